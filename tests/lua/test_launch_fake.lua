-- Modules, kernels and checked launches through the driver stand-in (GPULAB_LIBCUDA=libfakecuda.so).
-- The stand-in runs nothing: it logs each launch with its packed parameter bytes (hex, memory
-- order, one group per parameter), so these tests check packing byte for byte, the messages,
-- limits, error injection, the poisoned state and module lifetimes. No GPU result is claimed.
local T = dofile("tests/lua/t.lua")

assert(os.getenv("GPULAB_FAKE_LOG"), "run with GPULAB_FAKE_LOG set")
local GPULAB = arg[-1]

local read_log, clear_log = T.log_lines, T.clear_log

local function launches()
  local out = {}
  for _, l in ipairs(read_log()) do
    if l:match("^launch ") then out[#out + 1] = l end
  end
  return out
end

local function last_launch()
  local l = launches()
  return l[#l]
end

local function count_lines(pattern)
  local n = 0
  for _, l in ipairs(read_log()) do if l:find(pattern, 1, true) then n = n + 1 end end
  return n
end

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

-- One kernel per parameter kind the packing rules distinguish.
local PTX = [[
//
// test module for the driver stand-in
.version 8.0
.target sm_90
.address_size 64

.visible .entry every_kind(
	.param .u8 p_u8,
	.param .u16 p_u16,
	.param .u32 p_u32,
	.param .u64 p_u64,
	.param .s8 p_s8,
	.param .s16 p_s16,
	.param .s32 p_s32,
	.param .s64 p_s64,
	.param .f32 p_f32,
	.param .f64 p_f64,
	.param .u64 p_ptr
)
{
	ret;
}

.visible .entry with_struct(
	.param .u32 n,
	.param .align 8 .b8 s[24],
	.param .u8 flag
)
{
	ret;
}

.visible .entry with_tensormap(
	.param .u32 n,
	.param .align 64 .b8 tm[128],
	.param .u64 out
)
{
	ret;
}

.visible .entry with_half(
	.param .f16 h,
	.param .b32 bits
)
{
	ret;
}

.visible .entry unaligned_blob(
	.param .u32 n,
	.param .b8 tm[128]
)
{
	ret;
}

.visible .entry empty()
{
	ret;
}

.visible .entry big_params(
	.param .u32 n,
	.param .align 8 .b8 blob[6000],
	.param .u64 p
)
{
	ret;
}

.visible .entry too_big(
	.param .align 8 .b8 blob[32768]
)
{
	ret;
}

.visible .entry heavy(
	.param .u64 a
)
.maxnreg 128
{
	.shared .align 16 .b8 tile[65536];
	ret;
}
]]

clear_log()
local mod = cuda.load(PTX)

T.test("module and kernel fields", function()
  T.ok(tostring(mod):find("cuda.module", 1, true), tostring(mod))
  local k = mod:kernel("every_kind")
  T.eq(k.name, "every_kind")
  T.eq(#k.params, 11)
  local kinds = {}
  for i, p in ipairs(k.params) do kinds[i] = p.kind end
  T.eq(table.concat(kinds, ","), "u8,u16,u32,u64,s8,s16,s32,s64,f32,f64,u64")
  T.eq(k.params[4].offset, 8, "u64 after u8,u16,u32 aligns to 8")
  T.eq(k.params[4].align, 8)
  T.eq(k.regs, 32)
  T.eq(k.smem, 0)
  T.eq(k.max_threads, 1024)
  T.eq(k.local_bytes, 0)
  T.eq(k.const_bytes, 0)
  local s = mod:kernel("with_struct").params[2]
  T.eq(s.size, 24); T.eq(s.align, 8); T.eq(s.offset, 8)
  local h = mod:kernel("heavy")
  T.eq(h.regs, 128); T.eq(h.smem, 65536)
  T.ok(tostring(h):find("heavy(u64): 128 regs, 65536 B static smem", 1, true), tostring(h))
end)

T.test("a kernel's own metatable: fields, live fields and forged metatables", function()
  local k, k2 = mod:kernel("every_kind"), mod:kernel("empty")
  T.eq(getmetatable(k), "gpulab object")
  T.eq(k.module, mod)
  T.eq(k.nothing, nil); T.eq(k[1], nil); T.eq(k[k], nil)
  -- k.params is a fresh table on every read: changing one changes no later read
  local p = k.params
  p[1].kind = "changed"; table.remove(p)
  T.eq(#k.params, 11); T.eq(k.params[1].kind, "u8")
  T.ok(k.params ~= k.params)
  -- the methods are the class's own functions (help() and the API check read them there)
  T.eq(k.launch, k2.launch); T.eq(k.set_max_dynamic_smem, k2.set_max_dynamic_smem)
  -- under another metatable, a kernel is no kernel: not under the class metatable, not under
  -- another kernel's, and another object under a kernel's metatable is none either
  local mine, other = debug.getmetatable(k), debug.getmetatable(k2)
  T.ok(mine ~= other)
  debug.setmetatable(k, debug.getregistry()["cuda.kernel"])
  T.raises(function() k:launch({ grid = 1, block = 1 }) end, "calling 'k:launch' on bad self (cuda.kernel expected")
  T.raises(function() return k.regs end, "cuda.kernel expected")
  debug.setmetatable(k, other)
  T.raises(function() k:launch({ grid = 1, block = 1 }) end, "calling 'k:launch' on bad self (cuda.kernel expected")
  T.raises(function() tostring(k) end, "cuda.kernel expected")
  debug.setmetatable(k, mine)
  T.ok(tostring(k):find("every_kind", 1, true))
  local s = cuda.stream()
  local stream_mt = debug.getmetatable(s)
  debug.setmetatable(s, mine)
  T.raises(function() s:prepare({ grid = 1, block = 1 }) end, "calling 'k:prepare' on bad self (cuda.kernel expected")
  T.raises(function() s:occupancy(32) end, "cuda.kernel expected")
  T.eq(s.regs, 32, "a fixed field is the metatable's kernel's, read from no object")
  debug.setmetatable(s, stream_mt)
  s:free()
end)

T.test("unknown kernel names the entries", function()
  local err = T.raises(function() mod:kernel("nope") end, "mod:kernel: no kernel named 'nope'")
  local entries = "every_kind, with_struct, with_tensormap, with_half, unaligned_blob, empty, big_params, " ..
    "too_big, heavy"
  T.ok(err:find(entries, 1, true), err)
  T.raises(function() mod.kernel(42, "x") end, "cuda.module expected, got number")
  T.raises(function() mod:kernel() end,
    "bad argument #1 to 'mod:kernel' (kernel name or name expression expected, got no value)")
end)

T.test("packing every scalar kind byte for byte", function()
  local k = mod:kernel("every_kind")
  clear_log()
  k:launch({ grid = 3, block = 128 }, 0xab, 0xbeef, 0xdeadbeef, 0x0123456789abcdef,
    -2, -300, -5, math.mininteger, 1.5, -0.25, 0x7f0000001000)
  T.eq(last_launch(), "launch every_kind grid=3,1,1 block=128,1,1 smem=0 stream=0 args=" ..
    "ab efbe efbeadde efcdab8967452301 fe d4fe fbffffff 0000000000000080 0000c03f " ..
    "000000000000d0bf 00100000007f0000")
  -- integral floats are integers; the extremes of each range are accepted
  k:launch({ grid = 1, block = 1 }, 255, 65535, 4294967295, math.maxinteger, -128, 32767,
    -2147483648, 3.0, 0, 1e308, 0)
  T.eq(last_launch(), "launch every_kind grid=1,1,1 block=1,1,1 smem=0 stream=0 args=" ..
    "ff ffff ffffffff ffffffffffffff7f 80 ff7f 00000080 0300000000000000 00000000 " ..
    hex(string.pack("<d", 1e308)) .. " 0000000000000000")
  -- NVCC declares C's int as .u32: negative values pack as two's complement
  k:launch({ grid = 1, block = 1 }, -1, -2, -3, -4, 0, 0, 0, 0, 0, 0, -1)
  T.eq(last_launch():match("args=(.*)$"), "ff feff fdffffff fcffffffffffffff 00 0000 00000000 " ..
    "0000000000000000 00000000 0000000000000000 ffffffffffffffff")
end)

T.test("by-value struct blob and padding bytes", function()
  local k = mod:kernel("with_struct")
  clear_log()
  local blob = string.pack("<i4i4d", 7, -1, 2.5) .. string.rep("\0", 8)
  T.eq(#blob, 24)
  k:launch({ grid = 1, block = 32 }, 5, blob, 1)
  T.eq(last_launch(), "launch with_struct grid=1,1,1 block=32,1,1 smem=0 stream=0 args=05000000 " ..
    hex(blob) .. " 01")
  T.raises(function() k:launch({ grid = 1, block = 32 }, 5, "short", 1) end,
    "bad argument #3 to 'k:launch' (with_struct parameter 2 (b8[24]): b8[24] (24 bytes, align 8) expected, got a " ..
    "string of 5 bytes)")
  T.raises(function() k:launch({ grid = 1, block = 32 }, 5, 12, 1) end,
    "bad argument #3 to 'k:launch' (with_struct parameter 2 (b8[24]): b8[24] (24 bytes, align 8) expected, got 12)")
end)

T.test("a 6 KB parameter list, packed into the kernel's own buffer", function()
  local k = mod:kernel("big_params")
  T.eq(k.params[2].offset, 8); T.eq(k.params[3].offset, 6008)
  local d = cuda.array("u8", 16)
  local blob = string.rep("\xab", 5999) .. "\x01"
  clear_log()
  k:launch({ grid = 1, block = 32 }, 7, blob, d)
  T.eq(last_launch(), "launch big_params grid=1,1,1 block=32,1,1 smem=0 stream=0 args=07000000 " ..
    hex(blob) .. " " .. hex(string.pack("<I8", d.ptr)))
  local p = k:prepare({ grid = 1, block = 32 }, 7, blob, d)
  clear_log()
  p()
  T.eq(last_launch():match("args=(.*)"), "07000000 " .. hex(blob) .. " " .. hex(string.pack("<I8", d.ptr)))
  p:free()
  -- finalizers that run while the module, the kernel and the stream are made free the module or
  -- the stream: the launch then names what was freed, never reads it stale (ASan build).
  -- Where a finalizer runs depends on the collector's pace, which the size of the whole heap sets
  -- (this file's own length moved it): every fifth round has none, so both outcomes occur whatever
  -- the pace, and the others put finalizers around the launch at varying depths into a cycle.
  collectgarbage("incremental", 100, 100)
  local outcomes = { ok = 0, freed = 0 }
  for round = 1, 200 do
    local m, s = cuda.load(PTX), cuda.stream()
    local kk = m:kernel("big_params")
    for _ = 1, round % 5 == 0 and 0 or 1 + round % 4 do
      setmetatable({}, { __gc = function() if round % 2 == 0 then m:free() else s:free() end end })
    end
    local ok, err = pcall(kk.launch, kk, { grid = 1, block = 1, stream = s }, 1, blob, d)
    if ok then outcomes.ok = outcomes.ok + 1
    else
      T.ok(tostring(err):find("freed", 1, true), tostring(err))
      outcomes.freed = outcomes.freed + 1
    end
    s:free(); m:free()
  end
  collectgarbage("incremental", 200, 100)
  collectgarbage(); collectgarbage()
  T.ok(outcomes.ok > 0 and outcomes.freed > 0, string.format("ok %d, freed %d", outcomes.ok, outcomes.freed))
  d:free()
end)

T.test("a parameter list over the driver's 32,764 bytes is refused before the driver", function()
  local k = mod:kernel("too_big")
  T.eq(k.params[1].size, 32768)
  local blob = string.rep("x", 32768)
  clear_log()
  T.raises(function() k:launch({ grid = 1, block = 1 }, blob) end,
    "k:launch: kernel 'too_big' takes 32768 bytes of parameters; the driver allows 32764")
  T.raises(function() k:prepare({ grid = 1, block = 1 }, blob) end,
    "k:prepare: kernel 'too_big' takes 32768 bytes of parameters; the driver allows 32764")
  T.eq(#launches(), 0)
end)

T.test("a 128-byte by-value parameter lands at its 64-byte aligned offset", function()
  local k = mod:kernel("with_tensormap")
  T.eq(k.params[2].offset, 64); T.eq(k.params[2].align, 64); T.eq(k.params[3].offset, 192)
  local blob = {}
  for i = 0, 127 do blob[#blob + 1] = string.char(i) end
  blob = table.concat(blob)
  clear_log()
  k:launch({ grid = 1, block = 1 }, 9, blob, 0xabc)
  T.eq(last_launch():match("args=(.*)$"), "09000000 " .. hex(blob) .. " bc0a000000000000")
  T.eq(mod:kernel("unaligned_blob").params[2].offset, 4)
end)

T.test("f16 rounding and untyped bits", function()
  local k = mod:kernel("with_half")
  clear_log()
  k:launch({ grid = 1, block = 1 }, 1.0, 0x3f800000)
  T.eq(last_launch():match("args=(.*)$"), "003c 0000803f")
  k:launch({ grid = 1, block = 1 }, 65504, -1)
  T.eq(last_launch():match("args=(.*)$"), "ff7b ffffffff")
  k:launch({ grid = 1, block = 1 }, 1 + 2 ^ -11, 0) -- tie: rounds to even (1.0)
  T.eq(last_launch():match("args=(.*)$"), "003c 00000000")
  k:launch({ grid = 1, block = 1 }, 2 ^ -24, 0) -- smallest subnormal
  T.eq(last_launch():match("args=(.*)$"), "0100 00000000")
  k:launch({ grid = 1, block = 1 }, -math.huge, string.pack("<f", 0.5))
  T.eq(last_launch():match("args=(.*)$"), "00fc 0000003f")
  k:launch({ grid = 1, block = 1 }, 0 / 0, 0)
  T.ok(last_launch():match("args=(....)"):match("^..7[c-f]$") or
       last_launch():match("args=(....)"):match("^..f[c-f]$"), "NaN stays NaN: " .. last_launch())
  T.raises(function() k:launch({ grid = 1, block = 1 }, 70000, 0) end,
    "bad argument #2 to 'k:launch' (with_half parameter 1 (f16): f16 (2 bytes) expected, got 70000 (out of f16 range))")
  T.raises(function() k:launch({ grid = 1, block = 1 }, 1, 0.5) end,
      "bad argument #3 to 'k:launch' (with_half parameter 2 (b32): b32 (4 bytes) expected, got 0.5 (not an integer: " ..
      "untyped bits take an integer or a string of the parameter's size))")
  T.raises(function() k:launch({ grid = 1, block = 1 }, 1, 2 ^ 32) end,
      "bad argument #3 to 'k:launch' (with_half parameter 2 (b32): b32 (4 bytes) expected, got 4294967296.0 (out of " ..
      "range -2147483648..4294967295))")
end)

T.test("f16 packing: every finite value exactly, midpoints round to even", function()
  local prepared = mod:kernel("with_half"):prepare({ grid = 1, block = 1 }, 0, 0)
  local function value(b) -- decode a positive f16 bit pattern
    local e, m = (b >> 10) & 31, b & 1023
    if e == 0 then return m * 2.0 ^ -24 end
    return (1024 + m) * 2.0 ^ (e - 25)
  end
  local want = {}
  clear_log()
  for b = 0, 0x7bfe do
    prepared:set(1, value(b)); prepared()
    want[#want + 1] = b
    prepared:set(1, -value(b)); prepared()
    want[#want + 1] = b | 0x8000
    prepared:set(1, (value(b) + value(b + 1)) / 2); prepared() -- a tie: the even neighbour wins
    want[#want + 1] = (b & 1 == 0) and b or b + 1
  end
  local got = launches()
  T.eq(#got, #want)
  for i, w in ipairs(want) do
    local h = got[i]:match("args=(%x%x%x%x) ")
    local bits = tonumber(h:sub(3, 4) .. h:sub(1, 2), 16)
    if bits ~= w then
      error(string.format("launch %d: packed 0x%04x, want 0x%04x", i, bits, w))
    end
  end
  prepared:free()
end)

-- k:launch packs the commonest values (integers and floats of 4 and 8 bytes, device arrays) on a
-- path of its own; prepared:set packs every value by the general rules. Both must give the same
-- bytes, and refuse the same values with the same reason.
T.test("the launch's quick packing agrees with the general rules at every edge", function()
  local k = mod:kernel("every_kind")
  local cfg = { grid = 1, block = 1 }
  local good = { 1, 2, 3, 4, 5, 6, 7, 8, 9.5, 10.5, 11 }
  local prepared = k:prepare(cfg, table.unpack(good))
  local arr = cuda.array("f32", 4)
  local FLT_MAX = 3.4028234663852886e38
  local edges = {
    [3] = { -2147483648, -2147483649, 4294967295, 4294967296, 2.0, -0.0, 2.5, "\1\2\3\4", true },
    [4] = { math.mininteger, math.maxinteger, 2.0 ^ 53, 2.0 ^ 63, -1, arr, "12345678" },
    [7] = { 2147483647, 2147483648, -2147483648, -2147483649, -3.0 },
    [8] = { math.mininteger, math.maxinteger, -(2.0 ^ 63), 0.5 },
    [9] = { FLT_MAX, -FLT_MAX, 3.4028235677973366e38, 3.4028235677973367e38, 1e39, -1e39, 1 / 0, -1 / 0,
      0 / 0, 1e-46, 7, math.maxinteger, "abcd" },
    [10] = { 1e308, -1 / 0, 0 / 0, 5, math.mininteger, "abcdefgh" },
    [11] = { arr, 0, -1, 2.0 ^ 64, mod },
  }
  for i, values in pairs(edges) do
    for _, v in ipairs(values) do
      local args = { table.unpack(good) }
      args[i] = v
      clear_log()
      local ok_launch, err_launch = pcall(k.launch, k, cfg, table.unpack(args, 1, 11))
      local quick = last_launch()
      clear_log()
      local ok_set, err_set = pcall(function()
        prepared:set(i, v)
        prepared()
      end)
      local general = last_launch()
      local what = string.format("parameter %d, value %s", i, tostring(v))
      T.eq(ok_launch, ok_set, what)
      if ok_launch then
        T.eq(quick:match("args=(.*)$"), general:match("args=(.*)$"), what)
      else
        T.eq(err_launch:match("%(every_kind parameter .*$"), err_set:match("%(every_kind parameter .*$"), what)
      end
      prepared:set(i, good[i])
    end
  end
  prepared:free()
  arr:free()
  T.raises(function() k:launch(cfg, 1, 2, 3, arr, 5, 6, 7, 8, 9, 10, 11) end, "(the array was freed)")
end)

T.test("every mismatch message names the argument and both types", function()
  local k = mod:kernel("every_kind")
  local cfg = { grid = 1, block = 1 }
  local good = { 1, 2, 3, 4, 5, 6, 7, 8, 9.5, 10.5, 11 }
  local function with(i, v)
    local a = { table.unpack(good) }
    a[i] = v
    return function() k:launch(cfg, table.unpack(a, 1, 11)) end
  end
  T.raises(with(1, 256),
    "bad argument #2 to 'k:launch' (every_kind parameter 1 (u8): u8 (1 byte) expected, got 256 (out of range " ..
    "-128..255))")
  T.raises(with(1, -129),
    "bad argument #2 to 'k:launch' (every_kind parameter 1 (u8): u8 (1 byte) expected, got -129 (out of range " ..
    "-128..255))")
  T.raises(with(2, 65536),
    "bad argument #3 to 'k:launch' (every_kind parameter 2 (u16): u16 (2 bytes) expected, got 65536 (out of range " ..
    "-32768..65535))")
  T.raises(with(3, 2.5),
    "bad argument #4 to 'k:launch' (every_kind parameter 3 (u32): u32 (4 bytes) expected, got 2.5 (not an integer))")
  T.raises(with(3, 1 << 32),
      "bad argument #4 to 'k:launch' (every_kind parameter 3 (u32): u32 (4 bytes) expected, got 4294967296 (out of " ..
      "range -2147483648..4294967295))")
  T.raises(with(5, 128),
    "bad argument #6 to 'k:launch' (every_kind parameter 5 (s8): s8 (1 byte) expected, got 128 (out of range " ..
    "-128..127))")
  T.raises(with(6, -32769),
    "bad argument #7 to 'k:launch' (every_kind parameter 6 (s16): s16 (2 bytes) expected, got -32769 (out of range " ..
    "-32768..32767))")
  T.raises(with(7, 2 ^ 31),
    "bad argument #8 to 'k:launch' (every_kind parameter 7 (s32): s32 (4 bytes) expected, got 2147483648.0 (out of " ..
    "range -2147483648..2147483647))")
  T.raises(with(7, 1 << 31),
    "bad argument #8 to 'k:launch' (every_kind parameter 7 (s32): s32 (4 bytes) expected, got 2147483648 (out of " ..
    "range -2147483648..2147483647))")
  T.raises(with(7, 0 / 0), "bad argument #8 to 'k:launch' (every_kind parameter 7 (s32): s32 (4 bytes) expected, got")
  T.raises(with(8, 2 ^ 63),
    "bad argument #9 to 'k:launch' (every_kind parameter 8 (s64): s64 (8 bytes) expected, got 9.2233720368548e+18 " ..
    "(not an integer))")
  T.raises(with(9, "x"),
    "bad argument #10 to 'k:launch' (every_kind parameter 9 (f32): f32 (4 bytes) expected, got a string of 1 bytes)")
  T.raises(with(9, true), "bad argument #10 to 'k:launch' (every_kind parameter 9 (f32): f32 (4 bytes) expected, " ..
      "got boolean)")
  T.raises(with(9, 1e39),
    "bad argument #10 to 'k:launch' (every_kind parameter 9 (f32): f32 (4 bytes) expected, got 1e+39 (out of f32 " ..
    "range))")
  T.raises(with(10, {}), "bad argument #11 to 'k:launch' (every_kind parameter 10 (f64): f64 (8 bytes) expected, " ..
      "got table)")
  T.raises(with(11, mod),
    "bad argument #12 to 'k:launch' (every_kind parameter 11 (u64): u64 (8 bytes) expected, got cuda.module)")
  T.raises(with(11, nil), "bad argument #12 to 'k:launch' (every_kind parameter 11 (u64): u64 (8 bytes) expected, " ..
      "got nil)")
  T.raises(function() k:launch(cfg, 1, 2, 3) end, "k:launch: kernel 'every_kind' takes 11 arguments, got 3")
  local twelve = { table.unpack(good) }
  twelve[12] = 12
  T.raises(function() k:launch(cfg, table.unpack(twelve, 1, 12)) end, "takes 11 arguments, got 12")
  T.raises(function() mod:kernel("empty"):launch(cfg, 1) end, "kernel 'empty' takes 0 arguments, got 1")
end)

T.test("nothing reaches the driver when a check fails", function()
  clear_log()
  local k = mod:kernel("every_kind")
  pcall(k.launch, k, { grid = 1, block = 1 }, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, "bad")
  pcall(k.launch, k, { grid = 0, block = 1 }, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
  T.eq(#launches(), 0)
end)

T.test("grid, block and smem limits", function()
  local k = mod:kernel("empty")
  T.raises(function() k:launch({ grid = 0, block = 1 }) end,
    "bad argument #1 to 'k:launch' (field 'grid': x = 0 is out of range 1..2147483647 (device limit))")
  T.raises(function() k:launch({ grid = { 1, 65536 }, block = 1 }) end,
    "bad argument #1 to 'k:launch' (field 'grid': y = 65536 is out of range 1..65535 (device limit))")
  T.raises(function() k:launch({ grid = { 1, 1, 65536 }, block = 1 }) end,
    "bad argument #1 to 'k:launch' (field 'grid': z = 65536 is out of range 1..65535 (device limit))")
  T.raises(function() k:launch({ grid = 2 ^ 31, block = 1 }) end,
    "bad argument #1 to 'k:launch' (field 'grid': x = 2147483648 is out of range 1..2147483647 (device limit))")
  T.raises(function() k:launch({ grid = 1.5, block = 1 }) end,
    "bad argument #1 to 'k:launch' (field 'grid': x: integer expected, got 1.5)")
  T.raises(function() k:launch({ grid = 1, block = 1025 }) end,
    "bad argument #1 to 'k:launch' (field 'block': x = 1025 is out of range 1..1024 (device limit))")
  T.raises(function() k:launch({ grid = 1, block = { 1, 1, 65 } }) end,
    "bad argument #1 to 'k:launch' (field 'block': z = 65 is out of range 1..64 (device limit))")
  T.raises(function() k:launch({ grid = 1, block = { 64, 32 } }) end,
      "bad argument #1 to 'k:launch' (field 'block': 2048 threads exceed the limit of 1024 for kernel 'empty' on " ..
      "this device)")
  T.raises(function() k:launch({ grid = 1, block = { 1, 2, 3, 4 } }) end,
    "bad argument #1 to 'k:launch' (field 'block': 1 to 3 entries expected, got 4)")
  T.raises(function() k:launch({ grid = 1 }) end,
    "bad argument #1 to 'k:launch' (field 'block': required (a number or {x,y,z}))")
  T.raises(function() k:launch({ block = 1 }) end,
    "bad argument #1 to 'k:launch' (field 'grid': required (a number or {x,y,z}))")
  T.raises(function() k:launch({ grid = "1", block = 1 }) end,
    "bad argument #1 to 'k:launch' (field 'grid': number or {x,y,z} expected, got string)")
  T.raises(function() k:launch({ grid = 1, block = 1, smem = 49153 }) end,
      "bad argument #1 to 'k:launch' (field 'smem': 49153 bytes exceed kernel 'empty''s dynamic shared memory " ..
      "limit of 49152 bytes (k:set_max_dynamic_smem raises it, up to 232448 minus 0 static))")
  T.raises(function() k:launch({ grid = { "2" }, block = 1 }) end,
    "bad argument #1 to 'k:launch' (field 'grid': x: integer expected, got string)")
  T.raises(function() k:launch({ grid = 1, block = 1, smem = "0" }) end,
    "bad argument #1 to 'k:launch' (field 'smem': non-negative integer number of bytes expected, got string)")
  T.raises(function() k:launch({ grid = 1, block = 1, smem = -1 }) end,
    "bad argument #1 to 'k:launch' (field 'smem': non-negative integer number of bytes expected, got -1)")
  T.raises(function() k:launch({ grid = 1, block = 1, shmem = 0 }) end,
    "bad argument #1 to 'k:launch' (unknown field 'shmem'")
  -- the configuration is read in one walk over the table: keys of other types, an array part,
  -- fields a metatable provides (not read: raw, as before) and many unknown keys
  T.raises(function() k:launch({ grid = 1, block = 1, [1] = 5 }) end,
    "bad argument #1 to 'k:launch' (unexpected number key in the options table")
  T.raises(function() k:launch({ 7, 8, grid = 1, block = 1 }) end, "unexpected number key")
  T.raises(function() k:launch({ grid = 1, block = 1, [true] = 1 }) end, "unexpected boolean key")
  T.raises(function() k:launch(setmetatable({ grid = 1 }, { __index = { block = 1 } })) end,
    "field 'block': required")
  local wide = { grid = 1, block = 1 }
  for i = 1, 10000 do wide["x" .. i] = i end
  T.raises(function() k:launch(wide) end, "unknown field 'x")
  T.raises(function() k:launch({ grid = "1", block = {}, smem = -1, oops = 1 }) end,
    "field 'grid': number or {x,y,z} expected, got string", "grid is checked first, in any table order")
  T.raises(function() k:launch({ oops = 1, block = 1, grid = 1, smem = -1 }) end,
    "field 'smem': non-negative", "the values are checked before unknown keys")
  clear_log()
  k:launch({ stream = nil, smem = 16, block = { 2, 3 }, grid = { 4 } })
  T.eq(last_launch(), "launch empty grid=4,1,1 block=2,3,1 smem=16 stream=0 args=")
  T.raises(function() k:launch(nil) end,
    "bad argument #1 to 'k:launch' (launch configuration {grid=, block=, ...} expected, got nil)")
  T.raises(function() k:launch({ grid = 1, block = 1, stream = 5 }) end,
    "bad argument #1 to 'k:launch' (field 'stream': cuda.stream expected, got number)")
  clear_log()
  k:launch({ grid = { 7, 8, 9 }, block = { 4, 4, 4 }, smem = 49152 })
  T.eq(last_launch(), "launch empty grid=7,8,9 block=4,4,4 smem=49152 stream=0 args=")
end)

T.test("dynamic shared memory opt-in", function()
  local k = mod:kernel("empty")
  T.eq(k:set_max_dynamic_smem(200 * 1024), k)
  T.eq(k.max_dynamic_smem, 200 * 1024)
  clear_log()
  k:launch({ grid = 1, block = 1, smem = 200 * 1024 })
  T.eq(last_launch(), "launch empty grid=1,1,1 block=1,1,1 smem=204800 stream=0 args=")
  -- another kernel object for the same function sees the raised limit
  mod:kernel("empty"):launch({ grid = 1, block = 1, smem = 150 * 1024 })
  T.raises(function() k:set_max_dynamic_smem(227 * 1024 + 1) end,
    "the device allows 232448 bytes per block with opt-in, and kernel 'empty' uses 0 statically, so at most 232448")
  local h = mod:kernel("heavy")
  T.raises(function() h:set_max_dynamic_smem(200 * 1024) end, "uses 65536 statically, so at most 166912")
  T.raises(function() k:set_max_dynamic_smem(-1) end,
    "bad argument #1 to 'k:set_max_dynamic_smem' (-1 bytes of dynamic shared memory: the device allows 232448 " ..
    "bytes per block with opt-in, and kernel 'empty' uses 0 statically, so at most 232448)")
  T.raises(function() k:set_max_dynamic_smem(1.5) end, "integer number of bytes expected, got 1.5")
end)

T.test("occupancy and the limiting resource", function()
  local e = mod:kernel("empty")
  local n, why, lim = e:occupancy(1024, 0)
  T.eq(n, 2); T.eq(why, "threads")
  T.eq(lim.threads, 2); T.eq(lim.registers, 2); T.eq(lim.blocks, 32)
  n, why = e:occupancy(32, 0)
  T.eq(n, 32); T.eq(why, "blocks")
  n, why = e:occupancy(128, 100 * 1024)
  T.eq(n, 2); T.eq(why, "shared memory")
  local h = mod:kernel("heavy") -- 128 regs, 64 KB static shared memory
  n, why, lim = h:occupancy(256, 0)
  T.eq(lim.registers, 2); T.eq(lim.shared_memory, 3); T.eq(lim.threads, 8)
  T.eq(n, 2); T.eq(why, "registers")
  T.raises(function() e:occupancy(0) end, "block threads 0 out of range 1..1024")
  T.raises(function() e:occupancy(1025) end, "out of range 1..1024")
  T.raises(function() e:occupancy(32, -1) end, "dynamic shared memory bytes -1 out of range")
  T.raises(function() e:occupancy(32, 227 * 1024 + 1) end, "out of range 0..232448")
  T.raises(function() e:occupancy(32.5) end, "block threads must be an integer, got 32.5")
end)

T.test("prepared launch packs once, prepared:set repacks one argument", function()
  local k = mod:kernel("every_kind")
  local prepared = k:prepare({ grid = { 2, 2 }, block = 64 }, 1, 2, 3, 4, 5, 6, 7, 8, 0.5, 0.25, 0x1000)
  T.eq(cuda.stats().prepared, 1)
  T.ok(tostring(prepared):find("cuda.prepared every_kind<<<(2,2,1), 64, 0>>> (11 args", 1, true), tostring(prepared))
  clear_log()
  prepared()
  prepared()
  T.eq(#launches(), 2)
  T.eq(launches()[1], launches()[2])
  T.eq(last_launch(), "launch every_kind grid=2,2,1 block=64,1,1 smem=0 stream=0 args=" ..
    "01 0200 03000000 0400000000000000 05 0600 07000000 0800000000000000 0000003f " ..
    "000000000000d03f 0010000000000000")
  T.eq(prepared:set(3, 0xffffffff), prepared)
  prepared:set(9, -2)
  prepared()
  T.eq(last_launch(), "launch every_kind grid=2,2,1 block=64,1,1 smem=0 stream=0 args=" ..
    "01 0200 ffffffff 0400000000000000 05 0600 07000000 0800000000000000 000000c0 " ..
    "000000000000d03f 0010000000000000")
  T.raises(function() prepared:set(3, 1 << 32) end,
      "bad argument #2 to 'prepared:set' (every_kind parameter 3 (u32): u32 (4 bytes) expected, got 4294967296 (out " ..
      "of range -2147483648..4294967295))")
  T.raises(function() prepared:set(12, 1) end,
    "bad argument #1 to 'prepared:set' (argument index 1..11 expected, got 12)")
  T.raises(function() prepared:set(0, 1) end, "argument index 1..11 expected, got 0")
  T.raises(function() prepared:set(1) end, "bad argument #2 to 'prepared:set' (value expected)")
  -- a failed set leaves the packed bytes as they were
  clear_log()
  prepared()
  T.ok(last_launch():find("ffffffff", 1, true), last_launch())
  T.raises(function() k:prepare({ grid = 1, block = 1 }, 1) end,
    "k:prepare: kernel 'every_kind' takes 11 arguments, got 1")
  T.raises(function() k:prepare({ grid = 1, block = 1 }, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, "x") end,
    "bad argument #12 to 'k:prepare' (every_kind parameter 11 (u64): u64 (8 bytes) expected, got a string of 1 bytes)")
  prepared:free()
  prepared:free()
  T.eq(cuda.stats().prepared, 0)
  T.raises(function() prepared() end, "cuda.prepared: the prepared launch was freed")
  T.raises(function() prepared:set(1, 1) end, "the prepared launch was freed")
  T.ok(tostring(prepared):find("(freed)", 1, true))
  do
    local L2 <close> = k:prepare({ grid = 1, block = 1 }, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
    T.eq(cuda.stats().prepared, 1)
    T.ok(tostring(L2):find("every_kind", 1, true))
  end
  T.eq(cuda.stats().prepared, 0)
  mod:kernel("empty"):prepare({ grid = 1, block = 1 }) -- dropped at once: collected
  collectgarbage(); collectgarbage()
  T.eq(cuda.stats().prepared, 0)
end)

-- Device arrays, tensor maps and streams as arguments (bindings/memory.c, tensormap.c, stream.c).
-- Each runs once its binding and the stand-in's side of it are built (probe: one small object).
local probes = {
  array = function() cuda.array("u8", 1):free() end,
  tensormap = function()
    cuda.tensormap { address = 0x10000, dtype = "f16", dims = { 64, 64 }, strides = { 128 }, box = { 64, 64 } }:free()
  end,
  stream = function() cuda.stream():free() end,
}
local function with_binding(name, what, fn)
  local ok, why = pcall(probes[name])
  if ok then
    T.test(what, fn)
  else
    print("skipped (cuda." .. name .. " not available here: " .. tostring(why) .. "): " .. what)
  end
end

with_binding("array", "device arrays: address packed, kept alive, checked when freed", function()
  local k = mod:kernel("every_kind")
  local d = cuda.array("f32", 16)
  clear_log()
  k:launch({ grid = 1, block = 1 }, 1, 2, 3, d, 5, 6, 7, 8, 9, 10, d)
  local ptr = hex(string.pack("<I8", d.ptr))
  T.eq(last_launch():match("args=(.*)$"), "01 0200 03000000 " .. ptr ..
    " 05 0600 07000000 0800000000000000 00001041 0000000000002440 " .. ptr)
  T.raises(function() k:launch({ grid = 1, block = 1 }, 1, 2, 3, 4, 5, 6, 7, 8, d, 10, 11) end,
    "bad argument #10 to 'k:launch' (every_kind parameter 9 (f32): f32 (4 bytes) expected, got cuda.array)")
  T.raises(function() k:launch({ grid = 1, block = 1 }, d, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11) end,
      "bad argument #2 to 'k:launch' (every_kind parameter 1 (u8): u8 (1 byte) expected, got cuda.array (a bool " ..
      "parameter takes true or false, an 8-bit one an integer))")
  local prepared = k:prepare({ grid = 1, block = 1 }, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, cuda.array("u8", 4))
  collectgarbage(); collectgarbage()
  cuda.sync()
  T.eq(cuda.stats().arrays, 2, "the prepared launch holds its array")
  prepared:set(11, d)
  collectgarbage(); collectgarbage()
  T.eq(cuda.stats().arrays, 1, "prepared:set released the array it replaced")
  cuda.sync()
  d:free()
  T.raises(function() prepared() end, "cuda.prepared: every_kind parameter 11 (u64): the cuda.array was freed")
  T.raises(function() k:launch({ grid = 1, block = 1 }, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, d) end,
      "bad argument #12 to 'k:launch' (every_kind parameter 11 (u64): u64 (8 bytes) expected, got cuda.array (the " ..
      "array was freed))")
  prepared:free()
  cuda.sync()
  T.eq(cuda.stats().arrays, 0)
end)

with_binding("tensormap", "tensor maps go by value, 64-byte aligned", function()
  local tm = cuda.tensormap { address = 0x10000, dtype = "f16", dims = { 64, 64 }, strides = { 128 },
                              box = { 64, 64 } }
  local k = mod:kernel("with_tensormap")
  clear_log()
  k:launch({ grid = 1, block = 1 }, 1, tm, 0)
  local groups = {}
  for g in last_launch():match("args=(.*)$"):gmatch("%x+") do groups[#groups + 1] = g end
  T.eq(#groups, 3); T.eq(#groups[2], 256)
  T.ok(groups[2] ~= string.rep("0", 256), "the encoded map is not all zeros")
  local prepared = k:prepare({ grid = 1, block = 1 }, 1, tm, 0)
  clear_log()
  prepared()
  T.eq(last_launch():match("args=%x+ (%x+)"), groups[2])
  T.raises(function() mod:kernel("unaligned_blob"):launch({ grid = 1, block = 1 }, 1, tm) end,
    "bad argument #3 to 'k:launch' (unaligned_blob parameter 2 (b8[128]): b8[128] (128 bytes, align 1) expected, " ..
    "got cuda.tensormap (a tensor map parameter must be 64-byte aligned")
  T.raises(function() mod:kernel("with_struct"):launch({ grid = 1, block = 1 }, 1, tm, 0) end,
      "bad argument #3 to 'k:launch' (with_struct parameter 2 (b8[24]): b8[24] (24 bytes, align 8) expected, got " ..
      "cuda.tensormap (a tensor map is 128 bytes))")
  tm:free()
  T.raises(function() prepared() end, "cuda.prepared: with_tensormap parameter 2 (b8[128]): the cuda.tensormap was " ..
      "freed")
  prepared:free()
end)

with_binding("stream", "launches on a stream", function()
  local s = cuda.stream()
  local k = mod:kernel("empty")
  clear_log()
  k:launch({ grid = 1, block = 1, stream = s })
  T.ok(not last_launch():find("stream=0 ", 1, true), last_launch())
  local prepared = k:prepare({ grid = 2, block = 2, stream = s })
  prepared()
  T.eq(#launches(), 2)
  T.eq(launches()[1]:match("stream=(%S+)"), launches()[2]:match("stream=(%S+)"))
  s:sync()
  s:free()
  T.raises(function() prepared() end, "cuda.prepared: its cuda.stream was freed")
  prepared:free()
end)

with_binding("stream", "a captured graph keeps the kernels it launches alive", function()
  collectgarbage(); collectgarbage()
  cuda.sync()
  local base = cuda.stats().modules
  local s = cuda.stream { nonblocking = true }
  local g
  do
    local m = cuda.load(PTX)
    local k = m:kernel("empty")
    local prepared = m:kernel("with_half"):prepare({ grid = 1, block = 1, stream = s }, 1.5, 7)
    g = s:capture(function()
      k:launch({ grid = 2, block = 2, stream = s })
      prepared()
    end)
    prepared:free()
  end
  collectgarbage(); collectgarbage()
  cuda.sync()
  clear_log()
  T.eq(cuda.stats().modules, base + 1, "the graph holds the module")
  g:launch(s)
  s:sync()
  g:free()
  collectgarbage(); collectgarbage()
  cuda.sync()
  T.eq(cuda.stats().modules, base, "released with the graph")
  T.eq(count_lines("module_unload"), 1)
  s:free()
end)

with_binding("stream", "a finalizer's launch inside a captured k:launch leaves the captured arguments", function()
  -- k:launch packs into the kernel's own buffer. Under s:capture, noting the launch's objects
  -- can run a collector step (s:capture stops the automatic collector, but a script may restart
  -- it), and the finalizers run there launch the same kernel on another stream with other
  -- arguments: the captured launch keeps its own because the packing comes after the noting.
  -- The recipe that puts the step inside k:launch: generational mode, young garbage with
  -- finalizers, then a table grown by a loop, which allocates without any collector check.
  local k = mod:kernel("every_kind")
  local d, other = cuda.array("f32", 16), cuda.array("f32", 16)
  local s, s2 = cuda.stream { nonblocking = true }, cuda.stream { nonblocking = true }
  local cfg, other_cfg = { grid = 1, block = 1, stream = s }, { grid = 1, block = 1, stream = s2 }
  local inside = 0
  local function junk(n)
    for _ = 1, n do
      setmetatable({}, { __gc = function()
        if debug.traceback():find("in method 'launch'", 1, true) then inside = inside + 1 end
        k:launch(other_cfg, 9, 9, 9, other, 9, 9, 9, 9, 9, 9, other)
      end })
    end
  end
  local want = "01 0200 03000000 " .. hex(string.pack("<I8", d.ptr)) ..
    " 05 0600 07000000 0800000000000000 00001041 0000000000002440 " .. hex(string.pack("<I8", d.ptr))
  local mode = collectgarbage("generational")
  for round = 1, 20 do
    local g = s:capture(function()
      collectgarbage("restart")
      junk(3)
      local grow = {}
      for i = 1, 20000 do grow[i] = i end
      T.eq(#grow, 20000)
      k:launch(cfg, 1, 2, 3, d, 5, 6, 7, 8, 9, 10, d)
    end)
    clear_log()
    g:launch(s)
    s:sync()
    local node
    for _, l in ipairs(read_log()) do node = l:match("^graph_node every_kind .*args=(.*)$") or node end
    T.eq(node, want, "round " .. round)
    g:free()
  end
  collectgarbage(mode)
  collectgarbage(); collectgarbage()
  T.ok(inside > 0, "no finalizer ran inside k:launch")
  cuda.sync()
  s:free(); s2:free(); d:free(); other:free()
end)

T.test("wrong self and use of freed objects", function()
  local k = mod:kernel("empty")
  T.raises(function() k.launch(mod, { grid = 1, block = 1 }) end, "cuda.kernel expected, got cuda.module")
  T.raises(function() k.occupancy({}, 32) end, "cuda.kernel expected, got table")
  local m2 = cuda.load(PTX)
  local k2 = m2:kernel("empty")
  local prepared = k2:prepare({ grid = 1, block = 1 })
  m2:free()
  m2:free()
  T.raises(function() k2:launch({ grid = 1, block = 1 }) end, "k:launch: the module of kernel 'empty' was freed")
  T.raises(function() prepared() end, "the module of kernel 'empty' was freed")
  T.raises(function() m2:kernel("empty") end, "mod:kernel: the cuda.module was freed")
  T.eq(tostring(m2), "cuda.module (freed)")
  T.ok(tostring(k2):find("(module freed)", 1, true), tostring(k2))
  prepared:free()
end)

T.test("kernel keeps its module alive; unloading waits for queued launches", function()
  collectgarbage(); collectgarbage()
  local base = cuda.stats().modules
  local m = cuda.load(PTX)
  local k = m:kernel("empty")
  T.eq(cuda.stats().modules, base + 1)
  clear_log()
  m = nil -- luacheck: ignore 311
  collectgarbage(); collectgarbage()
  T.eq(count_lines("module_unload"), 0, "module unloaded while a kernel holds it")
  T.eq(cuda.stats().modules, base + 1)
  k:launch({ grid = 1, block = 1 })
  T.eq(#launches(), 1)
  cuda.sync()
  k = nil -- luacheck: ignore 311
  collectgarbage(); collectgarbage()
  T.eq(count_lines("module_unload"), 1)
  T.eq(cuda.stats().modules, base)

  -- a launch still queued: free parks the unload until the launch is known complete (here the
  -- stand-in completes work at once, so the next drain or sync unloads it)
  local m3 = cuda.load(PTX)
  m3:kernel("empty"):launch({ grid = 1, block = 1 })
  clear_log()
  m3:free()
  T.eq(count_lines("module_unload"), 0, "unloaded before its launch was known complete")
  cuda.sync()
  T.eq(count_lines("module_unload"), 1)
  local s = cuda.stats()
  T.eq(s.modules, base)
  T.eq(s.deferred, 0)
end)

T.test("cuda.load from a program table, a file and bad input", function()
  local prog = setmetatable({ ptx = PTX, lowered = { ["kern<int>"] = "with_half" }, name = "p.cu" }, {})
  local m = cuda.load(prog)
  T.ok(tostring(m):find("program p.cu (ptx)", 1, true), tostring(m))
  local k = m:kernel("kern<int>")
  T.eq(k.name, "kern<int>", "the name as asked for")
  T.eq(tostring(k):match("^[^:]*"), "cuda.kernel kern<int>(f16, b32)")
  T.eq(k.params[1].kind, "f16")
  local path = os.tmpname()
  local f = assert(io.open(path, "wb")); f:write(PTX); f:close()
  local m2 = cuda.load(path)
  T.ok(tostring(m2):find(path, 1, true), tostring(m2))
  T.eq(#m2:kernel("every_kind").params, 11)
  os.remove(path)
  T.raises(function() cuda.load(path) end,
    "bad argument #1 to 'cuda.load' (not a PTX, cubin or fatbin image, and no readable file")
  T.raises(function() cuda.load(42) end,
    "bad argument #1 to 'cuda.load' (program, image string or path expected, got number)")
  T.raises(function() cuda.load({}) end, "program has neither a cubin nor a ptx string")
  T.raises(function() cuda.load({ cubin = 5, ptx = PTX }) end,
    "bad argument #1 to 'cuda.load' (field 'cubin': string expected, got number)")
  T.raises(function() cuda.load("a\0b") end, "not a PTX, cubin or fatbin image")
  T.raises(function() cuda.load({ ptx = "not ptx" }) end,
    "cuda.load: cuModuleLoadDataEx (JIT log: ptxas application ptx input, line 1; fatal   : " ..
    "Missing .version directive at start of file): CUDA_ERROR_INVALID_PTX (218)")
  m:free(); m2:free()
end)

T.test("binary images: headers are checked before the driver reads them", function()
  local p = cuda.compile('extern "C" __global__ void k(float *x, int n) { if (n < 0) x[0] = 1; }',
    { name = "bin.cu", arch = "sm_90a" })
  T.ok(p.cubin and p.cubin:sub(1, 4) == "\127ELF", "NVRTC gave a cubin")
  local m = cuda.load(p.cubin)
  T.ok(tostring(m):find("binary image of " .. #p.cubin .. " bytes", 1, true), tostring(m))
  m:free()
  local half = p.cubin:sub(1, #p.cubin // 2)
  T.raises(function() cuda.load(half) end, "bad argument #1 to 'cuda.load' (truncated image: its header describes")
  T.raises(function() cuda.load(p.cubin:sub(1, 40)) end, "(not a 64-bit ELF cubin)")
  T.raises(function() cuda.load("\x50\xed\x55\xba\1\0\16\0" .. string.rep("\255", 8)) end, "truncated image")
  T.raises(function() cuda.load({ cubin = half, ptx = p.ptx }) end, "truncated image")
  T.raises(function() cuda.load({ cubin = "hello", ptx = p.ptx }) end, "program's cubin is not a cubin or fatbin")
  -- a program with both: the cubin is loaded, the parameter kinds come from its PTX
  local k = cuda.load(p):kernel("k")
  T.eq(k.params[1].kind, "u64"); T.eq(k.params[2].kind, "u32")
  k.module:free()
end)

T.test("prepared:launch(n) launches n times from one C loop; prepared() ignores its arguments", function()
  local k = mod:kernel("every_kind")
  local prepared = k:prepare({ grid = 1, block = 32 }, 1, 2, 3, 4, 5, 6, 7, 8, 0.5, 0.25, 0x1000)
  clear_log()
  prepared:launch(3)
  T.eq(#launches(), 3)
  prepared:launch()
  prepared(5) -- one launch: cuda.measure calls a callable as fn(stream)
  local l = launches()
  T.eq(#l, 5)
  for i = 2, 5 do T.eq(l[i], l[1]) end
  T.ok(l[1]:find("0000003f 000000000000d03f 0010000000000000", 1, true), l[1])
  T.raises(function() prepared:launch(0) end,
    "bad argument #1 to 'prepared:launch' (launch count 1..16777216 expected, got 0)")
  T.raises(function() prepared:launch(1.5) end,
    "bad argument #1 to 'prepared:launch' (launch count 1..16777216 expected, got 1.5)")
  T.raises(function() prepared:launch("x") end,
    "bad argument #1 to 'prepared:launch' (launch count 1..16777216 expected, got string)")
  T.raises(function() prepared:launch((1 << 24) + 1) end, "launch count 1..16777216 expected, got 16777217")
  T.raises(function() prepared:launch(-1) end, "got -1")
  T.eq(#launches(), 5) -- a refused count launches nothing
  prepared:free()
  T.raises(function() prepared:launch(2) end, "prepared:launch: the prepared launch was freed")
end)

-- The remaining cases need a fresh process each (injected faults, a poisoned context).
local function child(env, code)
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write("local PTX = ", string.format("%q", PTX), "\n", code)
  f:close()
  local p = assert(io.popen("GPULAB_FAKE_LOG=/dev/null " .. env .. " " .. GPULAB .. " " .. script .. " 2>&1"))
  local out = p:read("a")
  local _, _, rc = p:close()
  os.remove(script)
  return out, rc
end

T.test("an injected launch error names the function, the error and its number", function()
  local out, rc = child("GPULAB_FAKE_FAIL=cuLaunchKernel:701:2", [[
    local k = cuda.load(PTX):kernel("empty")
    k:launch({grid=1, block=1})
    local ok, err = pcall(k.launch, k, {grid=1, block=1})
    print(err)
    k:launch({grid=1, block=1})
    print("third launch ok")
    local prepared = k:prepare({grid=1, block=1})
    print(pcall(prepared))
  ]])
  T.eq(rc, 0, out)
  T.ok(out:find(
    "k:launch: cuLaunchKernel: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (701): too many resources requested for launch",
    1, true), out)
  T.ok(out:find("third launch ok", 1, true), out)
  T.ok(out:find("true", 1, true), out)
end)

T.test("a launch failing inside prepared:launch(n) stops the loop and names the function", function()
  local out, rc = child("GPULAB_FAKE_FAIL=cuLaunchKernel:701:3", [[
    local k = cuda.load(PTX):kernel("empty")
    local prepared = k:prepare({grid=1, block=1})
    print(pcall(prepared.launch, prepared, 5))
    print(pcall(prepared.launch, prepared, 2))
  ]])
  T.eq(rc, 0, out)
  T.ok(out:find("false\tprepared:launch: cuLaunchKernel: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (701)", 1, true), out)
  T.ok(out:find("\ntrue", 1, true), out) -- the fault was the third call only: the next run goes through
end)

T.test("a sticky error poisons the context and later calls name the launches", function()
  local out, rc = child("GPULAB_FAKE_FAIL=cuCtxSynchronize:700", [[
    local m = cuda.load(PTX)
    local k = m:kernel("with_struct")
    k:launch({grid={4,2}, block=128}, 1, string.rep("\0", 24), 0)
    m:kernel("empty"):launch({grid=1, block=32})
    local ok, err = pcall(cuda.sync)
    print("SYNC " .. err)
    ok, err = pcall(k.launch, k, {grid=1, block=1}, 1, string.rep("\0", 24), 0)
    print("NEXT " .. err)
    print("AVAILABLE", cuda.available())
    m:free()
    print("STATS", cuda.stats().modules)
  ]])
  T.eq(rc, 0, out)
  T.ok(out:find("SYNC cuda.sync: context sync: CUDA_ERROR_ILLEGAL_ADDRESS (700)", 1, true), out)
  T.ok(out:find(
    "2 launches since the last good sync: with_struct<<<(4,2,1), 128>>> on the default stream, empty<<<1, 32>>>",
    1, true), out)
  T.ok(out:find(
    "NEXT k:launch: context poisoned by cuda.sync: context sync: CUDA_ERROR_ILLEGAL_ADDRESS (700)", 1, true), out)
  T.ok(out:find("with_struct<<<(4,2,1), 128>>>", out:find("NEXT", 1, true), true), out)
  T.ok(out:find("restart the process", 1, true), out)
  T.ok(out:find("AVAILABLE\tfalse\tcontext poisoned by", 1, true), out)
  T.ok(out:find("STATS\t0", 1, true), out)
end)

T.test("work that never completes: a deadline names the pending launches", function()
  -- leaving without closing the Lua state is the point here, so a leak check would only object
  local out, rc = child("GPULAB_FAKE_HANG=1 ASAN_OPTIONS=detect_leaks=0", [[
    local k = cuda.load(PTX):kernel("empty")
    k:launch({grid={3,1,2}, block=64})
    local ok, err = pcall(cuda.sync, {timeout = 0.2})
    print(ok, err)
    io.stdout:flush()
    os.exit(0, false) -- the stand-in's sync never returns: leave without finalizers waiting
  ]])
  T.eq(rc, 0, out)
  T.ok(out:find("false\tcuda.sync: timed out after 0.2", 1, true), out)
  T.ok(out:find("empty<<<(3,1,2), 64>>>", 1, true), out)
end)

T.test("a module whose launch never completes is not unloaded", function()
  local log = os.tmpname()
  local out, rc = child("GPULAB_FAKE_HANG=1 ASAN_OPTIONS=detect_leaks=0 GPULAB_FAKE_LOG=" .. log, [[
    local m = cuda.load(PTX)
    m:kernel("empty"):launch({grid=1, block=1})
    m:free()
    for _ = 1, 3 do
      local s = cuda.stats()
      print("MODULES", s.modules, "DEFERRED", s.deferred)
    end
    io.stdout:flush()
    os.exit(0, false) -- the work never completes: leave without waiting for it
  ]])
  local f = assert(io.open(log))
  local text = f:read("a")
  f:close()
  os.remove(log)
  T.eq(rc, 0, out)
  T.ok(out:find("MODULES\t0\tDEFERRED\t1\n", 1, true), out)
  T.ok(text:find("launch empty", 1, true), text)
  T.ok(not text:find("module_unload", 1, true), "unloaded while its launch was pending:\n" .. text)
end)

T.test("module load and function lookup errors", function()
  local out, rc = child("GPULAB_FAKE_FAIL=cuModuleLoadDataEx:218,cuModuleGetFunction:500:1,cuFuncGetAttribute:2:1", [[
    print(select(2, pcall(cuda.load, PTX)))
    local m = cuda.load(PTX)
    print(select(2, pcall(m.kernel, m, "empty")))
    print(select(2, pcall(m.kernel, m, "empty")))
    print(m:kernel("empty").name)
  ]])
  T.eq(rc, 0, out)
  T.ok(out:find("cuda.load: cuModuleLoadDataEx (JIT log: ptxas fatal   : failure injected by GPULAB_FAKE_FAIL): " ..
    "CUDA_ERROR_INVALID_PTX (218)", 1, true), out)
  T.ok(out:find("mod:kernel: no kernel named 'empty' in this module", 1, true), out)
  T.ok(out:find("mod:kernel: cuFuncGetAttribute: CUDA_ERROR_OUT_OF_MEMORY (2)", 1, true), out)
  T.ok(out:find("\nempty\n", 1, true), out)
end)

mod:free()
collectgarbage(); collectgarbage()
T.test("stats return to zero", function()
  local s = cuda.stats()
  T.eq(s.modules, 0)
  T.eq(s.prepared, 0)
end)

T.done()
