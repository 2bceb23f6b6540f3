# NVRTC: the PTX signature parser, SHA-256 and cache entries in C; cuda.compile from Lua.
add_executable(test_ptx tests/c/test_ptx.c)
target_link_libraries(test_ptx PRIVATE gpulab_core)
gl_deadline(deadline 120)
add_test(NAME ptx_unit COMMAND ${deadline} $<TARGET_FILE:test_ptx> ${CMAKE_SOURCE_DIR}/tests/c/ptx ${CMAKE_BINARY_DIR}/test-ptx-scratch)
set_tests_properties(ptx_unit PROPERTIES LABELS cpu TIMEOUT 120)

gl_add_lua_test(nvrtc_compile tests/lua/test_compile.lua ENV GPULAB_CACHE=0 GPULAB_LIBCUDA=/nonexistent/libcuda.so)
gl_add_lua_test(nvrtc_compile_fake tests/lua/test_compile.lua FAKE ENV GPULAB_CACHE=0)
