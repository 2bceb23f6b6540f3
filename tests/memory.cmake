# Memory: dtypes and f16/bf16 conversions (C unit test), host arrays without any driver,
# device arrays through the driver stand-in, and the GPU round trips (label gpu).
add_executable(test_dtype tests/c/test_dtype.c)
target_link_libraries(test_dtype PRIVATE gpulab_core)
gl_deadline(deadline 120)
add_test(NAME dtype_unit COMMAND ${deadline} $<TARGET_FILE:test_dtype>)
set_tests_properties(dtype_unit PROPERTIES LABELS cpu TIMEOUT 120)

gl_add_lua_test(memory_host tests/lua/test_memory.lua ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so)
gl_add_lua_test(memory_fake tests/lua/test_memory_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/memory_fake.log)
gl_add_lua_test(memory_fake_oom tests/lua/test_memory_errors.lua FAKE
  ENV GPULAB_FAKE_FAIL=cuMemAlloc:2:2,cuMemAllocHost:2,cuMemcpyHtoD:1:2,cuMemcpyDtoH:1:3)
gl_add_lua_test(memory_gpu tests/lua/gpu_memory.lua GPU)
gl_add_lua_test(memory_fake_sticky tests/lua/test_memory_errors.lua FAKE ENV GPULAB_FAKE_FAIL=cuMemcpyDtoD:700)
gl_add_lua_test(memory_fake_sticky_capture tests/lua/test_memory_errors.lua FAKE
  ENV GPULAB_FAKE_FAIL=cuMemcpyDtoD:700 GPULAB_MEMORY_CASE=capture)
gl_add_lua_test(memory_host_generational tests/lua/test_memory.lua
  ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so GPULAB_TEST_GC=generational)
gl_add_lua_test(memory_host_gc_every_call tests/lua/test_memory.lua
  ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so GPULAB_TEST_GC=every-call)
gl_add_lua_test(memory_fake_gc_every_call tests/lua/test_memory_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/memory_fake_gc.log GPULAB_TEST_GC=every-call)
