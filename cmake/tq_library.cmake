# The C++ library (include/turboquant/): libturboquant holding every layer it needs, its headers,
# a CMake package (find_package(turboquant) -> turboquant::turboquant) and turboquant.pc.
#   static (default): one archive with the objects of all layers; users link its dependencies
#     (fmt, PCRE2, ICU, threads), which the package and the .pc name.
#   -DBUILD_SHARED_LIBS=ON: one shared object exporting only turboquant:: (a version script hides
#     every engine symbol); its dependencies stay private.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TQ_LIBRARY_LAYERS tq_api tq_runtime tq_model tq_kv tq_kernels tq_quant tq_tokenizer tq_io
    tq_core)
set(tq_lib_objects)
foreach(layer IN LISTS TQ_LIBRARY_LAYERS)
  list(APPEND tq_lib_objects $<TARGET_OBJECTS:${layer}>)
endforeach()
if(TARGET tq_kernels_cuda)
  list(APPEND tq_lib_objects $<TARGET_OBJECTS:tq_kernels_cuda>)
endif()

add_library(turboquant_lib ${tq_lib_objects})
add_library(turboquant::turboquant ALIAS turboquant_lib)
set_target_properties(turboquant_lib PROPERTIES OUTPUT_NAME turboquant EXPORT_NAME turboquant
                                                VERSION ${PROJECT_VERSION} SOVERSION 0)
target_include_directories(turboquant_lib PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                                 $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(turboquant_lib PUBLIC cxx_std_20)
set(tq_lib_deps Threads::Threads fmt::fmt PkgConfig::PCRE2 ICU::uc)
if(TQ_CUDA)
  list(APPEND tq_lib_deps CUDA::cudart ${CMAKE_DL_LIBS})
endif()
if(BUILD_SHARED_LIBS)
  target_link_libraries(turboquant_lib PRIVATE ${tq_lib_deps})
  target_link_options(turboquant_lib PRIVATE
                      "-Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/turboquant.map")
  set_property(TARGET turboquant_lib APPEND PROPERTY LINK_DEPENDS
                                                    ${PROJECT_SOURCE_DIR}/cmake/turboquant.map)
  set(TQ_PC_LIBS_PRIVATE "-lfmt -lpcre2-8 -licuuc -lpthread")
  set(TQ_PC_LIBS "-lturboquant")
  set(TQ_PACKAGE_DEPS "")
else()
  target_link_libraries(turboquant_lib PUBLIC $<BUILD_INTERFACE:${tq_lib_deps}>
                        $<INSTALL_INTERFACE:Threads::Threads> $<INSTALL_INTERFACE:fmt::fmt>
                        $<INSTALL_INTERFACE:PkgConfig::PCRE2> $<INSTALL_INTERFACE:ICU::uc>)
  set(TQ_PC_LIBS "-lturboquant -lfmt -lpcre2-8 -licuuc -lpthread")
  set(TQ_PC_LIBS_PRIVATE "")
  set(TQ_PACKAGE_DEPS "find_dependency(Threads)\nfind_dependency(fmt)\nfind_dependency(PkgConfig)\npkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)\nfind_dependency(ICU COMPONENTS uc)")
endif()

install(TARGETS turboquant_lib EXPORT turboquantTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/turboquant DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT turboquantTargets NAMESPACE turboquant::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/turboquant)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/turboquantConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/turboquantConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/turboquant)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/turboquantConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/turboquantConfig.cmake
              ${PROJECT_BINARY_DIR}/turboquantConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/turboquant)
configure_file(${PROJECT_SOURCE_DIR}/cmake/turboquant.pc.in ${PROJECT_BINARY_DIR}/turboquant.pc
               @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/turboquant.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
