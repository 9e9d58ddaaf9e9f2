# Included by tests/CMakeLists.txt after the target test_shmem_coll_ext exists.
target_link_libraries(test_shmem_coll_ext PRIVATE kinet_shmem m)
