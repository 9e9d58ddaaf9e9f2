# Included by tests/CMakeLists.txt after the target test_rules exists: the
# rules header is private to the software NIC (src/nic/soft/rules.h).
target_include_directories(test_rules PRIVATE ${PROJECT_SOURCE_DIR}/src)
