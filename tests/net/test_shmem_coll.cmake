# Included by tests/CMakeLists.txt after the target test_shmem_coll exists.
target_link_libraries(test_shmem_coll PRIVATE kinet_shmem m)
