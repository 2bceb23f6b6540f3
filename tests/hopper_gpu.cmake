# Hopper launches on the device (label gpu, skipped without one): cluster shape, distributed shared
# memory between CTAs, clusters of 16 and the non-portable attribute, PDL chain values, cooperative
# grid.sync values and the oversized cooperative grid, a TMA multicast into both CTAs of a cluster.
gl_add_lua_test(gpu_hopper_launch tests/lua/gpu_hopper_launch.lua GPU)

# The hopper_clusters lab in quick mode on the device (skipped without one): exits non-zero when a
# kernel result it checks is wrong or a wait timed out.
gl_deadline(deadline 300)
add_test(NAME lab_hopper_clusters_quick COMMAND ${deadline} $<TARGET_FILE:gpulab> tests/lua/tma_lab_runner.lua
         labs/hopper_clusters.lua --quick --json ${CMAKE_BINARY_DIR}/lab_hopper_clusters_quick.json
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(lab_hopper_clusters_quick PROPERTIES LABELS gpu TIMEOUT 300 SKIP_RETURN_CODE 77
  ENVIRONMENT "GPULAB_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache;GPULAB_BIN=$<TARGET_FILE:gpulab>")
