-- A short compile session for valgrind: success with names and parameters, a failing compile
-- with its log, bad input. Kept small: everything runs about 30 times slower under valgrind.
local T = dofile("tests/lua/t.lua")
T.test("compile, lowered names, parameters", function()
  local p = cuda.compile([[
template <int N> __global__ void scale(float *x, int n) { if (threadIdx.x < n) x[threadIdx.x] *= N; }
extern "C" __global__ void k(float *x, unsigned short h, double d) { x[0] = h + d; }
]], { names = { "scale<2>" }, cache = false })
  T.ok(#p.ptx > 0 and p.cubin ~= nil)
  T.eq(p:params("scale<2>")[2].kind, "u32")
  T.eq(p:params("k")[2].kind, "u16")
end)
T.test("a failing compile raises with file:line", function()
  T.raises(function() cuda.compile("__global__ void k() { nope; }", { name = "bad.cu", cache = false }) end,
    "bad.cu:1:")
end)
T.test("bad input", function()
  T.raises(function() cuda.compile(42) end, "bad argument #1 to 'cuda.compile'")
  T.raises(function() cuda.compile("x", { arch = "sm_0" , cache = false }) end, "sm_0")
end)
T.done()
