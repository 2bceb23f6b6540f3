# GPU tests for devices, modules, kernels and launches (label gpu: skipped without a device).
# gpu_core.lua runs tests/lua/gpu_fault_child.lua in child processes for the faults.
gl_add_lua_test(gpu_core tests/lua/gpu_core.lua GPU)
