# Core: driver loading without a driver, versions, text-only loading.
gl_add_lua_test(core_nodriver tests/lua/test_core.lua ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so)
