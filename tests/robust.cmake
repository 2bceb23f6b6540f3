# Robustness against hostile scripts and failing drivers: every driver call made to fail,
# lifetimes across captures and retired streams, the context-sync watchdog, devices, forged
# metatables and user values, the debug library and the loaders, and a lifetime stress run at
# a small count (tools/stress_lifetimes.lua; the 100,000-operation run is for the GPU).
gl_add_lua_test(fail_every_call tests/lua/test_fail_every_call.lua FAKE
  ENV GPULAB_BIN=$<TARGET_FILE:gpulab> GPULAB_FAKE_LOG_DIR=${CMAKE_BINARY_DIR} GPULAB_FAKE_DEVICES=2)
gl_add_lua_test(robust_fake tests/lua/test_robust_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/robust_fake.log GPULAB_FAKE_BUSY_FILE=${CMAKE_BINARY_DIR}/robust_fake.busy
      GPULAB_FAKE_DEVICES=2)
# The same without the watchdog thread (as if pthread_create failed): syncs poll every stream.
gl_add_lua_test(robust_fake_no_watchdog tests/lua/test_robust_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/robust_fake_nw.log GPULAB_FAKE_BUSY_FILE=${CMAKE_BINARY_DIR}/robust_fake_nw.busy
      GPULAB_NO_WATCHDOG=1)
gl_add_lua_test(retire_no_event tests/lua/test_retire_no_event.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/retire_no_event.log GPULAB_FAKE_BUSY_FILE=${CMAKE_BINARY_DIR}/retire_no_event.busy
      GPULAB_FAKE_FAIL=cuEventCreate:2:1)
gl_add_lua_test(lifetime_sequences tests/lua/test_lifetime_sequences.lua FAKE
  ENV GPULAB_FAKE_BUSY_FILE=${CMAKE_BINARY_DIR}/lifetime_sequences.busy)
gl_deadline(deadline 300)
add_test(NAME lifetime_sequences_generational COMMAND ${deadline} $<TARGET_FILE:gpulab> tests/lua/test_lifetime_sequences.lua generational 150
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(lifetime_sequences_generational PROPERTIES LABELS cpu TIMEOUT 300 ENVIRONMENT
  "GPULAB_LIBCUDA=$<TARGET_FILE:fakecuda>;GPULAB_FAKE_BUSY_FILE=${CMAKE_BINARY_DIR}/lifetime_sequences_gen.busy")
# The lifetime stress run: small against the stand-in here, 100,000 operations on a GPU.
add_test(NAME stress_lifetimes_fake COMMAND ${deadline} $<TARGET_FILE:gpulab> tools/stress_lifetimes.lua 3000 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(stress_lifetimes_fake PROPERTIES LABELS cpu TIMEOUT 300 ENVIRONMENT
  "GPULAB_LIBCUDA=$<TARGET_FILE:fakecuda>;GPULAB_FAKE_BUSY_FILE=${CMAKE_BINARY_DIR}/stress_lifetimes.busy")
gl_deadline(deadline600 600)
add_test(NAME stress_lifetimes_gpu COMMAND ${deadline600} $<TARGET_FILE:gpulab> tools/stress_lifetimes.lua 100000 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(stress_lifetimes_gpu PROPERTIES LABELS gpu TIMEOUT 600 SKIP_RETURN_CODE 77)
