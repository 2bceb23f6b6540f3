# Several GPUs: peer access and peer copies through the driver stand-in in multi-device mode
# (GPULAB_FAKE_DEVICES, GPULAB_FAKE_PEER), NCCL through its stand-in (tests/fakenccl, selected by
# GPULAB_LIBNCCL), the multi-GPU lab and sweeps; GPU tests (label gpu) for the H200 machines.
add_library(fakenccl SHARED ${CMAKE_SOURCE_DIR}/tests/fakenccl/fake_nccl.c)
set_target_properties(fakenccl PROPERTIES C_VISIBILITY_PRESET hidden)
add_dependencies(gpulab fakenccl)

set(GL_MULTI_ENV GPULAB_FAKE_DEVICES=3 GPULAB_FAKE_PEER=0-1,1-0 GPULAB_LIBNCCL=$<TARGET_FILE:fakenccl>)
gl_add_lua_test(multigpu_fake tests/lua/test_multigpu_fake.lua FAKE
  ENV ${GL_MULTI_ENV} GPULAB_FAKENCCL_LOG=${CMAKE_BINARY_DIR}/multigpu_fake.nccl.log
      GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/multigpu_fake.cuda.log
      GPULAB_FAKE_BUSY_FILE=${CMAKE_BINARY_DIR}/multigpu_fake.busy)
gl_add_lua_test(multigpu_fake_absent_peers tests/lua/test_multigpu_fake.lua FAKE
  ENV ${GL_MULTI_ENV} GPULAB_FAKENCCL_ABSENT_PEERS=1
      GPULAB_FAKENCCL_LOG=${CMAKE_BINARY_DIR}/multigpu_fake_absent.nccl.log
      GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/multigpu_fake_absent.cuda.log
      GPULAB_FAKE_BUSY_FILE=${CMAKE_BINARY_DIR}/multigpu_fake_absent.busy)
gl_add_lua_test(nccl_errors_fake tests/lua/test_nccl_errors_fake.lua FAKE
  ENV ${GL_MULTI_ENV} GPULAB_FAKENCCL_FAIL=ncclBroadcast:5,ncclCommInitAll:2 GPULAB_FAKENCCL_ASYNC_ERROR=6)
gl_add_lua_test(nccl_errors_fake_event tests/lua/test_nccl_errors_fake.lua FAKE
  ENV ${GL_MULTI_ENV} GPULAB_FAKE_FAIL=cuEventCreate:2)
gl_add_lua_test(sweep_gpus_fake tests/lua/test_sweep_gpus.lua FAKE ENV GPULAB_FAKE_DEVICES=3)
gl_add_lua_test(run_isolated_many tests/lua/test_run_isolated_many.lua)
gl_add_lua_test(lab_multi_gpu_fake tests/lua/test_multi_gpu_lab.lua FAKE
  ENV GPULAB_FAKE_PEER=0-1,1-0 GPULAB_LIBNCCL=$<TARGET_FILE:fakenccl>)
gl_add_lua_test(gpu_multigpu tests/lua/gpu_multigpu.lua GPU)
gl_add_lua_test(ranks_fake tests/lua/test_ranks_fake.lua FAKE ENV ${GL_MULTI_ENV})
# The NCCL ABI of bindings/nccl_abi.h against a real nccl.h, where the CUDA folder has one.
find_path(GL_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
if(GL_NCCL_INCLUDE)
  add_executable(nccl_abi_check tests/c/nccl_abi_check.c)
  target_include_directories(nccl_abi_check PRIVATE ${GL_NCCL_INCLUDE} ${CMAKE_SOURCE_DIR}/bindings
                             ${CUDAToolkit_INCLUDE_DIRS})
  gl_deadline(deadline 60)
  add_test(NAME nccl_abi COMMAND ${deadline} $<TARGET_FILE:nccl_abi_check>)
  set_tests_properties(nccl_abi PROPERTIES LABELS cpu TIMEOUT 60)
endif()
gl_add_lua_test(nccl_connect_fake tests/lua/test_nccl_connect_fake.lua FAKE ENV ${GL_MULTI_ENV} GPULAB_FAKENCCL_CONNECT=3)
gl_add_lua_test(nccl_connect_never_fake tests/lua/test_nccl_connect_fake.lua FAKE ENV ${GL_MULTI_ENV} GPULAB_FAKENCCL_CONNECT=-1)
