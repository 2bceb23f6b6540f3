-- GPU test (label gpu) for module variables and toolkit headers: a kernel that includes
-- <cuda_fp16.h> and <cooperative_groups.h> with the default options, reads a __constant__ table
-- and a templated __device__ array written through mod:global views, counts its threads in a
-- __device__ counter read back through a view (also passed as a pointer argument), and takes a
-- bool parameter given as true/false. Every result is checked against host arithmetic, with the
-- output poisoned before each launch.
local T = dofile("tests/lua/t.lua")
T.require_gpu()

local SRC = [[
#include <cuda_fp16.h>
#include <cooperative_groups.h>

__constant__ float coeff[64];
__device__ unsigned int hits;
template <int N> __device__ float bias[N];
template __device__ float bias<4>[4];

extern "C" __global__ void apply(const __half *in, float *out, int n, bool negate) {
  namespace cg = cooperative_groups;
  cg::thread_block block = cg::this_thread_block();
  int i = blockIdx.x * blockDim.x + (int)block.thread_rank();
  if (i < n) {
    float v = __half2float(in[i]) * coeff[i % 64] + bias<4>[i % 4];
    out[i] = negate ? -v : v;
    atomicAdd(&hits, 1u);
  }
}

extern "C" __global__ void bump(unsigned int *counter, unsigned int by) { atomicAdd(counter, by); }

struct alignas(64) Map { unsigned long long w[16]; };
extern "C" __global__ void by_copy(const Map m) {
  asm volatile("prefetch.tensormap [%0];" :: "l"(&m) : "memory");
}
]]

local N = 4099 -- not a multiple of the block: the tail is checked too

T.test("module variables, toolkit headers and a bool parameter on the device", function()
  local prog = cuda.compile(SRC, { name = "module_api.cu", names = { "bias<4>" } })
  T.ok(prog.cubin ~= nil, "a cubin for the device")
  local mod = cuda.load(prog)
  local k = mod:kernel("apply")
  T.eq(#k.params, 4); T.eq(k.params[4].size, 1)

  local coeff = mod:global("coeff", "f32", 64)
  local bias = mod:global("bias< 4 >", "f32", 4) -- spacing variant of the registered expression
  local hits = mod:global("hits", "u32", 1)
  T.eq(coeff.nbytes, 256); T.eq(bias.nbytes, 16); T.eq(hits.nbytes, 4)
  T.raises(function() mod:global("coeff", "f32", 65) end, "f32[65] needs 260 bytes, but 'coeff' holds 256 bytes")

  local hc = cuda.host("f32", 64)
  for j = 1, 64 do hc[j] = j * 0.25 end
  coeff:copy_from(hc)
  local hb = cuda.host("f32", 4)
  for j = 1, 4 do hb[j] = j end
  bias:copy_from(hb)
  local zero = cuda.host("u32", 1):fill(0)
  hits:copy_from(zero)

  local hin = cuda.host("f16", N)
  for i = 1, N do hin[i] = ((i - 1) % 32) * 0.5 end
  local din = cuda.array("f16", N)
  din:copy_from(hin)
  local dout = cuda.array("f32", N)
  local hout = cuda.host("f32", N)

  local function expect(i, negate) -- exact: small dyadic rationals
    local v = ((i - 1) % 32) * 0.5 * (((i - 1) % 64) + 1) * 0.25 + (((i - 1) % 4) + 1)
    return negate and -v or v
  end
  for round, negate in ipairs { true, false } do
    dout:fill(0 / 0)
    k:launch({ grid = (N + 255) // 256, block = 256 }, din, dout, N, negate)
    cuda.sync { timeout = 10 }
    hout:copy_from(dout)
    local bad = 0
    for i = 1, N do
      if hout[i] ~= expect(i, negate) then
        if bad == 0 then print(string.format("first mismatch at %d: %s, want %s", i, hout[i], expect(i, negate))) end
        bad = bad + 1
      end
    end
    T.eq(bad, 0, "mismatches with negate=" .. tostring(negate))
    local hh = cuda.host("u32", 1)
    hh:copy_from(hits)
    T.eq(hh[1], N * round, "__device__ counter read back through its view")
  end

  -- the __device__ variable's view as a pointer argument of another kernel
  mod:kernel("bump"):launch({ grid = 3, block = 32 }, hits, 5)
  cuda.sync { timeout = 10 }
  local hh = cuda.host("u32", 1)
  hh:copy_from(hits)
  T.eq(hh[1], 2 * N + 3 * 32 * 5, "counter after bump")

  -- a view keeps its module loaded after mod:free(); the memory is still readable
  mod:free()
  local again = cuda.host("f32", 64)
  again:copy_from(coeff)
  T.eq(again[64], 16.0)
  coeff:free(); bias:free(); hits:free()
  cuda.sync { timeout = 10 }
  T.eq(cuda.stats().deferred, 0)
end)

T.test("a tensor map for a parameter the kernel copies is refused on the device too", function()
  local mod = cuda.load(cuda.compile(SRC, { name = "module_api.cu", names = { "bias<4>" } }))
  local d = cuda.array("f16", 64 * 64)
  local tm = cuda.tensormap { array = d, dtype = "f16", dims = { 64, 64 }, box = { 64, 64 } }
  T.raises(function() mod:kernel("by_copy"):launch({ grid = 1, block = 1 }, tm) end,
    "the kernel copies this parameter")
  tm:free(); d:free(); mod:free()
end)

T.done()
