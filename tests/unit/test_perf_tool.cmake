# Included by tests/CMakeLists.txt after the target test_perf_tool exists.
# The test runs the built kinet-perf (its path is compiled in) and parses
# the --json output with json-c when it is there (libjson-c-dev).
if(TARGET kinet-perf)
  add_dependencies(test_perf_tool kinet-perf)
  target_compile_definitions(test_perf_tool PRIVATE KINET_PERF_BIN="$<TARGET_FILE:kinet-perf>")
endif()
if(PkgConfig_FOUND)
  pkg_check_modules(JSONC IMPORTED_TARGET json-c)
endif()
if(JSONC_FOUND)
  target_link_libraries(test_perf_tool PRIVATE PkgConfig::JSONC)
  target_compile_definitions(test_perf_tool PRIVATE KINET_HAVE_JSONC=1)
else()
  message(STATUS "kinet: json-c not found: test_perf_tool skips its JSON check")
endif()
# docs/hardware.md: its kinet-perf commands are run by the test
target_compile_definitions(test_perf_tool PRIVATE KINET_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
