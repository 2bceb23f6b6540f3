# The two error forms: argument errors as plain strings in one format, and cuda.error objects
# for CUDA and NVRTC failures (fields, printing by the CLI and run_isolated), through the driver
# stand-in; the REPL's printing is tests/repl/cuda_error.pty.
gl_add_lua_test(errors_format tests/lua/test_errors.lua FAKE
  ENV GPULAB_ERRORS_CASE=format GPULAB_FAKE_BUSY_FILE=${CMAKE_BINARY_DIR}/errors_format.busy)
gl_add_lua_test(errors_oom tests/lua/test_errors.lua FAKE
  ENV GPULAB_ERRORS_CASE=oom GPULAB_FAKE_FAIL=cuMemAlloc:2:1)
gl_add_lua_test(errors_sticky tests/lua/test_errors.lua FAKE
  ENV GPULAB_ERRORS_CASE=sticky GPULAB_FAKE_FAIL=cuCtxSynchronize:700)
# On a GPU: a real illegal-address fault (in a child process) gives the same fields.
gl_add_lua_test(errors_gpu tests/lua/gpu_errors.lua GPU)
