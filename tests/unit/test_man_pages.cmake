# Included by tests/CMakeLists.txt after the target test_man_pages exists:
# the pages and the headers are read from the source tree.
target_compile_definitions(test_man_pages PRIVATE KINET_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
