# Hopper launch support through the driver stand-in: kernel attributes by name, the compiled-in
# cluster shape and cluster occupancy, plain, with the cluster entry points missing (an older
# driver) and on a device of compute capability 8.0. The GPU test reads the same on an H200.
gl_add_lua_test(kernel_attrs_fake tests/lua/test_kernel_attrs_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/kernel_attrs_fake.log)
gl_add_lua_test(kernel_attrs_fake_no_entry tests/lua/test_kernel_attrs_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/kernel_attrs_fake_no_entry.log
      GPULAB_FAKE_NO_ENTRY=cuOccupancyMaxActiveClusters,cuOccupancyMaxPotentialClusterSize)
gl_add_lua_test(kernel_attrs_fake_cc80 tests/lua/test_kernel_attrs_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/kernel_attrs_fake_cc80.log GPULAB_FAKE_CC=8.0)
gl_add_lua_test(gpu_hopper_attrs tests/lua/gpu_hopper_attrs.lua GPU)
