-- labs/lib/lab_rules.lua: the rules by which hopper_clusters (pdl_time, coop_step, pdl_gap) and
-- tma_double_buffer (expect_tx_small) turn evidence into verdicts, on hand-made inputs (pure Lua,
-- no driver), and that the labs decide those claims through them.
local T = dofile("tests/lua/t.lua")
package.path = "labs/lib/?.lua;" .. package.path
local rules = require("lab_rules")

T.test("faster_verdict: slower and same refute, faster holds, unclear or wrong output stay unclear", function()
  T.eq(rules.faster_verdict(true, "faster"), true)
  T.eq(rules.faster_verdict(true, "slower"), false, "slower refutes (was unclear through `a and b or nil`)")
  T.eq(rules.faster_verdict(true, "same"), false, "the same refutes")
  T.eq(rules.faster_verdict(true, "unclear"), nil)
  T.eq(rules.faster_verdict(true, nil), nil)
  for _, d in ipairs { "faster", "slower", "same", "unclear" } do
    T.eq(rules.faster_verdict(false, d), nil, "wrong output, " .. d)
  end
end)

T.test("expect_tx_small: poison seen holds, a failed child or timed-out wait refutes, else unclear", function()
  local function child(t)
    local c = { status = "ok", healthy = true, stuck = 0, poison = 0 }
    for k, v in pairs(t) do c[k] = v end
    return c
  end
  T.eq(rules.expect_tx_small(child { poison = 28672 }), true, "the phase completed early and poison was read")
  T.eq(rules.expect_tx_small(child { poison = 0 }), nil, "no poison seen: unclear (was refuted)")
  local unparsed = child {}
  unparsed.poison = nil
  T.eq(rules.expect_tx_small(unparsed), nil, "line not parsed: unclear (was refuted)")
  T.eq(rules.expect_tx_small(child { stuck = 0x41000000, poison = 5 }), false, "the wait timed out")
  T.eq(rules.expect_tx_small(child { healthy = false, poison = 5 }), false, "context hurt")
  T.eq(rules.expect_tx_small(child { status = "timeout", poison = 5 }), false, "child did not end well")
end)

T.test("interval: mean, t interval, median of any sign", function()
  local iv = rules.interval { -1, 1 }
  T.eq(iv.n, 2)
  T.eq(iv.mean, 0)
  T.near(iv.stdev, math.sqrt(2), 1e-12)
  T.near(iv.half, 12.706 * math.sqrt(2) / math.sqrt(2), 1e-9)
  T.eq(iv.median, 0)
  T.eq(iv.lo, -iv.half)
  T.eq(rules.interval { 3 }, nil, "one value bounds nothing")
  local many = {}
  for i = 1, 100 do many[i] = i end
  local m = rules.interval(many)
  T.near(m.mean, 50.5, 1e-12)
  T.eq(m.median, 50.5)
  T.near(m.half, 2.042 * m.stdev / 10, 1e-12, "df > 30 uses t(30): never narrower")
end)

-- n samples spread evenly over mean ± spread
local function around(mean, spread, n)
  local v = {}
  n = n or 31
  for i = 1, n do v[i] = mean + spread * ((i - 1) / (n - 1) * 2 - 1) end
  return v
end

T.test("gap_verdict: decided from intervals and the timer's tick", function()
  local h, ev = rules.gap_verdict(around(0.8, 0.1), around(3.5, 0.3), 0.032, true)
  T.eq(h, true, "PDL's gap clearly smaller")
  T.near(ev.diff_us, 2.7, 1e-9)
  T.eq(ev.reason, nil)
  T.eq(rules.gap_verdict(around(3.5, 0.3), around(0.8, 0.1), 0.032, true), false, "clearly larger: refuted")
  -- negative gaps (blocks started before the previous link ended) are samples like any other
  T.eq(rules.gap_verdict(around(-1.5, 0.2), around(3.0, 0.2), 0.032, true), true, "negative gaps")
  h, ev = rules.gap_verdict(around(2.0, 3.0), around(2.5, 3.0), 0.032, true)
  T.eq(h, nil, "overlapping intervals")
  T.ok(ev.reason:find("overlap", 1, true), ev.reason)
  -- disjoint intervals, but the means 0.5 µs apart with a 1 µs timer: unclear, not holds
  h, ev = rules.gap_verdict(around(2.0, 0.01), around(2.5, 0.01), 1.0, true)
  T.eq(h, nil, "within the tick")
  T.ok(ev.reason:find("within the timer's tick", 1, true), ev.reason)
  T.eq(rules.gap_verdict(around(2.5, 0.01), around(2.0, 0.01), 1.0, true), nil, "larger, but within the tick")
  T.eq(rules.gap_verdict(around(2.0, 0.01), around(2.5, 0.01), 0.032, true), true, "the same gaps, a fine timer")
  h, ev = rules.gap_verdict(around(0.8, 0.1), around(3.5, 0.3), nil, true)
  T.eq(h, nil, "no tick measured")
  T.ok(ev.reason:find("tick", 1, true), ev.reason)
  T.eq(rules.gap_verdict(around(0.8, 0.1), around(3.5, 0.3), 0, true), nil, "a tick of 0: the timer never moved")
  h, ev = rules.gap_verdict(around(0.8, 0.1), around(3.5, 0.3), 0.032, false)
  T.eq(h, nil, "wrong output or stamps")
  T.ok(ev.reason:find("wrong", 1, true), ev.reason)
  T.eq(rules.gap_verdict({ 0.5 }, around(3.5, 0.3), 0.032, true), nil, "one sample")
  T.eq(rules.gap_verdict({}, {}, 0.032, true), nil, "no samples")
end)

T.test("the labs decide these claims through the rules", function()
  local hc = T.read("labs/hopper_clusters.lua")
  T.ok(hc:find('rules.faster_verdict(all_correct, decision)', 1, true), "pdl_time")
  T.ok(hc:find('rules.faster_verdict(correct, decision)', 1, true), "coop_step")
  T.ok(hc:find('rules.gap_verdict(', 1, true), "pdl_gap")
  T.ok(not hc:find("verdict_of_compare(decision) or nil", 1, true), "no `a and b or nil` verdicts left")
  -- the times pdl_time and coop_step compare are the GPU's, each sample queued whole first
  T.ok(hc:find("results[pdl] = measure_queued(run, stream, K)", 1, true), "pdl_time measures queued samples")
  T.ok(hc:find("measure_queued(coop, stream, 1), measure_queued(multi, stream, S)", 1, true),
    "coop_step measures queued samples")
  T.ok(hc:find("blocking = true", 1, true), "queued: blocking=true")
  local tma = T.read("labs/tma_double_buffer.lua")
  T.ok(tma:find("rules.expect_tx_small(small)", 1, true), "expect_tx_small")
end)

T.done()
