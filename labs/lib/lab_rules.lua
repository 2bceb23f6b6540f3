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

-- Student's t, 97.5% quantile, for 1..30 degrees of freedom; beyond 30 the value for 30 (a
-- slightly wider interval than the exact one, never a narrower one).
local T975 = { 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
  2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042 }

-- The mean of a list of numbers (of any sign: gaps between kernels may be negative) and its 95%
-- interval (mean ± t·stdev/√n), with the median, min and max; nil for fewer than 2 values.
function M.interval(values)
  local n = #values
  if n < 2 then return nil end
  local sum, sorted = 0, {}
  for i, v in ipairs(values) do
    sum = sum + v
    sorted[i] = v
  end
  table.sort(sorted)
  local mean = sum / n
  local ss = 0
  for _, v in ipairs(values) do ss = ss + (v - mean) ^ 2 end
  local sd = math.sqrt(ss / (n - 1))
  local half = T975[math.min(n - 1, #T975)] * sd / math.sqrt(n)
  return { n = n, mean = mean, stdev = sd, half = half, lo = mean - half, hi = mean + half, min = sorted[1],
    max = sorted[n], median = n % 2 == 1 and sorted[(n + 1) // 2] or (sorted[n // 2] + sorted[n // 2 + 1]) / 2 }
end

-- pdl_gap: does PDL shrink the gap between one link's end and the next link's dependent work?
-- `pdl` and `plain` are per-pair gap samples (µs) of the two chains, `tick_us` the %globaltimer's
-- resolution measured on the device (µs), `valid` false when the chain's output or stamps were
-- wrong. Holds when PDL's 95% interval lies wholly below the plain chain's and the means differ
-- by more than one tick; refuted when it lies wholly above by more than one tick; otherwise
-- unclear: the intervals overlap, the difference is within the timer's tick (the timer cannot
-- tell them apart), no tick was measured, or fewer than 2 samples. Returns the verdict and the
-- evidence {pdl=, plain= (M.interval results), tick_us=, diff_us= (plain - pdl), reason=}.
function M.gap_verdict(pdl, plain, tick_us, valid)
  local a, b = M.interval(pdl or {}), M.interval(plain or {})
  local ev = { pdl = a, plain = b, tick_us = tick_us }
  if not valid then
    ev.reason = "the chain's output or its stamps were wrong"
    return nil, ev
  end
  if a == nil or b == nil then
    ev.reason = "fewer than 2 gap samples"
    return nil, ev
  end
  if type(tick_us) ~= "number" or tick_us ~= tick_us or tick_us <= 0 or tick_us == math.huge then
    ev.reason = "the timer's tick was not measured"
    return nil, ev
  end
  ev.diff_us = b.mean - a.mean
  if a.hi < b.lo and ev.diff_us > tick_us then return true, ev end
  if a.lo > b.hi and -ev.diff_us > tick_us then return false, ev end
  if a.hi >= b.lo and a.lo <= b.hi then
    ev.reason = "the 95% intervals overlap"
  else
    ev.reason = string.format("the difference (%.3f µs) is within the timer's tick (%.3f µs)", math.abs(ev.diff_us),
      tick_us)
  end
  return nil, ev
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
