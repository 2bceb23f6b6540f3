# Modules, kernels and checked launches through the driver stand-in (argument packing byte for
# byte, messages, limits, injected errors, the poisoned state, module lifetimes).
gl_add_lua_test(launch_fake tests/lua/test_launch_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/launch_fake.log)
gl_add_lua_test(device_fake tests/lua/test_device_fake.lua FAKE)
gl_add_lua_test(device_fake_two tests/lua/test_device_fake.lua FAKE ENV GPULAB_FAKE_DEVICES=2)
gl_add_lua_test(device_fake_none tests/lua/test_device_fake.lua FAKE ENV GPULAB_FAKE_DEVICES=0)

# The raw C baseline of tools/bench_launch.lua (run on a GPU machine: build/gpulab tools/bench_launch.lua).
add_executable(bench_launch_raw ${CMAKE_SOURCE_DIR}/tools/bench_launch.c)
target_link_libraries(bench_launch_raw PRIVATE gpulab_core)

# Launches with attributes (cluster, cooperative, pdl, priority, l2_window) through the stand-in, on
# an H200-like device, an older device (compute capability 8.0) and a driver without cuLaunchKernelEx.
gl_add_lua_test(launch_attrs_fake tests/lua/test_launch_attrs_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/launch_attrs_fake.log)
gl_add_lua_test(launch_attrs_fake_cc80 tests/lua/test_launch_attrs_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/launch_attrs_fake_cc80.log GPULAB_FAKE_CC=8.0)
gl_add_lua_test(launch_attrs_fake_noex tests/lua/test_launch_attrs_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/launch_attrs_fake_noex.log GPULAB_FAKE_NO_ENTRY=cuLaunchKernelEx)
# An attribute set through one kernel object: the others ask the driver again (the second call of
# each occupancy query fails, so a kernel that asks again is seen to).
gl_add_lua_test(kernel_attr_sync_fake tests/lua/test_kernel_attr_sync_fake.lua FAKE
  ENV GPULAB_FAKE_FAIL=cuOccupancyMaxActiveBlocksPerMultiprocessor:999:2,cuOccupancyMaxActiveClusters:999:2)
gl_add_lua_test(cfg_finalizer_fake tests/lua/test_cfg_finalizer_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/cfg_finalizer_fake.log)
# A configuration table launched again: the kernel's remembered check against every change to the
# table, its mark, its stream and the kernel's attributes.
gl_add_lua_test(launch_cfg_reuse_fake tests/lua/test_launch_cfg_reuse_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/launch_cfg_reuse_fake.log)
# The remembered check against the full one: random scripts change tables, streams and kernel
# attributes, and every launch is repeated with a fresh copy on a twin kernel object.
gl_add_lua_test(launch_cfg_differential_fake tests/lua/test_launch_cfg_differential_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/launch_cfg_differential_fake.log)
