# Included by tests/CMakeLists.txt after the target test_plot exists: the
# test runs the built kinet-perf and the kinet-plot of the build tree.
if(TARGET kinet-perf)
  add_dependencies(test_plot kinet-perf)
  target_compile_definitions(test_plot PRIVATE KINET_PERF_BIN="$<TARGET_FILE:kinet-perf>")
endif()
target_compile_definitions(test_plot PRIVATE
  KINET_PLOT_BIN="${PROJECT_BINARY_DIR}/tools/plot/kinet-plot")
