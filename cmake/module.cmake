# kinet_module(<target> EXPORTS <pattern>... SOURCES <source>... [LIBS <lib>...])
#
# A module libkinet loads at run time with dlopen from the folder libkinet
# itself was loaded from (kinet_module_open, src/core/module.c):
# lib<target>.so, built beside libkinet.so and installed with it. The module links libkinet (it may use the
# private node of src/kinet.map.in) and exports only the symbols matching
# EXPORTS (version node KINET_MODULE_<version>): the entry point libkinet
# looks up with dlsym, and whatever tests call directly.
function(kinet_module target)
  cmake_parse_arguments(M "" "" "EXPORTS;SOURCES;LIBS" ${ARGN})
  if(NOT M_EXPORTS OR NOT M_SOURCES)
    message(FATAL_ERROR "kinet_module(${target}): EXPORTS and SOURCES are required")
  endif()
  list(JOIN M_EXPORTS "; " globals)
  set(map ${CMAKE_CURRENT_BINARY_DIR}/${target}.map)
  file(CONFIGURE OUTPUT ${map} CONTENT
       "KINET_MODULE_${PROJECT_VERSION} {\n  global: ${globals};\n  local: *;\n};\n")
  add_library(${target} MODULE ${M_SOURCES})
  target_link_libraries(${target} PRIVATE kinet ${M_LIBS})
  target_link_options(${target} PRIVATE -Wl,--version-script=${map} -Wl,--no-undefined)
  set_target_properties(${target} PROPERTIES
    LINK_DEPENDS ${map}
    LIBRARY_OUTPUT_DIRECTORY ${KINET_LIB_OUTPUT}
    INSTALL_RPATH "$ORIGIN")
  set_property(GLOBAL APPEND PROPERTY KINET_MODULES ${target})
endfunction()
