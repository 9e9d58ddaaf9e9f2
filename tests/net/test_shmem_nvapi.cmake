# Included by tests/CMakeLists.txt after the target test_shmem_nvapi exists:
# NVSHMEM's names (kinet/nvshmem/nvshmem.h) on the host executor.
target_link_libraries(test_shmem_nvapi PRIVATE kinet_shmem)
target_include_directories(test_shmem_nvapi PRIVATE ${PROJECT_SOURCE_DIR}/include/kinet/nvshmem)
