-- gpulab.lab verdicts from intervals: harness.summarize's statistics, lab:compare's decisions on
-- synthetic results (clearly faster or slower, the same within the margin, overlapping ->
-- unclear with its reason, the re-measure path and the budget), declared claims and the ones
-- never judged (printed and in the JSON, with the intervals), parameter rules, harness.measure's
-- choice of engine and harness.spawn's deadline. No GPU is needed.
local T = dofile("tests/lua/t.lua")
local harness = require("gpulab.lab")
local json = require("gpulab.json")

local function new(args, spec)
  spec = spec or {}
  spec.name, spec.args = spec.name or "t", args or {}
  return harness.new(spec)
end

-- n samples spread evenly over mean ± half
local function result(mean, half, n)
  local times = {}
  n = n or 20
  for i = 1, n do times[i] = mean + half * ((i - 1) / (n - 1) * 2 - 1) end
  return harness.summarize(times)
end

T.test("harness.summarize: mean, median, stdev, noise and the t interval", function()
  local r = harness.summarize({ 1, 2, 3, 4 }, { regime = "cold" })
  T.eq(r.mean, 2.5)
  T.eq(r.median, 2.5)
  T.eq(r.min, 1)
  T.eq(r.max, 4)
  T.near(r.stdev, math.sqrt(5 / 3), 1e-12)
  T.near(r.noise, math.sqrt(5 / 3) / 2.5, 1e-12)
  -- t(0.975, 3 dof) = 3.182
  T.near(r.ci95[1], 2.5 - 3.182 * math.sqrt(5 / 3) / 2, 1e-9)
  T.near(r.ci95[2], 2.5 + 3.182 * math.sqrt(5 / 3) / 2, 1e-9)
  T.eq(r.samples, 4)
  T.eq(r.regime, "cold")
  T.eq(#r.times, 4)
  T.eq(harness.summarize({ 5, 1, 3 }).median, 3)
  -- many samples use the normal quantile
  local big = result(10, 1, 100)
  T.near(big.ci95[2] - big.mean, 1.96 * big.stdev / 10, 1e-9)
  T.raises(function() harness.summarize({}) end,
    "bad argument #1 to 'harness.summarize' (non-empty list of times in ms expected)")
  T.raises(function() harness.summarize({ 1, 0 / 0 }) end, "sample 2 is ")
  T.raises(function() harness.summarize({ 1, -1 }) end, "sample 2 is -1")
  T.raises(function() harness.summarize({ math.huge }) end, "times must be finite")
  -- one sample: an interval that decides nothing
  T.eq(harness.summarize({ 2 }).ci95[2], math.huge)
end)

T.test("harness.ratio: interval from the bounds of the two intervals", function()
  local a, b = harness.summarize({ 1, 1.1, 0.9 }), harness.summarize({ 2, 2.2, 1.8 })
  local ratio, ci = harness.ratio(a, b)
  T.near(ratio, 0.5, 1e-12)
  T.near(ci[1], a.ci95[1] / b.ci95[2], 1e-12)
  T.near(ci[2], a.ci95[2] / b.ci95[1], 1e-12)
  -- b's interval reaching zero leaves the upper bound open
  local wide = { mean = 1, ci95 = { 0, 2 } }
  T.eq(select(2, harness.ratio(a, wide))[2], math.huge)
  T.raises(function() harness.ratio({ mean = 1 }, b) end,
    "bad argument #1 to 'harness.ratio' (measure result {mean=, ci95={lo, hi}, ...} or a function returning one " ..
    "expected)")
  T.raises(function() harness.ratio(a, { mean = 0, ci95 = { 0, 0 } }) end, "mean time of 0")
  -- one sample has no interval: the message says so, not "not a result"
  T.raises(function() harness.ratio(harness.summarize({ 1.0 }), b) end,
    "bad argument #1 to 'harness.ratio' (the result's 95% interval is {0, inf}: a result of 1 sample(s) bounds " ..
    "nothing; take at least 2)")
end)

T.test("lab:compare: clearly faster, clearly slower, the same within the margin", function()
  local lab = new()
  local d, ratio, ci, det = lab:compare(result(1.0, 0.01), result(2.0, 0.02), { margin = 0.01 })
  T.eq(d, "faster")
  T.near(ratio, 0.5, 1e-9)
  T.ok(ci[1] < 0.5 and ci[2] > 0.5 and ci[2] < 0.99, "interval around 0.5")
  T.eq(det.reason, nil)
  T.eq(det.rounds, 0)
  T.eq((lab:compare(result(2.0, 0.02), result(1.0, 0.01))), "slower")
  T.eq((lab:compare(result(1.0, 0.001), result(1.002, 0.001), { margin = 0.01 })), "same")
  -- a threshold instead of 1: a at 97% of b's speed passes "at least 95%" (a/b <= 1/0.95)
  T.eq((lab:compare(result(1.0 / 0.97, 0.001), result(1.0, 0.001), { against = 1 / 0.95, margin = 0 })), "faster")
  T.eq((lab:compare(result(1.0 / 0.90, 0.001), result(1.0, 0.001), { against = 1 / 0.95, margin = 0 })), "slower")
end)

T.test("lab:compare: overlapping intervals are unclear, with the reason", function()
  local lab = new()
  local d, _, ci, det = lab:compare(result(1.0, 0.2), result(1.05, 0.2), { margin = 0.01 })
  T.eq(d, "unclear")
  T.ok(ci[1] < 0.99 and ci[2] > 1.01, "straddles the band")
  T.ok(det.reason:find("effect smaller than the noise", 1, true), det.reason)
  -- a narrow interval across the edge of the band: at the margin, not noise
  d, _, _, det = lab:compare(result(1.0, 0.0005), result(1.0 / 0.99, 0.0005), { margin = 0.01 })
  T.eq(d, "unclear")
  T.ok(det.reason:find("effect at the margin", 1, true), det.reason)
  -- results alone cannot be measured again: no re-measure round is claimed
  T.eq(det.rounds, 0)
  T.ok(not det.reason:find("budget", 1, true), det.reason)
end)

T.test("lab:compare: measure functions are called again and pooled until it is decided", function()
  local lab = new()
  local calls = { a = 0, b = 0 }
  -- each call gives noisy samples whose pool narrows: undecided at first, faster after pooling
  local function maker(key, mean)
    return function()
      calls[key] = calls[key] + 1
      return result(mean, 0.3, 10)
    end
  end
  local d, _, _, det = lab:compare(maker("a", 1.0), maker("b", 1.2), { margin = 0.01, rounds = 5 })
  T.eq(d, "faster")
  T.ok(det.rounds >= 1, "measured again: " .. det.rounds)
  T.eq(calls.a, det.rounds + 1)
  T.eq(calls.b, det.rounds + 1)
  T.eq(det.a.samples, 10 * (det.rounds + 1))
  -- the remeasure callback, with results
  local seen = {}
  d, _, _, det = lab:compare(result(1.0, 0.3, 10), result(1.2, 0.3, 10), { margin = 0.01, rounds = 5,
    remeasure = function(round)
      seen[#seen + 1] = round
      return result(1.0, 0.3, 10), result(1.2, 0.3, 10)
    end })
  T.eq(d, "faster")
  T.eq(#seen, det.rounds)
  T.eq(seen[1], 1)
  -- rounds run out: unclear, and it says so
  d, _, _, det = lab:compare(maker("a", 1.0), maker("b", 1.0), { margin = 0.001, rounds = 2 })
  T.eq(d, "unclear")
  T.eq(det.rounds, 2)
  T.ok(det.reason:find("2 re-measure rounds spent", 1, true), det.reason)
end)

T.test("lab:compare: the lab's budget stops re-measuring", function()
  local lab = new({}, { budget_s = 1e-6 })
  local n = 0
  local function f() n = n + 1; return result(1.0, 0.3, 10) end
  local d, _, _, det = lab:compare(f, f, { margin = 0.001, rounds = 10 })
  T.eq(d, "unclear")
  T.eq(n, 2, "measured once each, never again")
  T.ok(det.reason:find("budget spent", 1, true), det.reason)
  T.eq(new({ "--quick" }, { quick_budget_s = 7, budget_s = 99 }).budget_s, 7)
  T.eq(new({}, { quick_budget_s = 7, budget_s = 99 }).budget_s, 99)
  T.raises(function() new({}, { budget_s = -1 }) end, "field 'budget_s' must be a positive number")
end)

T.test("lab:compare checks its arguments", function()
  local lab = new()
  local r = result(1, 0.01)
  T.raises(function() lab:compare(5, r) end,
    "bad argument #1 to 'lab:compare' (measure result {mean=, ci95={lo, hi}, ...} or a function returning one " ..
    "expected)")
  T.raises(function() lab:compare(r, function() return {} end) end,
    "bad argument #2 to 'lab:compare' (measure result {mean=, ci95={lo, hi}, ...} or a function returning one " ..
    "expected)")
  T.raises(function() lab:compare(r, r, { margin = -0.1 }) end,
    "bad argument #3 to 'lab:compare' (field 'margin': must be a number in [0, 1), got -0.1)")
  T.raises(function() lab:compare(r, r, { margin = 0 / 0 }) end,
    "bad argument #3 to 'lab:compare' (field 'margin': must be a number in [0, 1), got")
  T.raises(function() lab:compare(r, r, { rounds = 1.5 }) end,
    "bad argument #3 to 'lab:compare' (field 'rounds': must be an integer >= 0)")
  T.raises(function() lab:compare(r, r, { against = 0 }) end,
    "bad argument #3 to 'lab:compare' (field 'against': must be a positive ratio, got 0)")
  T.raises(function() lab:compare(r, r, { remeasure = 3 }) end,
    "bad argument #3 to 'lab:compare' (field 'remeasure': must be a function(round) --> a, b)")
  T.raises(function() lab:compare(r, r, 7) end,
    "bad argument #3 to 'lab:compare' (options table {margin=, rounds=, remeasure=} expected)")
end)

T.test("lab:claim: declared with a seed section or as the lab's own", function()
  local lab = new()
  lab:claim { id = "a", seed = "§1", text = "x" }
  lab:claim { id = "b.c-d", own = true, text = "y" }
  T.raises(function() lab:claim { id = "a", seed = "§1", text = "x" } end, "'a' is declared twice")
  T.raises(function() lab:claim { id = "e", text = "x" } end, "needs exactly one of source=")
  T.raises(function() lab:claim { id = "e", seed = "§1", own = true, text = "x" } end, "needs exactly one of source=")
  T.raises(function() lab:claim { id = "e", seed = "3", text = "x" } end, "must name a seed section like \"§3\"")
  T.raises(function() lab:claim { id = "a b", own = true, text = "x" } end, "field 'id' must be a short name")
  T.raises(function() lab:claim { id = "e", own = true } end, "field 'text' must be a sentence")
  T.raises(function() lab:claim(3) end, "lab:claim: expected a table")
  T.raises(function() lab:verdict("a", "m", true, 5) end,
    "bad argument #4 to 'lab:verdict' (table (a compare detail or results) expected)")
  lab:verdict("a", "measured", true)
  T.eq(lab.verdicts[1].claim, "x")
  T.eq(lab.verdicts[1].id, "a")
  T.eq(lab.verdicts[1].seed, "§1")
  lab:judge_missing("stopped early")
  T.eq(#lab.verdicts, 2)
  T.eq(lab.verdicts[2].id, "b.c-d")
  T.eq(lab.verdicts[2].verdict, "UNCLEAR")
  T.eq(lab.verdicts[2].measured, "never judged: stopped early")
  T.eq(lab.verdicts[2].own, true)
  lab:judge_missing()
  T.eq(#lab.verdicts, 2, "reported once")
end)

T.test("parameter rules: multiple_of refused with the rule, quick values printed as used", function()
  local spec = function()
    return { params = { { name = "cols", default = 1024, quick = 256, multiple_of = 256 } } }
  end
  T.eq(new({}, spec()).params.cols, 1024)
  T.eq(new({ "--quick" }, spec()).params.cols, 256)
  T.eq(new({ "--quick", "--cols=512" }, spec()).params.cols, 512, "the command line wins over the quick value")
  T.raises(function() new({ "--cols=300" }, spec()) end, "option --cols must be a multiple of 256, got 300")
  T.raises(function() new({}, { params = { { name = "c", default = 10, multiple_of = 4 } } }) end,
    "param 'c': 10 is not a multiple of 4")
  T.raises(function() new({}, { params = { { name = "c", default = 8, multiple_of = 0 } } }) end,
    "multiple_of must be a positive integer")
  T.raises(function() new({}, { params = { { name = "c", default = 8, quick = "x" } } }) end,
    "its quick value must have the default's type")
end)

T.test("a lab with claims: verdict lines with intervals, the never-judged claim, the JSON", function()
  local path = os.tmpname()
  local r = cuda.run_isolated("tests/lab_fixtures/claims_lab.lua", { args = { "--quick", "--json", path },
    timeout = 60 })
  T.eq(r.status, "ok", r.stderr)
  local out = r.stdout
  T.ok(out:find("params: quick cols=256\n", 1, true), "the quick value is the size printed:\n" .. out)
  T.ok(out:find("cols used: 256", 1, true), out)
  T.ok(out:find("[HOLDS]   the new kernel is faster (faster)\n", 1, true), out)
  T.ok(out:match("a: 1 ms %[0%.99%d*, 1%.00%d*%] n=20 noise [%d.]+%% cold"), "result interval printed:\n" .. out)
  T.ok(out:match("time ratio a/b 0%.5000 %[0%.49%d*, 0%.50%d*%] against 1%.0000 ± 1%.00%% %-> faster"), out)
  T.ok(out:find("[HOLDS]   two equal kernels time the same (same)", 1, true), out)
  T.ok(out:find("[UNCLEAR] a claim the lab never judges (forgotten) — never judged", 1, true), out)
  T.ok(out:find("## Verdicts: 2 holds, 0 refuted, 1 unclear", 1, true), out)
  local res = json.decode(T.read(path))
  os.remove(path)
  T.eq(#res.verdicts, 3)
  local v = res.verdicts[1]
  T.eq(v.id, "faster")
  T.eq(v.seed, "§3")
  T.eq(v.evidence.decision, "faster")
  T.near(v.evidence.ratio, 0.5, 1e-9)
  T.ok(v.evidence.ratio_ci[1] < 0.5 and v.evidence.ratio_ci[2] > 0.5, "ratio interval in the JSON")
  T.eq(#v.evidence.intervals, 2)
  T.near(v.evidence.intervals[1].mean, 1.0, 1e-9)
  T.ok(v.evidence.intervals[1].ci95[1] < 1 and v.evidence.intervals[1].ci95[2] > 1, "result interval")
  T.eq(v.evidence.intervals[1].regime, "cold")
  T.eq(res.verdicts[2].own, true)
  T.eq(res.verdicts[3].id, "forgotten")
  T.eq(res.verdicts[3].verdict, "UNCLEAR")
  T.eq(res.verdicts[3].never_judged, true)
  T.eq(#res.declared_claims, 3)
  T.eq(res.params.cols, 256)
end)

T.test("harness.measure: cuda.measure with every one of its options handed on, others refused", function()
  local saved = cuda.measure
  local got
  cuda.measure = function(fn, opts)
    got = opts
    fn()
    return { mean = 1, ci95 = { 0.9, 1.1 }, times = { 1 } }
  end
  local called = false
  local r = harness.measure(function() called = true end, { regime = "graph", min_samples = 7, warmup = 3,
    max_samples = 4, batch = 8, blocking = true, l2_reset = false, label = "x" })
  T.ok(called, "the function was handed on")
  T.eq(got.regime, "graph")
  T.eq(got.min_samples, 7)
  T.eq(got.warmup, 3)
  T.eq(got.max_samples, 4)
  T.eq(got.batch, 8)
  T.eq(got.blocking, true)
  T.eq(got.label, nil)
  T.eq(r.label, "x")
  T.eq(r.engine, "cuda.measure")
  T.raises(function() harness.measure(function() end, { regime = "hot", extra = 1 }) end,
    "bad argument #2 to 'harness.measure' (unknown option 'extra' (known: regime, min_samples, max_samples")
  cuda.measure = saved
end)

T.test("harness.decide: faster, slower, same, and unclear where the interval straddles the band", function()
  T.eq(harness.decide({ 0.5, 0.9 }, 0.01), "faster")
  T.eq(harness.decide({ 1.1, 1.3 }, 0.01), "slower")
  T.eq(harness.decide({ 0.995, 1.005 }, 0.01), "same")
  T.eq(harness.decide({ 0.9, 1.1 }, 0.01), "unclear")
  T.eq(harness.decide({ 1.9, 2.2 }, 0.01, 2), "unclear")
end)

T.test("lab:record takes a measure result: ci95 with .lo/.hi is written as [lo, hi], nothing lost", function()
  local lab = new()
  local ci = { 0.9, 1.1, lo = 0.9, hi = 1.1 }
  lab:record("m", { mean = 1, ci95 = ci, times = { 0.9, 1.1 }, clocks = {}, stop = "converged" })
  local back = json.decode(json.encode(lab:results().records))
  T.eq(back.m.ci95[1], 0.9)
  T.eq(back.m.ci95[2], 1.1)
  T.eq(#back.m.ci95, 2)
  T.eq(back.m.times[2], 1.1)
  T.eq(back.m.stop, "converged")
  T.eq(ci.lo, 0.9, "the caller's table is left alone")
  lab:record("mixed", { 5, 6, name = "x" })
  back = json.decode(json.encode(lab:results().records))
  T.eq(back.mixed["1"], 5)
  T.eq(back.mixed["2"], 6)
  T.eq(back.mixed.name, "x")
  local loop = {}
  loop.self = loop
  T.raises(function() lab:record("loop", loop) end, "contains itself")
  T.raises(function() lab:record("f", { fn = print }) end, "lab:record: value for 'f' cannot be written as JSON")
end)

T.test("harness.spawn: output and exit status; the deadline is told apart", function()
  local r = harness.spawn("echo one; echo two >&2; exit 3", { timeout = 20 }).wait()
  T.eq(r.exit, 3)
  T.eq(r.timed_out, false)
  T.ok(r.out:find("one\ntwo", 1, true), r.out)
  T.ok(r.seconds ~= nil and r.seconds >= 0, "seconds measured")
  local h = harness.spawn("echo started; sleep 30; echo never", { timeout = 1, kill_after = 1 })
  r = h.wait()
  T.eq(r.exit, 124)
  T.eq(r.timed_out, true)
  T.ok(r.out:find("started", 1, true) and not r.out:find("never", 1, true), r.out)
  T.ok(h.wait() == r, "waiting again returns the same result")
  T.eq(harness.shell_quote("it's"), "'it'\\''s'")
end)

T.done()
