# The server's end-to-end tests (tests/e2e/run.sh): include(${PROJECT_SOURCE_DIR}/tests/e2e/e2e.cmake)
# from tests/CMakeLists.txt. Needs node + npm (scripts/setup.sh) and the shared models.
find_program(TQ_NODE node)
if(TQ_NODE AND TARGET turboquant)
  add_test(NAME e2e_server
           COMMAND ${PROJECT_SOURCE_DIR}/tests/e2e/run.sh $<TARGET_FILE:turboquant>)
  set_tests_properties(e2e_server PROPERTIES
                       ENVIRONMENT "TQ_SHARED_DIR=${TQ_SHARED_DIR}"
                       LABELS "slow;e2e" TIMEOUT 600 RUN_SERIAL TRUE)
endif()
