# Hostile scripts, round 3 (docs/THREAT_MODEL.md): regressions run in the normal and the ASan+UBSan
# builds. A capture whose fn calls os.exit: the state's close ends it and releases the stream.
gl_add_lua_test(capture_exit tests/lua/test_capture_exit.lua FAKE ENV GPULAB_CACHE=0)
