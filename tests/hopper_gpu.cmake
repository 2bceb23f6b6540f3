# Hopper launches on the device (label gpu, skipped without one): cluster shape, distributed shared
# memory between CTAs, clusters of 16 and the non-portable attribute, PDL chain values, cooperative
# grid.sync values and the oversized cooperative grid, a TMA multicast into both CTAs of a cluster.
gl_add_lua_test(gpu_hopper_launch tests/lua/gpu_hopper_launch.lua GPU)
