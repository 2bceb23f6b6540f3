# The seed labs (labs/*.lua): without a driver each compiles its kernels and exits 0, --help
# and option errors work, JSON results are written. On a device each lab runs --quick and its
# key claims must hold (label gpu; skipped without a device).
gl_add_lua_test(labs_nogpu tests/lua/test_labs_nogpu.lua ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so)
# The rules labs/lib/lab_rules.lua decides some verdicts by, on hand-made inputs (pure Lua).
gl_add_lua_test(lab_rules tests/lua/test_lab_rules.lua ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so)

gl_deadline(deadline 600)
foreach(lab launch_anatomy warp_states compile_pipeline illegal_access)
  add_test(NAME lab_${lab}_gpu COMMAND ${deadline} $<TARGET_FILE:gpulab> tests/lua/test_labs_nogpu.lua --gpu ${lab}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(lab_${lab}_gpu PROPERTIES
    ENVIRONMENT "GPULAB_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache"
    SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS gpu)
endforeach()

# How illegal_access reads its child processes, with a fault injected through the stand-in.
gl_deadline(deadline 300)
add_test(NAME labs_fake_triage COMMAND ${deadline} $<TARGET_FILE:gpulab> tests/lua/test_labs_nogpu.lua --fake WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(labs_fake_triage PROPERTIES
  ENVIRONMENT "GPULAB_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache;GPULAB_LIBCUDA=$<TARGET_FILE:fakecuda>"
  TIMEOUT 300 LABELS cpu)
