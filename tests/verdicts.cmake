# Verdicts from intervals (lua/gpulab/lab.lua: L:claim, L:compare, lab.summarize, lab.measure)
# and tools/verdicts.sh, which reruns the labs and prints their verdicts side by side.
gl_add_lua_test(lab_verdicts tests/lua/test_lab_verdicts.lua ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so)
gl_add_lua_test(lab_measure_fake tests/lua/test_lab_measure_fake.lua FAKE)
gl_deadline(deadline 300)
add_test(NAME verdicts_tool COMMAND ${deadline} sh ${CMAKE_SOURCE_DIR}/tests/verdicts_check.sh $<TARGET_FILE:gpulab>
  ${CMAKE_BINARY_DIR}/verdicts-check WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(verdicts_tool PROPERTIES LABELS cpu TIMEOUT 300
  ENVIRONMENT "GPULAB_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")
