# The bindings in a host that opens several Lua states (as cuda.so sees it under lua5.4, or in an
# embedding program): one after the other, and a second one while the first is open.
add_executable(test_states tests/c/test_states.c)
target_link_libraries(test_states PRIVATE gpulab_bindings)
gl_deadline(deadline 120)
add_test(NAME module_lua_states COMMAND ${deadline} $<TARGET_FILE:test_states>)
set_tests_properties(module_lua_states PROPERTIES LABELS cpu TIMEOUT 120
  ENVIRONMENT "GPULAB_LIBCUDA=$<TARGET_FILE:fakecuda>;GPULAB_CACHE=0")
