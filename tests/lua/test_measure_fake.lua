-- cuda.measure through the driver stand-in, with scripted event times and SM clocks
-- (GPULAB_FAKE_ELAPSED_FILE, GPULAB_FAKE_CLOCK_FILE: tests/fakecuda/fake_measure.c). Nothing runs:
-- these tests drive the stopping rule, the rejection of throttled samples, the regimes' call
-- sequences and the error paths with known numbers. NVML is off (GPULAB_NVML=0), so the reference
-- clock is the device attribute (1980 MHz in the stand-in).
local T = dofile("tests/lua/t.lua")

assert(os.getenv("GPULAB_FAKE_LOG"), "run with GPULAB_FAKE_LOG set")
local ELAPSED = assert(os.getenv("GPULAB_FAKE_ELAPSED_FILE"), "run with GPULAB_FAKE_ELAPSED_FILE set")
local CLOCK = assert(os.getenv("GPULAB_FAKE_CLOCK_FILE"), "run with GPULAB_FAKE_CLOCK_FILE set")
local GPULAB = arg[-1]

local function script(path, values) T.write(path, table.concat(values, " ") .. "\n") end
local function unscript() os.remove(ELAPSED); os.remove(CLOCK) end
local clear_log = T.clear_log
local function count(pattern)
  local n = 0
  for l in T.log_text():gmatch("[^\n]+") do if l:find(pattern) then n = n + 1 end end
  return n
end

local PTX = [[
.version 8.0
.target sm_90
.address_size 64
.visible .entry work(.param .u64 p)
{
	ret;
}
]]
local mod = cuda.load(PTX)
local work = mod:kernel("work")
local a = cuda.array("f32", 16)
local function launcher(s) return function(st) work:launch({ grid = 1, block = 1, stream = st or s }, a) end end

local function check_no_leaks()
  cuda.sync()
  local st = cuda.stats()
  for _, k in ipairs({ "events", "graphs", "deferred" }) do T.eq(st[k], 0, k) end
end

local function test(name, fn)
  T.test(name, function()
    local ok, err = xpcall(fn, debug.traceback)
    unscript()
    if not ok then error(err, 0) end
  end)
end

-- The index of the first sample count at which noise <= target, from the times alone.
local function first_converged(times, target, from)
  for n = from, #times do
    local sub = { table.unpack(times, 1, n) }
    if cuda.stats_of(sub).noise <= target then return n end
  end
end

test("result fields: the contract's names and types", function()
  script(ELAPSED, { 1.0 })
  local s = cuda.stream()
  local r = cuda.measure(launcher(s), { regime = "hot", batch = 1, stream = s, min_time = 0 })
  for _, k in ipairs({ "mean", "median", "min", "max", "stdev", "noise", "sm_clock_mhz" }) do
    T.eq(math.type(r[k]), "float", k)
  end
  T.eq(math.type(r.samples), "integer"); T.eq(math.type(r.rejected), "integer")
  T.eq(type(r.ci95), "table"); T.eq(#r.ci95, 2)
  T.eq(r.regime, "hot"); T.eq(#r.times, r.samples); T.eq(r.stop, "converged")
  T.eq(r.samples, 10, "a constant time converges at min_samples"); T.eq(r.noise, 0)
  T.eq(r.mean, 1.0); T.eq(r.ci95[1], 1.0); T.eq(r.ci95[2], 1.0)
  T.eq(r.sm_clock_mhz, 1980.0); T.eq(r.clock_ref_mhz, 1980.0); T.eq(r.clock_ref, "device attribute")
  T.eq(r.nvml_sm_clock_mhz, nil, "NVML is off")
  T.eq(r.rejected, 0); T.eq(r.batch, 1); T.eq(r.warmup, 2); T.eq(r.blocking, false)
  s:free()
  check_no_leaks()
end)

test("stopping rule: converges at the first sample count whose interval is narrow enough", function()
  script(ELAPSED, { 1.0, 1.2 })
  local s = cuda.stream()
  local r = cuda.measure(launcher(s), { regime = "hot", batch = 1, stream = s, min_time = 0, max_noise = 0.005 })
  T.eq(r.stop, "converged")
  T.ok(r.noise <= 0.005, "noise " .. r.noise)
  T.eq(first_converged(r.times, 0.005, 10), r.samples, "stopped at the first n that met the target")
  T.ok(r.samples > 1000 and r.samples < 1500, "about 1270 samples of a +-9% alternation: " .. r.samples)
  T.near(r.mean, 1.1, 1e-3)
  local again = cuda.stats_of(r.times)
  T.eq(again.mean, r.mean); T.eq(again.noise, r.noise); T.eq(again.ci95[1], r.ci95[1])
  s:free()
end)

test("stopping rule: min_samples holds it back, max_samples ends it", function()
  script(ELAPSED, { 1.0, 1.2 })
  local r = cuda.measure(launcher(), { regime = "hot", batch = 1, min_time = 0, min_samples = 50, max_noise = 0.5 })
  T.eq(r.stop, "converged"); T.eq(r.samples, 50)
  r = cuda.measure(launcher(), { regime = "hot", batch = 1, min_time = 0, max_samples = 30, max_noise = 1e-9 })
  T.eq(r.stop, "max_samples"); T.eq(r.samples, 30)
end)

test("stopping rule: drifting samples stop on a plateau", function()
  local drift = {}
  for i = 1, 2000 do drift[i] = 1 + i * 0.01 end
  script(ELAPSED, drift)
  local r = cuda.measure(launcher(),
    { regime = "hot", batch = 1, min_time = 0, max_noise = 1e-6, max_samples = 100000 })
  T.eq(r.stop, "plateau")
  local n = r.samples
  T.ok(n >= 20, "at least 2 windows: " .. n)
  local half = cuda.stats_of({ table.unpack(r.times, 1, n // 2) }).noise
  T.ok(r.noise > 0.95 * half, "doubling the samples did not improve the noise by 5%")
  local m1 = cuda.stats_of({ table.unpack(r.times, 1, n // 2) })
  local m2 = cuda.stats_of({ table.unpack(r.times, n // 2 + 1, n) })
  T.ok(m2.ci95[1] > m1.ci95[2], "the halves' intervals are apart")
  -- one outlier does not stop it: its half's interval widens as much as its mean moves
  local spike = {}
  for i = 1, 4000 do spike[i] = (i % 2 == 0) and 1.01 or 1.0 end
  spike[17] = 1.5 -- sample 15, after the two warmup passes
  script(ELAPSED, spike)
  r = cuda.measure(launcher(), { regime = "hot", batch = 1, min_time = 0, max_noise = 0.001 })
  T.eq(r.stop, "converged")
  T.ok(r.samples > 500, "the outlier costs samples: " .. r.samples)
  -- independent-looking samples do not plateau: they run to the timeout
  script(ELAPSED, { 1.0, 1.2, 1.1, 0.9 })
  r = cuda.measure(launcher(), { regime = "hot", batch = 1, min_time = 0, max_noise = 1e-9,
                                 max_samples = 1000000, timeout = 0.3 })
  T.eq(r.stop, "timeout")
  T.ok(r.elapsed_s >= 0.3, "ran to the timeout")
  T.ok(r.samples > 20)
end)

test("throttled samples are rejected and counted", function()
  script(ELAPSED, { 1.0 })
  -- two warmup passes take the first two clocks; then 1000, 1000, 1980, 1980, ...
  script(CLOCK, { 1980, 1980, 1000, 1000 })
  local r = cuda.measure(launcher(), { regime = "hot", batch = 1, min_time = 0 })
  T.eq(r.samples, 10); T.eq(r.rejected, 10); T.eq(r.taken, 20)
  T.eq(r.sm_clock_mhz, 1980.0)
  for _, c in ipairs(r.clocks) do T.eq(c, 1980.0) end
  -- 1000 MHz is above 0.5 x 1980: accepted; throttle = 0 turns the check off
  r = cuda.measure(launcher(), { regime = "hot", batch = 1, min_time = 0, throttle = 0.5 })
  T.eq(r.rejected, 0)
  script(CLOCK, { 1000, 1000, 1000, 1980 }) -- new content: the script starts over
  r = cuda.measure(launcher(), { regime = "hot", batch = 1, min_time = 0, throttle = 0 })
  T.eq(r.rejected, 0)
  T.eq(r.sm_clock_mhz, 1000.0, "median clock of the accepted samples (7 at 1000, 3 at 1980)")
  script(CLOCK, { 900 })
  T.raises(function() cuda.measure(launcher(), { regime = "hot", batch = 1, min_time = 0, timeout = 0.2 }) end,
    "cuda.measure: no sample accepted within 0.2")
  check_no_leaks()
end)

test("hot: the batch is sized from a warmup pass, times are per call", function()
  script(ELAPSED, { 0.015625 })
  local calls = 0
  local r = cuda.measure(function(s) calls = calls + 1; work:launch({ grid = 1, block = 1, stream = s }, a) end,
    { regime = "hot", min_time = 0 })
  T.eq(r.batch, 64, "1 ms / (1/64 ms)")
  T.eq(calls, 2 + 64 * r.samples)
  T.eq(r.mean, 0.015625 / 64)
  r = cuda.measure(launcher(), { regime = "hot", min_time = 0, batch = 7, warmup = 0 })
  T.eq(r.batch, 7); T.eq(r.warmup, 0)
end)

test("cold: the L2 flush (2x L2) precedes each sample's start event", function()
  script(ELAPSED, { 1.0 })
  clear_log()
  local s = cuda.stream()
  local r = cuda.measure(launcher(s), { stream = s, min_time = 0, min_samples = 2, max_samples = 3, warmup = 1 })
  T.eq(r.regime, "cold"); T.eq(r.batch, 1)
  local log = T.log_text()
  T.ok(log:find("alloc 0x%x+ 125829120"), "2 x 60 MB")
  local order = {}
  for l in log:gmatch("[^\n]+") do
    if l:find("^cuMemsetD32Async") then order[#order + 1] = "flush"
    elseif l:find("^event_record") then order[#order + 1] = "record"
    elseif l:find("^launch work") then order[#order + 1] = "work"
    elseif l:find("^launch gl_measure_clock") then order[#order + 1] = "clock" end
  end
  local seq = table.concat(order, " ")
  -- the first record probes the stream (one of another context fails there, with a clear message)
  T.ok(seq:find("^record flush record work record clock record flush record work record clock record"), seq)
  s:free()
  check_no_leaks()
  T.eq(count("^free 0x"), 1, "the flush buffer is freed")
end)

test("graph: captured once, replayed per sample; the stream made for it is freed", function()
  script(ELAPSED, { 1.0 })
  clear_log()
  local calls = 0
  local r = cuda.measure(function(s) calls = calls + 1; work:launch({ grid = 1, block = 1, stream = s }, a) end,
    { regime = "graph", batch = 4, min_time = 0 })
  T.eq(r.regime, "graph"); T.eq(calls, 1, "fn runs once, in the capture")
  T.eq(count("^capture_begin"), 1)
  T.eq(count("^graph_launch"), 2 + 4 * r.samples)
  T.eq(cuda.stats().streams, 0); T.eq(cuda.stats().graphs, 0)
  local s = cuda.stream()
  r = cuda.measure(launcher(s), { regime = "graph", stream = s, min_time = 0 })
  T.eq(r.regime, "graph")
  T.raises(function() cuda.measure(function() end, { regime = "graph" }) end, "the captured graph is empty")
  local boom = {}
  local ok, err = pcall(cuda.measure, function() error(boom) end, { regime = "graph", stream = s })
  T.eq(ok, false); T.eq(err, boom)
  s:capture(function(st) work:launch({ grid = 1, block = 1, stream = st }, a) end):free() -- no capture left open
  s:free()
  check_no_leaks()
end)

test("blocking: the spin kernel holds the stream while the sample is enqueued", function()
  script(ELAPSED, { 1.0 })
  clear_log()
  local s = cuda.stream()
  local r = cuda.measure(launcher(s), { regime = "hot", batch = 3, stream = s, min_time = 0, blocking = true })
  T.eq(r.blocking, true); T.eq(r.block_timeouts, 0); T.eq(r.rejected, 0)
  T.eq(count("^launch gl_measure_block"), 2 + r.samples)
  s:free()
  check_no_leaks()
end)

test("a prepared launch is a callable", function()
  script(ELAPSED, { 1.0 })
  local s = cuda.stream()
  local P = work:prepare({ grid = 1, block = 1, stream = s }, a)
  local r = cuda.measure(P, { regime = "hot", batch = 2, stream = s, min_time = 0 })
  T.eq(r.samples, 10)
  local callable = setmetatable({},
    { __call = function(_, st) work:launch({ grid = 1, block = 1, stream = st }, a) end })
  T.eq(cuda.measure(callable, { regime = "hot", stream = s, min_time = 0 }).samples, 10)
  s:free()
end)

test("bad input: clear errors naming the argument", function()
  local f = launcher()
  local function bad(opts, msg) T.raises(function() cuda.measure(f, opts) end, msg) end
  T.raises(function() cuda.measure() end,
    "bad argument #1 to 'cuda.measure' (function or callable expected, got no value)")
  T.raises(function() cuda.measure(5) end,
    "bad argument #1 to 'cuda.measure' (function or callable expected, got number)")
  T.raises(function() cuda.measure({}) end, "(function or callable expected, got table)")
  T.raises(function() cuda.measure(f, 5) end, "bad argument #2 to 'cuda.measure' (options table")
  bad({ reps = 3 }, "bad argument #2 to 'cuda.measure' (unknown field 'reps'")
  bad({ regime = "hot", blocking = true, batch = 1000 },
    "field 'batch': 1000 calls with blocking=true exceed the 256 that fit behind the spin kernel")
  bad({ regime = "warm" }, "field 'regime': must be \"cold\", \"hot\" or \"graph\", got \"warm\"")
  bad({ min_samples = 1 }, "field 'min_samples': must be 2..1000000, got 1")
  bad({ min_samples = -3 }, "field 'min_samples': must be 2..1000000, got -3")
  bad({ min_samples = 2.5 }, "field 'min_samples': integer expected")
  bad({ min_samples = 20, max_samples = 10 }, "field 'max_samples': must be 20..")
  bad({ max_noise = 0 }, "field 'max_noise': must be a finite number > 0, got 0")
  bad({ max_noise = -0.01 }, "field 'max_noise': must be a finite number > 0")
  bad({ max_noise = 0 / 0 }, "field 'max_noise': number expected, got NaN")
  bad({ timeout = math.huge }, "field 'timeout': must be a finite number > 0, got inf")
  bad({ timeout = 0 }, "field 'timeout': must be a finite number > 0, got 0")
  bad({ min_time = -1 }, "field 'min_time': must be a finite number >= 0, got -1")
  bad({ min_time = 20 }, "field 'min_time': 20 s is longer than 'timeout' (15 s)")
  bad({ throttle = 1.5 }, "field 'throttle': must be a finite number in [0, 1], got 1.5")
  bad({ throttle = "high" }, "field 'throttle': number expected, got string")
  bad({ blocking = 1 }, "field 'blocking': boolean expected")
  bad({ batch = 0, regime = "hot" }, "field 'batch': must be 1..1000, got 0")
  bad({ batch = 4 }, "field 'batch': applies to the hot and graph regimes")
  bad({ stream = 5 }, "field 'stream': cuda.stream expected, got number")
  local dead = cuda.stream()
  dead:free()
  bad({ stream = dead }, "bad argument #2 to 'cuda.measure' (field 'stream': the cuda.stream was freed)")
  T.raises(function() cuda.measure(function() end, { min_time = 0 }) end, "cuda.measure: fn enqueued no GPU work")
  local s = cuda.stream()
  T.raises(function() cuda.measure(function() s:free() end, { stream = s }) end,
    "cuda.measure: the cuda.stream was freed")
  s = cuda.stream()
  T.raises(function() s:capture(function() cuda.measure(f) end) end,
    "cuda.measure: not available while a stream capture is under way")
  local boom = {}
  local ok, err = pcall(cuda.measure, function() error(boom) end, { stream = s })
  T.eq(ok, false); T.eq(err, boom, "fn's own error propagates")
  s:free()
  check_no_leaks()
end)

-- Cases that need a fresh process: injected faults, a spin kernel that gives up.
local function child(env, code)
  local path = os.tmpname()
  T.write(path, "local PTX = " .. string.format("%q", PTX) .. "\n" .. code)
  local log = env:find("GPULAB_FAKE_LOG=", 1, true) and "" or " GPULAB_FAKE_LOG=/dev/null"
  local p = assert(io.popen(env .. log .. " " .. GPULAB .. " " .. path .. " 2>&1"))
  local out = p:read("a")
  local _, _, rc = p:close()
  os.remove(path)
  return out, rc
end

local PRELUDE = [[
  local k = cuda.load(PTX):kernel("work")
  local a = cuda.array("f32", 4)
  local s = cuda.stream()
  local function f(st) k:launch({ grid = 1, block = 1, stream = st }, a) end
]]

test("a stream of another context, a spin that gives up, an event that cannot be created", function()
  local out = child("GPULAB_FAKE_FAIL=cuEventRecord:400", PRELUDE .. [[
    print("OTHER", select(2, pcall(cuda.measure, f, { stream = s, min_time = 0 })))
    print("STATS", cuda.stats().events)
  ]])
  T.ok(out:find("OTHER\tcuda.measure: option 'stream': the cuda.stream belongs to another device's context " ..
                "(cuEventRecord: CUDA_ERROR_INVALID_HANDLE (400))", 1, true), out)
  T.ok(out:find("STATS\t0", 1, true), out)
  out = child("GPULAB_FAKE_BLOCK_GIVEUP=1", PRELUDE .. [[
    print("GIVEUP", select(2, pcall(cuda.measure, f,
      { regime = "hot", stream = s, min_time = 0, blocking = true, timeout = 0.2 })))
  ]])
  T.ok(out:find("GIVEUP\tcuda.measure: no sample accepted within 0.2", 1, true), out)
  T.ok(out:find("a spin that gave up", 1, true), out)
  out = child("GPULAB_FAKE_FAIL=cuEventCreate:2:3", PRELUDE .. [[
    print("EVENT", select(2, pcall(cuda.measure, f, { stream = s, min_time = 0 })))
    print("STATS", cuda.stats().events)
  ]])
  T.ok(out:find("EVENT\tcuda.measure: cuEventCreate: CUDA_ERROR_OUT_OF_MEMORY (2)", 1, true), out)
  T.eq(select(2, out:gsub("event_create", "")), 0, "the log is off here")
end)

test("no driver object outlives a measurement, whatever fn does", function()
  local out = child("GPULAB_FAKE_LOG=/dev/stdout", PRELUDE .. [[
    cuda.measure(f, { regime = "cold", stream = s, min_time = 0, min_samples = 2, max_samples = 2 })
    cuda.measure(f, { regime = "hot", blocking = true, stream = s, min_time = 0 })
    cuda.measure(f, { regime = "graph", min_time = 0 })
    pcall(cuda.measure, function(st) f(st); error("boom") end, { regime = "hot", blocking = true, stream = s })
    pcall(cuda.measure, function(st) f(st); error("boom") end, { regime = "graph" })
    pcall(cuda.measure, function(st) f(st); error("boom") end, { regime = "cold" })
    s:free()
    cuda.sync()
    collectgarbage()
    cuda.sync()
    print("DEFERRED", cuda.stats().deferred)
  ]])
  local function n(pat) return select(2, out:gsub("\n" .. pat, "")) end
  T.ok(n("event_create") > 0, out)
  T.eq(n("event_create"), n("event_destroy"), "events")
  T.eq(n("alloc_host"), n("free_host"), "pinned words")
  T.eq(n("graph_instantiate"), n("graph_exec_destroy"), "graphs")
  T.eq(n("stream_create"), n("stream_destroy"), "streams")
  T.ok(out:find("DEFERRED\t0", 1, true), out)
end)

T.test("a prepared launch without a stream is measured in the graph regime on the stream it is given", function()
  -- the H200 refused this with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (906): the launch went to the
  -- default stream while the measurement stream was being captured; prepared(s) launches on s
  local p = work:prepare({ grid = 1, block = 1 }, a)
  local r = cuda.measure(p, { regime = "graph", min_samples = 3, min_time = 0 })
  T.eq(r.regime, "graph")
  T.ok(r.samples >= 3)
  local s = cuda.stream { nonblocking = true }
  clear_log()
  p(s)
  p(5) -- any other argument is ignored
  local lines = {}
  for l in T.log_text():gmatch("launch work [^\n]*") do lines[#lines + 1] = l end
  T.eq(#lines, 2)
  T.ok(not lines[1]:find("stream=0 ", 1, true), "on the stream given: " .. lines[1])
  T.ok(lines[2]:find("stream=0 ", 1, true), "on its own (default) stream: " .. lines[2])
  s:free()
  T.raises(function() p(s) end, "bad argument #2 to 'cuda.prepared' (the cuda.stream was freed)")
  p:free()
end)

T.done()
