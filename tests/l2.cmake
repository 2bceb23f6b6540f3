# L2 residency (bindings/l2.c): cuda.l2_persisting, cuda.l2_reset, stream access-policy windows and
# cuda.measure's cold regime resetting persisting lines, through the driver stand-in
# (tests/fakecuda/fake_l2.c) on an H200-like device, on two devices, and with a driver that lacks
# the reset and the stream attribute calls.
gl_add_lua_test(l2_fake tests/lua/test_l2_fake.lua FAKE
  ENV GPULAB_NVML=0 GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/l2_fake.log)
gl_add_lua_test(l2_fake_two tests/lua/test_l2_fake.lua FAKE
  ENV GPULAB_NVML=0 GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/l2_fake_two.log GPULAB_FAKE_DEVICES=2)
gl_add_lua_test(l2_fake_old_driver tests/lua/test_l2_fake.lua FAKE
  ENV GPULAB_NVML=0 GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/l2_fake_old_driver.log
      GPULAB_FAKE_NO_ENTRY=cuCtxResetPersistingL2Cache,cuStreamSetAttribute)
# On the H200: the set-aside granted, a window's round trip, and a persisting window making a
# cold sample faster when cuda.measure skips its reset (l2_reset=false) than with it.
gl_add_lua_test(gpu_l2 tests/lua/gpu_l2.lua GPU)
