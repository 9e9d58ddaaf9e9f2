# Included by tests/CMakeLists.txt after the target test_examples exists: the
# test runs the built example programs (their paths are compiled in).
foreach(ex put_local put_remote boot_hello)
  if(TARGET ${ex})
    string(TOUPPER ${ex} up)
    target_compile_definitions(test_examples PRIVATE KINET_EX_${up}="$<TARGET_FILE:${ex}>")
    add_dependencies(test_examples ${ex})
  endif()
endforeach()
