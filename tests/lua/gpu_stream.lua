-- GPU tests for streams, events, graphs and cuda.bench (ctest label `gpu`; skipped without a device).
-- Durations come from kernels that spin on %globaltimer for a known time; results are read back
-- and checked against host arithmetic.
local T = dofile("tests/lua/t.lua")
T.require_gpu()

local GPULAB = arg[-1]

local SRC = [[
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Busy for `ns` nanoseconds of the global timer; thread 0 writes how long it spun.
extern "C" __global__ void spin_ns(unsigned long long ns, unsigned long long *spun) {
  unsigned long long t0 = global_ns(), t;
  do { t = global_ns(); } while (t - t0 < ns);
  if (threadIdx.x == 0 && blockIdx.x == 0) *spun = t - t0;
}

// Order-dependent: replaying launches in another order gives another value.
extern "C" __global__ void step(unsigned *x, unsigned i) { x[0] = x[0] * 3u + i; }

extern "C" __global__ void add_at(unsigned *y, unsigned i, unsigned v) { y[i] += v; }
]]

local mod = cuda.load(cuda.compile(SRC, { name = "gpu_stream.cu" }))
local spin = mod:kernel("spin_ns")
local MS = 1000000 -- nanoseconds

local function median(t)
  local s = { table.unpack(t) }
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

local function read_u64(d)
  local h = cuda.host("u64", d.numel)
  h:copy_from(d)
  return h
end

T.test("two streams run two 2 ms kernels at the same time", function()
  local s1, s2 = cuda.stream { nonblocking = true }, cuda.stream { nonblocking = true, priority = 0 }
  local out1, out2 = cuda.array("u64", 1), cuda.array("u64", 1)
  out1:fill(0); out2:fill(0)
  cuda.sync()
  spin:launch({ grid = 1, block = 32, stream = s1 }, 1000, out1) -- warm up
  s1:sync { timeout = 10 }
  local single, both = {}, {}
  local a0, a1, b0 = cuda.event(), cuda.event(), cuda.event()
  local overlap_ms = {}
  for rep = 1, 7 do
    local t0 = cuda.now()
    spin:launch({ grid = 1, block = 32, stream = s1 }, 2 * MS, out1)
    s1:sync { timeout = 10 }
    single[rep] = cuda.now() - t0
    t0 = cuda.now()
    a0:record(s1)
    spin:launch({ grid = 1, block = 32, stream = s1 }, 2 * MS, out1)
    a1:record(s1)
    b0:record(s2)
    spin:launch({ grid = 1, block = 32, stream = s2 }, 2 * MS, out2)
    s1:sync { timeout = 10 }
    s2:sync { timeout = 10 }
    both[rep] = cuda.now() - t0
    overlap_ms[rep] = a1:elapsed(b0) -- > 0: the first kernel ended after the second one began
  end
  local one, two = median(single), median(both)
  print(string.format("one kernel %.3f ms, two on two streams %.3f ms (%.2fx)", one * 1e3, two * 1e3, two / one))
  T.ok(one >= 0.002, "a kernel spins at least 2 ms: " .. one)
  T.ok(read_u64(out1)[1] >= 2 * MS and read_u64(out2)[1] >= 2 * MS, "both kernels spun 2 ms")
  T.ok(T.instrumented or two < 1.6 * one,
    string.format("two streams overlap: %.3f ms vs %.3f ms", two * 1e3, one * 1e3))
  T.ok(T.instrumented or median(overlap_ms) > 1.0,
    "the second kernel started before the first ended: " .. median(overlap_ms) .. " ms")
  a0:free(); a1:free(); b0:free(); s1:free(); s2:free(); out1:free(); out2:free()
end)

T.test("event timing of kernels of known length", function()
  local s = cuda.stream()
  local out = cuda.array("u64", 1)
  local e0, e1 = cuda.event(), cuda.event()
  spin:launch({ grid = 1, block = 32, stream = s }, 1000, out)
  s:sync { timeout = 10 }
  for _, ms in ipairs({ 1, 5, 20 }) do
    e0:record(s)
    spin:launch({ grid = 1, block = 32, stream = s }, ms * MS, out)
    e1:record(s)
    e1:sync { timeout = 10 }
    T.eq(e1:query(), true)
    local got = e1:elapsed(e0)
    local spun = read_u64(out)[1] / MS
    print(string.format("spin %d ms: events %.4f ms, %%globaltimer %.4f ms", ms, got, spun))
    T.ok(spun >= ms, "the kernel spun its time")
    -- the upper bound allows one update step of %globaltimer (fine on Hopper, but some drivers
    -- update it only every microsecond to millisecond) plus the launch itself
    T.ok(got >= ms * 0.995 and (T.instrumented or got < ms + 1.1),
      string.format("elapsed %.4f ms for a %d ms kernel", got, ms))
    T.ok(got >= spun * 0.995, "events enclose the kernel")
  end
  T.ok(e0:elapsed(e1) < 0, "reversed order gives a negative time")
  e0:free(); e1:free(); out:free(); s:free()
end)

T.test("cuda.bench times the work fn enqueues", function()
  local s = cuda.stream { nonblocking = true }
  local out = cuda.array("u64", 1)
  local calls = 0
  local r = cuda.bench(function()
    calls = calls + 1
    spin:launch({ grid = 1, block = 32, stream = s }, 2 * MS, out)
  end, { warmup = 2, reps = 9, stream = s, timeout = 10 })
  T.eq(calls, 11)
  T.eq(#r.samples, 9)
  print(string.format("bench of a 2 ms kernel: median %.4f min %.4f max %.4f ms", r.median, r.min, r.max))
  T.ok(r.min >= 2 * 0.995 and (T.instrumented or r.max < 3.1), "every sample near 2 ms (see the bound above)")
  T.ok(r.min <= r.median and r.median <= r.max)
  out:free(); s:free()
end)

T.test("a graph of 100 captured launches replays them in order", function()
  local step, add = mod:kernel("step"), mod:kernel("add_at")
  local x, y = cuda.array("u32", 1), cuda.array("u32", 50)
  x:fill(0); y:fill(0)
  cuda.sync()
  local s = cuda.stream { nonblocking = true }
  local g = s:capture(function()
    for i = 0, 49 do step:launch({ grid = 1, block = 1, stream = s }, x, i) end
    for i = 0, 49 do add:launch({ grid = 1, block = 1, stream = s }, y, i, i + 1) end
  end)
  T.eq(g.nodes, 100)
  s:sync { timeout = 10 }
  local hx, hy = cuda.host("u32", 1), cuda.host("u32", 50)
  hx:copy_from(x)
  T.eq(hx[1], 0, "capturing runs nothing")
  for _ = 1, 3 do g:launch(s) end
  s:sync { timeout = 10 }
  hx:copy_from(x); hy:copy_from(y)
  local want = 0
  for _ = 1, 3 do
    for i = 0, 49 do want = (want * 3 + i) % (1 << 32) end
  end
  T.eq(hx[1], want, "the chain ran 3 x 50 times in capture order")
  for i = 1, 50 do T.eq(hy[i], 3 * i, "y[" .. i .. "]") end
  -- a replay on another stream, and the default stream
  local s2 = cuda.stream()
  g:launch(s2)
  s2:sync { timeout = 10 }
  g:launch()
  cuda.sync { timeout = 10 }
  hy:copy_from(y)
  T.eq(hy[50], 5 * 50)
  g:free(); s:free(); s2:free(); x:free(); y:free()
end)

T.test("an error inside a capture leaves the stream usable", function()
  local step = mod:kernel("step")
  local x = cuda.array("u32", 1)
  x:fill(7)
  cuda.sync()
  local s = cuda.stream { nonblocking = true }
  T.raises(function()
    s:capture(function()
      step:launch({ grid = 1, block = 1, stream = s }, x, 1)
      error("stop here")
    end)
  end, "stop here")
  T.eq(s:query(), true)
  step:launch({ grid = 1, block = 1, stream = s }, x, 2)
  s:sync { timeout = 10 }
  local h = cuda.host("u32", 1)
  h:copy_from(x)
  T.eq(h[1], 7 * 3 + 2, "only the launch after the capture ran")
  local g = s:capture(function() step:launch({ grid = 1, block = 1, stream = s }, x, 0) end)
  g:launch(s)
  s:sync { timeout = 10 }
  h:copy_from(x)
  T.eq(h[1], (7 * 3 + 2) * 3)
  g:free(); s:free(); x:free()
end)

-- What the driver refuses while a stream captures (the driver stand-in copies these rules, and
-- test_stream_fake.lua checks gpulab against them in CI): after each refusal the capture fails,
-- and the stream and the context keep working.
T.test("syncs, queries and allocations inside a capture are refused; the stream works after", function()
  local step = mod:kernel("step")
  local x, h = cuda.array("u32", 1), cuda.host("u32", 1)
  local other, e = cuda.stream(), cuda.event()
  e:record()
  local cases = {
    { "cuda.sync", function() cuda.sync() end },
    { "cuda.sync{timeout=}", function() cuda.sync { timeout = 1 } end },
    { "another stream's sync", function() other:sync() end },
    { "another stream's query", function() other:query() end },
    { "an event's sync", function() e:sync() end },
    { "an allocation", function() cuda.array("u8", 64) end },
    { "an event's query", function() e:query() end },
    { "a pinned allocation", function() cuda.host("f32", 4, { pinned = true }) end },
  }
  for _, case in ipairs(cases) do
    local s = cuda.stream { nonblocking = true }
    local inner
    T.raises(function()
      s:capture(function(st)
        step:launch({ grid = 1, block = 1, stream = st }, x, 1)
        local ok, err = pcall(case[2])
        inner = ok and "no error" or tostring(err)
      end)
    end, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)", case[1])
    T.ok(inner:find("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900)", 1, true), case[1] .. ": " .. inner)
    x:fill(2)
    cuda.sync() -- the fill is on the default stream, which a non-blocking stream does not wait for
    step:launch({ grid = 1, block = 1, stream = s }, x, 1)
    s:sync { timeout = 10 }
    h:copy_from(x)
    T.eq(h[1], 7, case[1] .. ": the stream runs work after the failed capture")
    local g = s:capture(function(st) step:launch({ grid = 1, block = 1, stream = st }, x, 1) end)
    g:launch(s)
    s:sync { timeout = 10 }
    h:copy_from(x)
    T.eq(h[1], 22, case[1] .. ": and captures again")
    g:free(); s:free()
  end
  other:free(); e:free(); x:free()
end)

T.test("default-stream work beside a capture: refused for a blocking stream, run at once for a non-blocking one",
  function()
  local step = mod:kernel("step")
  local x, h = cuda.array("u32", 1), cuda.host("u32", 1)
  x:fill(1)
  cuda.sync()
  local blocking = cuda.stream()
  T.raises(function()
    blocking:capture(function(st)
      step:launch({ grid = 1, block = 1, stream = st }, x, 0)
      step:launch({ grid = 1, block = 1 }, x, 1)
    end)
  end, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (906)")
  local nonblocking = cuda.stream { nonblocking = true }
  local g = nonblocking:capture(function(st)
    step:launch({ grid = 1, block = 1, stream = st }, x, 5)
    step:launch({ grid = 1, block = 1 }, x, 1) -- the default stream: runs now, not in the graph
  end)
  T.eq(g.nodes, 1)
  cuda.sync()
  h:copy_from(x)
  T.eq(h[1], 1 * 3 + 1, "only the default stream's launch ran during the capture")
  g:launch(nonblocking)
  nonblocking:sync { timeout = 10 }
  h:copy_from(x)
  T.eq(h[1], 4 * 3 + 5, "the replay runs the captured launch")
  g:free(); blocking:free(); nonblocking:free(); x:free()
end)

T.test("a graph keeps the arrays its launches use", function()
  local add = mod:kernel("add_at")
  local y = cuda.array("u32", 4)
  y:fill(0)
  cuda.sync()
  local s = cuda.stream { nonblocking = true }
  local g = s:capture(function() add:launch({ grid = 1, block = 1, stream = s }, y, 3, 5) end)
  T.eq(g.objects, 2, "the kernel's module and the array")
  local held = setmetatable({ y }, { __mode = "v" }) -- sees y without keeping it alive
  y = nil
  collectgarbage(); collectgarbage()
  T.ok(held[1] ~= nil, "the graph holds its array")
  for _ = 1, 4 do g:launch(s) end
  s:sync { timeout = 10 }
  local h = cuda.host("u32", 4)
  h:copy_from(held[1])
  T.eq(h[4], 4 * 5, "four replays added 5 each")
  T.eq(h[1], 0)
  h = nil -- luacheck: ignore 311
  g:free()
  collectgarbage(); collectgarbage()
  T.eq(held[1], nil, "freeing the graph lets the array go")
  s:free()
end)

T.test("a never-ending kernel is caught by s:sync{timeout=1} in a child process", function()
  local t0 = cuda.now()
  local p = assert(io.popen(GPULAB .. " tests/lua/gpu_hang_child.lua 2>&1"))
  local out = p:read("a")
  local _, _, rc = p:close()
  local took = cuda.now() - t0
  print(out)
  T.eq(rc, 0, out)
  T.ok(out:find("TIMEOUT s:sync: timed out after 1.0 s waiting for the GPU", 1, true), out)
  T.ok(out:find("spin_until_flag<<<1, 1>>> on a stream", 1, true), "the error names the kernel: " .. out)
  local waited = tonumber(out:match("WAITED (%S+)"))
  T.ok(waited and waited >= 1.0 and waited < 3.0, "the deadline was kept: " .. tostring(waited))
  T.ok(out:find("ENDED true", 1, true), "the kernel was released afterwards: " .. out)
  T.ok(took < 30, "the child finished in " .. took .. " s")
end)

mod:free()
collectgarbage(); collectgarbage()
cuda.sync()
T.test("stats return to zero", function()
  local st = cuda.stats()
  for _, k in ipairs({ "streams", "events", "graphs", "arrays", "modules", "deferred" }) do T.eq(st[k], 0, k) end
end)

T.done()
