# Hardening: random API sequences through the driver stand-in, in three collector modes.
gl_add_lua_test(api_sequences_incremental tests/lua/test_api_sequences.lua FAKE)
set_tests_properties(api_sequences_incremental PROPERTIES
  ENVIRONMENT "GPULAB_LIBCUDA=$<TARGET_FILE:fakecuda>;GPULAB_CACHE=0")
gl_deadline(deadline 600)
add_test(NAME api_sequences_generational COMMAND ${deadline} $<TARGET_FILE:gpulab> tests/lua/test_api_sequences.lua generational
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
add_test(NAME api_sequences_gc_every_call COMMAND ${deadline} $<TARGET_FILE:gpulab> tests/lua/test_api_sequences.lua gc-every-call 60
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(api_sequences_generational api_sequences_gc_every_call PROPERTIES
  ENVIRONMENT "GPULAB_LIBCUDA=$<TARGET_FILE:fakecuda>;GPULAB_CACHE=0" LABELS cpu TIMEOUT 600)
gl_add_lua_test(stress_streams tests/lua/stress_streams.lua GPU)

# The bad-input suite through the stand-ins, in three collector modes. cuda.profile's probes open
# the CUPTI stand-in too: a real CUPTI loaded against the driver stand-in tests nothing, and its
# thread-local storage made LeakSanitizer's tracer crash at exit in the sanitizer build.
foreach(mode incremental generational gc-every-call)
  add_test(NAME bad_input_${mode} COMMAND ${deadline} $<TARGET_FILE:gpulab> tests/lua/test_bad_input.lua ${mode}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(bad_input_${mode} PROPERTIES
    ENVIRONMENT "GPULAB_LIBCUDA=$<TARGET_FILE:fakecuda>;GPULAB_CUPTI=$<TARGET_FILE:fakecupti>;GPULAB_CACHE=0"
    LABELS cpu TIMEOUT 600)
endforeach()

# A script reaching gpulab's own state: registry entries, the stack slots of a binding that calls
# back into Lua, user values and C upvalues (docs/THREAT_MODEL.md, "State a script can reach").
gl_add_lua_test(hostile_state tests/lua/test_hostile_state.lua FAKE
  ENV GPULAB_CUPTI=$<TARGET_FILE:fakecupti> GPULAB_NVML=0 GPULAB_FAKE_FAIL=cuMemAllocHost:2:1)
