# Lab harness (lua/gpulab/lab.lua, json.lua, svg.lua), cuda.run_isolated and --sanitize.
# Everything here runs without a GPU: the driver is hidden (GPULAB_LIBCUDA=/nonexistent).
set(GL_NO_DRIVER GPULAB_LIBCUDA=/nonexistent/libcuda.so)
gl_add_lua_test(isolate tests/lua/test_isolate.lua ENV ${GL_NO_DRIVER} GPULAB_BIN=$<TARGET_FILE:gpulab>)
gl_add_lua_test(lab_harness tests/lua/test_lab.lua ENV ${GL_NO_DRIVER} GPULAB_BIN=$<TARGET_FILE:gpulab>)
gl_add_lua_test(lab_svg tests/lua/test_lab_svg.lua ENV ${GL_NO_DRIVER})
gl_add_lua_test(lab_json tests/lua/test_lab_json.lua ENV ${GL_NO_DRIVER})
# harness.holds: a claim's verdict from lab:compare's decisions (what labs map by rule).
gl_add_lua_test(lab_holds tests/lua/test_lab_holds.lua ENV ${GL_NO_DRIVER})
# What the harness writes and refuses: output trials, a failed write put back, UTF-8, argument errors.
gl_add_lua_test(lab_outputs tests/lua/test_lab_outputs.lua ENV ${GL_NO_DRIVER} GPULAB_BIN=$<TARGET_FILE:gpulab>)
gl_add_lua_test(lab_sanitize tests/lua/test_lab_sanitize.lua ENV ${GL_NO_DRIVER} GPULAB_BIN=$<TARGET_FILE:gpulab>)
# The pictures open in a browser: headless Chromium (skipped, exit 77, where it is not installed).
gl_deadline(deadline 300)
add_test(NAME lab_svg_browser COMMAND ${deadline} sh ${CMAKE_SOURCE_DIR}/tests/svg_check.sh $<TARGET_FILE:gpulab>
  ${CMAKE_BINARY_DIR}/svg-check WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(lab_svg_browser PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 300)
# On a GPU: faulting and hanging children of cuda.run_isolated; the demo lab's GPU path.
gl_add_lua_test(lab_gpu tests/lua/test_lab_gpu.lua GPU)
# A lab author's harness: labs outside the tree, claims with sources, provenance, --html reports.
gl_add_lua_test(lab_authoring tests/lua/test_lab_authoring.lua ENV ${GL_NO_DRIVER} GPULAB_BIN=$<TARGET_FILE:gpulab>)
# The results' device provenance (name, UUID, SMs, clocks, memory) through the driver stand-in.
gl_add_lua_test(lab_provenance_fake tests/lua/test_lab_provenance_fake.lua FAKE)
gl_add_lua_test(lab_report tests/lua/test_lab_report.lua ENV ${GL_NO_DRIVER})
# The --html report in a real browser: headless Chromium renders it (skipped, exit 77, without Chromium).
gl_deadline(deadline 300)
add_test(NAME lab_html_browser COMMAND ${deadline} sh ${CMAKE_SOURCE_DIR}/tests/html_check.sh $<TARGET_FILE:gpulab>
  ${CMAKE_BINARY_DIR}/html-check WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(lab_html_browser PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 300)
