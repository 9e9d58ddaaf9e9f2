# Included by tests/CMakeLists.txt after the target test_nvshmem_version exists:
# NVSHMEM's version macros and calls (kinet/nvshmem/nvshmem.h), host side.
target_link_libraries(test_nvshmem_version PRIVATE kinet_shmem)
target_include_directories(test_nvshmem_version PRIVATE ${PROJECT_SOURCE_DIR}/include/kinet/nvshmem)
