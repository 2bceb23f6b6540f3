-- cuda.compile additions that need NVRTC but no driver: toolkit headers by default, name
-- expressions with spacing variants, and hostile option tables (NUL bytes, replaced globals,
-- metamethods, many in-memory headers).
local T = dofile("tests/lua/t.lua")

local FP16 = [[
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#include <cuda/std/cstdint>
extern "C" __global__ void halve(__half *x, bool twice) {
  namespace cg = cooperative_groups;
  cuda::std::uint32_t i = cg::this_thread_block().thread_rank();
  x[i] = __hmul(x[i], __float2half(twice ? 0.25f : 0.5f));
}
]]

local function has(list, pattern)
  for _, v in ipairs(list) do if v:find(pattern) then return v end end
end

T.test("toolkit headers compile with the default options", function()
  local p = cuda.compile(FP16, { name = "fp16.cu", cache = false })
  T.ok(p.ptx:find(".entry halve", 1, true), "halve in the PTX")
  local inc = has(p.options, "^%-I.*/include$")
  T.ok(inc and has(p.options, "^%-I.*/include/cccl$"), "toolkit and CCCL folders in " .. table.concat(p.options, " "))
  local params = p:params("halve")
  T.eq(#params, 2); T.eq(params[2].kind, "u8"); T.eq(params[2].size, 1)
end)

T.test("toolkit_headers=false leaves them out", function()
  local err = T.raises(function() cuda.compile(FP16, { name = "fp16.cu", toolkit_headers = false, cache = false }) end,
    "cannot open source file \"cuda_fp16.h\"")
  T.ok(err:find("fp16.cu:1:", 1, true), err)
  local p = cuda.compile('extern "C" __global__ void k() {}', { toolkit_headers = false })
  T.ok(not has(p.options, "cccl"), table.concat(p.options, " "))
  T.raises(function() cuda.compile("x", { toolkit_headers = 1 }) end,
    "bad argument #2 to 'cuda.compile' (field 'toolkit_headers': boolean expected, got number)")
end)

T.test("the cache key covers the toolkit headers and the switch", function()
  local a = cuda.cache_key(FP16, {})
  T.eq(cuda.cache_key(FP16, {}), a, "stable")
  T.ok(cuda.cache_key(FP16, { toolkit_headers = false }) ~= a, "the switch moves the key")
end)

local TEMPLATES = [[
template <int N, typename T> __global__ void scale(T *x, T s) { x[N] *= s; }
template <typename T> __global__ void fill(T *x) { x[0] = T(1); }
]]

T.test("name expressions: spacing variants find the registered one", function()
  local p = cuda.compile(TEMPLATES, { names = { "scale<2,float>", "fill<unsigned int>" } })
  for _, asked in ipairs { "scale<2,float>", "scale<2, float>", " scale < 2 , float > " } do
    local params = p:params(asked)
    T.eq(#params, 2, asked); T.eq(params[2].kind, "f32", asked)
  end
  T.eq(#p:params("fill<unsigned  int>"), 1)
  local err = T.raises(function() p:params("scale<3, float>") end,
    "'scale<3, float>' is not a registered name expression")
  T.ok(err:find("registered: fill<unsigned int>, scale<2,float>", 1, true), err)
  T.raises(function() p:params("fill<unsignedint>") end, "not a registered name expression")
  T.raises(function() p:params("scale\0<2,float>") end, "kernel name contains a NUL byte")
end)

T.test("NUL bytes in option strings are refused, never truncated", function()
  local src = 'extern "C" __global__ void k() {}'
  T.raises(function() cuda.compile(src, { arch = "sm_90a\0junk" }) end,
    "bad argument #2 to 'cuda.compile' (field 'arch': contains a NUL byte)")
  T.raises(function() cuda.compile(src, { std = "c++17\0x" }) end,
    "bad argument #2 to 'cuda.compile' (field 'std': contains a NUL byte)")
  T.raises(function() cuda.compile(src, { defines = { ["K\0X"] = 1 } }) end,
    "bad argument #2 to 'cuda.compile' (field 'defines': key 'K' contains a NUL byte)")
  T.raises(function() cuda.compile(src, { defines = { K = "1\0 2" } }) end,
    "bad argument #2 to 'cuda.compile' (field 'defines': 'K' contains a NUL byte or a newline)")
  T.raises(function() cuda.compile(src, { options = { "-DA\0B" } }) end,
    "bad argument #2 to 'cuda.compile' (field 'options': item 1 contains a NUL byte)")
  T.raises(function() cuda.compile(src, { names = { "k\0x" } }) end,
    "bad argument #2 to 'cuda.compile' (field 'names': item 1 contains a NUL byte)")
  T.raises(function() cuda.compile(src, { include_dirs = { "/tmp\0/x" } }) end, "item 1 contains a NUL byte")
  T.raises(function() cuda.compile(src, { headers = { ["a\0.h"] = "x" } }) end, "contains a NUL byte")
  T.raises(function() cuda.compile(src, { name = "a\0.cu" }) end,
    "bad argument #2 to 'cuda.compile' (field 'name': contains a NUL byte)")
  T.raises(function() cuda.compile(src, { ["arch\0x"] = "sm_80" }) end,
    "bad argument #2 to 'cuda.compile' (unknown field 'arch'")
end)

T.test("replacing table.sort does not reach cuda.compile", function()
  local saved = table.sort
  table.sort = function() error("the script's table.sort was called") end -- luacheck: ignore 122
  local ok, err = pcall(cuda.compile, 'extern "C" __global__ void k() { int x = B + A; (void)x; }',
    { defines = { B = 2, A = 1, C = true }, headers = { ["z.h"] = "", ["a.h"] = "" }, cache = false })
  table.sort = saved -- luacheck: ignore 122
  T.ok(ok, tostring(err))
  T.eq(table.concat(err.options, " "):match("%-DA=1 %-DB=2 %-DC"), "-DA=1 -DB=2 -DC")
end)

T.test("options are read raw: metamethods on the options table never run", function()
  local calls = 0
  local opts = setmetatable({}, { __index = function() calls = calls + 1; collectgarbage(); return nil end })
  local p = cuda.compile('extern "C" __global__ void k() {}', opts)
  T.ok(p.ptx ~= nil); T.eq(calls, 0)
  p.lowered = setmetatable({}, { __index = function() calls = calls + 1 end })
  T.eq(#p:params("k"), 0); T.eq(calls, 0)
end)

T.test("many in-memory headers go on the heap, not the C stack", function()
  local headers = {}
  -- two pointers each: 11 MB, more than the 8 MB C stack
  for i = 1, 700000 do headers["h" .. i .. ".h"] = "" end
  local p = cuda.compile('#include "h7.h"\nextern "C" __global__ void k() {}', { headers = headers, cache = false })
  T.ok(p.ptx:find(".entry k", 1, true), "compiled")
end)

T.done()
