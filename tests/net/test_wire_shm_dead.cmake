# The lock finder of test_wire_shm_dead is this program's pthread_spin_lock, which
# libfabric (loaded by libkinet) must find first: exported from the program.
set_target_properties(test_wire_shm_dead PROPERTIES ENABLE_EXPORTS ON)
target_link_libraries(test_wire_shm_dead PRIVATE ${CMAKE_DL_LIBS})
