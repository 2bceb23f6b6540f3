-- NCCL's own failures through the stand-in: an error code returned by a call
-- (GPULAB_FAKENCCL_FAIL=ncclBroadcast:5,ncclCommInitAll:2 here) and an asynchronous error
-- reported by ncclCommGetAsyncError (GPULAB_FAKENCCL_ASYNC_ERROR=6) end in Lua errors naming
-- the function, the NCCL call, the result's name, number and text; no communicator is left.
local T = dofile("tests/lua/t.lua")

if os.getenv("GPULAB_FAKE_FAIL") == "cuEventCreate:2" then
  T.test("an init that fails on its completion event leaves the device it found current", function()
    T.eq(cuda.device().ordinal, 0)
    T.raises(function() cuda.nccl.init { rank = 0, nranks = 1, device = 1, id = cuda.nccl.unique_id() } end,
      "cuda.nccl.init: cuEventCreate: CUDA_ERROR_OUT_OF_MEMORY (2)")
    T.eq(cuda.device().ordinal, 0, "device 0 is still current")
  end)
  collectgarbage()
  T.eq(cuda.nccl.stats().communicators, 0)
  os.exit(T.done())
end

T.test("an error code names the function, the NCCL call and NCCL's text", function()
  T.raises(function() cuda.nccl.init { devices = { 0, 1 } } end,
    "cuda.nccl.init: ncclCommInitAll: ncclSystemError (2): unhandled system error (fake); fake failure"
      .. " injected into ncclCommInitAll")
  local comm <close> = cuda.nccl.init { rank = 0, nranks = 1, device = 0, id = cuda.nccl.unique_id() }
  local d = cuda.array("f32", 4)
  T.raises(function() comm:broadcast(d) end,
    "comm:broadcast: ncclBroadcast: ncclInvalidUsage (5): invalid usage (fake); fake failure injected into"
      .. " ncclBroadcast")
  T.eq(comm.aborted, false, "a refused call leaves the communicator usable")
  -- C compares names up to a NUL byte: "min\0sum" must not pass as "min"
  T.raises(function() comm:all_reduce(d, nil, { op = "min\0sum", timeout = 5 }) end,
    "bad argument #3 to 'comm:all_reduce' (field 'op': contains a NUL byte)")
end)

T.test("an asynchronous error aborts the communicator and is raised by the wait", function()
  local comm = cuda.nccl.init { rank = 0, nranks = 1, device = 0, id = cuda.nccl.unique_id() }
  local d = cuda.array("f32", 4)
  T.raises(function() comm:all_reduce(d, nil, { timeout = 5 }) end,
    "comm:all_reduce: the collective failed (the communicator was aborted): ncclRemoteError (6): remote"
      .. " process exited or there was a network error (fake); fake asynchronous error")
  T.eq(comm.aborted, true)
  comm:free()
end)

collectgarbage()
T.eq(cuda.nccl.stats().communicators, 0)
T.done()
