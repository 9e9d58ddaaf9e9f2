# Included by tests/CMakeLists.txt after the target test_stat exists: the test
# runs the built kinet-stat against a child process that publishes counters.
if(TARGET kinet-stat)
  add_dependencies(test_stat kinet-stat)
  target_compile_definitions(test_stat PRIVATE KINET_STAT_BIN="$<TARGET_FILE:kinet-stat>")
endif()
