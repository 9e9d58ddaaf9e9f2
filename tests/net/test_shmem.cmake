# Included by tests/CMakeLists.txt after the target test_shmem exists.
target_link_libraries(test_shmem PRIVATE kinet_shmem)
