# Each test of a Criterion program is a CTest test of its own, named
# <program>[.<variant>]/<suite>/<test> and run as
#   <program> --only <suite>/<test> --jobs 1
# so that CTest reports it passed, failed or skipped (tests/util/main.c exits
# 77 when the test was skipped: SKIP_RETURN_CODE), times it, and may run it
# beside others (make check: ctest -j).
#
# The tests are listed after each link of the program (<program> --list,
# criterion_discover.cmake, a POST_BUILD step) into <program>.tests; an
# include file that CTest reads (TEST_INCLUDE_FILES) registers one test per
# line, as gtest_discover_tests does for GoogleTest.
#
#   kinet_criterion_discover(<target>)
#     in the directory that creates the target: list its tests after each link
#   kinet_criterion_tests(<target> [NAME <name>] [LABELS <label>...]
#                         [ENVIRONMENT <var=value>...] [TESTS <suite/test>...]
#                         [TIMEOUT <seconds>] [PROPERTIES <property> <value>...])
#     registers the tests of <target> as <name>/<suite>/<test> (NAME: the
#     target's name; another NAME runs the same program again, e.g. under
#     another provider), only those of TESTS when given (each must exist).
#     Every test gets SKIP_RETURN_CODE 77 and a TIMEOUT unless PROPERTIES
#     says otherwise: TIMEOUT's, or by label (KINET_TEST_TIMEOUT_<LABEL>:
#     unit 120 s, net 300 s; 900 s for any other, the GPU's). A hung test
#     then costs minutes; each is 4 times or more its longest run measured
#     on the 2-core CI machine (20 s for unit, 31 s for net), and above its
#     own bounds (a test that bounds its waits fails with a message first:
#     tw_run's 90 s, the shmem PEs' alarm of 240 s).
#     CTest's own default, for a test without TIMEOUT, is no limit at all
#     (this project does not include(CTest)): tests/CMakeLists.txt gives
#     every other test one too.
#   kinet_test_properties(<regex> <property> <value> [<property> <value>...])
#     sets properties (one value each) on every test whose full name matches
#     <regex> (CMake's regular expressions), of the Criterion programs
#     registered after the call: put these first. For a property set by more
#     than one match, the last one wins.
include_guard(GLOBAL)
set(KINET_CRITERION_DISCOVER ${CMAKE_CURRENT_LIST_DIR}/criterion_discover.cmake)
set(KINET_TEST_TIMEOUT_UNIT 120 CACHE STRING "CTest TIMEOUT (s) of each unit test")
set(KINET_TEST_TIMEOUT_NET 300 CACHE STRING "CTest TIMEOUT (s) of each net test")
set(KINET_TEST_TIMEOUT_OTHER 900 CACHE STRING
    "CTest TIMEOUT (s) of each Criterion test of another label (gpu)")

function(kinet_criterion_discover target)
  set(list ${CMAKE_CURRENT_BINARY_DIR}/${target}.tests)
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D exe=$<TARGET_FILE:${target}> -D out=${list}
            -P ${KINET_CRITERION_DISCOVER}
    COMMENT "Listing the tests of ${target}" VERBATIM)
  set_property(TARGET ${target} PROPERTY KINET_CRITERION_LIST ${list})
endfunction()

function(kinet_test_properties regex)
  set_property(GLOBAL APPEND PROPERTY KINET_TEST_TWEAKS "${regex}")
  list(LENGTH ARGN n)
  math(EXPR odd "${n} % 2")
  if(n EQUAL 0 OR odd)
    message(FATAL_ERROR "kinet_test_properties(${regex}): property and value pairs expected")
  endif()
  _kinet_props_args(args ${ARGN})
  set_property(GLOBAL APPEND PROPERTY KINET_TEST_TWEAKS_ARGS "${args}")
endfunction()

# " <prop> [==[<value>]==] ..." from <prop> <value> pairs (CTest reads a
# bracket argument as it is)
function(_kinet_props_args out)
  set(s "")
  set(key "")
  foreach(a IN LISTS ARGN)
    if(key STREQUAL "")
      set(key "${a}")
    else()
      string(APPEND s " ${key} [==[${a}]==]")
      set(key "")
    endif()
  endforeach()
  # the variable holds square brackets and semicolons: hand it over unexpanded
  set(${out} "${s}" PARENT_SCOPE)
endfunction()

# The ctest lines that apply the tweaks to the test named ${kt_name}.
function(_kinet_tweak_lines out)
  get_property(regexes GLOBAL PROPERTY KINET_TEST_TWEAKS)
  get_property(argss GLOBAL PROPERTY KINET_TEST_TWEAKS_ARGS)
  set(s "")
  list(LENGTH regexes n)
  if(n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(i RANGE ${last})
      list(GET regexes ${i} re)
      list(GET argss ${i} args)
      string(APPEND s "  if(kt_name MATCHES [==[${re}]==])\n"
                      "    set_tests_properties(\"\${kt_name}\" PROPERTIES${args})\n"
                      "  endif()\n")
    endforeach()
  endif()
  set(${out} "${s}" PARENT_SCOPE)
endfunction()

function(kinet_criterion_tests target)
  cmake_parse_arguments(PARSE_ARGV 1 a "" "NAME;TIMEOUT" "LABELS;ENVIRONMENT;TESTS;PROPERTIES")
  if(a_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "kinet_criterion_tests(${target}): unknown ${a_UNPARSED_ARGUMENTS}")
  endif()
  get_property(list TARGET ${target} PROPERTY KINET_CRITERION_LIST)
  if(NOT list)
    message(FATAL_ERROR "kinet_criterion_tests(${target}): no kinet_criterion_discover(${target})")
  endif()
  set(name ${target})
  if(a_NAME)
    set(name ${a_NAME})
  endif()
  # LABELS and ENVIRONMENT (lists), then PROPERTIES: a later value of a
  # property replaces an earlier one
  if(a_TIMEOUT)
    set(timeout ${a_TIMEOUT})
  elseif("unit" IN_LIST a_LABELS)
    set(timeout ${KINET_TEST_TIMEOUT_UNIT})
  elseif("net" IN_LIST a_LABELS)
    set(timeout ${KINET_TEST_TIMEOUT_NET})
  else()
    set(timeout ${KINET_TEST_TIMEOUT_OTHER})
  endif()
  set(props_args " SKIP_RETURN_CODE 77 TIMEOUT ${timeout}")
  set(sep "")
  if(a_LABELS)
    string(APPEND props_args " LABELS [==[${a_LABELS}]==]")
  endif()
  if(a_ENVIRONMENT)
    # each entry's semicolons escaped once (cmake_parse_arguments adds a
    # backslash to one that came escaped)
    set(env "")
    foreach(e IN LISTS a_ENVIRONMENT)
      string(REPLACE "\\;" ";" e "${e}")
      string(REPLACE ";" "\\;" e "${e}")
      string(APPEND env "${sep}${e}")
      set(sep ";")
    endforeach()
    string(APPEND props_args " ENVIRONMENT [==[${env}]==]")
  endif()
  _kinet_props_args(extra ${a_PROPERTIES})
  string(APPEND props_args "${extra}")
  _kinet_tweak_lines(tweaks)
  set(only "")
  if(a_TESTS)
    list(JOIN a_TESTS " " only)
  endif()
  set(f ${CMAKE_CURRENT_BINARY_DIR}/${name}_tests.cmake)
  file(GENERATE OUTPUT ${f} CONTENT "# CTest: the tests of ${name} (tests/util/criterion_tests.cmake)
set(kt_list [==[${list}]==])
set(kt_only ${only})
if(EXISTS \"\${kt_list}\")
  file(STRINGS \"\${kt_list}\" kt_tests)
  # (CTest reads this with the old policies: no if(IN_LIST))
  foreach(kt_one IN LISTS kt_only)
    list(FIND kt_tests \"\${kt_one}\" kt_at)
    if(kt_at LESS 0)
      add_test(\"${name}/\${kt_one}_NOT_FOUND\" \"${name}/\${kt_one}_NOT_FOUND\")
    endif()
  endforeach()
  foreach(kt IN LISTS kt_tests)
    list(FIND kt_only \"\${kt}\" kt_at)
    if(kt_only AND kt_at LESS 0)
      continue()
    endif()
    set(kt_name \"${name}/\${kt}\")
    add_test(\"\${kt_name}\" [==[$<TARGET_FILE:${target}>]==] --only \"\${kt}\" --jobs 1)
    set_tests_properties(\"\${kt_name}\" PROPERTIES${props_args})
${tweaks}  endforeach()
else()
  add_test([==[${name}_NOT_BUILT]==] [==[${name}_NOT_BUILT]==])
endif()
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${f})
endfunction()
