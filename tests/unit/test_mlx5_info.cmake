# Included by tests/CMakeLists.txt after the target test_mlx5_info exists:
# the test runs the built kinet-info and parses its --json output with json-c
# when it is there.
if(TARGET kinet-info)
  add_dependencies(test_mlx5_info kinet-info)
  target_compile_definitions(test_mlx5_info PRIVATE KINET_INFO_BIN="$<TARGET_FILE:kinet-info>")
endif()
if(PkgConfig_FOUND AND NOT JSONC_FOUND)
  pkg_check_modules(JSONC IMPORTED_TARGET json-c)
endif()
if(JSONC_FOUND)
  target_link_libraries(test_mlx5_info PRIVATE PkgConfig::JSONC)
  target_compile_definitions(test_mlx5_info PRIVATE KINET_HAVE_JSONC=1)
endif()
# kinet-info reads the topology itself, and so does this test (kinet_topo);
# with KINET_MLX5_EMULATE=1 kinet-info loads the emulation module.
target_link_libraries(test_mlx5_info PRIVATE kinet_topo)
if(TARGET kinet_mlx5emu)
  add_dependencies(test_mlx5_info kinet_mlx5emu)
endif()
target_compile_definitions(test_mlx5_info PRIVATE
  KINET_LIB_FILE="$<TARGET_FILE:kinet>" KINET_LIB_SONAME="$<TARGET_SONAME_FILE_NAME:kinet>")
