-- test_host_ops.lua — views, offset/converting/reinterpreting copies, the bool dtype and the bulk
-- host operations (transpose, element-wise arithmetic, reductions, matmul), without a driver.
local T = dofile("tests/lua/t.lua")

if os.getenv("GPULAB_TEST_GC") == "every-call" then
  local collecting = false
  debug.sethook(function()
    if collecting then return end
    collecting = true
    collectgarbage()
    collecting = false
  end, "c")
end

local function stats_zero()
  collectgarbage(); collectgarbage()
  T.eq(cuda.stats().hosts, 0, "live host arrays")
end

T.test("views share memory, keep it alive, and check their range", function()
  local h = cuda.host("f32", 10):iota(1)
  local v = h:view(3, 4)
  T.eq(v.numel, 4); T.eq(v.dtype, "f32"); T.eq(v[1], 3); T.eq(v[4], 6)
  v[2] = 40
  T.eq(h[4], 40, "a write through the view is seen by the parent")
  h[6] = 60
  T.eq(v[4], 60, "and the other way")
  T.ok(tostring(v):find("cuda.host f32[4] view (16 B) {3, 40, 5, 60}", 1, true), tostring(v))
  local m = h:view(1, { 2, 5 })
  T.eq(m.ndim, 2); T.eq(m.shape[2], 5); T.eq(m[7], 7)
  local rest = h:view(8)
  T.eq(rest.numel, 3, "without a count: to the end"); T.eq(rest[3], 10)
  rest:free()
  local vv = v:view(2, 2)
  T.eq(vv[1], 40, "a view of a view")
  T.raises(function() h:view(0, 1) end, "bad argument #1 to 'h:view' (first element 0 out of range 1..10)")
  T.raises(function() h:view(11, 1) end, "first element 11 out of range 1..10")
  T.raises(function() h:view(8, 4) end,
    "bad argument #2 to 'h:view' (elements 8..11 are past the end (the array has 10))")
  T.raises(function() h:view(1.5, 1) end, "first element must be an integer, got 1.5")
  T.raises(function() h:view(1, 0) end, "size must be positive")
  T.raises(function() h:view(1, { 3, 4 }) end, "bad argument #2 to 'h:view' (elements 1..12 are past the end")
  -- the parent freed: the view still reads the memory it shares
  h:free()
  T.eq(v[2], 40, "the view keeps the memory")
  T.eq(vv[2], 5)
  T.eq(cuda.stats().hosts, 3, "three views live, the parent is gone")
  v, vv, m = nil, nil, nil -- luacheck: ignore 311
  stats_zero()
  -- a dropped parent is kept alive by its view
  local w = cuda.host("i32", 8):iota(10):view(5, 2)
  collectgarbage(); collectgarbage()
  T.eq(w[1], 14)
  T.eq(cuda.stats().hosts, 2, "the parent lives on through the view")
  w = nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("offset and count copies", function()
  local a = cuda.host("f64", 10):iota(1)
  local b = cuda.host("f64", 6)
  b:copy_from(a, { src_offset = 2, dst_offset = 1, count = 4 })
  T.eq(b[1], 0); T.eq(b[2], 3); T.eq(b[5], 6); T.eq(b[6], 0)
  b:copy_from(a, { src_offset = 4 }) -- everything from the offsets on: 6 and 6 elements
  T.eq(b[1], 5); T.eq(b[6], 10)
  b:copy_from(a, { count = 0 })
  T.raises(function() b:copy_from(a) end, "size mismatch (destination 48 bytes, source 80 bytes)")
  T.raises(function() b:copy_from(a, { src_offset = 3 }) end,
    "size mismatch after the offsets (destination 6 elements of f64 left, source 7 elements of f64)")
  T.raises(function() b:copy_from(a, { count = 7 }) end,
    "bad argument #2 to 'h:copy_from' (field 'count': 7 does not fit (destination has 6 elements of f64 after " ..
    "dst_offset, source 10 elements of f64 after src_offset))")
  T.raises(function() b:copy_from(a, { dst_offset = 7, count = 0 }) end,
    "bad argument #2 to 'h:copy_from' (field 'dst_offset': 7 is past the end of the destination (6 elements))")
  T.raises(function() b:copy_from(a, { src_offset = 11, count = 0 }) end,
    "bad argument #2 to 'h:copy_from' (field 'src_offset': 11 is past the end of the source (10 elements))")
  T.raises(function() b:copy_from(a, { count = -1 }) end,
    "bad argument #2 to 'h:copy_from' (field 'count': must not be negative, got -1)")
  T.raises(function() b:copy_from(a, { src_offset = -1, count = 1 }) end, "must not be negative")
  T.raises(function() b:copy_from(a, { cnt = 1 }) end, "bad argument #2 to 'h:copy_from' (unknown field 'cnt'")
  T.raises(function() b:copy_from(a, { count = 1.5 }) end,
    "bad argument #2 to 'h:copy_from' (field 'count': integer expected, got 1.5)")
  T.raises(function() b:copy_from(a, { count = 1, stream = 3 }) end,
    "bad argument #2 to 'h:copy_from' (field 'stream': cuda.stream expected, got number)")
  if cuda.available() then
    T.raises(function() b:copy_from(a, { count = 1, stream = cuda.stream() }) end,
      "bad argument #2 to 'h:copy_from' (field 'stream': a host-to-host copy takes no stream)")
  end
  -- overlapping copies within one array behave like memmove
  local o = cuda.host("i32", 8):iota(1)
  o:view(3, 6):copy_from(o:view(1, 6))
  T.eq(o[3], 1); T.eq(o[8], 6)
  a, b, o = nil, nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("2-D copies: rows of count elements, pitches in elements", function()
  local m = cuda.host("i32", { 6, 8 }):iota(0) -- m[r][c] = 8r + c (0-based)
  local tile = cuda.host("i32", { 3, 4 })
  tile:copy_from(m, { rows = 3, count = 4, src_offset = 2 * 8 + 1 }) -- rows 2..4, columns 1..4
  T.eq(tile[1], 17); T.eq(tile[4], 20); T.eq(tile[5], 25); T.eq(tile[12], 36)
  -- back into the matrix at another place, with explicit pitches
  m:copy_from(tile, { rows = 3, count = 4, dst_offset = 4, dst_pitch = 8, src_pitch = 4 })
  T.eq(m[5], 17); T.eq(m[8], 20); T.eq(m[13], 25); T.eq(m[9], 8, "untouched between rows")
  -- converting 2-D copy, every row checked before any is written
  local f = cuda.host("f32", { 2, 3 }):iota(1)
  local i8 = cuda.host("i8", { 2, 2 }):fill(9)
  i8:copy_from(f, { rows = 2, count = 2, convert = true })
  T.eq(i8[3], 4)
  f[6] = 0.5
  f[5] = 1000
  T.raises(function() i8:copy_from(f, { rows = 2, count = 2, src_offset = 1, convert = true }) end,
    "bad argument #1 to 'h:copy_from' (source element 5 (1000) does not convert to i8 exactly)")
  T.eq(i8[1], 1, "nothing written")
  T.raises(function() tile:copy_from(m, { rows = 4, count = 4 }) end,
    "bad argument #2 to 'h:copy_from' (field 'rows': 4 rows of 4 elements, 4 apart from offset 0, do not fit the " ..
    "destination (12 elements))")
  T.raises(function() tile:copy_from(m, { rows = 3, count = 4, src_offset = 40 }) end,
    "do not fit the source (48 elements))")
  T.raises(function() tile:copy_from(m, { rows = 2 }) end,
    "bad argument #2 to 'h:copy_from' (field 'rows': a 2-D copy needs 'count', the elements of each row)")
  T.raises(function() tile:copy_from(m, { rows = 2, count = 4, dst_pitch = 3 }) end,
    "bad argument #2 to 'h:copy_from' (field 'dst_pitch': 3 is shorter than a row (count 4): rows would overlap)")
  T.raises(function() tile:copy_from(m, { src_pitch = 3, count = 1 }) end, "give 'rows' too")
  T.raises(function() tile:copy_from(cuda.host("u32", 48), { rows = 2, count = 2, reinterpret = true }) end,
    "bad argument #2 to 'h:copy_from' (field 'reinterpret': a 2-D copy ({rows=}) between different dtypes " ..
    "converts only ({convert=true}))")
  m, tile, f, i8 = nil, nil, nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("dtypes: refused, reinterpreted, or converted on request", function()
  local f = cuda.host("f32", 4):iota(1)
  local i = cuda.host("i32", 4)
  T.raises(function() i:copy_from(f) end,
      "bad argument #1 to 'h:copy_from' (dtype mismatch (destination i32, source f32); pass {reinterpret=true} to " ..
      "copy the bytes as they are, or {convert=true} to convert the values (host arrays))")
  i:copy_from(f, { reinterpret = true })
  T.eq(i[2], string.unpack("i4", string.pack("f", 2)), "the bytes as they are")
  i:copy_from(f, { convert = true })
  T.eq(i[4], 4); T.eq(math.type(i[4]), "integer")
  T.raises(function() i:copy_from(f, { convert = true, reinterpret = true }) end,
    "bad argument #2 to 'h:copy_from' (field 'convert': excludes 'reinterpret')")
  local frac = cuda.host("f64", 3)
  frac[1] = 1; frac[2] = 2.5; frac[3] = 3
  i:fill(-7)
  T.raises(function() i:view(1, 3):copy_from(frac, { convert = true }) end,
    "bad argument #1 to 'h:copy_from' (source element 2 (2.5) does not convert to i32 exactly)")
  T.eq(i[1], -7, "a refused conversion writes nothing")
  T.raises(function() i:view(1, 2):copy_from(frac, { convert = true, src_offset = 1 }) end,
    "source element 2 (2.5)", "the index counts in the source array")
  local big = cuda.host("i64", 2); big[1] = 300; big[2] = -1
  local u8 = cuda.host("u8", 2)
  T.raises(function() u8:copy_from(big, { convert = true }) end,
    "bad argument #1 to 'h:copy_from' (source element 1 (300) does not convert to u8 exactly)")
  local h16 = cuda.host("f16", 4):copy_from(cuda.host("f64", 4):iota(0, 0.1), { convert = true })
  T.eq(h16[2], 0.0999755859375, "f64 -> f16 rounds to nearest even")
  -- reinterpretation with different element sizes: counts in destination elements
  local bytes = cuda.host("u8", 8)
  bytes:copy_from(cuda.host("u32", 2):fill(0x01020304), { reinterpret = true })
  T.eq(bytes[1], 4); T.eq(bytes[4], 1)
  local w = cuda.host("u16", 2)
  w:copy_from(bytes, { reinterpret = true, count = 2, src_offset = 4 })
  T.eq(w[1], 0x0304)
  T.raises(function() w:copy_from(bytes, { reinterpret = true, count = 3 }) end,
    "bad argument #2 to 'h:copy_from' (field 'count': 3 does not fit")
  f, i, frac, big, u8, h16, bytes, w = nil, nil, nil, nil, nil, nil, nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("bool dtype", function()
  local b = cuda.host("bool", 5)
  T.eq(b.nbytes, 5); T.eq(b[1], false)
  b[2] = true
  T.eq(b[2], true); T.eq(math.type(b[2]), nil)
  T.raises(function() b[1] = 1 end, "cuda.host: element 1: bool takes true or false, got number")
  T.raises(function() b[1] = nil end, "bool takes true or false, got nil")
  b:fill(true)
  T.eq(b[5], true)
  T.raises(function() b:fill(0) end, "bad argument #1 to 'h:fill' (bool takes true or false, got number)")
  T.eq(b:sum(), 5, "sum counts the true elements")
  b[3] = false
  T.eq(b:sum(), 4)
  local lo, at = b:min()
  T.eq(lo, false); T.eq(at, 3)
  T.eq(select(1, b:max()), true)
  T.eq(tostring(b), "cuda.host bool[5] (5 B) {true, true, false, true, true}")
  T.eq(b:totable()[3], false)
  T.raises(function() b:iota() end, "calling 'h:iota' on bad self (a bool array has no sequence (use fill or random))")
  T.raises(function() b:add(1) end, "calling 'h:add' on bad self (a bool array takes no arithmetic)")
  T.raises(function() b:dot(b) end,
    "calling 'h:dot' on bad self (bool arrays have no dot product (h:sum() counts the true elements))")
  T.raises(function() cuda.host("f32", 5):dot(b) end, "bad argument #1 to 'h:dot' (bool arrays have no dot product")
  -- random: true with probability p, reproducible
  local r = cuda.host("bool", 10000):random { seed = 3, p = 0.25 }
  local n = r:sum()
  T.ok(n > 2300 and n < 2700, "about a quarter true: " .. n)
  T.eq(cuda.host("bool", 10000):random { seed = 3, p = 0.25 }:sum(), n, "same seed, same values")
  T.eq(cuda.host("bool", 100):random { p = 0 }:sum(), 0)
  T.eq(cuda.host("bool", 100):random { p = 1 }:sum(), 100)
  T.raises(function() r:random { lo = 0 } end, "a bool array takes {p=}")
  T.raises(function() r:random { p = 2 } end, "bad argument #1 to 'h:random' (field 'p': must be 0 <= p <= 1, got 2)")
  T.raises(function() cuda.host("f32", 2):random { p = 0.5 } end,
    "bad argument #1 to 'h:random' (field 'p': is for bool arrays (this one is f32))")
  -- compare and conversions
  T.ok(cuda.compare(b, cuda.host("bool", 5):fill(true)).mismatches == 1)
  local bytes = cuda.host("u8", 5):copy_from(b, { reinterpret = true })
  T.eq(bytes[1], 1); T.eq(bytes[3], 0)
  bytes[1] = 7
  b:copy_from(bytes, { reinterpret = true })
  T.eq(b[1], true, "any non-zero byte reads as true")
  local f = cuda.host("f32", 5):copy_from(b, { convert = true })
  T.eq(f[1], 1); T.eq(f[3], 0)
  f[2] = 0 / 0
  b:copy_from(f, { convert = true })
  T.eq(b[2], true, "NaN converts to true"); T.eq(b[3], false)
  T.eq(cuda.host("bool", { 2, 2 }).shape[2], 2)
  b, r, bytes, f = nil, nil, nil, nil -- luacheck: ignore 311
  stats_zero()
end)

-- a reference transpose in plain Lua
local function lua_transpose(h, rows, cols)
  local t = cuda.host(h.dtype, { cols, rows })
  for r = 1, rows do
    for c = 1, cols do t[(c - 1) * rows + r] = h[(r - 1) * cols + c] end
  end
  return t
end

T.test("transpose", function()
  for _, dt in ipairs({ "u8", "f16", "f32", "f64", "bool" }) do
    for _, rc in ipairs({ { 1, 1 }, { 3, 70 }, { 33, 31 }, { 64, 64 } }) do
      local rows, cols = rc[1], rc[2]
      local h = cuda.host(dt, { rows, cols })
      if dt == "bool" then h:random { seed = rows } else h:random { seed = rows, lo = 0, hi = 100 } end
      local t = h:transpose()
      T.eq(t.shape[1], cols); T.eq(t.shape[2], rows)
      T.eq(cuda.compare(t, lua_transpose(h, rows, cols)).mismatches, 0, dt .. " " .. rows .. "x" .. cols)
    end
  end
  local h = cuda.host("f32", { 4, 6 }):iota()
  local into = cuda.host("f32", 24)
  T.eq(h:transpose(into), into, "returns the destination")
  T.eq(into[2], 6)
  T.raises(function() cuda.host("f32", 24):transpose() end,
    "calling 'h:transpose' on bad self (2-D array expected, got 1 dimension (h:view(1, {rows, cols}) gives one))")
  T.raises(function() h:transpose(cuda.host("f64", 24)) end, "dtype mismatch (destination f64, source f32)")
  T.raises(function() h:transpose(cuda.host("f32", { 4, 6 })) end, "the result is 6x4 (24 elements)")
  T.raises(function() h:transpose(cuda.host("f32", 23)) end, "the destination holds 23")
  T.raises(function() h:transpose(h:view(1, 24)) end,
    "bad argument #1 to 'h:transpose' (the destination overlaps the source)")
  h, into = nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("element-wise arithmetic", function()
  local x = cuda.host("f32", 5):iota(1)
  local y = cuda.host("f32", 5):fill(10)
  T.eq(y:add(x), y); T.eq(y[5], 15)
  y:sub(1); T.eq(y[1], 10)
  y:mul(x); T.eq(y[2], 22)
  y:div(2); T.eq(y[2], 11)
  y:scale(0.5); T.eq(y[2], 5.5)
  y:axpy(2, x); T.eq(y[2], 9.5); T.eq(y[5], 2 * 5 + 0.5 * (14 * 5 / 2))
  local third = cuda.host("f32", 1):fill(1):div(3)
  T.eq(third[1], string.unpack("f", string.pack("f", 1 / 3)), "rounded once to f32")
  -- mixed dtypes into a float destination
  local h16 = cuda.host("f16", 5):iota(1)
  local d = cuda.host("f64", 5):add(h16):add(cuda.host("i8", 5):fill(-1))
  T.eq(d[5], 4)
  -- integers wrap and refuse fractions and division by zero before writing
  local i = cuda.host("i8", 3):fill(100)
  i:add(100); T.eq(i[1], -56, "wraps like the GPU")
  i:fill(7):div(-2); T.eq(i[1], -3, "truncates toward zero")
  T.raises(function() i:add(0.5) end,
    "bad argument #1 to 'h:add' (the operand must be an integer for a i8 array, got 0.5)")
  T.raises(function() i:add(x:view(1, 3)) end, "a i8 destination takes integer operands, got f32")
  local z = cuda.host("i32", 3):iota(1)
  local den = cuda.host("i32", 3):iota(-1) -- -1, 0, 1
  T.raises(function() z:div(den) end, "bad argument #1 to 'h:div' (integer division by zero (operand element 2))")
  T.eq(z[1], 1, "nothing written")
  T.raises(function() z:div(0) end, "bad argument #1 to 'h:div' (integer division by zero)")
  local u = cuda.host("u64", 1); u[1] = math.maxinteger
  u:mul(2); T.eq(u[1], 2.0 ^ 64 - 2, "u64 wraps")
  -- operand checks
  T.raises(function() y:add(cuda.host("f32", 4)) end,
    "bad argument #1 to 'h:add' (element counts differ (destination 5, operand 4))")
  T.raises(function() y:add("1") end,
    "bad argument #1 to 'h:add' (the operand: number or cuda.host expected, got string)")
  T.raises(function() y:scale(x) end,
    "bad argument #1 to 'h:scale' (the factor must be a number (h:mul(x) multiplies by an array))")
  T.raises(function() y:axpy(x, x) end,
    "bad argument #1 to 'h:axpy' (the scale factor: number or cuda.host expected, got cuda.host)")
  -- a shifted view of itself reads the old values
  local s = cuda.host("i32", 6):iota(1)
  s:view(2, 5):add(s:view(1, 5))
  T.eq(s[2], 3); T.eq(s[6], 11, "6 + 5, not a running sum")
  s:add(s); T.eq(s[1], 2)
  x, y, third, h16, d, i, z, den, u, s = nil, nil, nil, nil, nil, nil, nil, nil, nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("apply: named functions of every element", function()
  local h = cuda.host("f64", 5):iota(-2) -- -2 .. 2
  T.eq(h:apply("relu"), h)
  T.eq(h[1], 0); T.eq(h[5], 2); T.eq(1 / h[1], math.huge, "relu gives +0")
  h:iota(-2):apply("abs"); T.eq(h[1], 2)
  h:iota(0):apply("exp"); T.eq(h[2], math.exp(1))
  h:apply("log"); T.near(h[3], 2, 1e-15)
  h:iota(1):apply("sigmoid"); T.eq(h[1], 1 / (1 + math.exp(-1)))
  h:iota(0, 0.5):apply("rint"); T.eq(h[2], 0, "0.5 rounds to even"); T.eq(h[4], 2, "1.5 rounds to even")
  h:iota(1):apply("square"):apply("sqrt"); T.eq(h[5], 5)
  h:iota(1):apply("recip"):apply("neg"); T.eq(h[4], -0.25)
  local f = cuda.host("f32", 3):iota(1):apply("tanh")
  T.eq(f[1], string.unpack("f", string.pack("f", 0.76159415595576488)), "tanh(1) rounded to f32")
  local nan = cuda.host("f16", 1); nan[1] = 0 / 0
  nan:apply("relu"); T.ok(nan[1] ~= nan[1], "relu keeps NaN")
  T.raises(function() h:apply("gelu") end,
    "bad argument #1 to 'h:apply' (unknown function 'gelu' (known: abs, neg, sqrt, exp, log, sin, cos, tanh, " ..
    "relu, sigmoid, floor, ceil, rint, square, recip))")
  T.raises(function() h:apply("exp\0") end, "unknown function")
  T.raises(function() h:apply() end, "unknown function no value")
  T.raises(function() cuda.host("i32", 2):apply("abs") end,
    "calling 'h:apply' on bad self (float array expected, got i32)")
  h, f, nan = nil, nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("reductions", function()
  local h = cuda.host("f32", 1000):iota(1)
  T.eq(h:sum(), 500500)
  local mx, imx = h:max()
  T.eq(mx, 1000); T.eq(imx, 1000)
  local mn, imn = h:min()
  T.eq(mn, 1); T.eq(imn, 1)
  T.eq(h:dot(h), 1000 * 1001 * 2001 / 6)
  -- pairwise summation: a million 0.1s in f32 stay close to the exact sum of the stored values
  local tenth = cuda.host("f32", 1000000):fill(0.1)
  T.near(tenth:sum(), 1e6 * string.unpack("f", string.pack("f", 0.1)), 1e-6, "pairwise")
  h[500] = 0 / 0
  local nan, at = h:max()
  T.ok(nan ~= nan, "NaN wins"); T.eq(at, 500)
  local ties = cuda.host("i16", 4):fill(3)
  T.eq(select(2, ties:max()), 1, "first index on ties")
  local i = cuda.host("i64", 3):fill(math.maxinteger)
  T.eq(i:sum(), 3 * 2.0 ^ 63 - 3, "beyond 64 bits: a float")
  T.eq(math.type(cuda.host("i32", 4):iota(-2):sum()), "integer")
  T.eq(cuda.host("i32", 4):iota(-2):sum(), -2)
  T.eq(cuda.host("u8", 3):fill(200):dot(cuda.host("u8", 3):fill(200)), 120000)
  T.eq(cuda.host("i8", 2):fill(-3):dot(cuda.host("f32", 2):fill(0.5)), -3)
  T.raises(function() h:dot(cuda.host("f32", 3)) end, "bad argument #1 to 'h:dot' (element counts differ (1000 and 3))")
  T.raises(function() h:dot(1) end, "bad argument #1 to 'h:dot' (cuda.host expected, got number)")
  h, tenth, ties, i = nil, nil, nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("matmul", function()
  local M, K, N = 5, 7, 3
  local a = cuda.host("f32", { M, K }):random { seed = 1, lo = -1, hi = 1 }
  local b = cuda.host("f64", { K, N }):random { seed = 2, lo = -1, hi = 1 }
  local c = cuda.host("f64", { M, N })
  T.eq(c:matmul(a, b), c)
  for i = 1, M do
    for j = 1, N do
      local acc = 0
      for k = 1, K do acc = acc + a[(i - 1) * K + k] * b[(k - 1) * N + j] end
      T.near(c[(i - 1) * N + j], acc, 1e-12, "c[" .. i .. "," .. j .. "]")
    end
  end
  local keep = c[1]
  c:matmul(a, b, { alpha = 2, beta = -1 })
  T.near(c[1], keep, 1e-12, "2ab - ab")
  local ia = cuda.host("i8", { 2, 2 }):iota(1)
  local ic = cuda.host("i32", { 2, 2 }):matmul(ia, ia)
  T.eq(ic[1], 7); T.eq(ic[4], 22)
  T.raises(function() c:matmul(b, a) end,
    "bad argument #2 to 'h:matmul' (shapes do not fit: a 7x3 times b 5x7 into c 5x3)")
  T.raises(function() cuda.host("f64", { M - 1, N }):matmul(a, b) end,
    "calling 'h:matmul' on bad self (shapes do not fit: a 5x7 times b 7x3 into c 4x3)")
  T.raises(function() c:matmul(a:view(1, M * K), b) end,
    "bad argument #1 to 'h:matmul' (2-D array expected, got 1 dimension (h:view(1, {rows, cols}) gives one))")
  T.raises(function() c:matmul(a, b, { gamma = 1 }) end, "bad argument #3 to 'h:matmul' (unknown field 'gamma'")
  a, b, c, ia, ic = nil, nil, nil, nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("dtype names with an embedded NUL are refused", function()
  T.raises(function() cuda.host("f32\0junk", 4) end,
    "bad argument #1 to 'cuda.host' (dtype name contains a NUL byte: 'f32\\0...')")
  T.raises(function() cuda.array("f32\0", 4) end, "contains a NUL byte")
  T.raises(function() cuda.host("bool\0", 1) end, "contains a NUL byte")
  stats_zero()
end)

T.test("edge values: wrapped divisors, 64-bit scalars, wrapped matmul results, staged 2-D overlaps", function()
  do
    local u = cuda.host("u32", 2)
    u[1], u[2] = 10, 7
    u:div(-1) -- -1 is 4294967295 in a u32 register
    T.eq(u[1], 0)
    T.eq(u[2], 0)
    u[1], u[2] = 10, 7
    u:div(cuda.host("u32", 2):fill(4294967295))
    T.eq(u[1], 0, "an array operand is wrapped too")
    local i = cuda.host("i32", 1)
    i[1] = 12
    i:div(cuda.host("u32", 1):fill(4294967295)) -- as i32: -1
    T.eq(i[1], -12)
    local b = cuda.host("u8", 1)
    b[1] = 9
    T.raises(function() b:div(256) end, "integer division by zero (256 wraps to 0 in a u8 array)")
    T.eq(b[1], 9, "nothing written")
    -- every integral float a 64-bit dtype holds is an integer operand
    T.eq(cuda.host("u64", 1):add(2^63)[1], 2^63)
    T.eq(cuda.host("i64", 1):add(-2^63)[1], math.mininteger)
    T.raises(function() cuda.host("u64", 1):add(2^64) end, "must be an integer for a u64 array")
    -- matmul into an integer c: rounded, then wrapped modulo 2^64
    local a1, one = cuda.host("f64", {1, 1}), cuda.host("f64", {1, 1})
    one[1] = 1
    a1[1] = 2^63
    T.eq(cuda.host("u64", {1, 1}):matmul(a1, one)[1], 2^63)
    a1[1] = 1e19
    T.eq(cuda.host("i64", {1, 1}):matmul(a1, one)[1], -8446744073709551616)
    a1[1] = -1
    T.eq(cuda.host("u32", {1, 1}):matmul(a1, one)[1], 4294967295)
    a1[1] = 0 / 0
    T.eq(cuda.host("i32", {1, 1}):matmul(a1, one)[1], 0, "NaN has no integer")
    -- a 2-D copy between overlapping views reads the source as it was (memmove's rule)
    local h = cuda.host("i32", 8):iota(1)
    h:copy_from(h, { rows = 2, count = 2, src_offset = 0, dst_offset = 2, src_pitch = 2, dst_pitch = 2 })
    T.eq(table.concat(h:totable(), " "), "1 2 1 2 3 4 7 8")
    h:iota(1)
    h:copy_from(h, { rows = 3, count = 2, src_offset = 2, dst_offset = 0, src_pitch = 2, dst_pitch = 2 })
    T.eq(table.concat(h:totable(), " "), "3 4 5 6 7 8 7 8")
    -- views say so from element 1 on; an oversized view names its last element without overflow
    T.ok(tostring(h:view(1, 4)):find("i32[4] view", 1, true), tostring(h:view(1, 4)))
    T.ok(not tostring(h):find("view", 1, true), tostring(h))
    T.raises(function() cuda.host("u8", 10):view(10, math.maxinteger) end,
      "elements 10..9223372036854775816 are past the end (the array has 10)")
    -- a mismatch against an infinity has an infinite relative difference
    local x, y = cuda.host("f64", 1), cuda.host("f64", 1)
    x[1], y[1] = 1, math.huge
    local r = cuda.compare(x, y)
    T.eq(r.max_rel, math.huge)
    T.eq(r.ok, false)
    -- the mean of large samples does not overflow
    T.eq(cuda.stats_of({ 1e308, 1e308, 1e308 }).mean, 1e308)
  end
  stats_zero()
end)

T.done()
