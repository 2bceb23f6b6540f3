# CLI tests: gpulab runs the test file, which runs the gpulab binary as a child (GPULAB_BIN).
gl_add_lua_test(cli_options tests/cli/test_cli.lua
  ENV GPULAB_BIN=$<TARGET_FILE:gpulab> GPULAB_LIBCUDA=/nonexistent/libcuda.so)
# gpulab side by side with Debian's lua5.4 (the reference interpreter); also checks that every
# function of the Lua C API in liblua5.4.a is exported for C modules.
gl_add_lua_test(cli_lua_compat tests/cli/test_lua_compat.lua
  ENV GPULAB_BIN=$<TARGET_FILE:gpulab> GPULAB_LIBCUDA=/nonexistent/libcuda.so
      LUA_STATIC_LIB=${LUA_STATIC_LIBRARY})
gl_add_lua_test(cli_watch tests/cli/test_watch.lua
  ENV GPULAB_BIN=$<TARGET_FILE:gpulab> GPULAB_LIBCUDA=/nonexistent/libcuda.so)
# Installs into a temporary prefix and runs the installed binary from elsewhere.
gl_deadline(deadline 120)
add_test(NAME cli_install
  COMMAND ${deadline} sh ${CMAKE_SOURCE_DIR}/tests/cli/install_test.sh ${CMAKE_BINARY_DIR} ${CMAKE_BINARY_DIR}/install-test)
set_tests_properties(cli_install PROPERTIES LABELS cpu TIMEOUT 120
  ENVIRONMENT "GPULAB_LIBCUDA=/nonexistent/libcuda.so")
# cuda.run_isolated refuses arguments it cannot pass on, before any child runs.
gl_add_lua_test(cli_isolate_limits tests/cli/test_isolate_limits.lua
  ENV GPULAB_BIN=$<TARGET_FILE:gpulab> GPULAB_LIBCUDA=/nonexistent/libcuda.so)
# --version, -v (NVRTC and the driver, or why there is none) and --help (lab options, environment).
gl_add_lua_test(cli_info tests/cli/test_cli_info.lua
  ENV GPULAB_BIN=$<TARGET_FILE:gpulab> GPULAB_LIBCUDA=/nonexistent/libcuda.so GPULAB_FAKECUDA=$<TARGET_FILE:fakecuda>)
