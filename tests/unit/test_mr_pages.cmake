# The same cases with the page check reading /proc/self/maps (the path of
# kernels without PROCMAP_QUERY; this machine's kernel may have it).
add_test(NAME test_mr_pages.maps COMMAND test_mr_pages --jobs 1)
set_tests_properties(test_mr_pages.maps PROPERTIES LABELS unit TIMEOUT 900
  ENVIRONMENT "KINET_MR_PAGE_CHECK=maps")
