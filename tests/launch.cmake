# Modules, kernels and checked launches through the driver stand-in (argument packing byte for
# byte, messages, limits, injected errors, the poisoned state, module lifetimes).
gl_add_lua_test(launch_fake tests/lua/test_launch_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/launch_fake.log)
gl_add_lua_test(device_fake tests/lua/test_device_fake.lua FAKE)
gl_add_lua_test(device_fake_two tests/lua/test_device_fake.lua FAKE ENV GPULAB_FAKE_DEVICES=2)
