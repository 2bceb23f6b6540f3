# Robustness against hostile scripts and failing drivers: every driver call made to fail,
# lifetimes across captures and retired streams, the context-sync watchdog, devices, forged
# metatables and user values, the debug library and the loaders, and a lifetime stress run at
# a small count (tools/stress_lifetimes.lua; the 100,000-operation run is for the GPU).
gl_add_lua_test(fail_every_call tests/lua/test_fail_every_call.lua FAKE
  ENV GPULAB_BIN=$<TARGET_FILE:gpulab> GPULAB_FAKE_LOG_DIR=${CMAKE_BINARY_DIR})
