-- test_tensormap.lua — tensor-map validation without a device: every documented rule of
-- cuTensorMapEncodeTiled, with a valid spec and at least one invalid one per rule, and the exact
-- messages. With the driver stand-in (FAKE) and an encoding entry point, also the object:
-- box_bytes, describe, fields, replace_address checks, free, stats.
local T = dofile("tests/lua/t.lua")

-- With GPULAB_FAKE_HANG=1 queued work never completes: only the lifetime check runs, and the
-- process ends without the final sync, which would wait for ever.
if os.getenv("GPULAB_FAKE_HANG") == "1" then
  local ok, probe = pcall(cuda.tensormap, { address = 0x100000, dtype = "f16", dims = { 64, 64 }, box = { 64, 64 } })
  if ok then probe:free() else
    print("skipped: no tensor-map encoder in this driver")
    os.exit(77)
  end
  T.test("freeing a map with queued work hands that work to its array", function()
    local mod = cuda.load([[
.version 8.0
.target sm_90
.address_size 64
.visible .entry takes_map(.param .align 64 .b8 tm[128])
{
	ret;
}
]])
    local d = cuda.array("f16", 64 * 64)
    local tm = cuda.tensormap { array = d, dtype = "f16", dims = { 64, 64 }, box = { 64, 64 } }
    mod:kernel("takes_map"):launch({ grid = 1, block = 1 }, tm)
    tm:free()
    d:free()
    T.eq(cuda.stats().arrays, 0, "the array is released")
    T.eq(cuda.stats().deferred >= 1, true, "its device memory waits for the queued launch")
    T.eq(cuda.stats().tensormaps, 0)
  end)
  print(string.format("%d passed, %d failed", T.passed, T.failed))
  os.exit(T.failed == 0 and 0 or 1, false)
end

-- A valid 2-D f16 spec; `with` overrides fields (use false to remove one).
local function spec(with)
  local s = { address = 0x100000, dtype = "f16", dims = { 8192, 4096 }, box = { 64, 64 } }
  for k, v in pairs(with or {}) do
    if v == false then s[k] = nil else s[k] = v end
  end
  return s
end

local function valid(s, what)
  local ok, msg = cuda.tensormap_check(s)
  T.ok(ok == true and msg == nil, (what or "spec") .. " should be valid, got: " .. tostring(msg))
end

local function invalid(s, text, what)
  local ok, msg = cuda.tensormap_check(s)
  T.eq(ok, false, what)
  T.ok(type(msg) == "string", "message is a string")
  T.ok(msg:find(text, 1, true), (what or "") .. ": message " .. string.format("%q", msg) ..
    " should contain " .. string.format("%q", text))
end

T.test("a plain spec is valid, every dtype and rank 1..5", function()
  valid(spec())
  for _, dt in ipairs({ "f16", "bf16", "f32", "f64", "u8", "u16", "u32", "i32", "u64", "i64",
                        "f32_ftz", "tf32", "tf32_ftz" }) do
    valid(spec { dtype = dt, box = { 32, 8 } }, dt)
  end
  valid(spec { dims = { 1024 }, box = { 256 } })
  valid(spec { dims = { 64, 2, 3, 4, 5 }, box = { 64, 1, 1, 1, 1 } })
  valid(spec { dims = { 64, 64 }, strides = { 256 }, box = { 8, 2 } }, "padded rows")
end)

T.test("names are compared whole: a NUL byte does not end them", function()
  invalid(spec { dtype = "f16\0junk" }, "unknown dtype", "dtype")
  invalid(spec { swizzle = "none\0junk" }, "unknown swizzle", "swizzle")
  invalid(spec { interleave = "none\0" }, "unknown interleave", "interleave")
end)

T.test("rank 1..5, and 3..5 with interleave", function()
  invalid(spec { dims = {}, box = {} }, "rank = 0 (#dims): the rank must be 1..5")
  invalid(spec { dims = { 1, 1, 1, 1, 1, 1 }, box = { 8, 1, 1, 1, 1, 1 } }, "rank = 6 (#dims): the rank must be 1..5")
  invalid(spec { interleave = "16B" }, "rank = 2: interleave 16B needs rank 3..5")
  valid(spec { interleave = "16B", dims = { 64, 64, 4 }, box = { 8, 8, 1 } })
end)

T.test("global address: 16-byte aligned, 32 with interleave 32B, not null", function()
  invalid(spec { address = 0x100008 }, "address = 0x100008: the global address must be 16-byte aligned")
  valid(spec { address = 0x100010 })
  -- 2^63 as a float is past the largest address (it once passed a check against (double)(2^63 - 1))
  invalid(spec { address = 2 ^ 63 }, "a device address is a non-negative integer")
  valid(spec { address = 2 ^ 63 - 2 ^ 11 })
  local il = { interleave = "32B", swizzle = "32B", dims = { 64, 64, 4 }, box = { 16, 8, 1 }, address = 0x100010 }
  invalid(spec(il), "address = 0x100010: the global address must be 32-byte aligned with interleave 32B")
  il.address = 0x100020
  valid(spec(il))
  invalid(spec { address = 0 }, "address = 0: a device address must not be null")
  invalid(spec { address = -16 }, "address = -16")
  invalid(spec { address = 0.5 }, "address = 0.5: must be an integer")
  invalid(spec { address = "4096" }, "address = '4096' (a string): must be an integer")
  invalid(spec { address = false }, "array= (a cuda.array) or address= (an integer device address) is required")
  invalid(spec { array = {} }, "give either array= or address=, not both")
  invalid(spec { address = false, array = {} }, "array = table: expected a cuda.array")
end)

T.test("dims: each 1..2^32, integral, not NaN", function()
  valid(spec { dims = { 4294967296, 1 }, strides = { 8589934592 } })
  invalid(spec { dims = { 4294967297, 1 } }, "dims[1] = 4294967297: each dimension must be 1..2^32")
  invalid(spec { dims = { 64, 0 } }, "dims[2] = 0: each dimension must be 1..2^32")
  invalid(spec { dims = { 64, -1 } }, "dims[2] = -1: each dimension must be 1..2^32")
  invalid(spec { dims = { 64, 0 / 0 } }, "dims[2] = NaN: must be an integer")
  invalid(spec { dims = { 64, 1.5 } }, "dims[2] = 1.5: must be an integer")
  invalid(spec { dims = { 64, math.huge } }, "dims[2] = inf")
  invalid(spec { dims = 64 }, "dims = 64: must be a list of integers, innermost dimension first")
  invalid(spec { dims = false }, "dims = nil: must be a list")
end)

T.test("strides: rank-1 entries, multiples of 16 (32 with interleave 32B), below 2^40, cover the dimension", function()
  valid(spec { strides = { 16384 } })
  invalid(spec { strides = { 16384, 16 } }, "strides has 2 entries: it must have 1")
  invalid(spec { strides = { 16392 } }, "strides[1] = 16392: each stride must be a multiple of 16 bytes")
  invalid(spec { strides = { 2 ^ 40 } }, "strides[1] = 1099511627776: each stride must be below 2^40 bytes")
  invalid(spec { strides = { 1 << 40 } }, "strides[1] = 1099511627776: each stride must be below 2^40 bytes")
  invalid(spec { strides = { 8192 } }, "strides[1] = 8192: smaller than the dimension it steps over (16384 bytes)")
  invalid(spec { dims = { 64, 64, 4 }, box = { 8, 8, 1 }, strides = { 128, 4096 } },
    "strides[2] = 4096: smaller than the dimension it steps over (8192 bytes)")
  local il = { interleave = "32B", swizzle = "32B", dims = { 64, 64, 4 }, box = { 16, 8, 1 } }
  il.strides = { 144, 144 * 64 }
  invalid(spec(il), "strides[1] = 144: each stride must be a multiple of 32 bytes with interleave 32B")
  il.strides = { 160, 160 * 64 }
  valid(spec(il))
  -- packed strides that would reach 2^40 are refused too
  invalid(spec { dims = { 2 ^ 32, 2 ^ 32, 2 }, box = { 8, 1, 1 } }, "must be below 2^40")
end)

T.test("box: 1..256 per dimension, innermost row a multiple of 16 bytes", function()
  invalid(spec { box = { 64, 257 } }, "box[2] = 257: each box dimension must be 1..256")
  invalid(spec { box = { 0, 64 } }, "box[1] = 0: each box dimension must be 1..256")
  invalid(spec { box = { 64 } }, "box has 1 entries: it must have 2")
  invalid(spec { box = { 4, 64 } },
    "box[1] = 4: box[1] x element size (f16, 2 bytes) = 8 bytes must be a multiple of 16")
  valid(spec { box = { 8, 256 } })
  valid(spec { box = { 256, 1 } })
  -- with interleave the innermost row rule does not apply
  valid(spec { interleave = "16B", dims = { 64, 64, 4 }, box = { 4, 8, 1 } })
end)

T.test("element strides: 1..8", function()
  valid(spec { element_strides = { 1, 8 } })
  invalid(spec { element_strides = { 1, 9 } }, "element_strides[2] = 9: each element stride must be 1..8")
  invalid(spec { element_strides = { 0, 1 } }, "element_strides[1] = 0: each element stride must be 1..8")
  invalid(spec { element_strides = { 1 } }, "element_strides has 1 entries: it must have 2")
end)

T.test("interleave 32B requires swizzle 32B", function()
  local il = { interleave = "32B", dims = { 64, 64, 4 }, box = { 16, 8, 1 }, address = 0x100020 }
  invalid(spec(il), "swizzle = none: interleave 32B requires swizzle 32B")
  il.swizzle = "64B"
  invalid(spec(il), "swizzle = 64B: interleave 32B requires swizzle 32B")
end)

T.test("swizzle: innermost box row within the swizzle span", function()
  valid(spec { box = { 16, 64 }, swizzle = "32B" })
  invalid(spec { box = { 24, 64 }, swizzle = "32B" },
    "box[1] = 24: box[1] x element size = 48 bytes exceeds the 32-byte span of swizzle 32B")
  valid(spec { box = { 32, 64 }, swizzle = "64B" })
  invalid(spec { box = { 64, 64 }, swizzle = "64B" }, "exceeds the 64-byte span of swizzle 64B")
  valid(spec { box = { 64, 64 }, swizzle = "128B" })
  invalid(spec { box = { 128, 32 }, swizzle = "128B" },
    "box[1] = 128: box[1] x element size = 256 bytes exceeds the 128-byte span of swizzle 128B")
  valid(spec { box = { 32, 8 }, dtype = "f32", swizzle = "128B_atom_32B" })
  valid(spec { box = { 128, 32 } }, "no swizzle: 256-byte rows are fine")
end)

T.test("NaN out-of-bounds fill only for floating-point dtypes", function()
  for _, dt in ipairs({ "f16", "bf16", "f32", "f64", "tf32" }) do
    valid(spec { dtype = dt, box = { 16, 8 }, oob_fill = "nan" }, dt)
  end
  for _, dt in ipairs({ "u8", "u16", "u32", "i32", "u64", "i64" }) do
    invalid(spec { dtype = dt, box = { 16, 8 }, oob_fill = "nan" },
      "oob_fill = nan: NaN fill needs a floating-point dtype, not " .. dt)
  end
end)

T.test("names: dtype, interleave, swizzle, l2_promotion, oob_fill; unknown fields", function()
  invalid(spec { dtype = "f8" }, "dtype = 'f8' (a string): unknown dtype (known: f16, bf16")
  invalid(spec { dtype = false }, "dtype = nil: a dtype is required")
  invalid(spec { dtype = 2 }, "dtype = 2: unknown dtype")
  invalid(spec { swizzle = "256B" }, "swizzle = '256B' (a string): unknown swizzle (known: none, 32B, 64B, 128B")
  invalid(spec { interleave = "8B" }, "interleave = '8B' (a string): unknown interleave (known: none, 16B, 32B)")
  invalid(spec { l2_promotion = "512B" },
    "l2_promotion = '512B' (a string): unknown l2_promotion (known: none, 64B, 128B, 256B)")
  invalid(spec { oob_fill = "zero" }, "oob_fill = 'zero' (a string): unknown oob_fill (known: none, nan)")
  for _, l2 in ipairs({ "none", "64B", "128B", "256B" }) do valid(spec { l2_promotion = l2 }) end
  invalid(spec { boxes = { 1 } }, "unknown field 'boxes' (known: array, address, dtype")
  invalid(spec { [1] = 5 }, "unknown field of type number")
  local ok, msg = cuda.tensormap_check("x")
  T.eq(ok, false); T.eq(msg, "the spec must be a table, got string")
  ok, msg = cuda.tensormap_check()
  T.eq(ok, false); T.eq(msg, "the spec must be a table, got nil")
end)

T.test("cuda.tensormap raises the same message, before any driver call", function()
  T.raises(function() cuda.tensormap(spec { box = { 64, 257 } }) end,
    "bad argument #1 to 'cuda.tensormap' (box[2] = 257: each box dimension must be 1..256)")
  T.raises(function() cuda.tensormap(5) end, "bad argument #1 to 'cuda.tensormap' (table expected, got number)")
  T.raises(function() cuda.tensormap(spec { array = 5, address = false }) end, "cuda.tensormap")
end)

-- With a driver (the stand-in does): spans checked against the array's size, freed arrays.
if cuda.available() then
  T.test("array=: the dims and strides must fit in the array", function()
    local d = cuda.array("f16", 64 * 64)
    valid { array = d, dtype = "f16", dims = { 64, 64 }, box = { 64, 64 } }
    valid { array = d, dtype = "f16", dims = { 32, 64 }, strides = { 128 }, box = { 32, 64 } }
    invalid({ array = d, dtype = "f16", dims = { 64, 65 }, box = { 64, 64 } },
      "dims and strides reach 8320 bytes but the array holds 8192 bytes")
    invalid({ array = d, dtype = "f16", dims = { 48, 64 }, strides = { 144 }, box = { 16, 64 } },
      "dims and strides reach 9168 bytes but the array holds 8192 bytes")
    T.raises(function() cuda.tensormap { array = 5, dtype = "f16", dims = { 64, 64 }, box = { 64, 64 } } end,
      "bad argument #1 to 'cuda.tensormap' (array = number: expected a cuda.array)")
    d:free()
    invalid({ array = d, dtype = "f16", dims = { 64, 64 }, box = { 64, 64 } },
      "array = cuda.array: expected a cuda.array (this one was freed)")
  end)
end

-- The object needs the driver's encoder: through the stand-in when it provides one.
local function encoder_available()
  if not cuda.available() then return false end
  local ok, err = pcall(cuda.tensormap, spec())
  if not ok and tostring(err):find("CUDA_ERROR_NOT_SUPPORTED", 1, true) then return false end
  return true
end

if encoder_available() then
  T.test("object: box_bytes, fields, describe, tostring, free, stats", function()
    collectgarbage(); collectgarbage()
    local base = cuda.stats().tensormaps
    local tm = cuda.tensormap(spec { swizzle = "128B", l2_promotion = "256B" })
    T.eq(cuda.stats().tensormaps, base + 1)
    T.eq(tm.box_bytes, 8192)
    T.eq(tm.dtype, "f16"); T.eq(tm.rank, 2); T.eq(tm.dims[1], 8192); T.eq(tm.dims[2], 4096)
    T.eq(tm.strides[1], 16384, "packed stride"); T.eq(#tm.strides, 1)
    T.eq(tm.box[1], 64); T.eq(tm.swizzle, "128B"); T.eq(tm.l2_promotion, "256B"); T.eq(tm.oob_fill, "none")
    T.eq(tm.address, 0x100000)
    local d = tm:describe()
    for _, want in ipairs({ "f16 (2-byte elements), rank 2", "0x100000", "8192 x 4096 elements",
                            "dim 2: 16384 bytes", "64 x 64 elements = 8192 bytes per load (the expect_tx count)",
                            "innermost row 128 bytes", "swizzle: 128B (16-byte chunks permuted within 128-byte spans)",
                            "L2 promotion: 256B", "out-of-bounds fill: none (zeros)", "interleave: none" }) do
      T.ok(d:find(want, 1, true), "describe contains " .. want .. ":\n" .. d)
    end
    T.eq(tostring(tm), "cuda.tensormap(f16 8192x4096, box 64x64 = 8192 B, swizzle 128B)")
    T.eq(cuda.tensormap(spec { box = { 16, 8 }, element_strides = { 2, 2 } }).box_bytes, 16 * 4 * 2,
      "element strides divide the box except innermost")
    T.raises(function() tm:replace_address(5) end, "tm:replace_address")
    tm:free(); tm:free()
    T.eq(tostring(tm), "cuda.tensormap (freed)")
    T.raises(function() return tm.box_bytes end, "field 'box_bytes' of a freed tensor map")
    T.raises(function() tm:describe() end, "tm:describe: the cuda.tensormap was freed")
    collectgarbage(); collectgarbage()
    T.eq(cuda.stats().tensormaps, base)
    do
      local tm2 <close> = cuda.tensormap(spec())
      T.eq(cuda.stats().tensormaps, base + 1, tostring(tm2))
    end
    T.eq(cuda.stats().tensormaps, base)
    T.raises(function() tm.describe(5) end, "bad argument #1 to 'tm:describe' (cuda.tensormap expected, got number)")
    T.raises(function() tm.free({}) end, "bad argument #1 to 'tm:free' (cuda.tensormap expected, got table)")
    T.raises(function() tm.replace_address(5) end,
      "bad argument #1 to 'tm:replace_address' (cuda.tensormap expected, got number)")
  end)
else
  print("note: no tensor-map encoder in this driver; object tests run in gpu_tma.lua")
end

T.done()
