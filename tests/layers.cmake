# Layers: bindings/ never reaches into host/, the host sees the bindings only through gpulab.h
# (and identity.h), lua/ holds no C, pure headers stay pure, includes match use, and no symbol is
# exported without a user in another object (tools/include_check.lua, tests/layers_compile.sh,
# tests/dead_exports.sh).
gl_deadline(deadline 120)
add_test(NAME layers_include_check
  COMMAND ${deadline} $<TARGET_FILE:gpulab> tools/include_check.lua ${CMAKE_SOURCE_DIR}
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
gl_add_lua_test(layers_include_check_rules tests/lua/test_include_check.lua
  ENV GPULAB_BIN=$<TARGET_FILE:gpulab> GPULAB_LIBCUDA=/nonexistent/libcuda.so)
get_target_property(GPULAB_BINDINGS_INCLUDES gpulab_bindings INTERFACE_INCLUDE_DIRECTORIES)
list(TRANSFORM GPULAB_BINDINGS_INCLUDES PREPEND "-I")
add_test(NAME layers_compile
  COMMAND ${deadline} sh ${CMAKE_SOURCE_DIR}/tests/layers_compile.sh ${CMAKE_C_COMPILER}
          ${CMAKE_SOURCE_DIR} ${GPULAB_BINDINGS_INCLUDES})
add_test(NAME layers_dead_exports
  COMMAND ${deadline} sh ${CMAKE_SOURCE_DIR}/tests/dead_exports.sh ${CMAKE_NM}
          $<TARGET_FILE:gpulab_bindings> $<TARGET_FILE:gpulab_core> $<TARGET_OBJECTS:gpulab>
          $<TARGET_OBJECTS:test_dtype> $<TARGET_OBJECTS:test_ptx> $<TARGET_OBJECTS:bench_launch_raw>
  COMMAND_EXPAND_LISTS)
set_tests_properties(layers_include_check layers_compile layers_dead_exports PROPERTIES LABELS cpu TIMEOUT 120)
