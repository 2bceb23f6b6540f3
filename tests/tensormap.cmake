# Tensor maps (bindings/tensormap.c) and the TMA lab (labs/tma_double_buffer.lua).
# Validation needs no driver; the object tests run where the driver can encode.
gl_add_lua_test(tensormap_nodriver tests/lua/test_tensormap.lua ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so)
gl_add_lua_test(tensormap_fake tests/lua/test_tensormap.lua FAKE)
# Work that never completes: a freed map's queued launch keeps its array's memory.
gl_add_lua_test(tensormap_fake_pending tests/lua/test_tensormap.lua FAKE ENV GPULAB_FAKE_HANG=1)
# Device: encode + TMA round trip for f16/bf16/f32 x swizzle none/64B/128B, replace_address,
# partial boxes, and the expect_tx protocol in child processes (tests/lua/tma_expect_tx_child.lua).
gl_add_lua_test(gpu_tma tests/lua/gpu_tma.lua GPU)
# The device tests' runner: skips under --sanitize when compute-sanitizer is not installed.
gl_add_lua_test(tma_lab_runner tests/lua/test_tma_lab_runner.lua FAKE)

# The lab needs the lab harness (lua/gpulab/lab.lua).
if(EXISTS ${CMAKE_SOURCE_DIR}/lua/gpulab/lab.lua)
  # Without a device the lab compiles its kernels for sm_90a, validates its tensor maps, exits 0.
  gl_deadline(deadline 300)
  add_test(NAME lab_tma_nodevice COMMAND ${deadline} $<TARGET_FILE:gpulab> labs/tma_double_buffer.lua --quick
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(lab_tma_nodevice PROPERTIES LABELS cpu TIMEOUT 300
    ENVIRONMENT "GPULAB_LIBCUDA=/nonexistent/libcuda.so;GPULAB_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")
  # Device (skipped without one): the quick lab, its correctness checks must hold (pictures go to
  # lab_tma_quick-<name>.svg); and a small size under each compute-sanitizer tool,
  # which must report no errors (skipped where compute-sanitizer is not installed).
  gl_deadline(deadline 600)
  add_test(NAME lab_tma_quick COMMAND ${deadline} $<TARGET_FILE:gpulab> tests/lua/tma_lab_runner.lua labs/tma_double_buffer.lua --quick
           --json ${CMAKE_BINARY_DIR}/lab_tma_quick.json --svg ${CMAKE_BINARY_DIR}/lab_tma_quick
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  foreach(tool memcheck synccheck racecheck initcheck)
    add_test(NAME lab_tma_${tool} COMMAND ${deadline} $<TARGET_FILE:gpulab> tests/lua/tma_lab_runner.lua --sanitize=${tool}
             labs/tma_double_buffer.lua --quick --rows=256 --cols=2048 --reps=3
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  endforeach()
  set_tests_properties(lab_tma_quick lab_tma_memcheck lab_tma_synccheck lab_tma_racecheck lab_tma_initcheck PROPERTIES LABELS gpu TIMEOUT 600
    SKIP_RETURN_CODE 77
    ENVIRONMENT "GPULAB_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache;GPULAB_BIN=$<TARGET_FILE:gpulab>")
endif()
