-- A collective on a one-rank-per-process communicator may answer ncclInProgress while NCCL
-- connects to the peers (the NCCL stand-in: GPULAB_FAKENCCL_CONNECT=n polls, -1 never). gpulab
-- polls until it is ready; one whose peers never connect ends at the collective's deadline (or
-- the communicator's), aborted.
local T = dofile("tests/lua/t.lua")
local mode = tonumber(os.getenv("GPULAB_FAKENCCL_CONNECT"))

if mode >= 0 then
  T.test("a connection that takes a few polls is waited for", function()
    local comm <close> = cuda.nccl.init { rank = 0, nranks = 2, id = cuda.nccl.unique_id(), device = 0, timeout = 5 }
    local d = cuda.array("f32", 4)
    comm:all_reduce(d, nil, { timeout = 5 })
    T.eq(comm.aborted, false)
  end)
else
  T.test("peers that never connect: the collective's deadline, then an abort", function()
    local comm = cuda.nccl.init { rank = 1, nranks = 2, id = cuda.nccl.unique_id(), device = 0, timeout = 30 }
    local d = cuda.array("f32", 4)
    T.raises(function() comm:all_reduce(d, nil, { timeout = 0.2 }) end,
      "comm:all_reduce: timed out after 0.2 s while ncclAllReduce was being set up (connecting to its peers); " ..
      "the communicator was aborted (ncclCommAbort)")
    T.eq(comm.aborted, true)
    comm:free()
  end)
  T.test("without a timeout on the call, the communicator's deadline bounds it", function()
    local comm = cuda.nccl.init { rank = 1, nranks = 2, id = cuda.nccl.unique_id(), device = 0, timeout = 0.3 }
    T.raises(function() comm:broadcast(cuda.array("i32", 2)) end, "comm:broadcast: timed out after 0.3 s")
    comm:free()
  end)
end
collectgarbage()
T.eq(cuda.nccl.stats().communicators, 0)
T.done()
