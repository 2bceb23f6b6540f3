# Static checks of the C code: clang-tidy with the check list in .clang-tidy over bindings/ and
# host/, zero findings (skipped where clang-tidy is absent).
gl_deadline(deadline 300)
add_test(NAME lint_clang_tidy COMMAND ${deadline} sh ${CMAKE_SOURCE_DIR}/tests/lint.sh ${CMAKE_BINARY_DIR}
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# static: the sanitizer build (ctest -LE nosan) need not run it again
set_tests_properties(lint_clang_tidy PROPERTIES LABELS "lint;nosan" SKIP_RETURN_CODE 77 TIMEOUT 300)
