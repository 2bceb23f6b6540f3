# The class convention (bindings/identity.h): every class keeps its methods in __methods and its
# computed fields in __fields, and what an object answers is what those tables name. One object
# of every class is made through the stand-ins: the driver, NCCL, CUPTI and the disassembler.
set(GL_CLASSES_ENV GPULAB_LIBNCCL=$<TARGET_FILE:fakenccl> GPULAB_CUPTI=$<TARGET_FILE:fakecupti>
    GPULAB_NVDISASM=${CMAKE_SOURCE_DIR}/tests/sass/fake_nvdisasm.sh
    FAKE_NVDISASM_TEXT=${CMAKE_SOURCE_DIR}/tests/pcsample/fake_sass.txt)
gl_add_lua_test(classes_fake tests/lua/test_classes_fake.lua FAKE ENV ${GL_CLASSES_ENV})

# Every method and function called while a script's code frees every object: metamethods of the
# arguments, a finalizer run by an allocation inside the call, a callback, a call hook
# (docs/THREAT_MODEL.md).
foreach(mode meta finalizer callback hook rewrite)
  gl_add_lua_test(reentrant_${mode} "tests/lua/test_reentrant_fake.lua;${mode}" FAKE ENV ${GL_CLASSES_ENV})
endforeach()
