# Included by tests/CMakeLists.txt after the target test_shmem_strided exists:
# the strided RMA through NVSHMEM's names (kinet/nvshmem/nvshmem.h) on the host executor.
target_link_libraries(test_shmem_strided PRIVATE kinet_shmem)
target_include_directories(test_shmem_strided PRIVATE ${PROJECT_SOURCE_DIR}/include/kinet/nvshmem)
