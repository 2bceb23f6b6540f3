# SM partitions (cuda.partition, green contexts) through the driver stand-in: every argument rule,
# the rounding, the streams in launches, copies and measurements, every lifetime path; and with an
# older driver that lacks cuGreenCtxCreate. On a GPU: a 16-SM partition's kernel sees at most 16
# SMs (%smid), and a copy on 16 SMs against the whole device.
gl_add_lua_test(partition_fake tests/lua/test_partition_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/partition_fake.log)
gl_add_lua_test(partition_fake_old_driver tests/lua/test_partition_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/partition_fake_old.log GPULAB_FAKE_NO_ENTRY=cuGreenCtxCreate)
gl_add_lua_test(partition_fake_two_devices tests/lua/test_partition_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/partition_fake_two.log GPULAB_FAKE_DEVICES=2)
gl_add_lua_test(partition_fake_profile tests/lua/test_partition_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/partition_fake_profile.log GPULAB_CUPTI=$<TARGET_FILE:fakecupti>)
gl_add_lua_test(gpu_partition tests/lua/gpu_partition.lua GPU)
