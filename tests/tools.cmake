# The device tools' own pieces that run without a GPU: tools/csv.lua, which reads ncu's CSV for
# tools/pcsample_ncu.lua and tools/profile_check.lua.
gl_add_lua_test(tools_csv tests/lua/test_tools_csv.lua ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so)
