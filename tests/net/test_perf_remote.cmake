# Included by tests/CMakeLists.txt after the target test_perf_remote exists:
# the test runs the built kinet-perf (its path is compiled in).
if(TARGET kinet-perf)
  add_dependencies(test_perf_remote kinet-perf)
  target_compile_definitions(test_perf_remote PRIVATE KINET_PERF_BIN="$<TARGET_FILE:kinet-perf>")
endif()
