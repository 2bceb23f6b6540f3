-- cuda.partition (SM partitions from green contexts) through the driver stand-in: 132 SMs, split
-- rules of compute capability 9.0 (at least 8 SMs, in multiples of 8; tests/fakecuda/fake_green.c).
-- Nothing runs: these tests check every argument rule, the rounding, the streams' use by
-- launches, copies, cuda.measure and cuda.profile, and every lifetime path (the log says when
-- the stand-in created and destroyed each green context, and how many of its streams were
-- still alive then). Run a second time with GPULAB_FAKE_NO_ENTRY=cuGreenCtxCreate (an older
-- driver): then only the missing-entry test runs.
local T = dofile("tests/lua/t.lua")

local NO_ENTRY = os.getenv("GPULAB_FAKE_NO_ENTRY")

local clear_log, lines = T.clear_log, T.log_lines

if NO_ENTRY then
  T.test("a driver without " .. NO_ENTRY .. ": one error naming it and the driver needed", function()
    local err = T.raises(function() cuda.partition{sms = 16} end,
                         "cuda.partition: needs " .. NO_ENTRY .. " (a CUDA 12.4 driver or newer)")
    T.ok(err:find("lacks it", 1, true), err)
    T.eq(cuda.stats().partitions, 0)
    -- everything else still works
    local s = cuda.stream()
    s:sync()
    s:free()
  end)
  T.done()
end

local PTX = [[
.version 8.0
.target sm_90
.address_size 64
.visible .entry touch(.param .u64 p)
{
	ret;
}
]]
local mod = cuda.load(PTX)
local touch = mod:kernel("touch")

local function settle()
  cuda.sync()
  collectgarbage(); collectgarbage()
  cuda.sync()
end

T.test("a partition: the SMs asked for, the driver's rules, the fields and the string", function()
  clear_log()
  local p = cuda.partition{sms = 16}
  T.eq(p.sm_count, 16); T.eq(p.requested, 16); T.eq(p.rounded, false)
  T.eq(p.granularity, 8); T.eq(p.minimum, 8); T.eq(p.device, 0); T.eq(p.streams, 0); T.eq(p.freed, false)
  T.ok(tostring(p):find("16 SMs of device 0; 0 streams", 1, true), tostring(p))
  T.ok(not tostring(p):find("rounded", 1, true), tostring(p))
  T.eq(cuda.stats().partitions, 1)
  T.eq(#lines("sm_split min=16 size=16 groups=1"), 1)
  T.eq(#lines("green_create"), 1)
  p:free()
  T.eq(cuda.stats().partitions, 0)
  T.eq(#lines("green_destroy"), 1)
  T.ok(lines("green_destroy")[1]:find("live_streams=0", 1, true))
end)

T.test("rounding: 12 SMs become the driver's 16, and the partition says so", function()
  local p = cuda.partition{sms = 12}
  T.eq(p.sm_count, 16); T.eq(p.requested, 12); T.eq(p.rounded, true)
  local s = tostring(p)
  T.ok(s:find("16 SMs of device 0: 12 asked for, rounded up by the driver to its multiples of 8", 1, true), s)
  p:free()
  local q = cuda.partition{sms = 8}
  T.eq(q.sm_count, 8); T.eq(q.rounded, false)
  q:free()
end)

T.test("the whole device: sms=132 takes the device's resource unsplit", function()
  clear_log()
  local p = cuda.partition{sms = 132}
  T.eq(p.sm_count, 132); T.eq(p.rounded, false)
  T.eq(#lines("sm_split"), 0, "no split for the whole device")
  p:free()
end)

T.test("bad sms: missing, not an integer, not positive, above the device, below the minimum", function()
  T.raises(function() cuda.partition() end,
           "bad argument #1 to 'cuda.partition' (options table {sms=n} expected, got no value)")
  T.raises(function() cuda.partition(16) end, "options table {sms=n} expected, got number")
  T.raises(function() cuda.partition{} end, "field 'sms': required: the number of SMs")
  T.raises(function() cuda.partition{sms = 1.5} end, "field 'sms': integer expected, got 1.5")
  T.raises(function() cuda.partition{sms = "16"} end, "field 'sms': integer expected, got string")
  T.raises(function() cuda.partition{sms = 0} end, "field 'sms': must be a positive number of SMs, got 0")
  T.raises(function() cuda.partition{sms = -8} end, "must be a positive number of SMs, got -8")
  T.raises(function() cuda.partition{sms = 133} end, "field 'sms': 133 is above this device's 132 SMs")
  T.raises(function() cuda.partition{sms = 1 << 40} end, "is above this device's 132 SMs")
  T.raises(function() cuda.partition{sms = 4} end,
           "field 'sms': 4 is below the driver's minimum partition of 8 SMs (granularity: multiples of 8)")
  T.raises(function() cuda.partition{sms = 130} end,
           "130 SMs cannot be split off this device's 132 (the driver splits at least 8 SMs, in multiples of 8): " ..
           "ask for at most 128, or 132 for the whole device")
  T.raises(function() cuda.partition{sms = 16, smz = 1} end, "unknown field 'smz' (known: sms)")
  T.eq(cuda.stats().partitions, 0)
end)

T.test("nesting: a partition is not split again", function()
  local p = cuda.partition{sms = 64}
  T.raises(function() cuda.partition(p) end, "partitions do not nest")
  p:free()
end)

T.test("streams: launches, copies, events, cuda.measure and cuda.bench run on a partition's stream", function()
  clear_log()
  local p = cuda.partition{sms = 16}
  local s = p:stream()
  T.eq(p.streams, 1)
  T.ok(tostring(s):find("non-blocking, priority 0", 1, true), tostring(s))
  local hs = lines("green_stream")[1]:match("green_stream (%S+)")
  local a = cuda.array("f32", 64)
  touch:launch({ grid = 2, block = 32, stream = s }, a)
  local launch = lines("launch touch")[1]
  T.ok(launch:find("stream=" .. hs, 1, true), launch .. " on " .. hs)
  local h = cuda.host("f32", 64)
  for i = 1, 64 do h[i] = i end
  a:copy_from(h, s)
  local b = cuda.array("f32", 64)
  b:copy_from(a, s)
  local back = cuda.host("f32", 64)
  back:copy_from(b, s)
  s:sync{ timeout = 5 }
  T.eq(back[64], 64.0)
  local e = cuda.event(); e:record(s); e:sync{ timeout = 5 }
  local r = cuda.measure(function(st) touch:launch({ grid = 1, block = 1, stream = st }, a) end,
                         { regime = "hot", batch = 1, stream = s, min_time = 0, max_samples = 10 })
  T.ok(r.samples >= 1)
  local launches = lines("launch touch")
  T.ok(launches[#launches]:find("stream=" .. hs, 1, true), launches[#launches])
  local rb = cuda.bench(function() touch:launch({ grid = 1, block = 1, stream = s }, a) end,
                        { stream = s, reps = 2, warmup = 0 })
  T.eq(rb.reps, 2)
  s:free(); p:free()
  settle()
  T.ok(lines("green_destroy")[1]:find("live_streams=0", 1, true), "streams destroyed before their green context")
end)

T.test("cuda.profile reads the counters of a launch on a partition's stream", function()
  if not os.getenv("GPULAB_CUPTI") then return end -- the run with the CUPTI stand-in (tests/partition.cmake)
  local p = cuda.partition{sms = 16}
  local s = p:stream()
  local a = cuda.array("f32", 64)
  local rows = cuda.profile(function() touch:launch({ grid = 2, block = 32, stream = s }, a) end,
                            { metrics = { "dram__bytes.sum" } })
  T.eq(#rows, 1)
  T.eq(rows[1].kernel, "touch")
  T.ok(rows[1].metrics["dram__bytes.sum"] ~= nil, "the metric's value")
  s:free(); p:free()
  settle()
end)

T.test("part:stream{priority=}: the device's range, checked", function()
  local p = cuda.partition{sms = 8}
  local s = p:stream{ priority = -5 }
  T.ok(tostring(s):find("priority -5", 1, true), tostring(s))
  T.raises(function() p:stream{ priority = -6 } end, "field 'priority': -6 is out of this device's range -5..0")
  T.raises(function() p:stream{ priority = 1 } end, "out of this device's range")
  T.raises(function() p:stream{ priority = "high" } end, "field 'priority': integer expected, got string")
  T.raises(function() p:stream{ prio = 1 } end, "unknown field 'prio' (known: priority)")
  T.raises(function() p:stream(3) end, "options table {priority=} expected, got number")
  T.raises(function() cuda.partition{sms = 8}.stream(s) end, "cuda.partition expected")
  s:free(); p:free()
  settle()
end)

T.test("a stream keeps its partition alive; the green context goes with the last of them", function()
  clear_log()
  local p = cuda.partition{sms = 32}
  local s1, s2 = p:stream(), p:stream() -- luacheck: ignore 231
  T.eq(p.streams, 2)
  local ref = setmetatable({ p }, { __mode = "v" })
  p = nil -- luacheck: ignore 311
  collectgarbage(); collectgarbage()
  T.ok(ref[1] ~= nil, "the partition object is held by its streams")
  T.eq(cuda.stats().partitions, 1)
  s1:free()
  T.eq(ref[1].streams, 1)
  T.eq(#lines("green_destroy"), 0)
  s2 = nil -- luacheck: ignore 311
  settle()
  T.eq(cuda.stats().partitions, 0)
  T.eq(#lines("green_destroy"), 1)
  T.ok(lines("green_destroy")[1]:find("live_streams=0", 1, true))
  T.eq(cuda.stats().deferred, 0)
end)

T.test("part:free() with live streams: they keep working, the green context waits for them", function()
  clear_log()
  local p = cuda.partition{sms = 16}
  local s = p:stream()
  local a = cuda.array("f32", 4)
  p:free()
  T.eq(p.freed, true)
  T.eq(cuda.stats().partitions, 0)
  T.ok(tostring(p):find("cuda.partition (freed; was 16 SMs of device 0)", 1, true), tostring(p))
  T.raises(function() p:stream() end, "part:stream: the cuda.partition was freed")
  touch:launch({ grid = 1, block = 1, stream = s }, a)
  s:sync{ timeout = 5 }
  T.eq(#lines("green_destroy"), 0, "not while a stream lives")
  s:free()
  settle()
  T.eq(#lines("green_destroy"), 1)
  T.ok(lines("green_destroy")[1]:find("live_streams=0", 1, true))
end)

T.test("free, __close and __gc: idempotent, never raising", function()
  local p = cuda.partition{sms = 8}
  p:free(); p:free()
  T.eq(cuda.stats().partitions, 0)
  do
    local q <close> = cuda.partition{sms = 8}
    T.eq(cuda.stats().partitions, 1)
    T.eq(q.sm_count, 8)
  end
  T.eq(cuda.stats().partitions, 0)
  local r = cuda.partition{sms = 8}
  r:stream()
  r = nil -- luacheck: ignore 311
  settle()
  T.eq(cuda.stats().partitions, 0)
  T.eq(cuda.stats().streams, 0)
end)

T.test("part:stream while a finalizer or an option's __index frees the partition", function()
  -- an options table's metamethods run no code inside the binding (read raw)
  local p = cuda.partition{sms = 8}
  local s = p:stream(setmetatable({}, { __index = function() p:free(); return 0 end }))
  T.ok(tostring(s):find("non-blocking", 1, true), tostring(s))
  s:free(); p:free()
  -- a finalizer run by the stream's allocation frees the partition: "freed during the call", or
  -- "was freed" when it ran before the call, never a crash
  collectgarbage("generational", 1, 100)
  local outcomes = { ok = 0, during = 0, before = 0 }
  for _ = 1, 200 do
    local q = cuda.partition{sms = 8}
    local fired = false
    setmetatable({}, { __gc = function() fired = true; q:free() end })
    for _ = 1, 5000 do
      local ok, err = pcall(q.stream, q)
      if ok then
        err:free()
        cuda.sync() -- the green context lets a freed stream go once its work is done
        if not fired then outcomes.ok = outcomes.ok + 1 end
      elseif tostring(err):find("freed during the call", 1, true) then outcomes.during = outcomes.during + 1
      else
        T.ok(tostring(err):find("was freed", 1, true), tostring(err))
        outcomes.before = outcomes.before + 1
      end
      if fired then break end
      local _ = string.rep("x", 600) -- the collector's debt runs out within a few dozen streams
    end
    q:free()
  end
  collectgarbage("incremental")
  settle()
  T.ok(outcomes.during > 0, string.format("freed during the call %d times, before it %d", outcomes.during,
    outcomes.before))
  T.eq(cuda.stats().partitions, 0)
  T.eq(cuda.stats().streams, 0)
end)

T.test("another device current: its partitions' streams are refused", function()
  if cuda.count() < 2 then return end
  cuda.device(0)
  local p = cuda.partition{sms = 8}
  cuda.device(1)
  T.raises(function() p:stream() end, "device")
  cuda.device(0)
  local s = p:stream()
  cuda.device(1)
  local a = cuda.array("f32", 4)
  T.raises(function() touch:launch({ grid = 1, block = 1, stream = s }, a) end, "device")
  cuda.device(0)
  s:free(); p:free()
  settle()
end)

T.test("driver failures: each step's error names it; nothing is left behind", function()
  -- GPULAB_FAKE_FAIL is read once per process: the failures are exercised in child runs
  local gpulab = arg[-1]
  local script = os.tmpname()
  T.write(script, [[
    local ok, err = pcall(cuda.partition, {sms = 16})
    io.write(tostring(ok), " ", tostring(err), " ", cuda.stats().partitions, "\n")
    if ok then
      local ok2, err2 = pcall(err.stream, err)
      io.write(tostring(ok2), " ", tostring(err2), " ", err.streams, " ", cuda.stats().streams, "\n")
    end
  ]])
  local cases = {
    { "cuDeviceGetDevResource:1", "cuDeviceGetDevResource: CUDA_ERROR_INVALID_VALUE (1)" },
    { "cuDevSmResourceSplitByCount:1", "cuDevSmResourceSplitByCount: CUDA_ERROR_INVALID_VALUE (1)" },
    { "cuDevSmResourceSplitByCount:915", "field 'sms': 16 SMs cannot be split off this device's 132" },
    { "cuDevResourceGenerateDesc:1", "cuDevResourceGenerateDesc: CUDA_ERROR_INVALID_VALUE" },
    { "cuGreenCtxCreate:2", "cuGreenCtxCreate: CUDA_ERROR_OUT_OF_MEMORY (2)" },
    { "cuGreenCtxStreamCreate:2", "part:stream: cuGreenCtxStreamCreate: CUDA_ERROR_OUT_OF_MEMORY (2)" },
  }
  for _, c in ipairs(cases) do
    local cmd = string.format("GPULAB_FAKE_FAIL=%s %q %q 2>&1", c[1], gpulab, script)
    local pipe = assert(io.popen(cmd))
    local out = pipe:read("a")
    pipe:close()
    T.ok(out:find(c[2], 1, true), c[1] .. ": " .. out)
    if c[1]:find("StreamCreate", 1, true) then
      T.ok(out:find(" 0 0\n", 1, true), "no stream counted after a failed create: " .. out)
    else
      T.ok(out:find("false .* 0\n"), "no partition counted: " .. out)
    end
  end
  os.remove(script)
end)

settle()
T.eq(cuda.stats().partitions, 0)
T.done()
