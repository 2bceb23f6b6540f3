# Lab harness (lua/gpulab/lab.lua, json.lua, svg.lua), cuda.run_isolated and --sanitize.
# Everything here runs without a GPU: the driver is hidden (GPULAB_LIBCUDA=/nonexistent).
set(GL_NO_DRIVER GPULAB_LIBCUDA=/nonexistent/libcuda.so)
gl_add_lua_test(isolate tests/lua/test_isolate.lua ENV ${GL_NO_DRIVER})
gl_add_lua_test(lab_harness tests/lua/test_lab.lua ENV ${GL_NO_DRIVER} GPULAB_BIN=$<TARGET_FILE:gpulab>)
gl_add_lua_test(lab_svg tests/lua/test_lab_svg.lua ENV ${GL_NO_DRIVER})
gl_add_lua_test(lab_json tests/lua/test_lab_json.lua ENV ${GL_NO_DRIVER})
gl_add_lua_test(lab_sanitize tests/lua/test_lab_sanitize.lua ENV ${GL_NO_DRIVER} GPULAB_BIN=$<TARGET_FILE:gpulab>)
