# The measurement engine (bindings/measure.c): statistics on synthetic samples (no driver), and
# cuda.measure through the driver stand-in with scripted event times and SM clocks
# (tests/fakecuda/fake_measure.c): stopping rule, throttled-sample rejection, regimes, bad input.
gl_add_lua_test(measure_stats tests/lua/test_stats.lua)
gl_add_lua_test(measure_fake tests/lua/test_measure_fake.lua FAKE
  ENV GPULAB_NVML=0 GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/measure_fake.log
      GPULAB_FAKE_ELAPSED_FILE=${CMAKE_BINARY_DIR}/measure_fake.elapsed
      GPULAB_FAKE_CLOCK_FILE=${CMAKE_BINARY_DIR}/measure_fake.clock)
# On a GPU: each regime runs the work as often as it reports, the clock kernel reads a plausible
# clock, the spin kernel is released, nothing leaks. The timing claims: tools/measure_check.lua.
gl_add_lua_test(gpu_measure tests/lua/gpu_measure.lua GPU)
