# Included by tests/CMakeLists.txt after the target test_tunables exists: the
# test runs the built kinet-info (masking, the table of docs/tunables.md) and
# reads docs/tunables.md from the source tree.
if(TARGET kinet-info)
  add_dependencies(test_tunables kinet-info)
  target_compile_definitions(test_tunables PRIVATE KINET_INFO_BIN="$<TARGET_FILE:kinet-info>")
endif()
target_compile_definitions(test_tunables PRIVATE KINET_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
