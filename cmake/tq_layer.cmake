# tq_layer(NAME DIR DEPS...): a static library `tq_<NAME>` from every .cc under the layer's folder
# (recursively, so sub-folders such as tokenizer/jinja need no CMake edits). Public include root
# is src/, so code includes "core/tensor.h", "io/safetensors_reader.h", ...
function(tq_layer name)
  cmake_parse_arguments(L "" "" "DEPS;EXCLUDE" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  foreach(pat IN LISTS L_EXCLUDE)
    list(FILTER srcs EXCLUDE REGEX "${pat}")
  endforeach()
  if(NOT srcs)
    # A layer with no code yet is an interface target so dependents still link.
    add_library(tq_${name} INTERFACE)
    target_include_directories(tq_${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(tq_${name} INTERFACE ${L_DEPS})
    return()
  endif()
  add_library(tq_${name} STATIC ${srcs})
  target_include_directories(tq_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(tq_${name} PUBLIC ${L_DEPS})
endfunction()

# tq_test(NAME SOURCES_DIR DEPS...): one GoogleTest executable per test folder.
function(tq_test name dir)
  cmake_parse_arguments(T "" "" "DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${dir}/*.cc)
  if(NOT srcs)
    return()
  endif()
  add_executable(test_${name} ${srcs})
  target_link_libraries(test_${name} PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main tq_testutil)
  # Each test is labelled with its executable (ctest -L test_io), so that a build of some of the
  # executables (scripts/test.sh --asan) runs only theirs.
  gtest_discover_tests(test_${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
                       PROPERTIES ENVIRONMENT "TQ_SHARED_DIR=${TQ_SHARED_DIR}" LABELS test_${name})
endfunction()
