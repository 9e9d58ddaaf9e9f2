# Included by tests/CMakeLists.txt after the target test_install exists: the
# test installs this build (so everything installable must be built first)
# and builds the consumers of tests/install/ with the same tools.
find_program(KINET_PKG_CONFIG NAMES pkg-config pkgconf REQUIRED)
set(kinet_install_deps kinet)
foreach(t kinet_cuda kinet_mlx5emu kinet-info kinet-perf)
  if(TARGET ${t})
    list(APPEND kinet_install_deps ${t})
  endif()
endforeach()
add_dependencies(test_install ${kinet_install_deps})
target_compile_definitions(test_install PRIVATE
  KINET_CMAKE="${CMAKE_COMMAND}" KINET_GENERATOR="${CMAKE_GENERATOR}"
  KINET_CC="${CMAKE_C_COMPILER}" KINET_CUDA_COMPILER="${CMAKE_CUDA_COMPILER}"
  KINET_PKG_CONFIG="${KINET_PKG_CONFIG}"
  KINET_BUILD_DIR="${PROJECT_BINARY_DIR}" KINET_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
  KINET_LIBDIR="${CMAKE_INSTALL_LIBDIR}" KINET_DOCDIR="${CMAKE_INSTALL_DOCDIR}")
# Programs built against an instrumented library would need the sanitizer
# runtimes too: under KINET_SANITIZE the tests skip, as they do in a build
# without install rules.
set(why "")
if(KINET_SANITIZE)
  set(why "built with KINET_SANITIZE: programs built against an instrumented library need the \
sanitizer runtimes")
elseif(NOT KINET_INSTALL)
  set(why "built with KINET_INSTALL=OFF: no install rules")
endif()
if(why)
  target_compile_definitions(test_install PRIVATE "KINET_TEST_INSTALL_SKIP=\"${why}\"")
endif()
