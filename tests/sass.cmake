# What the compiler made: prog:resources from the cubin and ptxas's report, prog:sass through a
# stand-in disassembler (tests/sass/fake_nvdisasm.sh); gpu_sass runs the real one on the H200.
gl_add_lua_test(sass_resources tests/lua/test_sass.lua ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so)
gl_add_lua_test(gpu_sass tests/lua/gpu_sass.lua GPU)
