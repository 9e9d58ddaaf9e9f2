# The same cases with the page check reading /proc/self/maps (the path of
# kernels without PROCMAP_QUERY; this machine's kernel may have it).
kinet_criterion_tests(test_mr_pages NAME test_mr_pages.maps LABELS unit
                      ENVIRONMENT "KINET_MR_PAGE_CHECK=maps")
