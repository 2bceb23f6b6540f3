-- test_memory.lua — host arrays and cuda.compare without any driver (GPULAB_LIBCUDA points
-- nowhere): every dtype, element access and its checks, fill/iota/random, sizes, lifetimes.
local T = dofile("tests/lua/t.lua")

-- GC stress modes (tests/memory.cmake): the generational collector, or a full collection
-- before every function call.
local gc_mode = os.getenv("GPULAB_TEST_GC")
if gc_mode == "generational" then
  collectgarbage("generational")
elseif gc_mode == "every-call" then
  local collecting = false
  debug.sethook(function()
    if collecting then return end
    collecting = true
    collectgarbage()
    collecting = false
  end, "c")
end

local DTYPES = { "f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64" }
local SIZES = { f16 = 2, bf16 = 2, f32 = 4, f64 = 8, i8 = 1, i16 = 2, i32 = 4, i64 = 8,
                u8 = 1, u16 = 2, u32 = 4, u64 = 8 }
local function is_int(dt) return dt:sub(1, 1) == "i" or dt:sub(1, 1) == "u" end

local function stats_zero()
  collectgarbage(); collectgarbage()
  local s = cuda.stats()
  T.eq(s.hosts, 0, "live host arrays")
  T.eq(s.pinned_bytes, 0, "pinned bytes")
end

T.test("fields and shapes in every dtype", function()
  for _, dt in ipairs(DTYPES) do
    local h = cuda.host(dt, { 3, 4 })
    T.eq(h.dtype, dt)
    T.eq(h.numel, 12)
    T.eq(#h, 12)
    T.eq(h.nbytes, 12 * SIZES[dt], dt .. " nbytes")
    T.eq(h.ndim, 2)
    T.eq(h.pinned, false)
    local s = h.shape
    T.eq(#s, 2); T.eq(s[1], 3); T.eq(s[2], 4)
    s[1] = 99 -- a fresh table every time: changing it changes nothing
    T.eq(h.shape[1], 3)
    for i = 1, 12 do T.eq(h[i], 0, dt .. " zero-initialised") end
    local one = cuda.host(dt, 5)
    T.eq(one.ndim, 1); T.eq(one.shape[1], 5)
    T.eq(cuda.host(dt, 2.0).numel, 2, "integral float size")
  end
  stats_zero()
end)

T.test("element round trips in every dtype", function()
  local samples = {
    f16 = { 1.5, -2, 65504, -0.0999755859375, 2 ^ -24 },
    bf16 = { 1.5, -2, 3.3895313892515355e38, 2 ^ -133 },
    f32 = { 1.5, -2, 3.4028234663852886e38, 1.401298464324817e-45 },
    f64 = { 0.1, -1e300, 5e-324 },
    i8 = { -128, 127, 0 }, i16 = { -32768, 32767 }, i32 = { -2147483648, 2147483647 },
    i64 = { math.mininteger, math.maxinteger },
    u8 = { 0, 255 }, u16 = { 65535 }, u32 = { 4294967295 }, u64 = { 0, math.maxinteger },
  }
  for _, dt in ipairs(DTYPES) do
    local vals = samples[dt]
    local h = cuda.host(dt, #vals)
    for i, v in ipairs(vals) do h[i] = v end
    for i, v in ipairs(vals) do
      T.eq(h[i], v, dt .. "[" .. i .. "]")
      if is_int(dt) then T.eq(math.type(h[i]), "integer", dt .. " reads back integers") end
    end
  end
  -- u64 above 2^63-1: written and read as floats
  local u = cuda.host("u64", 1)
  u[1] = 2 ^ 63
  T.eq(u[1], 2 ^ 63); T.eq(math.type(u[1]), "float")
  u[1] = 18446744073709549568.0 -- largest double below 2^64
  T.eq(u[1], 18446744073709549568.0)
end)

T.test("float rounding on store", function()
  local h = cuda.host("f16", 4)
  h[1] = 0.1; T.eq(h[1], 0.0999755859375, "f16 0.1")
  h[2] = 1 + 2 ^ -11; T.eq(h[2], 1, "f16 tie to even (down)")
  h[3] = 1 + 3 * 2 ^ -11; T.eq(h[3], 1 + 2 ^ -9, "f16 tie to even (up)")
  h[4] = 65520; T.eq(h[4], math.huge, "f16 overflow to Inf")
  h[4] = -1e300; T.eq(h[4], -math.huge)
  h[4] = 0 / 0; T.ok(h[4] ~= h[4], "f16 NaN")
  local b = cuda.host("bf16", 3)
  b[1] = 1 + 2 ^ -8; T.eq(b[1], 1, "bf16 tie to even")
  b[2] = 1 + 2 ^ -8 + 2 ^ -30; T.eq(b[2], 1 + 2 ^ -7, "bf16 above the tie")
  b[3] = 2 ^ -134; T.eq(b[3], 0, "bf16 half the smallest subnormal")
  local f = cuda.host("f32", 2)
  f[1] = 0.1; T.eq(f[1], 0.10000000149011612)
  f[2] = 1e300; T.eq(f[2], math.huge, "f32 overflow to Inf")
end)

T.test("integer stores refuse fractions, out-of-range values and non-numbers", function()
  local i8 = cuda.host("i8", 2)
  T.raises(function() i8[1] = 2.5 end, "cuda.host: element 1: i8 takes integers, got 2.5")
  T.raises(function() i8[1] = 128 end, "128 is out of range for i8 (-128..127)")
  T.raises(function() i8[2] = -129 end, "element 2: -129 is out of range")
  T.raises(function() i8[1] = 0 / 0 end, "i8 takes integers")
  T.raises(function() i8[1] = math.huge end, "i8 takes integers")
  T.raises(function() i8[1] = "3" end, "cuda.host: element 1: number expected, got string")
  T.raises(function() i8[1] = true end, "cuda.host: element 1: number expected, got boolean")
  T.raises(function() i8[1] = nil end, "cuda.host: element 1: number expected, got nil")
  i8[1] = 3.0; T.eq(i8[1], 3, "integral float accepted")
  local u8 = cuda.host("u8", 1)
  T.raises(function() u8[1] = -1 end, "-1 is out of range for u8 (0..255)")
  T.raises(function() u8[1] = 256 end, "out of range")
  local u64 = cuda.host("u64", 1)
  T.raises(function() u64[1] = -1 end, "out of range for u64")
  T.raises(function() u64[1] = 2 ^ 64 end, "out of range for u64")
  local i64 = cuda.host("i64", 1)
  T.raises(function() i64[1] = 2 ^ 63 end, "out of range for i64")
  i64[1] = -2 ^ 63; T.eq(i64[1], math.mininteger)
  local f = cuda.host("f32", 1)
  T.raises(function() f[1] = "1" end, "cuda.host: element 1: number expected, got string")
  T.raises(function() f[1] = {} end, "cuda.host: element 1: number expected, got table")
end)

T.test("indexing checks", function()
  local h = cuda.host("f32", 3)
  T.raises(function() return h[0] end, "cuda.host: index 0 out of range 1..3")
  T.raises(function() return h[4] end, "index 4 out of range 1..3")
  T.raises(function() h[4] = 1 end, "index 4 out of range 1..3")
  T.raises(function() return h[-1] end, "index -1 out of range")
  T.raises(function() return h[1.5] end, "index must be an integer, got 1.5")
  T.raises(function() return h[0 / 0] end, "index must be an integer")
  T.raises(function() return h[true] end, "index must be an integer, got boolean")
  T.raises(function() return h[math.maxinteger] end, "out of range")
  T.raises(function() h.dtype = "f64" end, "cannot assign field 'dtype'")
  T.eq(h.no_such_field, nil)
  T.eq(h[2.0], 0, "integral float index")
end)

T.test("fill", function()
  for _, dt in ipairs(DTYPES) do
    local h = cuda.host(dt, 7)
    T.eq(h:fill(5), h, "fill returns the array")
    for i = 1, 7 do T.eq(h[i], 5, dt) end
  end
  local h = cuda.host("i16", 2)
  T.raises(function() h:fill(1.5) end, "bad argument #1 to 'h:fill' (i16 takes integers, got 1.5)")
  T.raises(function() h:fill(40000) end, "out of range for i16")
  T.raises(function() h:fill() end, "bad argument #1 to 'h:fill' (number expected, got no value)")
  T.raises(function() h.fill(42, 1) end, "bad argument #1 to 'h:fill' (cuda.host expected, got number)")
end)

T.test("iota", function()
  local h = cuda.host("f32", 5):iota()
  for i = 1, 5 do T.eq(h[i], i - 1) end
  h:iota(1, 0.5)
  T.eq(h[5], 3)
  local i = cuda.host("i8", 4):iota(-2, 3)
  T.eq(i[1], -2); T.eq(i[4], 7)
  T.raises(function() cuda.host("i8", 200):iota() end,
    "calling 'h:iota' on bad self (last value 199 is out of range for i8 (-128..127))")
  T.raises(function() cuda.host("i8", 200):iota(-50) end,
    "bad argument #1 to 'h:iota' (last value 149 is out of range for i8 (-128..127))")
  T.raises(function() cuda.host("i8", 3):iota(0, 100) end,
    "bad argument #2 to 'h:iota' (last value 200 is out of range for i8 (-128..127))")
  T.raises(function() cuda.host("u8", 2):iota(-1) end,
    "bad argument #1 to 'h:iota' (first value -1 is out of range for u8 (0..255))")
  T.raises(function() cuda.host("i64", 3):iota(math.maxinteger) end,
    "bad argument #1 to 'h:iota' (the sequence overflows 64-bit integers)")
  T.raises(function() cuda.host("i64", 3):iota(0, math.maxinteger) end,
    "bad argument #2 to 'h:iota' (the sequence overflows 64-bit integers)")
  T.raises(function() cuda.host("i32", 3):iota(0.5) end,
    "bad argument #1 to 'h:iota' (integer expected for the i32 array, got 0.5)")
  T.raises(function() cuda.host("i32", 3):iota(0, 1.5) end,
    "bad argument #2 to 'h:iota' (integer expected for the i32 array, got 1.5)")
  T.raises(function() cuda.host("f32", 3):iota(0 / 0) end, "bad argument #1 to 'h:iota' (number expected, got NaN)")
  T.raises(function() cuda.host("f32", 3):iota("1") end, "bad argument #1 to 'h:iota' (number expected, got string)")
  T.raises(function() cuda.host("i32", 3):iota(0, "2") end, "bad argument #2 to 'h:iota' (number expected, got string)")
  local u = cuda.host("u16", 3):iota(65535, -1)
  T.eq(u[3], 65533, "descending")
  local b = cuda.host("bf16", 300):iota()
  T.eq(b[258], 256, "bf16 257 rounds to even 256"); T.eq(b[259], 258)
end)

-- splitmix64 + xoshiro256**, written again here from the published description, to check
-- the C generator bit for bit.
local function reference_rng(seed)
  local x = seed
  local function splitmix()
    x = x + 0x9E3779B97F4A7C15
    local z = x
    z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * 0x94D049BB133111EB
    return z ~ (z >> 31)
  end
  local s = { splitmix(), splitmix(), splitmix(), splitmix() }
  local function rotl(v, k) return (v << k) | (v >> (64 - k)) end
  return function()
    local result = rotl(s[2] * 5, 7) * 9
    local t = s[2] << 17
    s[3] = s[3] ~ s[1]; s[4] = s[4] ~ s[2]; s[2] = s[2] ~ s[3]; s[1] = s[1] ~ s[4]
    s[3] = s[3] ~ t; s[4] = rotl(s[4], 45)
    return (result >> 11) * 2.0 ^ -53
  end
end

T.test("random: documented generator, deterministic", function()
  local h = cuda.host("f64", 1000):random { seed = 1 }
  -- seed 1, f64 in [0, 1): the first values, for the README
  T.eq(h[1], 0.70292183315885048); T.eq(h[2], 0.52043661993885693)
  T.eq(h[3], 0.5741057000197225); T.eq(h[4], 0.39132860204190445)
  local ref = reference_rng(1)
  for i = 1, 1000 do T.eq(h[i], ref(), "f64 element " .. i) end
  local again = cuda.host("f64", 1000):random { seed = 1 }
  T.ok(cuda.compare(h, again).ok, "same seed, same values")
  local other = cuda.host("f64", 1000):random { seed = 2 }
  T.eq(cuda.compare(h, other).mismatches, 1000, "another seed, other values")
  -- ranges: floats lo + (hi-lo)*u, integers lo + floor((hi-lo)*u)
  local f = cuda.host("f32", 1000):random { seed = 7, lo = -3, hi = 5 }
  ref = reference_rng(7)
  local lo_seen, hi_seen = math.huge, -math.huge
  for i = 1, 1000 do
    local want = string.unpack("f", string.pack("f", -3 + 8 * ref()))
    T.eq(f[i], want, "f32 element " .. i)
    lo_seen = math.min(lo_seen, f[i]); hi_seen = math.max(hi_seen, f[i])
  end
  T.ok(lo_seen >= -3 and lo_seen < -2.9 and hi_seen <= 5 and hi_seen > 4.9, "spread over [lo, hi)")
  local i32 = cuda.host("i32", 6):random { seed = 1 }
  local want = { 70, 52, 57, 39, 69, 14 } -- seed 1, integers in the default [0, 100)
  for i = 1, 6 do T.eq(i32[i], want[i], "i32 seed 1") end
  local i8 = cuda.host("i8", 2000):random { seed = 3, lo = -128, hi = 128 }
  ref = reference_rng(3)
  local counts = {}
  for i = 1, 2000 do
    T.eq(i8[i], -128 + math.floor(256 * ref()), "i8 element " .. i)
    counts[i8[i]] = true
  end
  T.ok(counts[-128] and counts[127], "both ends of the integer range occur")
  local wide = cuda.host("i64", 1000):random { seed = 5, lo = math.mininteger, hi = math.maxinteger }
  local neg, pos = 0, 0
  for k = 1, 1000 do
    if wide[k] < 0 then neg = neg + 1 else pos = pos + 1 end
    T.ok(wide[k] < math.maxinteger, "i64 below hi")
  end
  T.ok(neg > 400 and pos > 400, "the full i64 range is covered (" .. neg .. " negative)")
  local d = cuda.host("f64", 3):random()
  T.eq(d[1], reference_rng(0)(), "default seed is 0")
end)

T.test("random: bad options", function()
  local h = cuda.host("f32", 2)
  T.raises(function() h:random { seed = 1.5 } end,
    "bad argument #1 to 'h:random' (field 'seed': integer expected, got 1.5)")
  T.raises(function() h:random { lo = 1, hi = 1 } end, "need finite lo < hi")
  T.raises(function() h:random { lo = 0 / 0 } end,
    "bad argument #1 to 'h:random' (field 'lo': number expected, got NaN)")
  T.raises(function() h:random { lo = -1e308, hi = 1e308 } end, "need finite lo < hi")
  T.raises(function() h:random { sed = 1 } end, "bad argument #1 to 'h:random' (unknown field 'sed'")
  T.raises(function() h:random(5) end, "table expected")
  local i = cuda.host("u8", 2)
  T.raises(function() i:random { lo = -1, hi = 10 } end,
    "bad argument #1 to 'h:random' (field 'lo': lo -1 is out of range for u8 (0..255))")
  T.raises(function() i:random { lo = 0, hi = 257 } end, "hi-1 256 is out of range for u8")
  T.raises(function() i:random { lo = 0.5 } end,
    "bad argument #1 to 'h:random' (field 'lo': integer expected, got 0.5)")
end)

T.test("totable and tostring", function()
  local h = cuda.host("i16", { 2, 5 }):iota(1)
  local t = h:totable()
  T.eq(#t, 10); T.eq(t[10], 10); T.eq(math.type(t[1]), "integer")
  T.eq(tostring(h), "cuda.host i16[2x5] (20 B) {1, 2, 3, 4, 5, 6, 7, 8, ...}")
  local f = cuda.host("f32", 3):iota(0.5)
  T.eq(tostring(f), "cuda.host f32[3] (12 B) {0.5, 1.5, 2.5}")
  local big = cuda.host("u8", 4096)
  T.ok(tostring(big):find("(4.0 KiB)", 1, true), tostring(big))
  f:free()
  T.eq(tostring(f), "cuda.host f32[3] (freed)")
end)

T.test("cuda.compare", function()
  local a = cuda.host("f32", 4):iota(1)
  local b = cuda.host("f64", 4):iota(1)
  local r = cuda.compare(a, b)
  T.eq(r.ok, true); T.eq(r.mismatches, 0); T.eq(r.first_bad, nil); T.eq(r.max_abs, 0); T.eq(r.max_rel, 0)
  b[3] = 3.5; b[4] = 4.01
  r = cuda.compare(a, b)
  T.eq(r.ok, false); T.eq(r.mismatches, 2); T.eq(r.first_bad, 3)
  T.eq(r.max_abs, 0.5); T.near(r.max_rel, 0.5 / 3.5, 1e-15)
  r = cuda.compare(a, b, { atol = 0.5 })
  T.eq(r.mismatches, 0, "|a-b| <= atol matches")
  r = cuda.compare(a, b, { atol = 0.01, rtol = 0.1 })
  T.eq(r.mismatches, 1, "0.5 > 0.01 + 0.1*3.5"); T.eq(r.first_bad, 3)
  r = cuda.compare(a, b, { rtol = 0.15 })
  T.eq(r.mismatches, 0, "0.5 <= 0.15 * 3.5")
  -- rtol scales with |b|, not |a|
  local x, y = cuda.host("f64", 1), cuda.host("f64", 1)
  x[1] = 2; y[1] = 1
  T.eq(cuda.compare(x, y, { rtol = 0.9 }).mismatches, 1)
  T.eq(cuda.compare(y, x, { rtol = 0.9 }).mismatches, 0)
  -- NaN equals NaN only; infinities equal themselves
  local n1, n2 = cuda.host("f32", 4), cuda.host("f16", 4)
  n1[1] = 0 / 0; n2[1] = 0 / 0
  n1[2] = math.huge; n2[2] = math.huge
  n1[3] = 0 / 0; n2[3] = 1
  n1[4] = 1; n2[4] = -math.huge
  r = cuda.compare(n1, n2, { atol = 1e9 })
  T.eq(r.mismatches, 2); T.eq(r.first_bad, 3); T.eq(r.max_abs, math.huge)
  -- b = 0 and a ~= 0 is an infinite relative error
  local z1, z2 = cuda.host("i32", 1), cuda.host("u8", 1)
  z1[1] = -1
  r = cuda.compare(z1, z2, { atol = 1 })
  T.eq(r.ok, true); T.eq(r.max_rel, math.huge); T.eq(r.max_abs, 1)
end)

T.test("cuda.compare: bad input", function()
  local a, b = cuda.host("f32", 4), cuda.host("f32", 5)
  T.raises(function() cuda.compare(a, b) end, "bad argument #2 to 'cuda.compare' (element counts differ (4 and 5))")
  T.raises(function() cuda.compare(a, {}) end,
    "bad argument #2 to 'cuda.compare' (cuda.array or cuda.host expected, got table)")
  T.raises(function() cuda.compare(nil, a) end,
    "bad argument #1 to 'cuda.compare' (cuda.array or cuda.host expected, got nil)")
  T.raises(function() cuda.compare(a, a, { atol = -1 }) end, "must not be negative")
  T.raises(function() cuda.compare(a, a, { rtol = 0 / 0 }) end,
    "bad argument #3 to 'cuda.compare' (field 'rtol': number expected, got NaN)")
  T.raises(function() cuda.compare(a, a, { tol = 1 }) end, "bad argument #3 to 'cuda.compare' (unknown field 'tol'")
  T.raises(function() cuda.compare(a, a, "x") end, "table expected")
  b:free()
  T.raises(function() cuda.compare(a, b) end, "bad argument #2 to 'cuda.compare' (cuda.host was freed)")
end)

T.test("sizes: bad types, NaN, negative, fractional, overflowing", function()
  T.raises(function() cuda.host("f32", 0) end, "bad argument #2 to 'cuda.host' (size must be positive, got 0")
  T.raises(function() cuda.host("f32", -5) end, "size must be positive, got -5")
  T.raises(function() cuda.host("f32", 2.5) end, "size must be an integer, got 2.5")
  T.raises(function() cuda.host("f32", 0 / 0) end, "size must be an integer")
  T.raises(function() cuda.host("f32", math.huge) end, "size must be an integer")
  T.raises(function() cuda.host("f32", "8") end, "element count or shape table expected, got string")
  T.raises(function() cuda.host("f32") end, "element count or shape table expected, got no value")
  T.raises(function() cuda.host("f32", {}) end, "shape must have 1 to 8 dimensions, got 0")
  T.raises(function() cuda.host("f32", { 1, 1, 1, 1, 1, 1, 1, 1, 1 }) end, "1 to 8 dimensions, got 9")
  T.raises(function() cuda.host("f32", { 4, 0 }) end, "dimension 2 size must be positive, got 0")
  T.raises(function() cuda.host("f32", { 4, 1.5 }) end, "dimension 2 size must be an integer, got 1.5")
  T.raises(function() cuda.host("f32", { 4, "x" }) end, "dimension 2 size must be an integer, got string")
  T.raises(function() cuda.host("f32", { 2 ^ 32, 2 ^ 32 }) end, "the element count overflows 64 bits")
  T.raises(function() cuda.host("u8", { 2 ^ 62, 4 }) end, "the element count overflows 64 bits")
  T.raises(function() cuda.host("f64", 2 ^ 61) end, "f64 elements: the byte size overflows 64 bits")
  T.raises(function() cuda.host("f32", math.maxinteger) end, "the byte size overflows 64 bits")
  T.raises(function() cuda.host("f32", 2 ^ 60) end, "cuda.host: cannot allocate 4611686018427387904 bytes")
  T.raises(function() cuda.host(1, 4) end, "bad argument #1 to 'cuda.host' (dtype name expected, got number)")
  T.raises(function() cuda.host("float", 4) end, "unknown dtype 'float'")
  T.raises(function() cuda.host("f32", 4, { pinned = 1 }) end,
    "bad argument #3 to 'cuda.host' (field 'pinned': boolean expected, got number)")
  T.raises(function() cuda.host("f32", 4, { pined = true }) end,
    "bad argument #3 to 'cuda.host' (unknown field 'pined'")
  T.raises(function() cuda.host("f32", 4, 7) end, "table expected")
  stats_zero()
end)

T.test("without a driver: pinned memory and device arrays raise, host arrays work", function()
  T.raises(function() cuda.host("f32", 4, { pinned = true }) end, "cuda.host: ")
  T.raises(function() cuda.array("f32", 4) end, "cuda.array: ")
  T.raises(function() cuda.array("f32", -1) end, "bad argument #2 to 'cuda.array' (size must be positive")
  T.raises(function() cuda.array("half", 1) end, "bad argument #1 to 'cuda.array' (unknown dtype 'half'")
  do
    local a, b = cuda.host("f32", 4):iota(), cuda.host("f32", 4)
    b:copy_from(a)
    T.eq(b[4], 3, "host to host copy needs no driver")
    T.raises(function() b:copy_from(cuda.host("f64", 4)) end,
        "bad argument #1 to 'h:copy_from' (dtype mismatch (destination f32, source f64); pass {reinterpret=true} " ..
        "to copy the bytes as they are, or {convert=true} to convert the values (host arrays))")
    T.raises(function() b:copy_from(cuda.host("f64", 4), { reinterpret = true }) end,
      "bad argument #1 to 'h:copy_from' (size mismatch (destination 16 bytes, source 32 bytes))")
    T.raises(function() b:copy_from(a, 0) end, "a host-to-host copy takes no stream")
    T.raises(function() b:copy_from("x") end,
      "bad argument #1 to 'h:copy_from' (cuda.array or cuda.host expected, got string)")
    local i = cuda.host("i32", 4):iota(7)
    T.raises(function() b:copy_from(i) end,
        "bad argument #1 to 'h:copy_from' (dtype mismatch (destination f32, source i32); pass {reinterpret=true} " ..
        "to copy the bytes as they are, or {convert=true} to convert the values (host arrays))")
    b:copy_from(i, { reinterpret = true }) -- same byte size, the bytes are copied as they are
    T.eq(string.pack("f", b[1]), string.pack("i4", 7))
  end
  stats_zero()
end)

T.test("free, use after free, __close, __gc, wrong self", function()
  local h = cuda.host("f32", 4)
  T.eq(cuda.stats().hosts >= 1, true)
  h:free(); h:free() -- idempotent
  T.raises(function() return h[1] end, "cuda.host was freed")
  T.raises(function() h[1] = 1 end, "cuda.host was freed")
  T.raises(function() return #h end, "cuda.host was freed")
  T.raises(function() return h.numel end, "field 'numel': cuda.host was freed")
  T.raises(function() h:fill(1) end, "h:fill: cuda.host was freed")
  T.raises(function() h:iota() end, "h:iota: cuda.host was freed")
  T.raises(function() h:random() end, "h:random: cuda.host was freed")
  T.raises(function() h:totable() end, "h:totable: cuda.host was freed")
  T.raises(function() cuda.host("f32", 4):copy_from(h) end, "bad argument #1 to 'h:copy_from' (cuda.host was freed)")
  do
    local c <close> = cuda.host("u8", 100)
    c[1] = 1
  end
  stats_zero()
  -- finalizers run by hand on other types do nothing and never raise
  local free = cuda.host("f32", 1).free
  free(42); free(nil); free({}); free(io.stdout)
  T.raises(function() cuda.host("f32", 1).iota({}) end, "bad argument #1 to 'h:iota' (cuda.host expected, got table)")
  collectgarbage(); collectgarbage()
  local before = cuda.stats().hosts
  local many = {} -- luacheck: ignore 241
  for i = 1, 200 do many[i] = cuda.host("f64", 1000) end
  T.eq(cuda.stats().hosts, before + 200)
  many = nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("metamethods called by hand through debug.getmetatable", function()
  local h = cuda.host("f32", 4)
  local mt = debug.getmetatable(h)
  T.eq(getmetatable(h), "gpulab object", "scripts see no internals")
  mt.__gc(h); mt.__gc(h); mt.__close(h)
  T.raises(function() return h[1] end, "cuda.host was freed")
  mt.__gc(42); mt.__gc(nil); mt.__close("x")
  T.raises(function() mt.__index(42, 1) end, "cuda.host expected, got number")
  T.raises(function() mt.__newindex({}, 1, 1) end, "cuda.host expected, got table")
  T.raises(function() mt.__len(io.stdout) end, "cuda.host expected")
  T.raises(function() mt.__tostring(1) end, "cuda.host expected")
  T.eq(mt.__tostring(h), "cuda.host f32[4] (freed)")
  stats_zero()
end)

T.done()
