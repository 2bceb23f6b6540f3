-- harness.holds: the verdict a claim gets from lab:compare's decisions (pure Lua, no driver).
-- It must give what labs/tma_double_buffer.lua's own mapping gave before it moved into the
-- harness, for every decision and each of that lab's rules, and decide lists of decisions (one
-- per size or pair) as hopper_clusters' all_faster does.
local T = dofile("tests/lua/t.lua")
local harness = require("gpulab.lab")

local WORDS = { "faster", "slower", "same", "unclear" }

-- The mapping tma_double_buffer.lua had in the lab: nil when undecided or the output was wrong.
local function lab_mapping(d, yes, no, all_correct)
  if d == "unclear" or not all_correct then return nil end
  for _, w in ipairs(yes) do if d == w then return true end end
  for _, w in ipairs(no) do if d == w then return false end end
end

-- tma_double_buffer's claims and the decisions that hold or refute each.
local RULES = {
  overlap = { { "faster" }, { "slower" } },
  store_holds = { { "faster" }, { "same", "slower" } },
  vs_dtod = { { "faster", "same" }, { "slower" } },
  plain_copy = { { "same", "slower" }, { "faster" } },
  box64 = { { "same" }, { "slower", "faster" } },
  prefetch = { { "same", "faster" }, { "slower" } },
}

T.test("one decision: the same verdict as the lab's own mapping, for every word and rule", function()
  for id, r in pairs(RULES) do
    for _, d in ipairs(WORDS) do
      for _, valid in ipairs({ true, false }) do
        local want = lab_mapping(d, r[1], r[2], valid)
        T.eq(harness.holds(d, { holds = r[1], refuted = r[2], valid = valid }), want,
          string.format("%s, %s, valid=%s", id, d, tostring(valid)))
      end
    end
  end
end)

T.test("valid may be left out: the evidence is then judged", function()
  T.eq(harness.holds("faster", { holds = { "faster" } }), true)
  T.eq(harness.holds("slower", { refuted = { "slower" } }), false)
  T.eq(harness.holds("same", { holds = { "faster" }, refuted = { "slower" } }), nil, "a word in neither list")
end)

T.test("a list: refuted by any refuting decision, holds when all hold, else unclear", function()
  local all_faster = { holds = { "faster" }, refuted = { "slower", "same" } }
  T.eq(harness.holds({ "faster", "faster", "faster" }, all_faster), true)
  T.eq(harness.holds({ "faster", "unclear", "faster" }, all_faster), nil)
  T.eq(harness.holds({ "unclear", "same", "faster" }, all_faster), false, "a refutation outweighs an unclear one")
  T.eq(harness.holds({}, all_faster), nil, "no decision decides nothing")
  T.eq(harness.holds({ "faster", "slower" }, { holds = { "faster" }, refuted = { "slower" }, valid = false }), nil)
end)

T.test("from two results: a 2x faster time holds a 1.6x claim, an equal one refutes it", function()
  local function result(ms) return harness.summarize({ ms, ms * 1.001, ms * 0.999, ms * 1.0005, ms * 0.9995 }) end
  local rule = { holds = { "faster" }, refuted = { "slower" } }
  local _, ci = harness.ratio(result(1.0), result(2.0))
  T.eq(harness.holds(harness.decide(ci, 0, 1 / 1.6), rule), true)
  _, ci = harness.ratio(result(2.0), result(2.0))
  T.eq(harness.holds(harness.decide(ci, 0, 1 / 1.6), rule), false)
end)

T.test("a rule or decision that cannot mean anything raises, naming the argument", function()
  T.raises(function() harness.holds("fast", { holds = { "faster" } }) end,
    "bad argument #1 to 'harness.holds' (the decision is 'fast'; faster, slower, same or unclear expected)")
  T.raises(function() harness.holds({ "faster", 1 }, { holds = { "faster" } }) end, "entry 2 is number")
  T.raises(function() harness.holds(nil, { holds = { "faster" } }) end, "a decision or a list of decisions expected")
  T.raises(function() harness.holds("faster", nil) end, "bad argument #2 to 'harness.holds' (rule")
  T.raises(function() harness.holds("faster", { hold = { "faster" } }) end, "unknown field 'hold'")
  T.raises(function() harness.holds("faster", { holds = { "faster" }, refuted = { "faster" } }) end,
    "(field 'refuted': 'faster' is in holds too)")
  T.raises(function() harness.holds("faster", { holds = { "unclear" } }) end,
    "(field 'holds': entry 1 is 'unclear'; faster, slower or same expected)")
  T.raises(function() harness.holds("faster", { holds = "faster" }) end, "(field 'holds': list of decisions expected)")
  T.raises(function() harness.holds("faster", { holds = { "faster" }, valid = 1 }) end,
    "(field 'valid': boolean expected, got number)")
end)

T.test("the position of an error is the caller's line", function()
  local err = T.raises(function() harness.holds("fast", {}) end)
  T.ok(err:find("test_lab_holds.lua:%d+: bad argument #1"), err)
  err = T.raises(function() harness.holds("faster", { holds = { "fast" } }) end)
  T.ok(err:find("test_lab_holds.lua:%d+: bad argument #2"), err)
end)

T.done()
