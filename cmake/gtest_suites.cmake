# One ctest test per GoogleTest suite, for the test programs that link LibTorch (test_runtime, test_train): loading
# LibTorch costs such a program about 0.8 s of CPU before its first test (2 s under AddressSanitizer), more than most
# of their tests take, so one process per test spent more on starting than on testing. ctest lists the suites when it
# starts (cmake/add_suite_tests.cmake runs the program's --gtest_list_tests), so a new test or suite needs no change
# here. Each test is named after its suite and filter ("Executor.*") and labelled like the tests in it
# (tests/labels.cmake). The programs without LibTorch start in milliseconds and keep one ctest test per test.
#   dualpipe_add_gtest_suites(test_runtime runtime 600)    # program, layer, seconds a suite may take
function(dualpipe_add_gtest_suites target layer timeout)
  set(file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  file(GENERATE OUTPUT "${file}" CONTENT
"include(\"${CMAKE_CURRENT_SOURCE_DIR}/tests/labels.cmake\")
include(\"${CMAKE_CURRENT_SOURCE_DIR}/cmake/add_suite_tests.cmake\")
dualpipe_add_suite_tests(\"$<TARGET_FILE:${target}>\" ${layer} ${timeout})
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${file}")
endfunction()
