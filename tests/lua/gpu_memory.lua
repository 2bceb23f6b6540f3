-- GPU tests for device and host arrays (ctest label `gpu`; skipped without a device).
-- Data is checked on the device by kernels as well as after copying back, so a copy that never
-- reached the GPU, or a fill that wrote the wrong bit pattern, fails.
local T = dofile("tests/lua/t.lua")
T.require_gpu()

local SEED = os.time() % 100000
print("random seed " .. SEED)

local DTYPES = { "f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64" }
local SIZE = { f16 = 2, bf16 = 2, f32 = 4, f64 = 8, i8 = 1, i16 = 2, i32 = 4, i64 = 8,
               u8 = 1, u16 = 2, u32 = 4, u64 = 8 }
local SIGNED_OF_WIDTH = { [1] = "i8", [2] = "i16", [4] = "i32", [8] = "i64" }

local SRC = [[
// counts the elements whose bits differ from v (the low `width` bytes of it)
template <typename T>
__device__ void count_ne(const T *x, unsigned long long n, long long v, unsigned long long *bad) {
  unsigned long long local = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    local += x[i] != (T)v;
  if (local) atomicAdd(bad, local);
}
#define COUNT_NE(W, T)                                                                    \
  extern "C" __global__ void count_ne_##W(const T *x, unsigned long long n, long long v, \
                                          unsigned long long *bad) { count_ne(x, n, v, bad); }
COUNT_NE(1, signed char)
COUNT_NE(2, short)
COUNT_NE(4, int)
COUNT_NE(8, long long)

// flips every byte: proves the device sees the bytes that were copied to it
extern "C" __global__ void flip_bytes(unsigned char *p, unsigned long long n) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    p[i] = (unsigned char)~p[i];
}
]]

local mod = cuda.load(cuda.compile(SRC, { name = "gpu_memory.cu" }))
local count_ne = {}
for _, w in ipairs({ 1, 2, 4, 8 }) do count_ne[w] = mod:kernel("count_ne_" .. w) end
local flip = mod:kernel("flip_bytes")
local CFG = { grid = 264, block = 256 }

-- The bits of value v stored as dtype dt, as a signed integer of the same width.
local function bits_of(dt, v)
  local h = cuda.host(dt, 1)
  h[1] = v
  return cuda.host(SIGNED_OF_WIDTH[SIZE[dt]], 1):copy_from(h, { reinterpret = true })[1]
end

-- Number of elements of device array d whose bits differ from `bits`, counted on the device.
local function device_mismatches(d, bits)
  local bad = cuda.array("u64", 1)
  bad:fill(0)
  count_ne[SIZE[d.dtype]]:launch(CFG, d, d.numel, bits, bad)
  cuda.sync()
  return cuda.host("u64", 1):copy_from(bad)[1]
end

local function stats_zero()
  collectgarbage(); collectgarbage()
  cuda.sync()
  local s = cuda.stats()
  T.eq(s.arrays, 0, "live arrays"); T.eq(s.hosts, 0, "live host arrays")
  T.eq(s.device_bytes, 0, "device bytes"); T.eq(s.pinned_bytes, 0, "pinned bytes")
  T.eq(s.deferred, 0, "deferred releases")
end

T.test("every dtype: host -> device -> device -> host, checked on the device too", function()
  for k, dt in ipairs(DTYPES) do
    local n = 100003 -- not a multiple of any vector width
    local src = cuda.host(dt, n):random { seed = SEED + k }
    local d1, d2 = cuda.array(dt, n), cuda.array(dt, n)
    d2:fill(0)
    d1:copy_from(src)
    d2:copy_from(d1)
    local back = cuda.host(dt, n)
    back:fill(1)
    back:copy_from(d2)
    local r = cuda.compare(src, back)
    T.ok(r.ok, dt .. ": " .. r.mismatches .. " mismatches, first at " .. tostring(r.first_bad))
    -- the device flips the bytes of d2; the host checks them against the source
    flip:launch(CFG, d2, d2.nbytes)
    cuda.sync()
    local flipped = cuda.host("u8", d2.nbytes):copy_from(d2, { reinterpret = true })
    local orig = cuda.host("u8", d2.nbytes):copy_from(src, { reinterpret = true })
    for i = 1, d2.nbytes, 97 do
      T.eq(flipped[i], 255 - orig[i], dt .. " byte " .. i)
    end
    T.eq(flipped[d2.nbytes], 255 - orig[d2.nbytes], dt .. " last byte")
  end
  stats_zero()
end)

T.test("fill on the device, every dtype and width", function()
  local values = { f16 = -1.5, bf16 = 3.0e38, f32 = 0.1, f64 = 1 / 3, i8 = -7, i16 = -1234,
                   i32 = -123456789, i64 = -1234567890123, u8 = 250, u16 = 65000,
                   u32 = 4000000000, u64 = 2 ^ 40 + 3 }
  for _, dt in ipairs(DTYPES) do
    local d = cuda.array(dt, { 1000, 33 })
    d:fill(values[dt])
    T.eq(device_mismatches(d, bits_of(dt, values[dt])), 0, dt .. " fill seen on the device")
    local h = cuda.host(dt, d.numel):copy_from(d)
    local want = cuda.host(dt, 1)
    want[1] = values[dt]
    for i = 1, d.numel, 511 do T.eq(h[i], want[1], dt .. " element " .. i) end
    T.eq(h[d.numel], want[1], dt .. " last element")
    T.eq(device_mismatches(d, bits_of(dt, 0)), d.numel, dt .. " the check can fail")
  end
  -- 8-byte patterns with equal halves take the 32-bit memset; others the staged copy
  local d = cuda.array("i64", 4097)
  d:fill(-1)
  T.eq(device_mismatches(d, -1), 0, "i64 -1")
  d:fill(math.mininteger)
  T.eq(device_mismatches(d, math.mininteger), 0, "i64 min")
  d = nil -- luacheck: ignore 311 (dropped so the leak check sees it collected)
  stats_zero()
end)

T.test("large array: 1 GiB fill and device-to-device copy, driver memory returns", function()
  collectgarbage(); collectgarbage(); cuda.sync()
  local free0 = cuda.mem_info()
  local n = 256 * 1024 * 1024
  local a, b = cuda.array("f32", n), cuda.array("f32", n)
  T.ok(T.instrumented or cuda.mem_info() <= free0 - 2 * n * 4, "the driver sees 2 GiB allocated")
  a:fill(2.5)
  b:fill(0)
  b:copy_from(a)
  T.eq(device_mismatches(b, bits_of("f32", 2.5)), 0, "copied 1 GiB")
  a, b = nil, nil -- luacheck: ignore 311
  stats_zero()
  T.ok(T.instrumented or math.abs(cuda.mem_info() - free0) <= 4 * 1024 * 1024,
    "device memory back to its starting value")
end)

T.test("pinned memory: async copies on a stream", function()
  T.ok(cuda.stream ~= nil, "cuda.stream is built")
  local s = cuda.stream { nonblocking = true }
  local n = 8 * 1024 * 1024
  local p = cuda.host("f32", n, { pinned = true }):random { seed = SEED, lo = -1, hi = 1 }
  local d, e = cuda.array("f32", n), cuda.array("f32", n)
  local q = cuda.host("f32", n, { pinned = true })
  q:fill(0 / 0)
  d:copy_from(p, s)
  e:copy_from(d, s)
  q:copy_from(e, s)
  -- freeing the device arrays while the copies are queued must not free them under the copies
  d:free(); e:free()
  s:sync()
  local r = cuda.compare(p, q)
  T.ok(r.ok, "async round trip: " .. r.mismatches .. " mismatches")
  e = cuda.array("f32", n)
  e:fill(7, s)
  s:sync()
  T.eq(device_mismatches(e, bits_of("f32", 7)), 0, "fill on a stream")
  p, q, e, d, s = nil, nil, nil, nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("captured copies and fills replay from a graph", function()
  local s = cuda.stream { nonblocking = true }
  local n = 4096
  local p = cuda.host("i32", n, { pinned = true }):iota(1)
  local d, e = cuda.array("i32", n), cuda.array("i32", n)
  local g = s:capture(function()
    d:fill(-5, s)
    e:copy_from(p, s)
  end)
  local q = cuda.host("i32", n, { pinned = true })
  for round = 1, 3 do
    p:iota(round * 1000) -- the graph's copy node reads p's memory at each replay
    g:launch(s)
    s:sync()
    T.eq(device_mismatches(d, -5), 0, "fill replayed, round " .. round)
    q:copy_from(e)
    T.eq(q[1], round * 1000, "copy replayed with the current data, round " .. round)
    T.eq(q[n], round * 1000 + n - 1)
  end
  g:free(); s:free()
  p, q, d, e, g, s = nil, nil, nil, nil, nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("compare reads device arrays", function()
  local h = cuda.host("bf16", 5000):random { seed = SEED }
  local d = cuda.array("bf16", 5000):copy_from(h)
  T.ok(cuda.compare(d, h).ok)
  local g = cuda.host("bf16", 5000):copy_from(h)
  g[4321] = g[4321] + 1
  local r = cuda.compare(g, d, { atol = 1e-3 })
  T.eq(r.mismatches, 1); T.eq(r.first_bad, 4321)
  h, d, g = nil, nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.done()
