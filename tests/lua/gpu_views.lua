-- GPU test (label gpu): device views as launch arguments and in offset copies, and bool arrays
-- through the device. Kernels check on the device what the host wrote, so a view whose address
-- were wrong, or a copy that moved the wrong bytes, fails.
local T = dofile("tests/lua/t.lua")
T.require_gpu()

local SRC = [[
// p[i] = p[i] * 2 + base, over n elements: run on a view it must touch only that range
extern "C" __global__ void twice_plus(float *p, unsigned n, float base) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * 2.0f + base;
}
// out[c * rows + r] = in[r * cols + c], one thread per element
extern "C" __global__ void transpose(const float *in, float *out, unsigned rows, unsigned cols) {
  unsigned c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) out[(unsigned long long)c * rows + r] = in[(unsigned long long)r * cols + c];
}
// out[i] = !in[i], and counts the true inputs
extern "C" __global__ void negate(const bool *in, bool *out, unsigned n, unsigned *trues) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = !in[i];
    if (in[i]) atomicAdd(trues, 1u);
  }
}
]]
local mod = cuda.load(cuda.compile(SRC, { name = "gpu_views.cu" }))
local twice, negate, transpose = mod:kernel("twice_plus"), mod:kernel("negate"), mod:kernel("transpose")

T.test("a device view as a launch argument touches only its range", function()
  local n, first, count = 1 << 20, 1000, 4096
  local h = cuda.host("f32", n):iota(1)
  local d = cuda.array("f32", n):copy_from(h)
  local v = d:view(first, count)
  twice:launch({ grid = (count + 255) // 256, block = 256 }, v, count, 0.5)
  local prepared = twice:prepare({ grid = 1, block = 32 }, d:view(1, 32), 32, 0.0)
  prepared()
  cuda.sync()
  local back = cuda.host("f32", n):copy_from(d)
  local want = cuda.host("f32", n):copy_from(h)
  want:view(first, count):scale(2):add(0.5)
  want:view(1, 32):scale(2)
  local r = cuda.compare(back, want)
  T.eq(r.mismatches, 0, "mismatches (first at " .. tostring(r.first_bad) .. ")")
end)

T.test("offset copies between host and device and on the device", function()
  local n = 1 << 16
  local h = cuda.host("i32", n):iota(1)
  local d = cuda.array("i32", n):fill(0)
  d:copy_from(h, { dst_offset = 100, src_offset = 10, count = 1000 })
  local e = cuda.array("i32", n):fill(-1)
  e:copy_from(d, { dst_offset = 5, src_offset = 100, count = 1000 })
  local s = cuda.stream()
  local p = cuda.host("i32", 1000, { pinned = true })
  p:copy_from(e, { src_offset = 5, count = 1000, stream = s })
  s:sync { timeout = 10 }
  T.eq(p[1], 11); T.eq(p[1000], 1010)
  local edge = cuda.host("i32", 6):copy_from(e:view(1, 6))
  T.eq(edge[5], -1); T.eq(edge[6], 11)
  -- a view of a view, copied into from the host
  e:view(2001, 100):view(51, 50):copy_from(cuda.host("i32", 50):fill(42))
  local around = cuda.host("i32", 3):copy_from(e, { src_offset = 2049, count = 3 })
  T.eq(around[1], -1); T.eq(around[2], 42); T.eq(around[3], 42)
end)

T.test("bool arrays round-trip through the device", function()
  local n = 100003
  local h = cuda.host("bool", n):random { seed = 7, p = 0.3 }
  local d = cuda.array("bool", n):copy_from(h)
  local out = cuda.array("bool", n)
  local trues = cuda.array("u32", 1):fill(0)
  negate:launch({ grid = (n + 255) // 256, block = 256 }, d, out, n, trues)
  cuda.sync()
  T.eq(cuda.host("u32", 1):copy_from(trues)[1], h:sum(), "the device counts the same trues")
  local back = cuda.host("bool", n):copy_from(out)
  T.eq(back:sum(), n - h:sum(), "every element negated")
  local hb = cuda.host("bool", n):copy_from(d)
  T.ok(cuda.compare(hb, h).ok, "unchanged input read back")
  out:fill(true)
  T.eq(cuda.host("bool", n):copy_from(out):sum(), n, "d:fill(true)")
end)

T.test("an 8192x8192 f32 transpose checked against the host reference h:transpose()", function()
  local rows, cols = 8192, 8192
  local h = cuda.host("f32", { rows, cols }):random { seed = 5, lo = -1, hi = 1 }
  local d = cuda.array("f32", { rows, cols }):copy_from(h)
  local out = cuda.array("f32", { cols, rows })
  transpose:launch({ grid = { cols // 32, rows // 8 }, block = { 32, 8 } }, d, out, rows, cols)
  cuda.sync { timeout = 20 }
  local t0 = os.clock()
  local ref = h:transpose()
  local t_ref = os.clock() - t0
  t0 = os.clock()
  local r = cuda.compare(out, ref)
  local t_cmp = os.clock() - t0
  print(string.format("host reference h:transpose() %dx%d f32: %.3f s; cuda.compare (device copy "
    .. "included): %.3f s", rows, cols, t_ref, t_cmp))
  T.eq(r.mismatches, 0, "mismatches (first at " .. tostring(r.first_bad) .. ")")
  -- the kernel's output, read through views of its rows, matches the reference's rows
  local row7 = cuda.host("f32", rows):copy_from(out:view(7 * rows + 1, rows))
  T.ok(cuda.compare(row7, ref:view(7 * rows + 1, rows)).ok, "row 8 through views")
end)

T.test("nothing left once the arrays and views are dropped", function()
  collectgarbage(); collectgarbage()
  cuda.sync()
  local s = cuda.stats()
  T.eq(s.arrays, 0, "live arrays"); T.eq(s.device_bytes, 0, "device bytes"); T.eq(s.deferred, 0, "deferred")
end)
T.done()
