# Hostile scripts, round 3 (docs/THREAT_MODEL.md): regressions run in the normal and the ASan+UBSan
# builds. A capture whose fn calls os.exit: the state's close ends it and releases the stream.
gl_add_lua_test(capture_exit tests/lua/test_capture_exit.lua FAKE ENV GPULAB_CACHE=0)
# SIGINT and SIGTERM while NVRTC compiles (its own handlers called exit(4) from signal context; the
# sanitizer build hung in its exit check): Ctrl-C raises "interrupted!", SIGTERM ends gpulab.
gl_deadline(deadline 300)
add_test(NAME sigint_compile COMMAND ${deadline} sh ${CMAKE_SOURCE_DIR}/tests/cli/sigint_compile.sh
  $<TARGET_FILE:gpulab> $<TARGET_FILE:pty_expect> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(sigint_compile PROPERTIES LABELS cpu TIMEOUT 300)
