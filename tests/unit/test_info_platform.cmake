# Included by tests/CMakeLists.txt after the target test_info_platform
# exists: the test runs the built kinet-info and parses its --json output
# with json-c (libjson-c-dev).
if(TARGET kinet-info)
  add_dependencies(test_info_platform kinet-info)
  target_compile_definitions(test_info_platform PRIVATE
    KINET_INFO_BIN="$<TARGET_FILE:kinet-info>")
endif()
if(PkgConfig_FOUND AND NOT JSONC_FOUND)
  pkg_check_modules(JSONC IMPORTED_TARGET json-c)
endif()
if(JSONC_FOUND)
  target_link_libraries(test_info_platform PRIVATE PkgConfig::JSONC)
  target_compile_definitions(test_info_platform PRIVATE KINET_HAVE_JSONC=1)
endif()
