# kinet-verbs' dma-buf checks are compiled in (the library does not export
# them); kinet_log comes from libkinet.so.
target_sources(test_verbs_dmabuf_check PRIVATE ${PROJECT_SOURCE_DIR}/src/verbs/dmabuf.c)
target_include_directories(test_verbs_dmabuf_check PRIVATE ${PROJECT_SOURCE_DIR}/src)
