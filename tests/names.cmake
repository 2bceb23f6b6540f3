# Names as scripts wrote them: the entry-name demangler and the declaration reader in C (with the
# fuzz target's checks over its checked-in corpus), and kernels named by their name expressions
# and declared parameters through the driver stand-in.
add_executable(test_demangle tests/c/test_demangle.c)
target_link_libraries(test_demangle PRIVATE gpulab_core)
gl_deadline(deadline 120)
add_test(NAME module_demangle_unit COMMAND ${deadline} $<TARGET_FILE:test_demangle>)
add_test(NAME fuzz_demangle_corpus
  COMMAND ${deadline} $<TARGET_FILE:test_demangle> ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/demangle)
set_tests_properties(module_demangle_unit fuzz_demangle_corpus PROPERTIES LABELS cpu TIMEOUT 120)
gl_add_lua_test(module_names_fake tests/lua/test_names_fake.lua FAKE ENV GPULAB_CACHE=0)
