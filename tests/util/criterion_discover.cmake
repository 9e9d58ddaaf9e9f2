# Run after each link of a Criterion test program (POST_BUILD, see
# criterion_tests.cmake): writes the program's tests, one suite/name a line,
# from `<exe> --list`, for the CTest include files to register one test each.
#   cmake -D exe=<program> -D out=<file> -P criterion_discover.cmake
# A program that cannot list its tests fails the build: its list is removed,
# and CTest then runs <name>_NOT_BUILT, which fails too.
file(REMOVE "${out}")
# LC_ALL=C: Criterion draws the tree in ASCII; no leak check of the listing
# run in a sanitized build
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env LC_ALL=C ASAN_OPTIONS=detect_leaks=0 "${exe}" --list
  OUTPUT_VARIABLE listing ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${exe} --list: status ${rc}\n${listing}${err}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(suite "")
set(tests "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([A-Za-z0-9_]+): [0-9]+ tests?$")
    set(suite ${CMAKE_MATCH_1})
  elseif(line MATCHES "^(\\|--|`--|├──|└──) ([A-Za-z0-9_]+)( \\(skipped\\))?$")
    if(suite STREQUAL "")
      message(FATAL_ERROR "${exe} --list: a test before its suite: ${line}")
    endif()
    # a test the source disables (.disabled) is listed too: the program reports
    # it skipped
    string(APPEND tests "${suite}/${CMAKE_MATCH_2}\n")
  elseif(NOT line STREQUAL "")
    message(FATAL_ERROR "${exe} --list: unexpected line: ${line}")
  endif()
endforeach()
if(tests STREQUAL "")
  message(FATAL_ERROR "${exe} --list: no test")
endif()
file(WRITE "${out}" "${tests}")
