# Labels for the tests a GoogleTest program discovers (tests/labels.cmake holds the rules): ctest loads the program's
# discovered tests, then the file written here, which labels each of them by its name.
#   dualpipe_label_tests(test_cli cli)
function(dualpipe_label_tests target layer)
  set(file "${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake")
  file(WRITE "${file}" "include(\"${CMAKE_CURRENT_SOURCE_DIR}/tests/labels.cmake\")\n"
                       "dualpipe_apply_labels(${layer} \${${target}_TESTS})\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${file}")
endfunction()
