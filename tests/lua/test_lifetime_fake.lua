-- Lifetimes around queued work, through the driver stand-in: an object that queued work uses is
-- released only once that work is known complete. GPULAB_FAKE_BUSY_FILE holds the stand-in's
-- work "in flight" while the file exists; removing it completes the work. The stand-in's log
-- shows when the driver is actually asked to free ("free 0x...", "module_unload", ...).
local T = dofile("tests/lua/t.lua")

local BUSY = assert(os.getenv("GPULAB_FAKE_BUSY_FILE"), "run with GPULAB_FAKE_BUSY_FILE set")
os.remove(BUSY)

local read_log, clear_log, logged = T.log_text, T.clear_log, T.logged
local function busy(on)
  if on then assert(io.open(BUSY, "w")):close() else os.remove(BUSY) end
end

local function full_collect() collectgarbage(); collectgarbage() end

-- The work completes however the test ends, so a failure cannot leave later tests waiting.
local function test(name, fn)
  T.test(name, function()
    local ok, err = xpcall(fn, debug.traceback)
    busy(false)
    if not ok then error(err, 0) end
  end)
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
]]

test("an array used by a launch on a busy stream is freed only after the work completes", function()
  local mod = cuda.load(PTX)
  local k = mod:kernel("use_array")
  local s = cuda.stream { nonblocking = true }
  local a = cuda.array("f32", 256)
  local addr = string.format("free 0x%x", a.ptr)
  clear_log()
  busy(true)
  k:launch({ grid = 1, block = 32, stream = s }, a)
  a = nil -- luacheck: ignore 311
  full_collect()
  T.ok(not logged(addr), "the memory is still in use: not freed yet")
  local st = cuda.stats()
  T.eq(st.deferred, 1, "one release waits for the work")
  T.eq(st.arrays, 0, "the array object itself is gone")
  T.eq(st.device_bytes, 0)
  T.eq(s:query(), false)
  full_collect()
  T.eq(cuda.stats().deferred, 1, "still waiting while the work runs")
  busy(false)
  T.eq(cuda.stats().deferred, 0, "the completed work lets the release run")
  T.ok(logged(addr), "freed after completion")
  s:free(); mod:free()
  cuda.sync()
end)

test("a module is unloaded only after its queued launches complete", function()
  local s = cuda.stream()
  local mod = cuda.load(PTX)
  mod:kernel("use_array"):launch({ grid = 1, block = 1, stream = s }, 0)
  clear_log()
  busy(true)
  mod:kernel("use_array"):launch({ grid = 1, block = 1, stream = s }, 0)
  mod:free()
  T.eq(cuda.stats().modules, 0)
  T.ok(not logged("module_unload"), "not unloaded while a launch is queued")
  T.eq(cuda.stats().deferred, 1)
  busy(false)
  s:sync { timeout = 1 }
  T.eq(cuda.stats().deferred, 0)
  T.ok(logged("module_unload"))
  s:free()
end)

test("an array freed by hand during work, and several streams", function()
  local k = cuda.load(PTX):kernel("use_array")
  local s1, s2 = cuda.stream(), cuda.stream { nonblocking = true }
  local a = cuda.array("u8", 64)
  local addr = string.format("free 0x%x", a.ptr)
  clear_log()
  busy(true)
  k:launch({ grid = 1, block = 1, stream = s1 }, a)
  k:launch({ grid = 1, block = 1, stream = s2 }, a)
  a:free(); a:free()
  T.ok(not logged(addr))
  T.eq(cuda.stats().deferred, 1)
  T.raises(function() k:launch({ grid = 1, block = 1, stream = s1 }, a) end, "the array was freed")
  busy(false)
  T.eq(cuda.stats().deferred, 0)
  T.ok(logged(addr))
  s1:free(); s2:free()
  k = nil
  full_collect()
  cuda.sync()
end)

test("a stream freed with work queued: what it ran is released after a full sync", function()
  local k = cuda.load(PTX):kernel("use_array")
  local s = cuda.stream()
  local a = cuda.array("u8", 64)
  local addr = string.format("free 0x%x", a.ptr)
  clear_log()
  busy(true)
  k:launch({ grid = 1, block = 1, stream = s }, a)
  s:free()
  T.ok(logged("stream_destroy"), "the driver defers the stream's own destruction")
  T.eq(cuda.stats().streams, 0)
  a = nil -- luacheck: ignore 311
  full_collect()
  T.ok(not logged(addr))
  T.eq(cuda.stats().deferred, 1)
  busy(false)
  cuda.sync()
  T.eq(cuda.stats().deferred, 0)
  T.ok(logged(addr))
  k = nil -- luacheck: ignore 311
  full_collect()
  cuda.sync()
end)

test("a stream freed with work queued: releases wait on its final event, not only a full sync", function()
  local k = cuda.load(PTX):kernel("use_array")
  local s = cuda.stream()
  local a = cuda.array("u8", 64)
  local addr = string.format("free 0x%x", a.ptr)
  clear_log()
  busy(true)
  k:launch({ grid = 1, block = 1, stream = s }, a)
  s:free()
  a:free()
  T.eq(cuda.stats().deferred, 1, "the stream's final event is still pending")
  T.ok(not logged(addr))
  busy(false)
  T.eq(cuda.stats().deferred, 0, "the final event completed: released without any sync")
  T.ok(logged(addr))
  T.ok(not logged("ctx_sync"), "no full sync was needed")
  k = nil -- luacheck: ignore 311
  full_collect()
  cuda.sync()
end)

test("frees inside a capture reach the driver only after the capture has ended", function()
  local k = cuda.load(PTX):kernel("use_array")
  local s, other = cuda.stream(), cuda.stream { nonblocking = true }
  local idle, used = cuda.array("u8", 64), cuda.array("u8", 64)
  local idle_free = string.format("free 0x%x", idle.ptr)
  local used_free = string.format("free 0x%x", used.ptr)
  busy(true)
  k:launch({ grid = 1, block = 1, stream = other }, used)
  clear_log()
  local g = s:capture(function()
    k:launch({ grid = 1, block = 1, stream = s }, 0)
    idle:free()
    used:free()
    T.eq(cuda.stats().deferred, 2, "both releases are parked")
    for line in read_log():gmatch("[^\n]+") do
      T.ok(line:match("^capture_begin ") or line:match("^launch "), "a driver call during the capture: " .. line)
    end
  end)
  T.eq(g.nodes, 1)
  T.ok(logged(idle_free), "the idle array is freed once the capture ended")
  T.ok(not logged(used_free), "the array still used by work on another stream waits for it")
  T.eq(cuda.stats().deferred, 1)
  busy(false)
  T.eq(cuda.stats().deferred, 0)
  T.ok(logged(used_free))
  g:free(); s:free(); other:free()
  k = nil -- luacheck: ignore 311
  full_collect()
  cuda.sync()
end)

test("a graph keeps what its captured work uses, and outlives its queued replays", function()
  local s = cuda.stream { nonblocking = true }
  local e = cuda.event()
  local g = s:capture(function() e:record(s) end)
  e = nil
  full_collect()
  T.eq(cuda.stats().events, 1, "the graph holds the event it records")
  clear_log()
  busy(true)
  g:launch(s)
  g:free()
  T.eq(cuda.stats().graphs, 0)
  T.ok(not logged("graph_exec_destroy"), "the executable graph waits for its replay")
  T.eq(cuda.stats().deferred, 1)
  full_collect()
  T.eq(cuda.stats().events, 0, "the freed graph let go of the event")
  busy(false)
  T.eq(cuda.stats().deferred, 0)
  T.ok(logged("graph_exec_destroy"))
  s:free()
end)

test("arrays launched in a capture stay alive with the graph", function()
  local k = cuda.load(PTX):kernel("use_array")
  local s = cuda.stream()
  local a = cuda.array("u8", 64)
  local addr = string.format("free 0x%x", a.ptr)
  local g = s:capture(function() k:launch({ grid = 1, block = 1, stream = s }, a) end)
  T.eq(g.objects, 2, "the kernel's module and the array")
  a = nil; k = nil
  full_collect()
  T.eq(cuda.stats().arrays, 1, "held by the graph")
  clear_log()
  busy(true)
  g:launch(s)
  g:free()
  full_collect()
  T.eq(cuda.stats().arrays, 0)
  T.ok(not logged(addr), "the replay still uses it")
  busy(false)
  s:sync { timeout = 1 }
  T.ok(logged(addr))
  s:free()
  full_collect()
  cuda.sync()
end)

-- A launch that fails on its arguments inside a capture has already had its objects noted, so the
-- graph holds a pageable host array, and each replay marks it as used on the replay's stream.
-- Freeing the host array must drop those marks: they hold the stream's bookkeeping, whose final
-- event is then destroyed with it (found by the lifetimes fuzzer as a leak).
local function count_logged(word)
  local n = 0
  for _ in read_log():gmatch("%f[%w_]" .. word .. " ") do n = n + 1 end
  return n
end

test("a pageable host array held by a replayed graph lets go of the stream when freed", function()
  local k = cuda.load(PTX):kernel("use_array")
  local s, h = cuda.stream(), cuda.host("f32", 9)
  clear_log()
  local g = s:capture(function(cs)
    local ok, err = pcall(k.launch, k, { grid = 1, block = 1, stream = cs }, h)
    T.ok(not ok and err:find("got cuda.host", 1, true), tostring(err))
  end)
  T.eq(g.objects, 2, "the kernel's module and the host array, noted before the arguments were checked")
  g:launch(s)
  h:free(); g:free(); s:free()
  h, k = nil, nil -- the graph and stream were freed above; the module goes with its last kernel
  full_collect()
  cuda.sync()
  full_collect()
  T.ok(count_logged("event_create") > 0, read_log())
  T.eq(count_logged("event_destroy"), count_logged("event_create"), read_log())
end)

test("cuda.sync waits while the stand-in holds work in flight", function()
  local k = cuda.load(PTX):kernel("use_array")
  local s = cuda.stream { nonblocking = true }
  local a = cuda.array("f32", 16)
  busy(true)
  k:launch({ grid = 1, block = 32, stream = s }, a)
  clear_log()
  local ok, err = pcall(cuda.sync, { timeout = 0.2 })
  T.ok(not ok and tostring(err):find("cuda.sync: timed out after 0.2 s", 1, true), tostring(err))
  T.ok(not logged("ctx_sync"), "cuCtxSynchronize has not returned while the work is busy")
  busy(false)
  cuda.sync()
  -- the timed-out wait's own cuCtxSynchronize returns too (its thread ends before the process)
  local function syncs() return select(2, read_log():gsub("ctx_sync", "")) end
  local deadline = os.time() + 5
  while syncs() < 2 and os.time() < deadline do os.execute("sleep 0.01") end
  T.eq(syncs(), 2, "both context syncs returned")
  a:free()
  s:free()
end)

test("finalizers after a poisoned context do not touch handles", function()
  local p = assert(io.popen("GPULAB_FAKE_FAIL=cuStreamSynchronize:700 GPULAB_FAKE_LOG=/dev/stdout " ..
    arg[-1] .. " -e '" .. [[
      local s = cuda.stream()
      local e = cuda.event()
      local g = s:capture(function() e:record(s) end)
      print(pcall(s.sync, s))
      print(pcall(cuda.stream))
      s:free(); e:free(); g:free()
      local st = cuda.stats()
      print("STATS", st.streams, st.events, st.graphs)
    ]] .. "' 2>&1"))
  local out = p:read("a")
  p:close()
  T.ok(out:find("s:sync: stream sync: CUDA_ERROR_ILLEGAL_ADDRESS (700)", 1, true), out)
  T.ok(out:find("cuda.stream: context poisoned by", 1, true), out)
  T.ok(out:find("STATS\t0\t0\t0", 1, true), out)
  local after = out:sub(out:find("context poisoned", 1, true), -1)
  T.ok(not after:find("stream_destroy", 1, true), "no driver call for a poisoned context's stream")
  T.ok(not after:find("event_destroy", 1, true), out)
  T.ok(not after:find("graph_exec_destroy", 1, true), out)
end)

full_collect()
cuda.sync()
T.test("stats return to zero", function()
  local st = cuda.stats()
  for _, key in ipairs({ "arrays", "modules", "streams", "events", "graphs", "deferred", "device_bytes" }) do
    T.eq(st[key], 0, key)
  end
end)

T.done()
