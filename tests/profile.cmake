# cuda.profile and cuda.trace. CI runs them through the CUPTI stand-in (tests/fakecupti, selected by
# GPULAB_CUPTI) on top of the driver stand-in; the stand-ins measure nothing, they check the
# plumbing: one row per launch, values passed through, near matches for unknown metrics, passes,
# cleanup after errors, and the timeline's events.
add_library(fakecupti SHARED ${CMAKE_SOURCE_DIR}/tests/fakecupti/fake_cupti.c)
target_include_directories(fakecupti PRIVATE ${CMAKE_SOURCE_DIR}/bindings ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(fakecupti PRIVATE dl)
set_target_properties(fakecupti PROPERTIES C_VISIBILITY_PRESET hidden)
add_dependencies(gpulab fakecupti)

gl_add_lua_test(profile_fake tests/lua/test_profile_fake.lua FAKE
  ENV GPULAB_CUPTI=$<TARGET_FILE:fakecupti> GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/profile_fake.log)
gl_add_lua_test(profile_fake_nocupti tests/lua/test_profile_fake.lua FAKE
  ENV GPULAB_CUPTI=${CMAKE_BINARY_DIR}/no-such-dir/libcupti.so.13 GPULAB_PROFILE_EXPECT=absent)
gl_add_lua_test(trace_fake tests/lua/test_trace_fake.lua FAKE
  ENV GPULAB_CUPTI=$<TARGET_FILE:fakecupti> GPULAB_TRACE_DIR=${CMAKE_BINARY_DIR}/trace_fake
      GPULAB_FAKE_ELAPSED_FILE=${CMAKE_BINARY_DIR}/trace_fake/elapsed)
# On a GPU: counters of known kernels (a copy's DRAM bytes) and a trace of real launches.
gl_add_lua_test(gpu_profile tests/lua/gpu_profile.lua GPU)

# The CUPTI structs gpulab declares (bindings/cupti_abi.h) against the toolkit's headers.
find_path(GPULAB_CUPTI_INCLUDE cupti_range_profiler.h
  PATHS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/extras/CUPTI/include NO_DEFAULT_PATH)
if(GPULAB_CUPTI_INCLUDE)
  add_executable(cupti_abi_check ${CMAKE_SOURCE_DIR}/tests/c/cupti_abi_check.cpp)
  target_include_directories(cupti_abi_check PRIVATE ${CMAKE_SOURCE_DIR}/bindings ${GPULAB_CUPTI_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS})
  gl_deadline(deadline 60)
  add_test(NAME cupti_abi_check COMMAND ${deadline} $<TARGET_FILE:cupti_abi_check>)
  set_tests_properties(cupti_abi_check PROPERTIES LABELS cpu TIMEOUT 60)
endif()
gl_add_lua_test(profile_fake_fail tests/lua/test_profile_fake.lua FAKE
  ENV GPULAB_CUPTI=$<TARGET_FILE:fakecupti> GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/profile_fake_fail.log
      GPULAB_FAKE_CUPTI_FAIL=cuptiRangeProfilerSetConfig:35 GPULAB_PROFILE_EXPECT=fail)
# warp_states with its counters from the CUPTI stand-in, and with no CUPTI at all.
gl_add_lua_test(warp_states_counters tests/lua/test_warp_states_counters.lua FAKE
  ENV GPULAB_FAKECUPTI=$<TARGET_FILE:fakecupti>)
# The same with the outer range reported as a range of its own, and with no outer range pushed.
gl_add_lua_test(profile_fake_outer tests/lua/test_profile_fake.lua FAKE
  ENV GPULAB_CUPTI=$<TARGET_FILE:fakecupti> GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/profile_fake_outer.log
      GPULAB_FAKE_CUPTI_OUTER=1)
gl_add_lua_test(profile_fake_nopush tests/lua/test_profile_fake.lua FAKE
  ENV GPULAB_CUPTI=$<TARGET_FILE:fakecupti> GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/profile_fake_nopush.log
      GPULAB_CUPTI_PUSH_RANGE=0)
