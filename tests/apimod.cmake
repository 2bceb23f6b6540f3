# Module variables, toolkit headers, name expressions, bool and tensor-map parameters, and the
# hostile-input classes of the module/launch/compile bindings (NVRTC, the driver stand-in, the GPU).
gl_add_lua_test(compile_api tests/lua/test_compile_api.lua ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so)
gl_add_lua_test(module_api_fake tests/lua/test_module_api_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/module_api_fake.log)
gl_add_lua_test(gpu_module_api tests/lua/gpu_module_api.lua GPU)
