# Included by tests/CMakeLists.txt after the target test_abi exists: what it
# compares (the libraries, their version scripts, the installed headers) and
# the tools it uses (gcc -aux-info lists the headers' declarations, nm, readelf).
find_program(KINET_GCC NAMES gcc REQUIRED)
find_program(KINET_NM NAMES nm REQUIRED)
find_program(KINET_READELF NAMES readelf REQUIRED)
# the headers of libkinet: every installed C header but libkinet_cuda's and
# libkinet_shmem's
file(GLOB abi_headers RELATIVE ${PROJECT_SOURCE_DIR}/include CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/include/kinet/*.h)
list(REMOVE_ITEM abi_headers kinet/kinet_cuda.h kinet/shmem.h kinet/shmem_device.h)
list(JOIN abi_headers " " abi_headers)
target_compile_definitions(test_abi PRIVATE
  KINET_LIB="$<TARGET_FILE:kinet>"
  KINET_LINKER_FILE="$<TARGET_LINKER_FILE:kinet>"
  KINET_MAP="$<TARGET_PROPERTY:kinet,KINET_MAP>"
  KINET_HEADERS="${abi_headers}"
  KINET_INCLUDE_DIR="${PROJECT_SOURCE_DIR}/include"
  KINET_PROJECT_VERSION="${PROJECT_VERSION}"
  KINET_GCC="${KINET_GCC}" KINET_NM="${KINET_NM}" KINET_READELF="${KINET_READELF}")
if(TARGET kinet_cuda)
  target_compile_definitions(test_abi PRIVATE
    KINET_CUDA_LIB="$<TARGET_FILE:kinet_cuda>"
    KINET_CUDA_MAP="$<TARGET_PROPERTY:kinet_cuda,KINET_MAP>")
  add_dependencies(test_abi kinet_cuda)
endif()
if(TARGET kinet_mlx5emu)
  target_compile_definitions(test_abi PRIVATE KINET_EMU_MODULE="$<TARGET_FILE:kinet_mlx5emu>")
  add_dependencies(test_abi kinet_mlx5emu)
endif()
if(TARGET kinet_shmem)
  target_compile_definitions(test_abi PRIVATE
    KINET_SHMEM_LIB="$<TARGET_FILE:kinet_shmem>"
    KINET_SHMEM_MAP="$<TARGET_PROPERTY:kinet_shmem,KINET_MAP>")
  add_dependencies(test_abi kinet_shmem)
endif()
