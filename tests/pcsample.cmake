# cuda.pcsample through the CUPTI stand-in (tests/fakecupti: PC records for each launch it sees)
# on the driver stand-in, with a stand-in disassembler printing tests/pcsample/fake_sass.txt for
# the line mapping; again with no disassembler, with CUPTI failing mid-way, and with no CUPTI.
# gpu_pcsample samples a pointer chase and an FMA chain on the H200.
set(GL_PCS_ENV GPULAB_CUPTI=$<TARGET_FILE:fakecupti> GPULAB_NVDISASM=${CMAKE_SOURCE_DIR}/tests/sass/fake_nvdisasm.sh
    FAKE_NVDISASM_TEXT=${CMAKE_SOURCE_DIR}/tests/pcsample/fake_sass.txt GPULAB_FAKE_PCS_EXTRA=lib_kernel
    GPULAB_FAKE_PCS_NONUSER=4)
gl_add_lua_test(pcsample_fake tests/lua/test_pcsample_fake.lua FAKE
  ENV ${GL_PCS_ENV} GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/pcsample_fake.log)
gl_add_lua_test(pcsample_fake_nodisasm tests/lua/test_pcsample_fake.lua FAKE
  ENV GPULAB_CUPTI=$<TARGET_FILE:fakecupti> GPULAB_NVDISASM=${CMAKE_BINARY_DIR}/no-such-dir/nvdisasm
      GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/pcsample_fake_nodisasm.log GPULAB_PCS_EXPECT=nodisasm)
gl_add_lua_test(pcsample_fake_fail tests/lua/test_pcsample_fake.lua FAKE
  ENV ${GL_PCS_ENV} GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/pcsample_fake_fail.log
      GPULAB_FAKE_CUPTI_FAIL=cuptiPCSamplingGetData:7 GPULAB_PCS_EXPECT=fail)
gl_add_lua_test(pcsample_fake_full tests/lua/test_pcsample_fake.lua FAKE
  ENV ${GL_PCS_ENV} GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/pcsample_fake_full.log
      GPULAB_FAKE_PCS_FULL=1 GPULAB_PCS_EXPECT=full)
gl_add_lua_test(pcsample_fake_nocupti tests/lua/test_pcsample_fake.lua FAKE
  ENV GPULAB_CUPTI=${CMAKE_BINARY_DIR}/no-such-dir/libcupti.so.13 GPULAB_PCS_EXPECT=absent)
gl_add_lua_test(gpu_pcsample tests/lua/gpu_pcsample.lua GPU)
