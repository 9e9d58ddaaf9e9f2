# Install rules, into the GNU folders (GNUInstallDirs): headers, libraries
# with their soname links, the run-time modules beside libkinet, the tools,
# the examples' sources and the docs, kinet.pc (pkg-config) and the CMake
# package (kinetConfig.cmake: targets kinet::kinet and, where built,
# kinet::cuda). `cmake --install <build> --prefix <dir>` or
# `make install PREFIX=<dir>`.
include(CMakePackageConfigHelpers)
set(KINET_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kinet)

# the CUDA headers only with the library that serves them
if(TARGET kinet_cuda)
  set(kinet_cuda_headers)
else()
  set(kinet_cuda_headers PATTERN kinet_cuda.h EXCLUDE PATTERN device_cuda.cuh EXCLUDE)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/kinet DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh" ${kinet_cuda_headers})

set(kinet_libs kinet)
if(TARGET kinet_cuda)
  list(APPEND kinet_libs kinet_cuda)
endif()
if(TARGET kinet_shmem)
  list(APPEND kinet_libs kinet_shmem)
endif()
install(TARGETS ${kinet_libs} EXPORT kinetTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
get_property(kinet_modules GLOBAL PROPERTY KINET_MODULES)
if(kinet_modules)
  install(TARGETS ${kinet_modules} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
foreach(tool kinet-info kinet-perf)
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

file(GLOB kinet_example_sources ${PROJECT_SOURCE_DIR}/examples/*.c ${PROJECT_SOURCE_DIR}/examples/*.cu)
install(FILES ${kinet_example_sources} DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
file(GLOB kinet_nvshmem_examples ${PROJECT_SOURCE_DIR}/examples/nvshmem/*.cu)
install(FILES ${kinet_nvshmem_examples} DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/nvshmem)
file(GLOB kinet_docs ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE ${kinet_docs}
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# kinet.pc finds the prefix from where it lies (${pcfiledir}), so the
# installed tree can be moved, or installed with another --prefix than the
# one it was configured with.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(KINET_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(KINET_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(KINET_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH kinet_pc_up /r/${CMAKE_INSTALL_LIBDIR}/pkgconfig /r)
  string(REGEX REPLACE "/$" "" kinet_pc_up "${kinet_pc_up}")
  set(KINET_PC_PREFIX "\${pcfiledir}/${kinet_pc_up}")
  set(KINET_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(KINET_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/kinet.pc.in ${PROJECT_BINARY_DIR}/kinet.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kinet.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
# kinet-shmem.pc: the PGAS layer, with NVSHMEM's header folder on the path
configure_file(${PROJECT_SOURCE_DIR}/cmake/kinet-shmem.pc.in ${PROJECT_BINARY_DIR}/kinet-shmem.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kinet-shmem.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(EXPORT kinetTargets NAMESPACE kinet:: DESTINATION ${KINET_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kinetConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kinetConfig.cmake INSTALL_DESTINATION ${KINET_CMAKE_DIR})
# one soname per major version: any 0.x.y serves a request for 0.a.b with a.b <= x.y
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kinetConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kinetConfig.cmake ${PROJECT_BINARY_DIR}/kinetConfigVersion.cmake
        DESTINATION ${KINET_CMAKE_DIR})
