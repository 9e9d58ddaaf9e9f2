# Included by tests/gpu/CMakeLists.txt after the target test_gpu_perf exists:
# the test runs the built kinet-perf (its path is compiled in).
if(TARGET kinet-perf)
  add_dependencies(test_gpu_perf kinet-perf)
  target_compile_definitions(test_gpu_perf PRIVATE KINET_PERF_BIN="$<TARGET_FILE:kinet-perf>")
endif()
