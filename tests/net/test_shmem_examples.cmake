# Included by tests/CMakeLists.txt after the target test_shmem_examples exists:
# the host-executor builds of examples/nvshmem (their paths compiled in).
foreach(ex shmem_alltoall shmem_allreduce)
  if(TARGET ${ex})
    string(TOUPPER ${ex} up)
    target_compile_definitions(test_shmem_examples PRIVATE KINET_EX_${up}="$<TARGET_FILE:${ex}>")
    add_dependencies(test_shmem_examples ${ex})
  endif()
endforeach()
