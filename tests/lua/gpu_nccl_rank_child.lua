-- One rank of an NCCL communicator in its own process (run by tests/lua/gpu_multigpu.lua through
-- cuda.run_isolated's list form, and by tools/multi_gpu_check.sh).
--   gpulab gpu_nccl_rank_child.lua MODE RANK NRANKS ID [TIMEOUT]
-- MODE allreduce: rank r contributes r+1 in 1M floats; prints "rank R result X" (X = n(n+1)/2)
-- MODE leave:     joins, then exits without any collective (its peer's collective never completes)
-- MODE wait:      joins and runs an all-reduce with {timeout=TIMEOUT}; prints how it ended
-- MODE alone:     the others never start: prints how init ended
-- The device is the rank (one GPU per rank).
local mode, rank, nranks, id = arg[1], tonumber(arg[2]), tonumber(arg[3]), arg[4]
local timeout = tonumber(arg[5] or "30")
local function report(what, ok, err)
  print(string.format("rank %d %s %s", rank, what, ok and "ok" or ("error: " .. tostring(err))))
  io.stdout:flush()
end
if mode == "alone" then
  local ok, err = pcall(cuda.nccl.init, { rank = rank, nranks = nranks, id = id, device = rank, timeout = timeout })
  report("init", ok, err)
  os.exit(ok and 1 or 0) -- init must not succeed without the others
end
local comm = cuda.nccl.init { rank = rank, nranks = nranks, id = id, device = rank, timeout = 60 }
print(string.format("rank %d joined on device %d (%d ranks)", comm.rank, cuda.device().ordinal, comm.nranks))
io.stdout:flush()
if mode == "leave" then os.exit(0) end
local n = 1 << 20
local d = cuda.array("f32", n)
d:fill(rank + 1)
local s = cuda.stream()
if mode == "wait" then
  local ok, err = pcall(comm.all_reduce, comm, d, nil, { stream = s, timeout = timeout })
  report("all_reduce", ok, err)
  print("aborted " .. tostring(comm.aborted))
  os.exit(0)
end
comm:all_reduce(d, nil, { stream = s, op = "sum" })
comm:sync { timeout = 60 }
local h = cuda.host("f32", n)
h:copy_from(d)
local bad = 0
for i = 1, n, 4099 do if h[i] ~= nranks * (nranks + 1) / 2 then bad = bad + 1 end end
print(string.format("rank %d result %g mismatches %d", rank, h[1], bad))
comm:free()
