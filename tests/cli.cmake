# CLI tests: gpulab runs the test file, which runs the gpulab binary as a child (GPULAB_BIN).
gl_add_lua_test(cli_options tests/cli/test_cli.lua
  ENV GPULAB_BIN=$<TARGET_FILE:gpulab> GPULAB_LIBCUDA=/nonexistent/libcuda.so)
gl_add_lua_test(cli_watch tests/cli/test_watch.lua
  ENV GPULAB_BIN=$<TARGET_FILE:gpulab> GPULAB_LIBCUDA=/nonexistent/libcuda.so)
# Installs into a temporary prefix and runs the installed binary from elsewhere.
gl_deadline(deadline 120)
add_test(NAME cli_install
  COMMAND ${deadline} sh ${CMAKE_SOURCE_DIR}/tests/cli/install_test.sh ${CMAKE_BINARY_DIR} ${CMAKE_BINARY_DIR}/install-test)
set_tests_properties(cli_install PROPERTIES LABELS cpu TIMEOUT 120
  ENVIRONMENT "GPULAB_LIBCUDA=/nonexistent/libcuda.so")
