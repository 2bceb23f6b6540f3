-- Streams, events, captured graphs and cuda.bench through the driver stand-in
-- (GPULAB_LIBCUDA=libfakecuda.so). The stand-in runs nothing: these tests check the API's shape,
-- its messages, deadlines and capture error paths. Event times are host times between records,
-- never GPU measurements. While GPULAB_FAKE_BUSY_FILE exists, queued work does not complete.
local T = dofile("tests/lua/t.lua")

assert(os.getenv("GPULAB_FAKE_LOG"), "run with GPULAB_FAKE_LOG set")
local BUSY = assert(os.getenv("GPULAB_FAKE_BUSY_FILE"), "run with GPULAB_FAKE_BUSY_FILE set")
local GPULAB = arg[-1]
os.remove(BUSY)

local read_log, clear_log = T.log_lines, T.clear_log

local function count(prefix)
  local n = 0
  for _, l in ipairs(read_log()) do if l:sub(1, #prefix) == prefix then n = n + 1 end end
  return n
end

local function busy(on)
  if on then assert(io.open(BUSY, "w")):close() else os.remove(BUSY) end
end

-- A test that holds work in flight: the work completes however the test ends, so a failure
-- cannot leave later tests waiting for ever.
local function test_busy(name, fn)
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

.visible .entry work(
	.param .u64 p
)
{
	ret;
}
]]
local mod = cuda.load(PTX)
local work = mod:kernel("work")

T.test("streams: options, tostring, query, sync, free", function()
  local s = cuda.stream()
  T.ok(tostring(s):match("^cuda%.stream 0x%x+ %(blocking, priority 0%)$"), tostring(s))
  local nb = cuda.stream { nonblocking = true, priority = -5 }
  T.ok(tostring(nb):find("(non-blocking, priority -5)", 1, true), tostring(nb))
  local log = read_log()
  T.ok(log[#log]:find("flags=1 priority=-5", 1, true), log[#log])
  T.eq(s:query(), true)
  s:sync()
  s:sync { timeout = 0.5 }
  s:sync { timeout = math.huge }
  T.eq(cuda.stats().streams, 2)
  s:free(); s:free()
  T.eq(tostring(s), "cuda.stream (freed)")
  T.eq(cuda.stats().streams, 1)
  T.raises(function() s:sync() end, "s:sync: the cuda.stream was freed")
  T.raises(function() s:query() end, "s:query: the cuda.stream was freed")
  do
    local closed <close> = cuda.stream() -- luacheck: ignore 211
    T.eq(cuda.stats().streams, 2)
  end
  T.eq(cuda.stats().streams, 1)
  nb = nil -- luacheck: ignore 311
  collectgarbage(); collectgarbage()
  T.eq(cuda.stats().streams, 0)
end)

T.test("streams: bad options and wrong self", function()
  T.raises(function() cuda.stream(5) end, "bad argument #1 to 'cuda.stream' (options table")
  T.raises(function() cuda.stream { blocking = true } end,
    "bad argument #1 to 'cuda.stream' (unknown field 'blocking'")
  T.raises(function() cuda.stream { nonblocking = 1 } end,
    "bad argument #1 to 'cuda.stream' (field 'nonblocking': boolean expected, got number)")
  local s = cuda.stream()
  T.raises(function() s.sync({}) end, "bad argument #1 to 's:sync' (cuda.stream expected, got table)")
  T.raises(function() s.query(work) end, "bad argument #1 to 's:query' (cuda.stream expected, got cuda.kernel)")
  T.raises(function() s:sync(1) end,
    "bad argument #1 to 's:sync' (options table {timeout=seconds} expected, got number)")
  T.raises(function() s:sync { timeout = -1 } end,
    "bad argument #1 to 's:sync' (field 'timeout': must be >= 0 seconds, got -1)")
  T.raises(function() s:sync { timeout = 0 / 0 } end,
    "bad argument #1 to 's:sync' (field 'timeout': number expected, got NaN)")
  T.raises(function() s:sync { timeout = "1" } end,
    "bad argument #1 to 's:sync' (field 'timeout': number expected, got string)")
  T.raises(function() s:sync { tmeout = 1 } end, "bad argument #1 to 's:sync' (unknown field 'tmeout'")
  s:free()
  T.eq(s.free(42), nil, "free ignores a wrong self")
end)

T.test("stream priorities are checked against the device's range", function()
  for p = -5, 0 do cuda.stream { priority = p }:free() end
  T.raises(function() cuda.stream { priority = 1 } end,
      "bad argument #1 to 'cuda.stream' (field 'priority': 1 is out of this device's range -5..0 (-5 is the " ..
      "highest priority, 0 the default))")
  T.raises(function() cuda.stream { priority = -6 } end,
    "bad argument #1 to 'cuda.stream' (field 'priority': -6 is out of this device's range -5..0 (-5 is the " ..
    "highest priority, 0 the default))")
  T.raises(function() cuda.stream { priority = 1 << 40 } end, "out of this device's range")
  T.raises(function() cuda.stream { priority = -2.5 } end,
    "bad argument #1 to 'cuda.stream' (field 'priority': integer expected, got -2.5)")
  T.raises(function() cuda.stream { priority = 0 / 0 } end,
    "bad argument #1 to 'cuda.stream' (field 'priority': integer expected, got")
  T.raises(function() cuda.stream { priority = "1" } end,
    "bad argument #1 to 'cuda.stream' (field 'priority': integer expected, got string)")
  T.eq(cuda.stats().streams, 0)
end)

T.test("events: record, query, sync, elapsed, timing off", function()
  local s = cuda.stream()
  local e0, e1 = cuda.event(), cuda.event { timing = true }
  T.ok(tostring(e0):find("(timing, never recorded)", 1, true), tostring(e0))
  T.raises(function() e1:elapsed(e0) end, "e:elapsed: start event was never recorded")
  T.eq(e0:record(s), e0, "record returns the event")
  T.raises(function() e1:elapsed(e0) end, "e:elapsed: end event was never recorded")
  e1:record() -- the default stream
  T.eq(e1:query(), true)
  e1:sync()
  e1:sync { timeout = 1 }
  local ms = e1:elapsed(e0)
  T.eq(math.type(ms), "float")
  T.ok(ms >= 0 and ms < 1000, "elapsed " .. ms)
  T.ok(tostring(e1):find("(timing, recorded)", 1, true), tostring(e1))
  local quiet = cuda.event { timing = false }
  quiet:record(s)
  T.raises(function() quiet:elapsed(e0) end, "e:elapsed: the end event was created with timing=false")
  T.raises(function() e0:elapsed(quiet) end, "e:elapsed: the start event was created with timing=false")
  T.raises(function() e1:elapsed(5) end, "bad argument #1 to 'e:elapsed' (cuda.event expected, got number)")
  T.raises(function() e1:record(5) end, "bad argument #1 to 'e:record' (cuda.stream expected, got number)")
  T.raises(function() e1.record(s) end, "bad argument #1 to 'e:record' (cuda.event expected, got cuda.stream)")
  T.raises(function() cuda.event { timing = 1 } end,
    "bad argument #1 to 'cuda.event' (field 'timing': boolean expected, got number)")
  T.raises(function() cuda.event { blocking = true } end, "bad argument #1 to 'cuda.event' (unknown field 'blocking'")
  clear_log()
  T.eq(s:wait(e1), s)
  T.eq(count("stream_wait_event"), 1)
  T.raises(function() s:wait(s) end, "bad argument #1 to 's:wait' (cuda.event expected, got cuda.stream)")
  local dead = cuda.stream()
  dead:free()
  T.raises(function() e0:record(dead) end, "bad argument #1 to 'e:record' (the cuda.stream was freed)")
  e0:free(); e0:free()
  T.eq(tostring(e0), "cuda.event (freed)")
  T.raises(function() e0:record(s) end, "e:record: the cuda.event was freed")
  T.raises(function() s:wait(e0) end, "bad argument #1 to 's:wait' (the cuda.event was freed)")
  T.raises(function() e1:elapsed(e0) end, "bad argument #1 to 'e:elapsed' (the cuda.event was freed)")
  T.eq(cuda.stats().events, 2)
  e1:free(); quiet:free(); s:free()
  T.eq(cuda.stats().events, 0)
end)

test_busy("work in flight: queries say not ready, deadlines name the pending launch", function()
  local s = cuda.stream { nonblocking = true }
  local a = cuda.array("u8", 16)
  local e0, e1 = cuda.event(), cuda.event()
  busy(true)
  e0:record(s)
  work:launch({ grid = 2, block = 32, stream = s }, a)
  e1:record(s)
  T.eq(s:query(), false)
  T.eq(e1:query(), false)
  T.raises(function() e1:elapsed(e0) end, "e:elapsed: the work before the events has not completed yet")
  local t0 = cuda.now()
  local err = T.raises(function() s:sync { timeout = 0.2 } end, "s:sync: timed out after 0.2 s waiting for the GPU")
  T.ok(cuda.now() - t0 >= 0.2, "waited the whole deadline")
  T.ok(err:find("1 launch since the last good sync: work<<<2, 32>>> on a stream", 1, true), err)
  err = T.raises(function() e1:sync { timeout = 0.1 } end, "e:sync: timed out after 0.1 s")
  T.ok(err:find("work<<<2, 32>>>", 1, true), err)
  T.raises(function() s:sync { timeout = 0 } end, "timed out after 0.0 s")
  busy(false)
  T.eq(e1:query(), true)
  T.eq(s:query(), true)
  s:sync { timeout = 1 }
  T.ok(e1:elapsed(e0) >= 0)
  e0:free(); e1:free(); a:free(); s:free()
end)

-- Cases that need a fresh process: injected faults, work that never completes.
local function child(env, code)
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write("local PTX = ", string.format("%q", PTX), "\n", code)
  f:close()
  local log = env:find("GPULAB_FAKE_LOG=", 1, true) and "" or " GPULAB_FAKE_LOG=/dev/null"
  local p = assert(io.popen(env .. log .. " " .. GPULAB .. " " .. script .. " 2>&1"))
  local out = p:read("a")
  local _, _, rc = p:close()
  os.remove(script)
  return out, rc
end

T.test("GPULAB_FAKE_HANG: s:sync and cuda.sync deadlines name the pending launches", function()
  local out, rc = child("GPULAB_FAKE_HANG=1 ASAN_OPTIONS=detect_leaks=0", [[
    local k = cuda.load(PTX):kernel("work")
    local s = cuda.stream { nonblocking = true }
    k:launch({ grid = { 4, 2 }, block = 64, stream = s }, 0)
    print("QUERY", s:query())
    local ok, err = pcall(s.sync, s, { timeout = 0.2 })
    print("STREAM", ok, err)
    ok, err = pcall(cuda.sync, { timeout = 0.2 })
    print("CONTEXT", ok, err)
    io.stdout:flush()
    os.exit(0, false) -- nothing ever completes: leave without finalizers waiting
  ]])
  T.eq(rc, 0, out)
  T.ok(out:find("QUERY\tfalse", 1, true), out)
  T.ok(out:find("STREAM\tfalse\ts:sync: timed out after 0.2 s waiting for the GPU; 1 launch since " ..
    "the last good sync: work<<<(4,2,1), 64>>> on a stream", 1, true), out)
  T.ok(out:find("CONTEXT\tfalse\tcuda.sync: timed out after 0.2 s", 1, true), out)
  T.ok(out:find("work<<<(4,2,1), 64>>>", out:find("CONTEXT", 1, true), true), out)
end)

T.test("capture: events and launches become graph nodes; replays", function()
  local s = cuda.stream { nonblocking = true }
  local e, e2 = cuda.event(), cuda.event()
  local a = cuda.array("u8", 8)
  e2:record(s)
  clear_log()
  local ran = false
  local g = s:capture(function()
    T.ok(tostring(s):find(", capturing)", 1, true), tostring(s))
    e:record(s)
    s:wait(e2)
    work:launch({ grid = 1, block = 1, stream = s }, a)
    ran = true
  end)
  T.ok(ran)
  T.ok(not tostring(s):find("capturing", 1, true))
  local ended = nil
  for _, l in ipairs(read_log()) do ended = l:match("^capture_end %S+ nodes=(%d+)$") or ended end
  T.eq(g.nodes, tonumber(ended), "node count from cuGraphGetNodes")
  -- two event nodes from stream.c and one for the launch
  T.eq(g.nodes, 3, "nodes")
  T.eq(g.objects, 4, "the graph holds the two events, the kernel and the array")
  T.ok(tostring(g):match("^cuda%.graph 0x%x+ %(%d nodes, holds %d objects%)$"), tostring(g))
  T.eq(count("graph_instantiate"), 1)
  T.eq(count("graph_destroy"), 1, "the captured graph is dropped once instantiated")
  T.eq(cuda.stats().graphs, 1)
  g:launch(s)
  g:launch()
  T.eq(count("graph_launch"), 2)
  T.raises(function() g:launch(5) end, "bad argument #1 to 'g:launch' (cuda.stream expected, got number)")
  T.raises(function() g.launch(s) end, "bad argument #1 to 'g:launch' (cuda.graph expected, got cuda.stream)")
  T.eq(g.nope, nil)
  s:sync()
  g:free(); g:free()
  T.eq(tostring(g), "cuda.graph (freed)")
  T.raises(function() g:launch(s) end, "g:launch: the cuda.graph was freed")
  T.eq(cuda.stats().graphs, 0)
  e:free(); e2:free(); a:free(); s:free()
end)

T.test("capture: fn reaching s:capture's own slots can neither free the graph nor drop its objects", function()
  local s = cuda.stream { nonblocking = true }
  local seen = 0
  local a = cuda.array("u8", 8) -- allocated before: the driver refuses allocations in a capture
  local g = s:capture(function()
    work:launch({ grid = 1, block = 1, stream = s }, a)
    a = nil -- held by the graph alone from here on
    local n = 1
    while true do -- every value of s:capture's frame (a C function), as debug.getlocal gives them
      local name, v = debug.getlocal(2, n)
      if not name then break end
      seen = seen + 1
      if type(v) == "table" then for key in pairs(v) do v[key] = nil end end
      if type(v) == "userdata" and v ~= s then pcall(function() v:free() end) end
      n = n + 1
    end
  end)
  T.ok(seen >= 2, "fn saw s:capture's slots")
  T.eq(g.objects, 2, "the graph still holds the kernel and the array")
  collectgarbage()
  collectgarbage()
  g:launch(s) -- the array the graph alone holds is alive
  s:sync()
  g:free()
  s:free()
end)

T.test("capture: an error in fn ends the capture, re-raises it, and the stream stays usable", function()
  local s = cuda.stream { nonblocking = true }
  clear_log()
  local boom = { "the original error object" }
  local ok, err = pcall(s.capture, s, function() work:launch({ grid = 1, block = 1, stream = s }, 0); error(boom) end)
  T.eq(ok, false)
  T.eq(err, boom, "the same error value comes back")
  T.eq(count("capture_begin"), 1); T.eq(count("capture_end"), 1)
  T.eq(count("graph_destroy"), 1, "the partial graph is destroyed")
  T.eq(count("graph_instantiate"), 0)
  T.raises(function() s:capture(function() error("plain message") end) end, "plain message")
  T.eq(s:query(), true)
  s:sync { timeout = 1 }
  local g = s:capture(function() end)
  T.eq(g.nodes, 0)
  g:launch(s)
  g:free()
  collectgarbage(); collectgarbage()
  T.eq(cuda.stats().graphs, 0)
  s:free()
end)

T.test("capture: misuse", function()
  local s = cuda.stream()
  T.raises(function() s:capture(5) end, "bad argument #1 to 's:capture' (function expected, got number)")
  T.raises(function() s.capture(nil, function() end) end,
    "bad argument #1 to 's:capture' (cuda.stream expected, got nil; the default stream cannot be captured")
  local err = T.raises(function()
    s:capture(function() s:sync() end)
  end, "s:sync: the stream is being captured")
  T.raises(function() s:capture(function() return s:query() end) end, "s:query: the stream is being captured")
  T.raises(function() s:capture(function() s:capture(function() end) end) end,
    "s:capture: a capture is already under way (captures do not nest)")
  T.raises(function() s:capture(function() cuda.bench(function() end) end) end,
    "cuda.bench: not available while a stream capture is under way")
  s:sync()
  -- the stream freed inside fn: the capture ends first, then the stream goes
  local g = s:capture(function() s:free(); T.eq(cuda.stats().streams, 1) end)
  T.eq(cuda.stats().streams, 0)
  T.eq(tostring(s), "cuda.stream (freed)")
  T.raises(function() s:capture(function() end) end, "s:capture: the cuda.stream was freed")
  g:free()
  -- objects the graph uses are checked before each replay
  local s2 = cuda.stream()
  local e = cuda.event()
  local g2 = s2:capture(function() e:record(s2) end)
  e:free()
  T.raises(function() g2:launch(s2) end, "g:launch: the graph uses a cuda.event that was freed after the capture")
  g2:free(); s2:free()
  T.ok(err)
end)

-- What the H200's driver refuses while a stream captures (docs/RESULTS.md §43; gpu_stream.lua
-- checks the same on the GPU): syncs and queries of anything, event syncs and allocations, each
-- with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; the capture then fails, and the stream works after.
T.test("capture: syncs, queries and allocations inside fn are refused and fail the capture", function()
  local other, a = cuda.stream(), cuda.array("f32", 4)
  local e = cuda.event()
  e:record()
  local UNSUPPORTED = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900)"
  local cases = {
    { "cuda.sync", function() cuda.sync() end, "cuda.sync: context sync: " .. UNSUPPORTED },
    { "cuda.sync{timeout=}", function() cuda.sync { timeout = 1 } end, UNSUPPORTED },
    { "another stream's sync", function() other:sync() end, "s:sync: stream sync: " .. UNSUPPORTED },
    { "another stream's query", function() other:query() end, "s:query: cuStreamQuery: " .. UNSUPPORTED },
    { "an event's sync", function() e:sync() end, "e:sync: cuEventSynchronize: " .. UNSUPPORTED },
    { "an allocation", function() cuda.array("f32", 4) end, "cuda.array: cuMemAlloc: " .. UNSUPPORTED },
    { "an event's query", function() e:query() end, "e:query: cuEventQuery: " .. UNSUPPORTED },
    { "a pinned allocation", function() cuda.host("f32", 4, { pinned = true }) end,
      "cuda.host: cuMemAllocHost: " .. UNSUPPORTED },
  }
  for _, case in ipairs(cases) do
    local s = cuda.stream { nonblocking = true }
    local inner
    T.raises(function()
      s:capture(function(st)
        work:launch({ grid = 1, block = 1, stream = st }, a)
        local ok, err = pcall(case[2])
        inner = ok and "no error" or tostring(err)
      end)
    end, "s:capture: cuStreamEndCapture (the function did something that cannot be captured: a sync, " ..
         "a synchronous copy, an allocation or a free): CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)", case[1])
    T.ok(inner:find(case[3], 1, true), case[1] .. ": " .. inner)
    clear_log()
    work:launch({ grid = 1, block = 1, stream = s }, a)
    s:sync { timeout = 1 }
    T.eq(count("launch "), 1, case[1] .. ": the stream launches after the failed capture")
    local g = s:capture(function(st) work:launch({ grid = 1, block = 1, stream = st }, a) end)
    T.eq(g.nodes, 1, case[1] .. ": and captures again")
    g:free(); s:free()
  end
  other:free(); e:free(); a:free()
  cuda.sync() -- the releases parked for queued work go now, not in a later test
end)

T.test("capture: default-stream work is refused beside a blocking capture, runs outside a non-blocking one",
  function()
  local a = cuda.array("f32", 4)
  local blocking = cuda.stream()
  T.raises(function()
    blocking:capture(function(st)
      work:launch({ grid = 1, block = 1, stream = st }, a)
      work:launch({ grid = 1, block = 1 }, a)
    end)
  end, "k:launch: cuLaunchKernel: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (906)")
  local nonblocking = cuda.stream { nonblocking = true }
  clear_log()
  local g = nonblocking:capture(function(st)
    work:launch({ grid = 1, block = 1, stream = st }, a)
    work:launch({ grid = 1, block = 1 }, a)
  end)
  T.eq(g.nodes, 1, "only the capturing stream's launch is in the graph")
  T.eq(count("launch "), 2, "both launches reached the driver")
  g:free(); blocking:free(); nonblocking:free(); a:free()
  cuda.sync()
end)

T.test("capture: a collection inside fn waits for the capture to end", function()
  local s = cuda.stream()
  local running = collectgarbage("isrunning")
  local inside
  local g = s:capture(function() inside = collectgarbage("isrunning") end)
  T.eq(inside, false, "the automatic collector is paused during a capture")
  T.eq(collectgarbage("isrunning"), running, "and restarted after")
  pcall(s.capture, s, function() error("x") end)
  T.eq(collectgarbage("isrunning"), running, "also after an error")
  g:free(); s:free()
end)

T.test("capture: injected failures at the end and at instantiation", function()
  local out, rc = child("GPULAB_FAKE_FAIL=cuStreamEndCapture:901,cuGraphInstantiateWithFlags:2", [[
    local s = cuda.stream()
    print("END", select(2, pcall(s.capture, s, function() end)))
    print("INST", select(2, pcall(s.capture, s, function() end)))
    local g = s:capture(function() end)
    print("THIRD", g.nodes)
    g:free(); s:free()
    local st = cuda.stats()
    print("STATS", st.graphs, st.streams)
  ]])
  T.eq(rc, 0, out)
  T.ok(out:find("END\ts:capture: cuStreamEndCapture (the function did something that cannot be captured", 1, true), out)
  T.ok(out:find("901", 1, true), out)
  T.ok(out:find("INST\ts:capture: cuGraphInstantiateWithFlags: CUDA_ERROR_OUT_OF_MEMORY (2)", 1, true), out)
  T.ok(out:find("THIRD\t0", 1, true), out)
  T.ok(out:find("STATS\t0\t0", 1, true), out)
end)

T.test("injected driver errors name the function, the step and the error", function()
  local out, rc = child("GPULAB_FAKE_FAIL=cuStreamCreateWithPriority:2,cuEventCreate:2:2," ..
    "cuStreamBeginCapture:2,cuStreamQuery:1,cuEventElapsedTime:999", [[
    print("STREAM", select(2, pcall(cuda.stream)))
    local s = cuda.stream()
    local e0 = cuda.event()
    print("EVENT", select(2, pcall(cuda.event)))
    print("CAPTURE", select(2, pcall(s.capture, s, function() end)))
    print("QUERY", select(2, pcall(s.query, s)))
    local e1 = cuda.event()
    e0:record(s); e1:record(s)
    print("ELAPSED", select(2, pcall(e1.elapsed, e1, e0)))
    s:capture(function() end):free()
    s:free(); e0:free(); e1:free()
    local st = cuda.stats()
    print("STATS", st.streams, st.events, st.graphs)
  ]])
  T.eq(rc, 0, out)
  T.ok(out:find("STREAM\tcuda.stream: cuStreamCreateWithPriority: CUDA_ERROR_OUT_OF_MEMORY (2)", 1, true), out)
  T.ok(out:find("EVENT\tcuda.event: cuEventCreate: CUDA_ERROR_OUT_OF_MEMORY (2)", 1, true), out)
  T.ok(out:find("CAPTURE\ts:capture: cuStreamBeginCapture: CUDA_ERROR_OUT_OF_MEMORY (2)", 1, true), out)
  T.ok(out:find("QUERY\ts:query: cuStreamQuery: CUDA_ERROR_INVALID_VALUE (1)", 1, true), out)
  T.ok(out:find("ELAPSED\te:elapsed: cuEventElapsedTime: CUDA_ERROR_UNKNOWN (999)", 1, true), out)
  T.ok(out:find("STATS\t0\t0\t0", 1, true), out)
end)

T.test("cuda.bench: an event that cannot be created leaves nothing behind", function()
  local out, rc = child("GPULAB_FAKE_FAIL=cuEventCreate:2:2 GPULAB_FAKE_LOG=/dev/stdout", [[
    print("BENCH", select(2, pcall(cuda.bench, function() end)))
  ]])
  T.eq(rc, 0, out)
  T.ok(out:find("BENCH\tcuda.bench: cuEventCreate: CUDA_ERROR_OUT_OF_MEMORY (2)", 1, true), out)
  T.eq(select(2, out:gsub("event_create", "")), 1, out)
  T.eq(select(2, out:gsub("event_destroy", "")), 1, "the first event is destroyed: " .. out)
end)

test_busy("cuda.bench: result shape, options, errors", function()
  local s = cuda.stream()
  local calls = 0
  clear_log()
  local r = cuda.bench(function() calls = calls + 1 end, { warmup = 2, reps = 7, stream = s })
  T.eq(calls, 9)
  T.eq(count("event_record"), 18, "one event pair per call")
  T.eq(count("event_create"), 2); T.eq(count("event_destroy"), 2)
  T.eq(#r.samples, 7); T.eq(r.reps, 7); T.eq(r.warmup, 2)
  local sorted = { table.unpack(r.samples) }
  table.sort(sorted)
  T.eq(r.median, sorted[4]); T.eq(r.min, sorted[1]); T.eq(r.max, sorted[7])
  local sum = 0
  for _, v in ipairs(r.samples) do T.eq(math.type(v), "float"); sum = sum + v end
  T.near(r.mean, sum / 7, 1e-12)
  r = cuda.bench(function() end, { reps = 4 })
  T.eq(#r.samples, 4); T.eq(r.warmup, 3)
  T.eq(r.median, (function() local t = { table.unpack(r.samples) }; table.sort(t); return (t[2] + t[3]) / 2 end)())
  r = cuda.bench(function() end)
  T.eq(#r.samples, 20)
  T.raises(function() cuda.bench(5) end, "bad argument #1 to 'cuda.bench' (function expected, got number)")
  T.raises(function() cuda.bench(print, { reps = 0 }) end,
    "bad argument #2 to 'cuda.bench' (field 'reps': must be 1..1000000, got 0)")
  T.raises(function() cuda.bench(print, { reps = 2.5 }) end,
    "bad argument #2 to 'cuda.bench' (field 'reps': integer expected, got 2.5)")
  T.raises(function() cuda.bench(print, { warmup = -1 }) end,
    "bad argument #2 to 'cuda.bench' (field 'warmup': must be 0..1000000, got -1)")
  T.raises(function() cuda.bench(print, { stream = 5 }) end,
    "bad argument #2 to 'cuda.bench' (field 'stream': cuda.stream expected, got number)")
  T.raises(function() cuda.bench(print, { rep = 5 }) end, "bad argument #2 to 'cuda.bench' (unknown field 'rep'")
  T.raises(function() cuda.bench(print, 5) end, "bad argument #2 to 'cuda.bench' (options table")
  clear_log()
  local boom = {}
  local ok, err = pcall(cuda.bench, function() error(boom) end, { stream = s })
  T.eq(ok, false); T.eq(err, boom)
  T.eq(count("event_destroy"), 2, "the events are destroyed on error")
  T.raises(function() cuda.bench(function() s:free() end, { stream = s }) end, "cuda.bench: the cuda.stream was freed")
  T.raises(function() cuda.bench(print, { stream = s }) end,
    "bad argument #2 to 'cuda.bench' (field 'stream': the cuda.stream was freed)")
  local s2 = cuda.stream()
  busy(true)
  local t0 = cuda.now()
  T.raises(function() cuda.bench(function() end, { stream = s2, timeout = 0.1 }) end,
    "cuda.bench: timed out after 0.1 s")
  T.ok(cuda.now() - t0 < 5)
  busy(false)
  s2:free()
  T.eq(cuda.stats().events, 0)
end)

mod:free() -- its launches ran on streams freed since: the unload waits for a full sync
collectgarbage(); collectgarbage()
cuda.sync()
T.test("stats return to zero", function()
  local st = cuda.stats()
  for _, k in ipairs({ "streams", "events", "graphs", "arrays", "modules", "deferred" }) do T.eq(st[k], 0, k) end
end)

T.done()
