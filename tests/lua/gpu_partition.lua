-- GPU tests for SM partitions (ctest label `gpu`; skipped without a device). On the H200 (132 SMs,
-- partitions in multiples of 8): a 16-SM partition reports 16 SMs; a kernel on its stream that
-- records %smid per block sees at most that many distinct SMs (the whole device sees more); a
-- 16-byte copy kernel on 16 SMs and on the whole device both copy correctly (their bandwidths are
-- printed, not judged: labs/memory_system.lua judges them).
local T = dofile("tests/lua/t.lua")
T.require_gpu()

local SRC = [[
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Each block records the SM it ran on, after spinning for `ns` so that blocks spread out.
extern "C" __global__ void where(unsigned *smid, unsigned long long ns) {
  unsigned long long t0 = global_ns();
  while (global_ns() - t0 < ns) { }
  if (threadIdx.x == 0) {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    smid[blockIdx.x] = id;
  }
}

// Grid-stride copy of n 16-byte elements.
extern "C" __global__ void copy16(const uint4 *__restrict__ src, uint4 *__restrict__ dst, unsigned long long n) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = src[i];
}
]]

local mod = cuda.load(cuda.compile(SRC, { name = "gpu_partition.cu" }))
local where, copy16 = mod:kernel("where"), mod:kernel("copy16")
local SMS = cuda.device(0).sm_count
local BLOCKS = 1024

local function distinct_sms(stream)
  local out = cuda.array("u32", BLOCKS)
  out:fill(0xffffffff)
  cuda.sync()
  where:launch({ grid = BLOCKS, block = 128, stream = stream }, out, 20000)
  stream:sync{ timeout = 30 }
  local h = cuda.host("u32", BLOCKS)
  h:copy_from(out)
  local seen, list = {}, {}
  for i = 1, BLOCKS do
    local id = h[i]
    T.ok(id < SMS, "block " .. i .. " recorded SM " .. id .. " (the device has " .. SMS .. ")")
    if not seen[id] then seen[id] = true; list[#list + 1] = id end
  end
  table.sort(list)
  return #list, list
end

T.test("a 16-SM partition: sm_count 16, its kernels see at most 16 SMs", function()
  local p = cuda.partition{ sms = 16 }
  print(tostring(p))
  T.eq(p.sm_count, 16, "granted SMs")
  T.eq(p.rounded, false)
  local s = p:stream()
  local n, list = distinct_sms(s)
  print(string.format("partition of %d SMs: blocks ran on %d distinct SMs: %s", p.sm_count, n,
                      table.concat(list, " ")))
  T.ok(n >= 1 and n <= p.sm_count, n .. " distinct SMs on a partition of " .. p.sm_count)
  local whole = cuda.stream({ nonblocking = true })
  local nw = distinct_sms(whole)
  print(string.format("whole device (%d SMs): blocks ran on %d distinct SMs", SMS, nw))
  T.ok(nw > p.sm_count, "the whole device spreads the same blocks wider: " .. nw)
  whole:free(); s:free(); p:free()
  cuda.sync()
end)

T.test("copy on 16 SMs and on the whole device: both correct, bandwidth printed", function()
  local n = (256 << 20) // 16
  local src, dst = cuda.array("u32", n * 4), cuda.array("u32", n * 4)
  local h = cuda.host("u32", n * 4)
  h:iota(1)
  src:copy_from(h)
  local p = cuda.partition{ sms = 16 }
  local ps = p:stream()
  local full = cuda.partition{ sms = SMS }
  local fs = full:stream()
  local gbps = {}
  for _, c in ipairs({ { "16 SMs", ps, 16 }, { SMS .. " SMs", fs, SMS } }) do
    dst:fill(0)
    cuda.sync()
    local cfg = { grid = c[3] * 8, block = 256 }
    local r = cuda.measure(function(st)
      cfg.stream = st
      copy16:launch(cfg, src, dst, n)
    end, { stream = c[2], regime = "hot", max_samples = 50, timeout = 10 })
    c[2]:sync{ timeout = 30 }
    local cmp = cuda.compare(src, dst)
    T.ok(cmp.ok, c[1] .. ": copy mismatches " .. tostring(cmp.mismatches))
    gbps[c[1]] = 2 * n * 16 / (r.median * 1e-3) / 1e9
    print(string.format("copy16 on %-8s: median %.3f ms, %.0f GB/s (read + write)", c[1], r.median, gbps[c[1]]))
  end
  T.ok(gbps["16 SMs"] > 0 and gbps[SMS .. " SMs"] > 0)
  ps:free(); fs:free(); p:free(); full:free()
  src:free(); dst:free()
  cuda.sync()
  T.eq(cuda.stats().partitions, 0)
end)

T.done()
