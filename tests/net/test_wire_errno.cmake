# libfabric's headers: the program interposes fi_fabric and wraps what it returns.
if(KINET_HAVE_FABRIC)
  target_link_libraries(test_wire_errno PRIVATE PkgConfig::FABRIC)
endif()
