# Compile cache: hits across processes, key sensitivity, racing writers, damaged entries and
# untrusted directories (each case uses its own cache directory), and cold/warm runs on a GPU.
gl_add_lua_test(cache tests/lua/test_cache.lua ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so)
gl_add_lua_test(cache_gpu tests/lua/test_cache_gpu.lua GPU)
