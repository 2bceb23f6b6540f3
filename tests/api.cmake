# The API description (docs/api.lua): it matches what gpulab registers (walked at run time through
# the driver stand-in), its tools catch what they should, and docs/API.md and the LuaLS stub
# generated from it are not stale (regenerated into the build folder and compared).
gl_add_lua_test(api_coverage tools/api_check.lua FAKE)
gl_add_lua_test(api_doc_tools tests/lua/test_api_doc.lua FAKE ENV GPULAB_BIN=$<TARGET_FILE:gpulab>)
gl_deadline(deadline 120)
set(gen ${CMAKE_BINARY_DIR}/api-generated)
add_test(NAME api_generated_fresh
  COMMAND ${deadline} sh -c "\"$1\" tools/gen_api.lua \"$2\" >/dev/null &&
    diff -u docs/API.md \"$2/docs/API.md\" && diff -u lua/gpulab/meta/cuda.lua \"$2/lua/gpulab/meta/cuda.lua\" ||
    { echo 'stale: run gpulab tools/gen_api.lua and commit the result' >&2; exit 1; }" sh $<TARGET_FILE:gpulab> ${gen}
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(api_generated_fresh PROPERTIES LABELS cpu TIMEOUT 120)
# help(x)'s display: wrapped at spaces, every entry of a shared short name, stand-ins left out.
gl_add_lua_test(help_display tests/lua/test_help.lua FAKE)
# Every error text docs/api.lua shows is one the code raises: a format string of bindings/, host/
# or lua/, or what a CPU test expects (tools/api_errors.lua); and the check reports a changed one.
gl_add_lua_test(api_errors tools/api_errors.lua)
gl_add_lua_test(api_errors_tool tests/lua/test_api_errors.lua ENV GPULAB_BIN=$<TARGET_FILE:gpulab>)
