-- Several devices through the stand-ins: the driver stand-in in multi-device mode
-- (GPULAB_FAKE_DEVICES=3, GPULAB_FAKE_PEER=0-1,1-0: devices 0 and 1 reach each other, 2 reaches
-- nobody) and the NCCL stand-in (GPULAB_LIBNCCL=libfakenccl.so), whose single-process groups
-- really combine the ranks' buffers (the stand-in's "device" memory is host memory).
-- What this proves: bookkeeping, device checks, peer-copy plumbing, dtype/op mapping, counts,
-- error text, timeouts and double frees. Not what a GPU does.
local T = dofile("tests/lua/t.lua")

local NCCL_LOG = assert(os.getenv("GPULAB_FAKENCCL_LOG"), "run with GPULAB_FAKENCCL_LOG set")
local BUSY = assert(os.getenv("GPULAB_FAKE_BUSY_FILE"), "run with GPULAB_FAKE_BUSY_FILE set")
-- the stand-in appends to its log: start it empty, so a free logged by an earlier run (the ASan
-- build's addresses repeat from run to run) cannot stand for one made in this run
os.remove(NCCL_LOG); os.remove(BUSY); T.clear_log()
local function busy(on) if on then assert(io.open(BUSY, "w")):close() else os.remove(BUSY) end end
local function nccl_log() return T.read(NCCL_LOG) or "" end

-- While the stand-in holds device 1's work: the free logged as `freed` has not happened and waits
-- as the one deferred release. Device 1 is let go whatever the checks find (else later syncs wait).
local function not_freed_while_held(freed, what)
  local held_ok, why = pcall(function()
    T.ok(not T.log_text():find(freed, 1, true), "device 1's memory freed while its kernel ran")
    T.eq(cuda.stats().deferred, 1, what)
  end)
  busy(false)
  if not held_ok then error(why, 0) end
end

local PTX = [[
.version 8.0
.target sm_90
.address_size 64
.visible .entry touch(.param .u64 p) { ret; }
]]

local function filled(dtype, values)
  local h = cuda.host(dtype, #values)
  for i, v in ipairs(values) do h[i] = v end
  local d = cuda.array(dtype, #values)
  d:copy_from(h)
  return d
end

local function values(d)
  local h = cuda.host(d.dtype, d.numel)
  h:copy_from(d)
  local t = {}
  for i = 1, d.numel do t[i] = h[i] end
  return t
end

local function same_list(got, want, what)
  T.eq(#got, #want, what .. " (length)")
  for i = 1, #want do T.eq(got[i], want[i], what .. " [" .. i .. "]") end
end

T.eq(cuda.count(), 3, "three stand-in devices")

T.test("cuda.device returns the previous ordinal; cuda.device() the current device", function()
  local d, prev = cuda.device(1)
  T.eq(d.ordinal, 1)
  T.eq(prev, 0)
  T.eq(cuda.device().ordinal, 1)
  local _, back = cuda.device(prev)
  T.eq(back, 1)
  T.eq(cuda.device().ordinal, 0)
end)

T.test("a capture whose fn ends on another device: the graph belongs to the stream's device", function()
  cuda.device(0)
  local mod = cuda.load(PTX)
  local k = mod:kernel("touch")
  local s = cuda.stream { nonblocking = true }
  local d = cuda.array("f32", 16)
  local g = s:capture(function(st)
    k:launch({ grid = 1, block = 1, stream = st }, d)
    cuda.device(1)
  end)
  T.eq(cuda.device().ordinal, 1, "fn's choice of device stands after the capture")
  T.raises(function() g:launch() end, "belongs to device 0, but device 1 is current")
  cuda.device(0)
  g:launch(s)
  s:sync()
  g:free(); s:free(); d:free(); mod:free()
end)

T.test("a sync of one device proves nothing about another device's work", function()
  cuda.device(1)
  local mod1 = cuda.load(PTX)
  local a = cuda.array("f32", 16)
  local ptr = a.ptr
  T.write(BUSY, "1\n") -- the stand-in holds device 1's work; device 0's completes
  mod1:kernel("touch"):launch({ grid = 1, block = 1 }, a)
  cuda.device(0)
  cuda.sync { timeout = 5 }
  cuda.device(1)
  a:free()
  local freed = string.format("free 0x%x", ptr)
  not_freed_while_held(freed, "the free waits for device 1")
  cuda.sync { timeout = 5 }
  T.ok(T.log_text():find(freed, 1, true), "freed once device 1 is done")
  T.eq(cuda.stats().deferred, 0)
  mod1:free()
  cuda.device(0)
end)

T.test("memory used on another device's default stream is not freed under its running kernel", function()
  cuda.device(1)
  local mod1 = cuda.load(PTX)
  local a = cuda.array("f32", 16)
  local freed = string.format("free 0x%x", a.ptr)
  T.write(BUSY, "1\n")
  mod1:kernel("touch"):launch({ grid = 1, block = 1 }, a) -- device 1's default stream
  cuda.device(0)
  a:free() -- an event on device 0's default stream would prove nothing of device 1's work
  not_freed_while_held(freed, "the free waits")
  cuda.device(1)
  cuda.sync { timeout = 5 }
  cuda.device(0)
  cuda.sync { timeout = 5 }
  T.ok(T.log_text():find(freed, 1, true), "freed once both devices are known idle")
  T.eq(cuda.stats().deferred, 0)
  mod1:free()
end)

T.test("cuda.peer reports what the driver says and enables one direction or both", function()
  local r = cuda.peer(0, 1)
  T.eq(r.can, true); T.eq(r.enabled, false); T.eq(r.same, false)
  T.eq(cuda.peer(1, 2).can, false)
  local s = cuda.peer(1, 1)
  T.eq(s.can, true); T.eq(s.enabled, true); T.eq(s.same, true)
  T.raises(function() cuda.peer(0, 2, true) end,
    "bad argument #3 to 'cuda.peer' (device 0 cannot access device 2 directly (cuDeviceCanAccessPeer says no);"
      .. " copies between them"
      .. " still work")
  T.raises(function() cuda.peer(0, 3) end, "bad argument #2 to 'cuda.peer' (device 3 does not exist; 3"
    .. " devices present)")
  T.raises(function() cuda.peer("0", 1) end, "bad argument #1 to 'cuda.peer' (device ordinal expected, got string)")
  T.raises(function() cuda.peer(0, 1.5) end, "(device ordinal expected, got a non-integer number)")
  T.raises(function() cuda.peer(0, 1, 1) end, "bad argument #3 to 'cuda.peer' (true to enable peer access"
    .. " expected, got number)")
  T.raises(function() cuda.peer(0, 1, true, { both = true, x = 1 }) end,
    "bad argument #4 to 'cuda.peer' (unknown field 'x' (known: both))")
  T.raises(function() cuda.peer(0, 1, false, { both = true }) end, "bad argument #4 to 'cuda.peer' (field 'both':"
    .. " needs argument #3 = true)")
  T.eq(cuda.device().ordinal, 0, "a refused call leaves the current device alone")
end)

T.test("arrays of another device are refused until peer access is on; modules and streams always", function()
  cuda.device(0)
  local mod0 = cuda.load(PTX)
  local k0 = mod0:kernel("touch")
  cuda.device(1)
  local a1 = cuda.array("f32", 16)
  local s1 = cuda.stream()
  cuda.device(0)
  T.raises(function() k0:launch({ grid = 1, block = 1 }, a1) end,
    "bad argument #2 to 'k:launch' (the cuda.array belongs to device 1, but device 0 is current and has no peer"
      .. " access to it (cuda.peer(0, 1, true) enables it")
  T.raises(function() a1:fill(1) end, "calling 'd:fill' on bad self (the cuda.array belongs to device 1, but device 0"
    .. " is current")
  local h = cuda.host("f32", 16)
  T.raises(function() a1:copy_from(h) end,
    "calling 'd:copy_from' on bad self (the cuda.array belongs to device 1, but device 0 is current")
  T.raises(function() h:copy_from(a1) end,
    "bad argument #1 to 'h:copy_from' (the cuda.array belongs to device 1, but device 0 is current")
  T.raises(function() k0:launch({ grid = 1, block = 1, stream = s1 }, 0) end,
    "bad argument #1 to 'k:launch' (field 'stream': the cuda.stream belongs to device 1, but device 0 is"
      .. " current)")
  local r = cuda.peer(0, 1, true)
  T.eq(r.enabled, true)
  T.eq(cuda.peer(1, 0).enabled, false, "one direction only")
  T.eq(cuda.device().ordinal, 0, "enabling leaves device 0 current")
  k0:launch({ grid = 1, block = 1 }, a1) -- peer access: accepted
  a1:fill(2)
  a1:copy_from(h)
  h:copy_from(a1)
  T.raises(function() k0:launch({ grid = 1, block = 1, stream = s1 }, 0) end, "the cuda.stream belongs to device 1")
  cuda.device(1)
  local mod1 = cuda.load(PTX)
  local k1 = mod1:kernel("touch")
  local a0 = cuda.device(0) and cuda.array("f32", 16)
  cuda.device(1)
  T.raises(function() k1:launch({ grid = 1, block = 1 }, a0) end, "belongs to device 0, but device 1 is current")
  cuda.peer(1, 0, true)
  k1:launch({ grid = 1, block = 1 }, a0)
  T.eq(cuda.peer(0, 1, true, { both = true }).enabled, true, "enabling again is fine")
  cuda.sync()
  cuda.device(0)
  a0:free(); a1:free(); s1:free(); mod0:free(); mod1:free()
end)

T.test("d:copy_from across devices is a peer copy, with or without peer access", function()
  cuda.device(2) -- device 2 reaches nobody
  local src = filled("f32", { 1, 2, 3, 4 })
  local s2 = cuda.stream()
  cuda.device(0)
  local dst = cuda.array("f32", 4)
  dst:copy_from(src)
  same_list(values(dst), { 1, 2, 3, 4 }, "device 2 -> device 0")
  local log = T.log_text()
  T.ok(log:find("cuMemcpyPeer 0<-2 16", 1, true), "the copy went through cuMemcpyPeer with both contexts")
  local s0 = cuda.stream()
  local back = cuda.device(2) and cuda.array("f32", 4)
  cuda.device(0)
  back:copy_from(dst, s0)
  T.ok(T.log_text():find("cuMemcpyPeerAsync 2<-0 16", 1, true), "async: cuMemcpyPeerAsync on the stream")
  T.raises(function() back:copy_from(dst, s2) end, "the cuda.stream belongs to device 2, but device 0 is current")
  cuda.device(1)
  T.raises(function() back:copy_from(src) end, -- both on device 2
    "calling 'd:copy_from' on bad self (the cuda.array belongs to device 2, but device 1 is current")
  local other = cuda.device(2) and cuda.array("f32", 4)
  cuda.device(1)
  T.raises(function() other:copy_from(dst) end,
    "bad argument #1 to 'd:copy_from' (a copy from device 0 to device 2 is ordered on a stream of the current"
      .. " device 1, which is neither")
  T.raises(function() dst:copy_from(src) end, "a copy from device 2 to device 0")
  cuda.device(0)
  s0:sync { timeout = 5 }
  for _, x in ipairs({ src, dst, back, other, s0, s2 }) do x:free() end
end)

-- NCCL -----------------------------------------------------------------------------------------
T.test("cuda.nccl through the stand-in: version and unique id", function()
  T.eq(cuda.nccl.available(), true)
  T.eq(cuda.nccl.version(), "2.28.9")
  local id = cuda.nccl.unique_id()
  T.eq(#id, 256)
  T.ok(id:match("^[0-9a-f]+$"), "hex")
  T.ok(os.getenv("NCCL_NVLS_ENABLE") == "0", "NVLink multicast is off (NCCL_NVLS_ENABLE=0)")
end)

local function per_device(dtype, rows)
  local t = {}
  for i, row in ipairs(rows) do
    cuda.device(i - 1)
    t[i] = filled(dtype, row)
  end
  cuda.device(0)
  return t
end

T.test("all_reduce: every op and dtype mapping, combined across the ranks", function()
  local comm <close> = cuda.nccl.init { devices = { 0, 1, 2 } }
  T.eq(comm.nranks, 3)
  same_list(comm.devices, { 0, 1, 2 }, "devices")
  same_list(comm.ranks, { 0, 1, 2 }, "ranks")
  T.ok(tostring(comm):find("3 of 3 ranks on devices 0, 1, 2", 1, true), tostring(comm))
  local rows = { { 1, 5, -2 }, { 2, 3, 7 }, { 4, 4, 1 } }
  local want = { sum = { 7, 12, 6 }, prod = { 8, 60, -14 }, max = { 4, 5, 7 }, min = { 1, 3, -2 } }
  for _, dtype in ipairs({ "f32", "f64", "i32", "i64", "i8", "f16", "bf16" }) do
    for op, expect in pairs(want) do
      local send = per_device(dtype, rows)
      local recv = {}
      for i = 1, 3 do cuda.device(i - 1); recv[i] = cuda.array(dtype, 3) end
      cuda.device(0)
      comm:all_reduce(send, recv, { op = op, timeout = 5 })
      for i = 1, 3 do
        cuda.device(i - 1)
        same_list(values(recv[i]), expect, dtype .. " " .. op .. " rank " .. (i - 1))
      end
      cuda.device(0)
    end
  end
  local bufs = per_device("f32", { { 3 }, { 6 }, { 9 } })
  comm:all_reduce(bufs, nil, { op = "avg" }) -- in place
  comm:sync { timeout = 5 }
  for i = 1, 3 do cuda.device(i - 1); T.eq(values(bufs[i])[1], 6, "avg in place") end
  cuda.device(0)
  local u8 = per_device("u8", { { 200 }, { 50 }, { 1 } })
  comm:all_reduce(u8, nil, { op = "max", timeout = 5 })
  T.eq(values(u8[1])[1], 200, "u8 maps to ncclUint8")
  T.ok(nccl_log():find("all_reduce rank 2 of 3 type 1 op 2 count 1", 1, true), "u8 -> 1, max -> 2")
end)

T.test("broadcast, all_gather and reduce_scatter", function()
  local comm <close> = cuda.nccl.init { devices = { 0, 1 } }
  local b = per_device("i32", { { 1, 2 }, { 8, 9 } })
  comm:broadcast(b, nil, { root = 1, timeout = 5 })
  same_list(values(b[1]), { 8, 9 }, "broadcast from rank 1")
  local send = per_device("f32", { { 1, 2 }, { 3, 4 } })
  local recv = { cuda.array("f32", 4) }
  cuda.device(1); recv[2] = cuda.array("f32", 4); cuda.device(0)
  comm:all_gather(send, recv, { timeout = 5 })
  same_list(values(recv[1]), { 1, 2, 3, 4 }, "all_gather rank 0")
  cuda.device(1); same_list(values(recv[2]), { 1, 2, 3, 4 }, "all_gather rank 1"); cuda.device(0)
  local rs_send = per_device("f64", { { 1, 2, 3, 4 }, { 10, 20, 30, 40 } })
  local rs_recv = { cuda.array("f64", 2) }
  cuda.device(1); rs_recv[2] = cuda.array("f64", 2); cuda.device(0)
  comm:reduce_scatter(rs_send, rs_recv, { op = "sum", timeout = 5 })
  same_list(values(rs_recv[1]), { 11, 22 }, "reduce_scatter rank 0")
  cuda.device(1); same_list(values(rs_recv[2]), { 33, 44 }, "reduce_scatter rank 1"); cuda.device(0)
  local s = { cuda.stream() }
  cuda.device(1); s[2] = cuda.stream(); cuda.device(0)
  comm:all_reduce(send, nil, { streams = s })
  comm:sync()
end)

T.test("collective argument checks name the function, argument and devices", function()
  local comm <close> = cuda.nccl.init { devices = { 0, 1 } }
  local a = per_device("f32", { { 1, 2 }, { 3, 4 } })
  local wrong = { a[2], a[1] }
  T.raises(function() comm:all_reduce(wrong) end,
    "bad argument #1 to 'comm:all_reduce' (send of rank 0: the cuda.array belongs to device 1, but that rank's"
      .. " communicator is on device 0)")
  T.raises(function() comm:all_reduce(a[1]) end, "bad argument #1 to 'comm:all_reduce' (send: this communicator"
    .. " drives 2 devices; give a list of one cuda.array per device)")
  T.raises(function() comm:all_reduce({ a[1] }) end, "bad argument #1 to 'comm:all_reduce' (send: one"
    .. " cuda.array per device (2) expected, got 1)")
  T.raises(function() comm:all_reduce(a, { a[1] }) end, "bad argument #2 to 'comm:all_reduce' (recv: one"
    .. " cuda.array per device (2) expected, got 1)")
  T.raises(function() comm:all_reduce() end, "bad argument #1 to 'comm:all_reduce' (send: a cuda.array or a"
    .. " list of one per device expected, got no value)")
  T.raises(function() comm.all_reduce(comm) end, "bad argument #2 to 'comm:all_reduce' (send:", "self counted")
  T.raises(function() comm:all_reduce(a, { op = "max" }) end, "bad argument #2 to 'comm:all_reduce' (recv: a"
    .. " cuda.array or a list of them expected, got a table without entries (options go after recv, which may"
    .. " be nil for in place))")
  T.raises(function() comm:all_gather(a) end, "bad argument #2 to 'comm:all_gather' (recv: a cuda.array or a"
    .. " list of one per device expected, got no value)")
  T.raises(function() comm:all_reduce(a, nil, { op = "mean" }) end, "bad argument #3 to 'comm:all_reduce'"
    .. " (field 'op': must be one of sum, prod, max, min, avg, got 'mean')")
  T.raises(function() comm:all_reduce(a, nil, { op = 1 }) end, "bad argument #3 to 'comm:all_reduce'"
    .. " (field 'op': string expected, got number)")
  T.raises(function() comm:broadcast(a, nil, { op = "sum" }) end, "bad argument #3 to 'comm:broadcast'"
    .. " (field 'op': is for reductions (all_reduce, reduce_scatter))")
  T.raises(function() comm:all_reduce(a, nil, { root = 0 }) end, "bad argument #3 to 'comm:all_reduce'"
    .. " (field 'root': is for broadcast)")
  T.raises(function() comm:broadcast(a, nil, { root = 2 }) end, "bad argument #3 to 'comm:broadcast'"
    .. " (field 'root': 2 is out of range 0..1)")
  T.raises(function() comm:broadcast(a, nil, { root = 0.5 }) end, "bad argument #3 to 'comm:broadcast'"
    .. " (field 'root': integer expected, got 0.5)")
  T.raises(function() comm:all_reduce(a, nil, { bogus = 1 }) end, "bad argument #3 to 'comm:all_reduce'"
    .. " (unknown field 'bogus' (known: op, root, stream, streams, timeout))")
  T.raises(function() comm:all_reduce(a, nil, { timeout = -1 }) end, "bad argument #3 to 'comm:all_reduce'"
    .. " (field 'timeout': must be 0 < seconds <= 1e9, got -1)")
  T.raises(function() comm:all_reduce(a, nil, 7) end, "bad argument #3 to 'comm:all_reduce' (options table"
    .. " {op=, root=, stream=, streams=, timeout=} expected, got number)")
  local r16 = per_device("i16", { { 1 }, { 2 } })
  T.raises(function() comm:all_reduce(r16) end, "bad argument #1 to 'comm:all_reduce' (send: dtype i16 has no"
    .. " NCCL type")
  local f64 = per_device("f64", { { 1, 2 }, { 3, 4 } })
  T.raises(function() comm:all_reduce(a, f64) end, "bad argument #2 to 'comm:all_reduce' (rank 0: dtype"
    .. " mismatch (send f32, recv f64))")
  local short = per_device("f32", { { 1 }, { 2 } })
  T.raises(function() comm:all_reduce(a, short) end, "bad argument #2 to 'comm:all_reduce' (rank 0: send has 2"
    .. " elements, recv 1: they must be equal)")
  T.raises(function() comm:all_gather(a, a) end, "bad argument #2 to 'comm:all_gather' (rank 0: recv must hold"
    .. " nranks (2) x send (2 elements) = 4 elements, got 2)")
  T.raises(function() comm:reduce_scatter(a, a) end, "bad argument #1 to 'comm:reduce_scatter' (rank 0: send"
    .. " must hold nranks (2) x recv (2 elements) = 4 elements, got 2)")
  T.raises(function() comm:all_reduce({ a[1], short[2] }) end, "bad argument #1 to 'comm:all_reduce' (rank 1's"
    .. " arrays give 1 elements, rank 0's 2: every rank moves the same count)")
  local mixed = { a[1], per_device("i32", { { 0 }, { 5, 6 } })[2] }
  T.raises(function() comm:all_reduce(mixed) end, "bad argument #1 to 'comm:all_reduce' (rank 1's dtype i32"
    .. " differs from rank 0's f32)")
  local s0 = cuda.stream()
  T.raises(function() comm:all_reduce(a, nil, { stream = s0 }) end, "bad argument #3 to 'comm:all_reduce'"
    .. " (field 'stream': this communicator drives 2 devices; give 'streams', one per device)")
  T.raises(function() comm:all_reduce(a, nil, { streams = { s0, s0 } }) end, "bad argument #3 to"
    .. " 'comm:all_reduce' (field 'streams': stream of rank 1: the cuda.stream belongs to device 0, but that"
    .. " rank's communicator is on device 1)")
  T.raises(function() comm:all_reduce(a, nil, { streams = { s0 } }) end, "bad argument #3 to 'comm:all_reduce'"
    .. " (field 'streams': one cuda.stream per device (2) expected, got 1)")
  T.raises(function() comm:all_reduce(a, nil, { streams = { s0, 3 } }) end, "bad argument #3 to"
    .. " 'comm:all_reduce' (field 'streams': stream of rank 1: cuda.stream expected, got number)")
  T.raises(function() comm:all_reduce(a, nil, { streams = { s0 }, stream = s0 }) end, "bad argument #3 to"
    .. " 'comm:all_reduce' (give field 'stream' (one device) or 'streams' (one per device), not both)")
  T.raises(function() comm:all_reduce(a, { a[1], 5 }) end, "bad argument #2 to 'comm:all_reduce' (recv of"
    .. " rank 1: cuda.array expected, got number)")
  a[1]:free()
  T.raises(function() comm:all_reduce(a) end, "bad argument #1 to 'comm:all_reduce' (send of rank 0: the"
    .. " cuda.array was freed)")
  T.raises(function() comm.all_reduce(5) end, "bad argument #1 to 'comm:all_reduce' (cuda.nccl.comm expected,"
    .. " got number)")
  T.raises(function() comm.sync({}) end, "bad argument #1 to 'comm:sync' (cuda.nccl.comm expected, got table)")
  T.raises(function() comm:sync(1) end, "bad argument #1 to 'comm:sync' (options table {timeout=seconds}"
    .. " expected, got number)")
  T.raises(function() comm:sync { timeout = 0 } end, "bad argument #1 to 'comm:sync' (field 'timeout': must be"
    .. " 0 < seconds <= 1e9, got 0)")
  T.raises(function() comm:sync { timeout = "x" } end, "bad argument #1 to 'comm:sync' (field 'timeout': number"
    .. " expected, got string)")
  s0:free()
end)

T.test("a one-device communicator: rank 0 of 1", function()
  local comm <close> = cuda.nccl.init { devices = { 0 } }
  local d = filled("f32", { 1, 2, 3, 4 })
  comm:all_reduce(d, nil, { timeout = 5 })
  same_list(values(d), { 1, 2, 3, 4 }, "a sum over one rank")
  T.eq(comm.nranks, 1)
  T.raises(function() comm:all_gather(d, cuda.array("f32", 3)) end, "= 4 elements, got 3")
end)

T.test("init checks its options", function()
  local init = "bad argument #1 to 'cuda.nccl.init' ("
  T.raises(function() cuda.nccl.init { devices = { 0, 0 } } end, init .. "field 'devices': device 0 is listed twice)")
  T.raises(function() cuda.nccl.init { devices = { 0, 5 } } end, init .. "field 'devices': entry 2: device 5 does"
    .. " not exist (3 devices present))")
  T.raises(function() cuda.nccl.init { devices = {} } end, init .. "field 'devices': lists 0 devices; 1..16 are"
    .. " supported)")
  T.raises(function() cuda.nccl.init { devices = { "0" } } end, init .. "field 'devices': entry 1: device ordinal"
    .. " expected, got string)")
  T.raises(function() cuda.nccl.init { devices = { 0, 1.5 } } end, init .. "field 'devices': entry 2: device"
    .. " ordinal expected, got 1.5)")
  T.raises(function() cuda.nccl.init { devices = 0 } end, init .. "field 'devices': list of device ordinals"
    .. " expected, got number)")
  T.raises(function() cuda.nccl.init { devices = { 0 }, rank = 0 } end, init .. "field 'rank': belongs to the"
    .. " multi-process form; field 'devices' makes one process drive every listed device)")
  T.raises(function() cuda.nccl.init { rank = 0, nranks = 2, device = 0, id = "abc" } end, init .. "field 'id':"
    .. " the 256-character hex string of cuda.nccl.unique_id() expected, got a string of 3 characters)")
  T.raises(function() cuda.nccl.init { rank = 0, nranks = 2, device = 0, id = 12 } end, init .. "field 'id':"
    .. " the 256-character hex string of cuda.nccl.unique_id() expected, got number)")
  T.raises(function() cuda.nccl.init { rank = 0, nranks = 2, device = 0, id = string.rep("zz", 128) } end,
    init .. "field 'id': non-hex character at position 1)")
  T.raises(function() cuda.nccl.init { rank = 2, nranks = 2, device = 0, id = cuda.nccl.unique_id() } end,
    init .. "field 'rank': 2 is out of range 0..1)")
  T.raises(function() cuda.nccl.init { rank = 0, nranks = 2, device = 9, id = cuda.nccl.unique_id() } end,
    init .. "field 'device': 9 is out of range 0..2)")
  T.raises(function() cuda.nccl.init { rank = 0, device = 0, id = cuda.nccl.unique_id() } end,
    init .. "field 'nranks': integer expected, got no value)")
  T.raises(function() cuda.nccl.init { rank = "0", nranks = 2, device = 0, id = cuda.nccl.unique_id() } end,
    init .. "field 'rank': integer expected, got string)")
  T.raises(function() cuda.nccl.init { devices = { 0 }, timeout = 0 } end, init .. "field 'timeout': must be"
    .. " 0 < seconds <= 1e9, got 0)")
  T.raises(function() cuda.nccl.init { devices = { 0 }, color = 1 } end, init .. "unknown field 'color' (known:"
    .. " devices, rank, nranks, id, device, timeout))")
  T.raises(function() cuda.nccl.init() end, init .. "options table {devices=} or {rank=, nranks=, id=, device=}"
    .. " expected, got no value)")
  T.eq(cuda.nccl.stats().communicators, 0, "nothing left behind by refused inits")
end)

T.test("the multi-process form: one rank on its device (the stand-in's peers are elsewhere)", function()
  if os.getenv("GPULAB_FAKENCCL_ABSENT_PEERS") == "1" then return end -- that run's peers never join
  local id = cuda.nccl.unique_id()
  local comm = cuda.nccl.init { rank = 1, nranks = 2, id = id, device = 1, timeout = 5 }
  T.eq(cuda.device().ordinal, 1, "device 1 is current after init")
  T.eq(comm.rank, 1); T.eq(comm.nranks, 2)
  same_list(comm.devices, { 1 }, "its device")
  local d = cuda.array("f32", 8)
  comm:all_reduce(d, nil, { timeout = 5 })
  T.ok(nccl_log():find("init_rank rank 1 of 2 blocking 0", 1, true), "non-blocking init")
  T.ok(nccl_log():find("all_reduce rank 1 of 2 type 7 op 0 count 8", 1, true), "f32 -> 7, sum -> 0")
  comm:free()
  cuda.device(0)
end)

T.test("a collective that never completes ends in a timeout, aborts the communicator, and frees cleanly", function()
  local comm = cuda.nccl.init { devices = { 0, 1 } }
  local a = per_device("f32", { { 1 }, { 2 } })
  busy(true)
  comm:all_reduce(a)
  local t0 = os.time()
  T.raises(function() comm:sync { timeout = 0.2 } end,
    "comm:sync: timed out after 0.2 s waiting for a collective of ranks 0..1 of 2 (peers that never"
      .. " arrived?); the communicator was aborted (ncclCommAbort)")
  T.ok(os.time() - t0 < 5, "bounded")
  busy(false)
  T.eq(comm.aborted, true)
  T.ok(nccl_log():find("abort rank 0", 1, true) and nccl_log():find("abort rank 1", 1, true), "both ranks aborted")
  T.raises(function() comm:all_reduce(a) end, "the communicator was aborted after an earlier timeout or error")
  T.raises(function() comm:sync() end, "aborted")
  comm:free(); comm:free()
  T.eq(comm.freed, true)
  T.ok(tostring(comm):find("freed", 1, true))
  T.raises(function() comm:all_reduce(a) end, "comm:all_reduce: the communicator was freed")
end)

T.test("a timeout on the collective itself ({timeout=}) aborts too", function()
  local comm = cuda.nccl.init { rank = 0, nranks = 1, id = cuda.nccl.unique_id(), device = 0 }
  local d = cuda.array("f32", 2)
  busy(true)
  T.raises(function() comm:all_reduce(d, nil, { timeout = 0.1 }) end, "comm:all_reduce: timed out after 0.1 s")
  busy(false)
  T.eq(comm.aborted, true)
  comm = nil
  collectgarbage(); collectgarbage()
end)

T.test("free, __close and __gc release once; busy communicators are aborted, idle ones destroyed", function()
  os.remove(NCCL_LOG)
  do
    local c <close> = cuda.nccl.init { devices = { 0, 1 } }
    c:free()
  end
  local log = nccl_log()
  T.ok(log:find("destroy rank 0", 1, true) and log:find("destroy rank 1", 1, true), "idle: destroyed")
  os.remove(NCCL_LOG)
  local c = cuda.nccl.init { devices = { 0, 1 } }
  local a = per_device("f32", { { 1 }, { 2 } })
  busy(true)
  c:all_reduce(a)
  c = nil -- luacheck: ignore 311
  collectgarbage(); collectgarbage()
  busy(false)
  log = nccl_log()
  T.ok(log:find("abort rank 0", 1, true), "busy at __gc: aborted, not destroyed (a destroy would wait)\n" .. log)
  T.ok(not log:find("bad comm", 1, true), "no communicator was released twice")
  T.eq(cuda.nccl.stats().communicators, 0)
end)

T.test("a multi-process init whose peers never join times out and aborts", function()
  -- GPULAB_FAKENCCL_ABSENT_PEERS is set for this file's second run only
  if os.getenv("GPULAB_FAKENCCL_ABSENT_PEERS") ~= "1" then return end
  local t0 = os.clock()
  local id = cuda.nccl.unique_id()
  T.raises(function() cuda.nccl.init { rank = 0, nranks = 4, id = id, device = 0, timeout = 0.3 } end,
    "cuda.nccl.init: timed out after 0.3 s waiting for the other 3 ranks to join (rank 0 of 4 on device 0);"
      .. " the communicator was aborted (ncclCommAbort)")
  cuda.device(2)
  T.raises(function() cuda.nccl.init { rank = 0, nranks = 4, id = id, device = 1, timeout = 0.2 } end,
    "timed out after 0.2 s")
  T.eq(cuda.device().ordinal, 2, "a failed init leaves the device it found current")
  cuda.device(0)
  T.ok(os.clock() - t0 < 5)
  T.eq(cuda.nccl.stats().communicators, 0)
  collectgarbage()
  T.ok(not nccl_log():find("bad comm", 1, true), "the aborted handle is not released again")
end)

T.test("collectives are refused inside a stream capture", function()
  local comm <close> = cuda.nccl.init { devices = { 0 } }
  local s = cuda.stream()
  local d = cuda.array("f32", 2)
  T.raises(function() s:capture(function() comm:all_reduce(d, nil, { stream = s }) end) end,
    "comm:all_reduce: collectives are not captured into graphs by gpulab")
  s:free()
end)

collectgarbage(); collectgarbage()
T.eq(cuda.nccl.stats().communicators, 0, "no communicator left")
T.done()
