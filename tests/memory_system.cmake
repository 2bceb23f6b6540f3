# The memory_system lab in quick mode on the device (skipped without one): exits non-zero when a
# kernel result it checks is wrong or a wait timed out. With the --gpu run of test_labs_nogpu.lua
# its latency ordering must hold and --quick must stay within the labs' time budget.
gl_deadline(deadline 300)
add_test(NAME lab_memory_system_quick COMMAND ${deadline} $<TARGET_FILE:gpulab> tests/lua/tma_lab_runner.lua
         labs/memory_system.lua --quick --json ${CMAKE_BINARY_DIR}/lab_memory_system_quick.json
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(lab_memory_system_quick PROPERTIES LABELS gpu TIMEOUT 300 SKIP_RETURN_CODE 77
  ENVIRONMENT "GPULAB_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache;GPULAB_BIN=$<TARGET_FILE:gpulab>")
gl_deadline(deadline 600)
add_test(NAME lab_memory_system_gpu COMMAND ${deadline} $<TARGET_FILE:gpulab> tests/lua/test_labs_nogpu.lua
         --gpu memory_system WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(lab_memory_system_gpu PROPERTIES ENVIRONMENT "GPULAB_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache"
  SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS gpu)
