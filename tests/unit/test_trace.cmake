# Included by tests/CMakeLists.txt after the target test_trace exists: the test
# converts the trace it wrote with the built kinet-trace.
if(TARGET kinet-trace)
  add_dependencies(test_trace kinet-trace)
  target_compile_definitions(test_trace PRIVATE KINET_TRACE_BIN="$<TARGET_FILE:kinet-trace>")
endif()
