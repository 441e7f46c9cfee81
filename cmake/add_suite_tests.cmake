# Read by ctest when it starts (cmake/gtest_suites.cmake): a test for each GoogleTest suite of `program`, running the
# suite's tests in one process. A suite whose every test skips (`GTEST_SKIP`, e.g. those that need a GPU) is reported
# as not run.
function(dualpipe_add_suite_tests program layer timeout)
  get_filename_component(name "${program}" NAME)
  if(NOT EXISTS "${program}")
    add_test("${name}_NOT_BUILT" "${program}")  # fails, naming the program
    return()
  endif()
  execute_process(COMMAND "${program}" --gtest_list_tests OUTPUT_VARIABLE listing RESULT_VARIABLE status TIMEOUT 120)
  if(NOT status EQUAL 0)
    add_test("${name}_CANNOT_LIST_ITS_TESTS" "${program}" --gtest_list_tests)  # fails with the program's message
    return()
  endif()
  string(REPLACE "\n" ";" lines "${listing}")
  set(tests)
  foreach(line IN LISTS lines)
    # A suite's line starts in the first column and ends its name with a dot ("AllKinds/ListStages.", maybe followed
    # by "  # TypeParam = ..."); its tests' lines below are indented.
    if(line MATCHES "^([^ ]+)\\.( |$)")
      set(test "${CMAKE_MATCH_1}.*")
      add_test("${test}" "${program}" "--gtest_filter=${test}")
      set_tests_properties("${test}" PROPERTIES TIMEOUT ${timeout} SKIP_REGULAR_EXPRESSION "\\[  PASSED  \\] 0 tests")
      list(APPEND tests "${test}")
    endif()
  endforeach()
  dualpipe_apply_labels(${layer} ${tests})
endfunction()
