# Streams, events, captured graphs and cuda.bench through the driver stand-in (API shape, messages,
# deadlines, capture errors), object lifetimes around queued work, and the same on a GPU.
# GPULAB_FAKE_BUSY_FILE: while that file exists the stand-in's queued work does not complete.
gl_add_lua_test(stream_fake tests/lua/test_stream_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/stream_fake.log GPULAB_FAKE_BUSY_FILE=${CMAKE_BINARY_DIR}/stream_fake.busy)
gl_add_lua_test(lifetime_fake tests/lua/test_lifetime_fake.lua FAKE
  ENV GPULAB_FAKE_LOG=${CMAKE_BINARY_DIR}/lifetime_fake.log GPULAB_FAKE_BUSY_FILE=${CMAKE_BINARY_DIR}/lifetime_fake.busy)
# On a GPU: overlap of two streams, event timing of a known-length kernel, a graph of 100 launches,
# and a never-ending kernel caught by s:sync{timeout=1} in a child (tests/lua/gpu_hang_child.lua).
gl_add_lua_test(gpu_stream tests/lua/gpu_stream.lua GPU)
