-- harness.measure through the driver stand-in: it hands the work on to cuda.measure and returns its
-- result shape for both regimes, stopping at the timeout when the noise target cannot be met.
-- The stand-in's times say nothing about a GPU: only the shape and the stopping are checked.
-- The timeouts are generous: under ASan with other tests beside it, the first sample took over
-- 1.5 s on a 2-core machine.
local T = dofile("tests/lua/t.lua")
local harness = require("gpulab.lab")

local d = cuda.array("f32", 1024)
local function work() d:fill(1) end

local function check_shape(r, regime)
  for _, k in ipairs { "mean", "median", "min", "max", "stdev", "noise" } do
    T.ok(type(r[k]) == "number" and r[k] == r[k], k .. " is a number")
  end
  T.ok(r.min <= r.median and r.median <= r.max, "min <= median <= max")
  T.ok(r.ci95[1] <= r.mean and r.mean <= r.ci95[2], "the interval holds the mean")
  T.eq(r.regime, regime)
  T.ok(#r.times >= 1 and r.samples >= 1, "samples kept")
end

T.test("hot and cold regimes give a measure result", function()
  local r = harness.measure(work, { regime = "hot", min_samples = 6, min_time = 0, max_noise = 1, timeout = 10 })
  check_shape(r, "hot")
  T.ok(r.samples >= 6, "at least min_samples: " .. r.samples)
  r = harness.measure(work, { regime = "cold", min_samples = 4, min_time = 0, max_noise = 1, timeout = 10 })
  check_shape(r, "cold")
end)

T.test("an unreachable noise target stops at the timeout or a plateau, with what it measured", function()
  local r = harness.measure(work, { min_samples = 5, min_time = 0, max_noise = 1e-9, timeout = 5 })
  T.ok(r.samples >= 1, "samples: " .. r.samples)
  -- an unreachable target ends at the deadline, or earlier once the noise stops improving
  if r.engine == "cuda.measure" then
    T.ok(r.stop == "timeout" or r.stop == "plateau", "stop reason: " .. tostring(r.stop))
  end
  check_shape(r, r.regime)
end)

T.test("the engine is named in the result", function()
  local r = harness.measure(work, { min_samples = 3, min_time = 0, max_noise = 1, timeout = 10 })
  T.eq(r.engine, cuda.measure and "cuda.measure" or "cuda.bench")
end)

T.test("warmup, max_samples and batch reach cuda.measure; the result is recorded and read back", function()
  local r = harness.measure(work, { regime = "hot", min_samples = 2, max_samples = 4, min_time = 0,
    max_noise = 1e-12, timeout = 20, warmup = 3, batch = 5 })
  T.ok(r.samples <= 4, "at most max_samples accepted: " .. r.samples)
  T.ok(#r.times <= 4, "times: " .. #r.times)
  T.eq(r.warmup, 3)
  T.eq(r.batch, 5)
  -- the stand-in's times can come out equal (noise 0 meets even 1e-12): then converging first is right
  if r.stop ~= "timeout" and r.noise > 1e-12 then T.eq(r.stop, "max_samples") end
  if r.stop == "converged" then T.ok(r.noise <= 1e-12, "converged at noise " .. r.noise) end
  local json = require("gpulab.json")
  local lab = harness.new{ name = "rec", args = {} }
  lab:record("copy", r)
  local back = json.decode(json.encode(lab:results().records))
  T.eq(#back.copy.ci95, 2)
  T.near(back.copy.ci95[1], r.ci95[1], 1e-12)
  T.near(back.copy.ci95[2], r.ci95[2], 1e-12)
  T.eq(back.copy.samples, r.samples)
end)

d:free()
T.done()
