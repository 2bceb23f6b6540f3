# Views, offset/converting copies, the bool dtype and the bulk host operations: without a driver,
# through the driver stand-in, against hostile scripts, and on the GPU (label gpu).
gl_add_lua_test(host_ops tests/lua/test_host_ops.lua ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so)
gl_add_lua_test(host_ops_gc_every_call tests/lua/test_host_ops.lua
  ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so GPULAB_TEST_GC=every-call)
gl_add_lua_test(host_ops_fake tests/lua/test_host_ops.lua FAKE)
gl_add_lua_test(memory_hostile_host tests/lua/test_memory_hostile.lua ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so)
gl_add_lua_test(memory_hostile_fake tests/lua/test_memory_hostile.lua FAKE)
gl_add_lua_test(views_fake tests/lua/test_views_fake.lua FAKE ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/views_fake.log)
gl_add_lua_test(views_gpu tests/lua/gpu_views.lua GPU)
