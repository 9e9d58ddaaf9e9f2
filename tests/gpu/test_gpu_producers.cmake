# Included by tests/gpu/CMakeLists.txt after the target test_gpu_producers
# exists. It links libkinet.so as an application does: its mlx5 tests set
# KINET_MLX5_EMULATE=1, libkinet loads the emulation module, and the test
# reads the module's counters with dlsym.
target_link_libraries(test_gpu_producers PRIVATE ${CMAKE_DL_LIBS})
if(TARGET kinet_mlx5emu)
  add_dependencies(test_gpu_producers kinet_mlx5emu)
endif()
