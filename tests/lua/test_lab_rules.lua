-- labs/lib/lab_rules.lua: the rules by which hopper_clusters (pdl_time, coop_step) and
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

T.test("the labs decide these claims through the rules", function()
  local hc = T.read("labs/hopper_clusters.lua")
  T.ok(hc:find('rules.faster_verdict(all_correct, decision)', 1, true), "pdl_time")
  T.ok(hc:find('rules.faster_verdict(correct, decision)', 1, true), "coop_step")
  T.ok(not hc:find("verdict_of_compare(decision) or nil", 1, true), "no `a and b or nil` verdicts left")
  local tma = T.read("labs/tma_double_buffer.lua")
  T.ok(tma:find("rules.expect_tx_small(small)", 1, true), "expect_tx_small")
end)

T.done()
