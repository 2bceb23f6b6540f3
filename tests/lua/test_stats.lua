-- cuda.stats_of: the statistics cuda.measure reports, on synthetic samples with known answers
-- (no driver needed). Noise is the relative half-width of the 95% interval of the mean.
local T = dofile("tests/lua/t.lua")

T.test("stats_of: mean, median, stdev, interval of 1..5", function()
  local s = cuda.stats_of({ 5, 1, 4, 2, 3 })
  T.eq(s.samples, 5); T.eq(s.mean, 3); T.eq(s.median, 3); T.eq(s.min, 1); T.eq(s.max, 5)
  T.near(s.stdev, math.sqrt(2.5), 1e-12)
  T.near(s.t95, 2.776445105, 1e-9, "t(0.975, 4)")
  local half = 2.776445105 * math.sqrt(2.5) / math.sqrt(5)
  T.near(s.ci95[1], 3 - half, 1e-9); T.near(s.ci95[2], 3 + half, 1e-9)
  T.eq(s.ci95.lo, s.ci95[1]); T.eq(s.ci95.hi, s.ci95[2])
  T.near(s.noise, half / 3, 1e-9)
  T.near(s.stdrel, math.sqrt(2.5) / 3, 1e-12)
end)

T.test("stats_of: even count, one sample, no spread", function()
  T.eq(cuda.stats_of({ 4, 1, 3, 2 }).median, 2.5)
  local one = cuda.stats_of({ 2 })
  T.eq(one.samples, 1); T.eq(one.mean, 2); T.eq(one.stdev, 0)
  T.eq(one.noise, math.huge, "one sample says nothing about the spread")
  T.eq(one.ci95[1], -math.huge); T.eq(one.ci95[2], math.huge)
  local flat = cuda.stats_of({ 1.5, 1.5, 1.5 })
  T.eq(flat.noise, 0); T.eq(flat.ci95[1], 1.5); T.eq(flat.ci95[2], 1.5)
  local zeros = cuda.stats_of({ 0, 0 })
  T.eq(zeros.noise, 0)
  T.eq(cuda.stats_of({ 0, 1 }).noise, 1.0 * 12.706204736 * math.sqrt(0.5) / math.sqrt(2) / 0.5)
end)

T.test("stats_of: Student's t quantiles for small and large n", function()
  local function t_of(n)
    local v = {}
    for i = 1, n do v[i] = i end
    return cuda.stats_of(v).t95
  end
  -- t(0.975, df) from standard tables
  local want = { [2] = 12.706204736, [3] = 4.302652730, [11] = 2.228138852, [31] = 2.042272456,
                 [41] = 2.021075390, [61] = 2.000297822, [121] = 1.979930405, [1001] = 1.962339336 }
  for n, t in pairs(want) do T.near(t_of(n), t, 2e-6, "t for n=" .. n) end
  T.near(t_of(100001), 1.959987708, 1e-8)
  -- the interval of a sample of n values with known stdev
  local v = {}
  for i = 1, 41 do v[i] = (i % 2 == 0) and 1.0 or 3.0 end -- 20 ones, 21 threes
  local s = cuda.stats_of(v)
  local mean = (20 + 63) / 41
  local var = (20 * (1 - mean) ^ 2 + 21 * (3 - mean) ^ 2) / 40
  T.near(s.mean, mean, 1e-12); T.near(s.stdev, math.sqrt(var), 1e-12)
  T.near(s.ci95[2] - s.mean, 2.021075390 * math.sqrt(var / 41), 1e-6)
end)

T.test("stats_of: bad input", function()
  T.raises(function() cuda.stats_of(5) end,
    "bad argument #1 to 'cuda.stats_of' (table of sample times expected, got number)")
  T.raises(function() cuda.stats_of({}) end, "bad argument #1 to 'cuda.stats_of' (no samples: the table is empty)")
  T.raises(function() cuda.stats_of({ 1, "2" }) end,
    "bad argument #1 to 'cuda.stats_of' (sample 2: number expected, got string)")
  T.raises(function() cuda.stats_of({ 1, 0 / 0 }) end, "(sample 2 must be a finite time >= 0, got")
  T.raises(function() cuda.stats_of({ -1 }) end, "(sample 1 must be a finite time >= 0, got -1")
  T.raises(function() cuda.stats_of({ 1, math.huge }) end, "sample 2 must be a finite time >= 0")
  -- a metatable does not change what is read: raw access only
  local proxy = setmetatable({}, { __index = function() return 1 end, __len = function() return 3 end })
  T.raises(function() cuda.stats_of(proxy) end, "the table is empty")
end)

T.done()
