# What a fresh machine needs. NVRTC without the CUDA folder on the loader path: a mount namespace whose loader cache lists no
# folder with libnvrtc, LD_LIBRARY_PATH unset, an empty compile cache (tests/loader/). Needs root
# for the namespace; reported skipped (77) otherwise.
gl_deadline(deadline 300)
add_test(NAME nvrtc_no_loader_path
  COMMAND ${deadline} sh ${CMAKE_SOURCE_DIR}/tests/loader/no_loader_path.sh $<TARGET_FILE:gpulab> tests/lua/test_nvrtc_loader.lua
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
list(GET CUDAToolkit_INCLUDE_DIRS 0 GL_CUDA_INCLUDE)
set_tests_properties(nvrtc_no_loader_path PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "GL_NVRTC_DIR=${GPULAB_NVRTC_DIR};GL_CUDA_INCLUDE=${GL_CUDA_INCLUDE};GPULAB_LIBCUDA=/nonexistent/libcuda.so")
# Every test's own deadline leaves headroom below its ctest TIMEOUT (tests/deadline.sh).
gl_add_lua_test(test_deadlines tests/lua/test_deadlines.lua)
set_tests_properties(test_deadlines PROPERTIES
  ENVIRONMENT "GPULAB_LIBCUDA=/nonexistent/libcuda.so;GL_BUILD_DIR=${CMAKE_BINARY_DIR}")
# A libcuda given by path gets its JIT compiler library from its own folder (bindings/driver.c).
gl_add_lua_test(driver_siblings tests/lua/test_driver_siblings.lua)
set_tests_properties(driver_siblings PROPERTIES ENVIRONMENT "GL_FAKECUDA=$<TARGET_FILE:fakecuda>")
# README's commands and .ci/run install the same packages and run the same tests.
gl_deadline(deadline 120)
add_test(NAME readme_ci_agree COMMAND ${deadline} sh ${CMAKE_SOURCE_DIR}/tests/readme_ci.sh)
set_tests_properties(readme_ci_agree PROPERTIES LABELS cpu TIMEOUT 120)
