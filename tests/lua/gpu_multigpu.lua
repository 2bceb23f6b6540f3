-- Several GPUs on the device (label gpu). On one GPU: the device bookkeeping, NCCL with one rank
-- in both forms, and a multi-process init whose other rank never starts (a real NCCL timeout).
-- With two or more: peer access and peer copies with their bytes checked, every collective over
-- all GPUs in one process with its values checked, one process per rank (cuda.run_isolated's
-- list form), and a collective whose peer left (bounded, the communicator aborted).
local T = dofile("tests/lua/t.lua")
T.require_gpu()
local n = cuda.count()
local RANK = "tests/lua/gpu_nccl_rank_child.lua"
print(string.format("%d GPU(s); NCCL: %s", n, tostring(select(2, cuda.nccl.available()) or cuda.nccl.version())))

local function filled(dtype, count, v)
  local d = cuda.array(dtype, count)
  d:fill(v)
  return d
end

local function read(d)
  local h = cuda.host(d.dtype, d.numel)
  h:copy_from(d)
  return h
end

T.test("cuda.device returns the previous ordinal; cuda.peer(0, 0) is the same device", function()
  local _, prev = cuda.device(0)
  T.eq(prev, 0)
  local r = cuda.peer(0, 0)
  T.eq(r.same, true); T.eq(r.enabled, true)
end)

if T.instrumented then -- NCCL's own kernels are not this suite's to sanitize; the device bookkeeping is
  print("under compute-sanitizer: the NCCL parts are left to the native run")
  T.done()
end

T.test("NCCL is there, multicast off", function()
  T.ok(cuda.nccl.available(), "libnccl.so.2 opens")
  T.eq(os.getenv("NCCL_NVLS_ENABLE"), "0")
end)

T.test("one rank, one process: every collective is the identity", function()
  local comm <close> = cuda.nccl.init { devices = { 0 } }
  local d = filled("f32", 1 << 20, 3)
  local s = cuda.stream()
  comm:all_reduce(d, nil, { stream = s, timeout = 30 })
  T.eq(read(d)[1 << 20], 3)
  local g = cuda.array("f32", 1 << 20)
  comm:all_gather(d, g, { stream = s, timeout = 30 })
  T.eq(read(g)[7], 3)
  comm:broadcast(d, g, { timeout = 30 })
  comm:reduce_scatter(d, g, { op = "max", timeout = 30 })
  T.eq(read(g)[1], 3)
end)

T.test("one rank, the multi-process form in this process", function()
  local comm <close> = cuda.nccl.init { rank = 0, nranks = 1, id = cuda.nccl.unique_id(), device = 0 }
  local d = filled("i32", 1000, 5)
  comm:all_reduce(d, nil, { op = "prod", timeout = 30 })
  T.eq(read(d)[1000], 5)
end)

T.test("a multi-process init whose other rank never starts ends in a timeout", function()
  local id = cuda.nccl.unique_id()
  local r = cuda.run_isolated(RANK, { args = { "alone", "0", "2", id, "5" }, timeout = 60 })
  io.stdout:write(r.stdout, r.stderr)
  T.eq(r.status, "ok", "the child ended by itself")
  T.ok(r.stdout:find("cuda.nccl.init: timed out after 5.0 s waiting for the other 1 rank to join", 1, true), r.stdout)
end)

T.test("argument errors with the real library: lauxlib's format, nothing enqueued", function()
  local comm <close> = cuda.nccl.init { devices = { 0 } }
  local d = filled("f32", 64, 1)
  T.raises(function() comm:all_reduce(d, nil, { op = "mean" }) end, "bad argument #3 to 'comm:all_reduce'"
    .. " (field 'op': must be one of sum, prod, max, min, avg, got 'mean')")
  T.raises(function() comm:broadcast(d, nil, { root = 1 }) end, "bad argument #3 to 'comm:broadcast'"
    .. " (field 'root': 1 is out of range 0..0)")
  T.raises(function() comm:all_gather(d, cuda.array("f32", 63)) end, "bad argument #2 to 'comm:all_gather'"
    .. " (rank 0: recv must hold nranks (1) x send (64 elements) = 64 elements, got 63)")
  T.raises(function() cuda.nccl.init { rank = 0, nranks = 1, device = 0, id = "00" } end, "bad argument #1 to"
    .. " 'cuda.nccl.init' (field 'id': the 256-character hex string of cuda.nccl.unique_id() expected, got a"
    .. " string of 2 characters)")
  comm:sync { timeout = 30 }
  T.eq(comm.aborted, false, "a refused call leaves the communicator usable")
end)

if n < 2 then
  print("one GPU: the parts that need two are not run here")
  T.done()
end

T.test("peer access and copies between GPUs 0 and 1, bytes checked", function()
  local count = 16 << 20
  cuda.device(1)
  local b = filled("u32", count, 0xB1)
  cuda.device(0)
  local a = filled("u32", count, 0xA0)
  local back = cuda.array("u32", count)
  back:copy_from(b) -- 1 -> 0 before any peer access: staged by the driver
  T.eq(read(back)[count], 0xB1)
  local r = cuda.peer(0, 1)
  print(string.format("peer 0->1: can=%s", tostring(r.can)))
  if r.can then
    T.eq(cuda.peer(0, 1, true, { both = true }).enabled, true)
    T.eq(cuda.peer(1, 0).enabled, true)
    local s = cuda.stream()
    b:copy_from(a, s) -- 0 -> 1, device 0 current, on its stream
    s:sync { timeout = 30 }
    cuda.device(1)
    T.eq(read(b)[1], 0xA0)
    cuda.device(0)
    a:fill(7) -- peer access does not change what an array of device 0 is
    b:fill(9) -- device 1's array from device 0: allowed with peer access on
    cuda.sync { timeout = 30 }
    cuda.device(1)
    T.eq(read(b)[count], 9)
    cuda.device(0)
  end
end)

T.test("every collective over all GPUs in one process, values checked", function()
  local devices = {}
  for g = 0, n - 1 do devices[#devices + 1] = g end
  local comm <close> = cuda.nccl.init { devices = devices }
  T.eq(comm.nranks, n)
  local count = 322560 -- divisible by every rank count from 1 to 10 (reduce_scatter)
  local send, recv, gat, rs, streams = {}, {}, {}, {}, {}
  for g = 0, n - 1 do
    cuda.device(g)
    send[g + 1] = filled("f32", count, g + 1)
    recv[g + 1] = cuda.array("f32", count)
    gat[g + 1] = cuda.array("f32", count * n)
    rs[g + 1] = cuda.array("f32", count // n)
    streams[g + 1] = cuda.stream()
  end
  cuda.device(0)
  local swapped = { send[2], send[1] }
  for g = 3, n do swapped[g] = send[g] end
  T.raises(function() comm:all_reduce(swapped) end, "bad argument #1 to 'comm:all_reduce' (send of rank 0: the"
    .. " cuda.array belongs to device 1, but that rank's communicator is on device 0)")
  comm:all_reduce(send, recv, { streams = streams, timeout = 60 })
  comm:all_gather(send, gat, { streams = streams, timeout = 60 })
  comm:reduce_scatter(send, rs, { op = "max", streams = streams, timeout = 60 })
  for g = 0, n - 1 do
    cuda.device(g)
    T.eq(read(recv[g + 1])[count], n * (n + 1) / 2, "all_reduce on GPU " .. g)
    local h = read(gat[g + 1])
    for q = 0, n - 1 do T.eq(h[q * count + 1], q + 1, "all_gather segment " .. q .. " on GPU " .. g) end
    T.eq(read(rs[g + 1])[1], n, "reduce_scatter max on GPU " .. g)
  end
  cuda.device(0)
  comm:broadcast(send, nil, { root = n - 1, streams = streams, timeout = 60 })
  for g = 0, n - 1 do cuda.device(g); T.eq(read(send[g + 1])[1], n, "broadcast on GPU " .. g) end
  cuda.device(0)
end)

T.test("one process per rank (cuda.run_isolated's list form)", function()
  local id = cuda.nccl.unique_id()
  local entries = {}
  for r = 0, n - 1 do
    entries[#entries + 1] = { RANK, { args = { "allreduce", tostring(r), tostring(n), id }, timeout = 120 } }
  end
  local res = cuda.run_isolated(entries)
  for r = 0, n - 1 do
    io.stdout:write(res[r + 1].stdout, res[r + 1].stderr)
    T.eq(res[r + 1].status, "ok", "rank " .. r)
    T.ok(res[r + 1].stdout:find(string.format("rank %d result %g mismatches 0", r, n * (n + 1) / 2), 1, true))
  end
end)

T.test("a collective whose peer left ends bounded, the communicator aborted", function()
  local id = cuda.nccl.unique_id()
  local res = cuda.run_isolated({
    { RANK, { args = { "wait", "0", "2", id, "10" }, timeout = 120 } },
    { RANK, { args = { "leave", "1", "2", id }, timeout = 120 } },
  })
  io.stdout:write(res[1].stdout, res[1].stderr)
  T.eq(res[1].status, "ok", "rank 0 ended by itself")
  local out = res[1].stdout
  T.ok(out:find("rank 0 all_reduce error:", 1, true), out)
  T.ok(out:find("timed out after 10.0 s", 1, true) or out:find("the collective failed", 1, true), out) -- either way
  T.ok(out:find("aborted true", 1, true), out)
end)

T.done()
