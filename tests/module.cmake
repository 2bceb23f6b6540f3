# cuda.so from Lua 5.4's own interpreter: scripts run as `lua5.4 -e 'require "cuda"' script.lua`
# with LUA_CPATH_5_4 at the built module (and LUA_PATH_5_4 at lua/ for gpulab.lab and friends),
# against the driver stand-in. test_lua_module.lua checks the module itself and compares what a
# script sees with gpulab; some of gpulab's own Lua tests then run unchanged under lua5.4.
find_program(GPULAB_LUA54 NAMES lua5.4 lua54)
if(NOT GPULAB_LUA54)
  message(STATUS "lua5.4 not found: the tests of cuda.so under Lua's own interpreter are not registered")
  return()
endif()

# A sanitizer build's cuda.so needs the sanitizer runtime loaded before lua5.4, which has none,
# and so would every program the tests start: those builds leave these tests out (nosan).
set(GL_MODULE_LABELS cpu module)
if(GPULAB_SANITIZE OR GPULAB_FUZZ)
  list(APPEND GL_MODULE_LABELS nosan)
endif()

# gl_add_lua54_test(NAME FILE [FAKE] [ENV k=v ...]): runs `lua5.4 -e 'require "cuda"' FILE`.
function(gl_add_lua54_test name file)
  cmake_parse_arguments(T "FAKE" "" "ENV" ${ARGN})
  gl_deadline(deadline 300)
  add_test(NAME ${name} COMMAND ${deadline} ${GPULAB_LUA54} -e "require 'cuda'" ${file}
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set(env "GPULAB_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache"
    "LUA_CPATH_5_4=$<TARGET_FILE_DIR:gpulab_lua_module>/?.so\;\;"
    "LUA_PATH_5_4=${CMAKE_SOURCE_DIR}/lua/?.lua\;\;" ${T_ENV})
  if(T_FAKE)
    list(APPEND env "GPULAB_LIBCUDA=$<TARGET_FILE:fakecuda>")
  endif()
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${env}" LABELS "${GL_MODULE_LABELS}" TIMEOUT 300)
endfunction()

gl_add_lua54_test(module_lua54 tests/lua/test_lua_module.lua FAKE
  ENV GPULAB_BIN=$<TARGET_FILE:gpulab> GL_LUA54=${GPULAB_LUA54} GL_MODULE_DIR=$<TARGET_FILE_DIR:gpulab_lua_module>
      GL_SOURCE_DIR=${CMAKE_SOURCE_DIR} GL_MODULE_TO_HOME=${gl_module_to_home} GL_NM=${CMAKE_NM}
      GL_FAKECUPTI=$<TARGET_FILE:fakecupti> GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/module_lua54.log)

# gpulab's own tests, unchanged, under lua5.4: tensor-map rules, launches with attributes, memory,
# cuda.profile through the CUPTI stand-in, long API sequences.
gl_add_lua54_test(module_lua54_tensormap tests/lua/test_tensormap.lua FAKE)
gl_add_lua54_test(module_lua54_launch_attrs tests/lua/test_launch_attrs_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/module_lua54_launch_attrs.log)
gl_add_lua54_test(module_lua54_memory tests/lua/test_memory_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/module_lua54_memory.log)
gl_add_lua54_test(module_lua54_profile tests/lua/test_profile_fake.lua FAKE
  ENV GPULAB_CUPTI=$<TARGET_FILE:fakecupti> GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/module_lua54_profile.log)
gl_add_lua54_test(module_lua54_api_sequences tests/lua/test_api_sequences.lua FAKE ENV GPULAB_CACHE=0)

# cmake --install: cuda.so and the gpulab.* modules where Lua 5.4 looks under the prefix.
if(NOT IS_ABSOLUTE "${GPULAB_LUA_CMOD_DIR}" AND NOT IS_ABSOLUTE "${GPULAB_LUA_LMOD_DIR}")
  gl_deadline(deadline 120)
  add_test(NAME module_lua54_install
    COMMAND ${deadline} sh ${CMAKE_SOURCE_DIR}/tests/module_install.sh ${CMAKE_BINARY_DIR}
            ${CMAKE_BINARY_DIR}/module-install-test ${GPULAB_LUA54} ${GPULAB_LUA_CMOD_DIR} ${GPULAB_LUA_LMOD_DIR}
            ${CMAKE_INSTALL_DATADIR}/gpulab)
  set_tests_properties(module_lua54_install PROPERTIES LABELS "${GL_MODULE_LABELS}" TIMEOUT 120
    ENVIRONMENT "GPULAB_LIBCUDA=/nonexistent/libcuda.so")
endif()
