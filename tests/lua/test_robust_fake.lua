-- Robustness through the driver stand-in: releases parked during a capture (more than 256),
-- tensor maps over freed arrays, the context-sync watchdog (bounded threads, deadlines that
-- hold with and without it: GPULAB_NO_WATCHDOG=1), objects of another device
-- (GPULAB_FAKE_DEVICES=2), forged metatables and user values, and the text-only loaders.
local T = dofile("tests/lua/t.lua")

local BUSY = assert(os.getenv("GPULAB_FAKE_BUSY_FILE"), "run with GPULAB_FAKE_BUSY_FILE set")
local NO_WATCHDOG = (os.getenv("GPULAB_NO_WATCHDOG") or "0") ~= "0"
os.remove(BUSY)

local read_log, clear_log = T.log_text, T.clear_log
local function busy(on) if on then assert(io.open(BUSY, "w")):close() else os.remove(BUSY) end end
local function full_collect() collectgarbage(); collectgarbage() end

local function test(name, fn)
  T.test(name, function()
    local ok, err = xpcall(fn, debug.traceback)
    busy(false)
    pcall(cuda.sync, { timeout = 5 })
    if not ok then error(err, 0) end
  end)
end

-- Threads of this process, from /proc/self/status (the kernel's count of its tasks).
local function threads()
  for line in io.lines("/proc/self/status") do
    local n = line:match("^Threads:%s+(%d+)")
    if n then return tonumber(n) end
  end
  error("no Threads: line in /proc/self/status")
end

local PTX = [[
.version 8.0
.target sm_90
.address_size 64

.visible .entry use_array(
	.param .u64 p
)
{
	ret;
}

.visible .entry with_tensormap(
	.param .u32 n,
	.param .align 64 .b8 tm[128],
	.param .u64 out
)
{
	ret;
}
]]

local mod = cuda.load(PTX)
local k = mod:kernel("use_array")
local ktm = mod:kernel("with_tensormap")

test("more than 256 releases parked during a capture are all released once the work completes", function()
  local s = cuda.stream { nonblocking = true }
  local arrays = {}
  for i = 1, 600 do arrays[i] = cuda.array("f32", 16) end
  busy(true)
  for i = 1, 600 do k:launch({ grid = 1, block = 1, stream = s }, arrays[i]) end
  local g = s:capture(function()
    k:launch({ grid = 1, block = 1, stream = s }, arrays[1])
    for i = 2, 600 do arrays[i]:free() end -- parked without driver calls until the capture ends
  end)
  T.eq(cuda.stats().deferred, 599, "each waits for its queued launch")
  local function frees() local n = 0; for _ in read_log():gmatch("free 0x") do n = n + 1 end return n end
  clear_log()
  full_collect()
  T.eq(frees(), 0, "nothing freed while the work runs")
  busy(false)
  cuda.sync()
  T.eq(cuda.stats().deferred, 0, "every parked release was visited")
  T.eq(frees(), 599, "and freed")
  g:free(); arrays = nil -- luacheck: ignore 311
  s:free()
  full_collect(); cuda.sync()
  T.eq(cuda.stats().arrays, 0)
end)

test("a tensor map over a freed array is refused by launches, prepared launches and replays", function()
  local a = cuda.array("f16", 64 * 64)
  local tm = cuda.tensormap { array = a, dtype = "f16", dims = { 64, 64 }, strides = { 128 }, box = { 64, 64 } }
  local s = cuda.stream()
  local prepared = ktm:prepare({ grid = 1, block = 1, stream = s }, 1, tm, 0)
  local g = s:capture(function() ktm:launch({ grid = 1, block = 1, stream = s }, 1, tm, 0) end)
  ktm:launch({ grid = 1, block = 1 }, 1, tm, 0); prepared(); g:launch(s) -- fine while the array lives
  cuda.sync()
  a:free()
  T.raises(function() ktm:launch({ grid = 1, block = 1 }, 1, tm, 0) end,
    "the cuda.array under the tensor map was freed")
  T.raises(function() prepared() end,
    "cuda.prepared: with_tensormap parameter 2 (b8[128]): the cuda.array under the tensor map was freed")
  T.raises(function() g:launch(s) end, "g:launch: the graph uses a cuda.tensormap: the cuda.array under")
  local b = cuda.array("f16", 64 * 64)
  tm:replace_address(b) -- points at a live array again: usable
  ktm:launch({ grid = 1, block = 1 }, 1, tm, 0); prepared()
  b:free()
  T.raises(function() prepared() end, "the cuda.array under the tensor map was freed")
  tm:replace_address(cuda.array("f16", 64 * 64)); prepared()
  cuda.sync()
  prepared:free(); g:free(); tm:free(); s:free()
  full_collect(); cuda.sync()
  T.eq(cuda.stats().arrays, 0); T.eq(cuda.stats().tensormaps, 0)
end)

test("timed-out context syncs leave at most one watchdog thread, and each deadline holds", function()
  cuda.sync()
  local before = threads()
  local a = cuda.array("f32", 16)
  busy(true)
  k:launch({ grid = 1, block = 1 }, a)
  for _ = 1, 25 do
    T.raises(function() cuda.sync { timeout = 0.01 } end, "cuda.sync: timed out after")
  end
  local after = threads()
  T.ok(after <= before + 1, string.format("threads %d -> %d after 25 timed-out syncs", before, after))
  if NO_WATCHDOG then T.eq(after, before, "without the watchdog no thread is started") end
  busy(false)
  cuda.sync { timeout = 5 }
  T.eq(threads(), after, "the next sync reuses what is there")
  a:free()
end)

-- The REPL blocks SIGINT except while it waits for a key; a Ctrl-C the kernel gave a helper
-- thread instead would be noted where no one waits for it (the line would hang until a key).
test("the watchdog thread is born with SIGINT and SIGTERM blocked", function()
  if NO_WATCHDOG then return end
  local a = cuda.array("f32", 16)
  busy(true)
  k:launch({ grid = 1, block = 1 }, a)
  T.raises(function() cuda.sync { timeout = 0.01 } end, "cuda.sync: timed out after")
  local pid = assert(io.open("/proc/self/stat")):read("n")
  local helpers = 0
  for tid in assert(io.popen("ls /proc/" .. pid .. "/task")):lines() do
    if tonumber(tid) ~= pid then
      helpers = helpers + 1
      local blocked
      for line in io.lines("/proc/" .. pid .. "/task/" .. tid .. "/status") do
        blocked = blocked or line:match("^SigBlk:%s+(%x+)")
      end
      local mask = tonumber(assert(blocked, "no SigBlk line"), 16)
      T.ok(mask & 0x2 ~= 0 and mask & 0x4000 ~= 0, "thread " .. tid .. " SigBlk " .. blocked)
    end
  end
  T.ok(helpers >= 1, "the timed-out sync left the watchdog running")
  busy(false)
  cuda.sync { timeout = 5 }
  a:free()
end)

test("no capture begins while a timed-out context sync still waits for the GPU", function()
  cuda.sync()
  local a = cuda.array("f32", 16)
  local s = cuda.stream()
  busy(true)
  k:launch({ grid = 1, block = 1 }, a)
  T.raises(function() cuda.sync { timeout = 0.01 } end, "cuda.sync: timed out after")
  if not NO_WATCHDOG then
    T.raises(function() s:capture(function() k:launch({ grid = 1, block = 1, stream = s }, a) end) end,
      "s:capture: a timed-out cuda.sync is still waiting for the GPU")
  end
  busy(false)
  cuda.sync { timeout = 5 }
  local g = s:capture(function() k:launch({ grid = 1, block = 1, stream = s }, a) end)
  T.ok(g, "once the work has finished, captures begin again")
  g:free(); s:free(); a:free()
end)

test("a timed-out sync on a stream and on an event keeps its deadline too", function()
  local s = cuda.stream()
  local e = cuda.event()
  busy(true)
  k:launch({ grid = 1, block = 1, stream = s }, 0)
  e:record(s)
  T.raises(function() s:sync { timeout = 0.01 } end, "s:sync: timed out after")
  T.raises(function() e:sync { timeout = 0.01 } end, "e:sync: timed out after")
  busy(false)
  s:sync { timeout = 5 }
  e:free(); s:free()
end)

test("objects of another device are refused by launches", function()
  if cuda.count() < 2 then
    print("skipped: the stand-in pretends one device here (GPULAB_FAKE_DEVICES=2 for this part)")
    return
  end
  cuda.device(0)
  local a0 = cuda.array("f32", 64 * 64)
  local s0 = cuda.stream()
  local tm0 = cuda.tensormap { array = a0, dtype = "f32", dims = { 64, 64 }, strides = { 256 }, box = { 32, 32 } }
  k:launch({ grid = 1, block = 1 }, a0) -- same device: fine
  cuda.device(1)
  local mod1 = cuda.load(PTX)
  local k1, ktm1 = mod1:kernel("use_array"), mod1:kernel("with_tensormap")
  T.raises(function() k1:launch({ grid = 1, block = 1 }, a0) end,
      "bad argument #2 to 'k:launch' (the cuda.array belongs to device 0, but device 1 is current and has no " ..
      "peer access to it (cuda.peer(1, 0, true) enables it, or cuda.device(0) first))")
  T.raises(function() k1:prepare({ grid = 1, block = 1 }, a0) end, "belongs to device 0")
  T.raises(function() k1:launch({ grid = 1, block = 1, stream = s0 }, 0) end,
    "the cuda.stream belongs to device 0, but device 1 is current")
  T.raises(function() ktm1:launch({ grid = 1, block = 1 }, 1, tm0, 0) end,
    "the cuda.tensormap belongs to device 0, but device 1 is current")
  T.raises(function() k:launch({ grid = 1, block = 1 }, 0) end, "was loaded on device 0, but device 1 is current")
  local a1 = cuda.array("f32", 64 * 64)
  k1:launch({ grid = 1, block = 1 }, a1)
  T.raises(function() tm0:replace_address(a1) end, "the cuda.array belongs to device 1, the tensor map to device 0")
  cuda.sync()
  a1:free(); mod1:free()
  cuda.device(0)
  tm0:free(); s0:free(); a0:free()
end)

test("a forged metatable makes a method raise, never read another type's memory", function()
  local s = cuda.stream()
  local a = cuda.array("f32", 16)
  local array_mt, stream_mt = debug.getmetatable(a), debug.getmetatable(s)
  debug.setmetatable(s, array_mt)
  T.raises(function() s:fill(1) end, "cuda.array")
  T.raises(function() return s.numel end, "")
  T.raises(function() tostring(s) end, "")
  T.raises(function() k:launch({ grid = 1, block = 1 }, s) end, "")
  -- a kernel's own metatable on a stream (the loop below covers the other pairs too)
  debug.setmetatable(s, debug.getmetatable(k))
  T.raises(function() s:launch({ grid = 1, block = 1 }) end, "calling 'k:launch' on bad self (cuda.kernel expected")
  T.raises(function() s:prepare({ grid = 1, block = 1 }) end, "calling 'k:prepare' on bad self (cuda.kernel expected")
  debug.setmetatable(a, stream_mt)
  T.raises(function() a:sync() end, "cuda.stream")
  T.raises(function() k:launch({ grid = 1, block = 1, stream = a }, 0) end, "")
  debug.setmetatable(s, stream_mt); debug.setmetatable(a, array_mt)
  -- every class's methods against every other class's objects
  local objs = { s, a, cuda.event(), cuda.host("f32", 4), mod, k,
    cuda.tensormap { address = 0x10000, dtype = "f16", dims = { 64, 64 }, strides = { 128 }, box = { 64, 64 } } }
  local mts = {}
  for i, o in ipairs(objs) do mts[i] = debug.getmetatable(o) end
  for i, o in ipairs(objs) do
    for j, mt in ipairs(mts) do
      if i ~= j then
        local keep = debug.getmetatable(o)
        debug.setmetatable(o, mt)
        local methods = rawget(mt, "__index")
        if type(methods) == "table" then
          for name, m in pairs(methods) do
            if type(m) == "function" and name ~= "launch" and name ~= "capture" then pcall(m, o, 1, 2) end
          end
        end
        -- a clear error or a string, never a __tostring that calls itself until the C stack is
        -- exhausted (finalizers the collector runs that deep fail, and Lua drops them)
        local ok, msg = pcall(tostring, o)
        T.ok(ok or not tostring(msg):find("stack overflow", 1, true),
          string.format("tostring of object %d under metatable %d: %s", i, j, tostring(msg)))
        debug.setmetatable(o, keep)
      end
    end
  end
  debug.setmetatable(s, stream_mt); debug.setmetatable(a, array_mt)
  s:sync(); a:fill(2)
  for _, o in ipairs(objs) do pcall(function() o:free() end) end
  full_collect(); cuda.sync()
  T.eq(cuda.stats().streams, 0); T.eq(cuda.stats().arrays, 0)
end)

test("debug.setuservalue cannot take the objects a gpulab object holds away from it", function()
  local m = cuda.load(PTX)
  local kk = m:kernel("use_array")
  m = nil -- luacheck: ignore 311
  T.eq(debug.setuservalue(kk, false, 1), nil, "fail, as for a user value it does not have")
  full_collect()
  kk:launch({ grid = 1, block = 1 }, 0) -- its module is still alive
  cuda.sync()
  local plain = io.stdout -- other userdata behave as Lua's own
  T.eq(debug.setuservalue(plain, 1, 1), nil)
end)

test("an object under another metatable is refused even by its own methods, until it is back", function()
  local s = cuda.stream()
  local sync, own = s.sync, debug.getmetatable(s)
  T.eq(debug.setmetatable(s, {}), s, "returns its first argument, as Lua's")
  T.raises(function() sync(s) end, "cuda.stream expected")
  T.eq(debug.setuservalue(s, {}, 1), nil, "still a gpulab object for debug.setuservalue")
  debug.setmetatable(s, nil)
  T.raises(function() sync(s) end, "cuda.stream expected")
  debug.setmetatable(s, debug.getmetatable(cuda.event()))
  T.raises(function() sync(s) end, "cuda.stream expected")
  debug.setmetatable(s, own)
  sync(s)
  s:sync()
  -- the metatables are read raw: a foreign one's own __index runs nothing inside setmetatable
  local ran = 0
  local hostile = setmetatable({}, { __index = function() ran = ran + 1 end })
  debug.setmetatable(s, hostile)
  debug.setmetatable(s, own)
  T.eq(ran, 0)
  s:sync()
  -- a kernel's own metatable is its own: under another kernel's it is no kernel
  local m = cuda.load(PTX)
  local k1, k2 = m:kernel("use_array"), m:kernel("use_array")
  local launch, m1 = k1.launch, debug.getmetatable(k1)
  debug.setmetatable(k1, debug.getmetatable(k2))
  T.raises(function() launch(k1, { grid = 1, block = 1 }, 0) end, "cuda.kernel expected")
  T.eq(debug.setuservalue(k1, {}, 1), nil)
  debug.setmetatable(k1, m1)
  launch(k1, { grid = 1, block = 1 }, 0)
  -- other values: as Lua's own
  T.raises(function() debug.setmetatable(s, 5) end, "nil or table expected")
  local mt = { __index = function() return "seen" end }
  T.eq(debug.setmetatable(7, mt), 7)
  T.eq((8).anything, "seen")
  debug.setmetatable(7, nil)
  local out_mt = debug.getmetatable(io.stdout)
  T.eq(debug.setmetatable(io.stdout, out_mt), io.stdout)
  T.eq(io.type(io.stdout), "file")
  s:free()
end)

test("a metatable replaced, given back and replaced again: the first guardian finalizes nothing", function()
  local a = cuda.array("f32", 64)
  local own = debug.getmetatable(a)
  debug.setmetatable(a, {}) -- a guardian holds it while the metatable is foreign
  debug.setmetatable(a, own) -- back: that guardian becomes garbage
  debug.setmetatable(a, {}) -- a second guardian
  full_collect() -- the first one's finalizer runs
  T.eq(cuda.stats().arrays, 1, "the array the script holds is alive")
  debug.setmetatable(a, own)
  a:fill(1)
  a:free()
end)

test("timed syncs: a deadline of 0 on idle work succeeds; a stream sync keeps older launches counted", function()
  cuda.sync()
  cuda.sync { timeout = 0 }
  local s = cuda.stream()
  local m = cuda.load(PTX) -- an earlier test freed the shared module
  local kk = m:kernel("use_array")
  for _ = 1, 2 do kk:launch({ grid = 1, block = 1 }, 0) end -- the default stream
  for _ = 1, 8 do kk:launch({ grid = 1, block = 1, stream = s }, 0) end -- overwrites the log's ring
  s:sync()
  busy(true)
  local ok, e = pcall(cuda.sync, { timeout = 0.1 })
  busy(false)
  T.eq(ok, false)
  T.ok(tostring(e):find("2 launches since the last good sync", 1, true), tostring(e))
  T.eq(e.launches.n, 2)
  cuda.sync { timeout = 5 }
  s:free()
  m:free()
end)

test("the debug library does not reach a loader that runs binary chunks", function()
  local dumped = string.dump(function() return 42 end)
  T.eq(debug.getupvalue(load, 1), nil, "load keeps no upvalue")
  local seen = {}
  debug.sethook(function()
    local info = debug.getinfo(2, "f")
    if info and info.func then seen[info.func] = true end
  end, "c")
  load("return 1")
  load(function() return nil end)
  debug.sethook()
  for f in pairs(seen) do
    if f ~= debug.sethook then
      local ok, chunk = pcall(f, dumped)
      T.ok(not (ok and type(chunk) == "function" and select(2, pcall(chunk)) == 42),
        "a function reached while loading runs a binary chunk")
    end
  end
  local f, err = load(dumped)
  T.eq(f, nil); T.ok(err:find("binary", 1, true), err)
  local f2, err2 = load(function() local d = dumped; dumped = nil; return d end)
  T.eq(f2, nil); T.ok(err2:find("binary", 1, true), err2)
  T.eq(load("return ...", "=x", "t", {})(5), 5)
  T.eq(load("return y", "=x", "t", { y = 7 })(), 7)
  local pieces = { "return ", "1 + ", "2" }
  T.eq(load(function() return table.remove(pieces, 1) end)(), 3)
end)

mod:free()
clear_log()
T.done()
