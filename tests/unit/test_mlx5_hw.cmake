# Included by tests/CMakeLists.txt after the target test_mlx5_hw exists. It
# links libkinet.so (the CUDA driver calls it uses are in the private node):
# run over the emulation (KINET_MLX5_EMULATE=1) it loads the emulation module.
if(TARGET kinet_mlx5emu)
  add_dependencies(test_mlx5_hw kinet_mlx5emu)
endif()
