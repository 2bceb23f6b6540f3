-- lab_rules.lua — how some of the labs' claims turn evidence into a verdict, as plain functions of
-- plain values (no driver, no GPU), so that tests/lua/test_lab_rules.lua can run each rule on
-- hand-made inputs. A verdict is true (HOLDS), false (REFUTED) or nil (UNCLEAR).
--
-- The labs load it with
--   package.path = lab.dir .. "/lib/?.lua;" .. package.path
--   local rules = require("lab_rules")
local M = {}

-- ---- hopper_clusters ----------------------------------------------------------------------------

-- A "the first is faster" claim from lab:compare's decision, judged only on right output:
-- valid false (some output was wrong) -> nil; "faster" -> true; "slower" or "same" -> false
-- (the claim is refuted); "unclear" or anything else -> nil.
function M.faster_verdict(valid, decision)
  if not valid then return nil end
  if decision == "faster" then return true end
  if decision == "slower" or decision == "same" then return false end
  return nil
end

-- ---- tma_double_buffer --------------------------------------------------------------------------

-- expect_tx_small ("too few transaction bytes: the phase completes early"), from the child's
-- report {status=, healthy=, stuck=, poison=}: refuted (false) when the child did not end well,
-- the context was not healthy afterwards, or the wait timed out (stuck ~= 0: the phase did not
-- complete at all); holds (true) when the wait returned and poisoned elements, which only the
-- missing bytes would have overwritten, were read after it; unclear (nil) when the wait returned
-- but no poison was seen (the bytes may have landed before the reads) or the count was not
-- reported (the child's line not parsed).
function M.expect_tx_small(small)
  if not (small.status == "ok" and small.healthy and small.stuck == 0) then return false end
  if (small.poison or 0) > 0 then return true end
  return nil
end

return M
