-- GPU test of L2 residency (ctest label `gpu`; skipped without a device). On the H200: the
-- persisting set-aside the driver grants (at most MAX_PERSISTING_L2_CACHE_SIZE, 37.5 MiB), a
-- stream window's round trip, and the effect cuda.measure's cold regime guards against: a 16 MiB
-- hot set read under a persisting window survives the cold flush (2x L2 written before every
-- sample) when the persisting lines are not reset (l2_reset=false), so the "cold" sample reads it
-- from L2 and is faster than with the reset, where it comes from HBM.
local T = dofile("tests/lua/t.lua")
T.require_gpu()

local MAX_PERSISTING = 39321600 -- H200, measured 2026-12-01
local HOT_BYTES = 16 * 1024 * 1024
local MARGIN = 0.90 -- the no-reset median must be below 90% of the reset median

local SRC = [[
extern "C" __global__ void read_hot(const float4 *p, unsigned long long n4, float *out) {
  float acc = 0.0f;
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = p[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == -1.0f) out[0] = acc; /* never true for the data below: keeps the loads */
}
]]
local read_hot = cuda.load(cuda.compile(SRC, { name = "gpu_l2.cu" })):kernel("read_hot")
local hot = cuda.array("f32", HOT_BYTES // 4)
hot:fill(1)
local out = cuda.array("f32", 1)
local sms = cuda.device().sm_count or 132
local cfg = { grid = sms * 8, block = 256 }

T.test("cuda.l2_persisting grants at most the device's maximum and reads back", function()
  local granted = cuda.l2_persisting(MAX_PERSISTING)
  print(string.format("l2_persisting: asked %d, granted %d", MAX_PERSISTING, granted))
  T.ok(granted > HOT_BYTES and granted <= MAX_PERSISTING, "granted " .. granted)
  T.eq(cuda.l2_persisting(), granted)
  cuda.l2_reset()
end)

T.test("a stream window round-trips through the driver", function()
  local s = cuda.stream { nonblocking = true }
  s:set_l2_window { array = hot, hit_ratio = 1, hit = "persisting", miss = "streaming" }
  local w = s:l2_window()
  T.eq(w.ptr, hot.ptr)
  T.eq(w.bytes, HOT_BYTES)
  T.eq(w.hit_ratio, 1)
  T.eq(w.hit, "persisting")
  T.eq(w.miss, "streaming")
  T.ok(rawequal(w.array, hot))
  s:set_l2_window { array = hot, bytes = HOT_BYTES // 2, hit_ratio = 0.5, hit = "normal", miss = "normal" }
  w = s:l2_window()
  T.eq(w.bytes, HOT_BYTES // 2)
  T.eq(w.hit_ratio, 0.5)
  T.eq(w.hit, "normal")
  s:set_l2_window(nil)
  T.eq(s:l2_window(), nil)
  s:free()
end)

T.test("a persisting window makes cold samples hot unless cuda.measure resets it", function()
  T.ok(cuda.l2_persisting(MAX_PERSISTING) > HOT_BYTES)
  local s = cuda.stream { nonblocking = true }
  s:set_l2_window { array = hot, hit_ratio = 1, hit = "persisting", miss = "streaming" }
  local function fn(st)
    read_hot:launch({ grid = cfg.grid, block = cfg.block, stream = st }, hot, HOT_BYTES // 16, out)
  end
  local opts = { regime = "cold", stream = s, min_samples = 100, max_samples = 2000, min_time = 1,
                 max_noise = 0.01, timeout = 60 }
  local function measure(reset)
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    o.l2_reset = reset
    return cuda.measure(fn, o)
  end
  -- interleaved, so a drift of the clock or the temperature affects both alike
  local with_reset, skipped = {}, {}
  for round = 1, 3 do
    with_reset[round] = measure(true)
    skipped[round] = measure(false)
  end
  local function median_of(rs)
    local m = {}
    for i, r in ipairs(rs) do m[i] = r.median end
    table.sort(m)
    return m[(#m + 1) // 2]
  end
  local reset_ms, skipped_ms = median_of(with_reset), median_of(skipped)
  local report = {}
  for round = 1, 3 do
    local a, b = with_reset[round], skipped[round]
    report[#report + 1] = string.format(
      "round %d: reset median %.4f ms [%.4f, %.4f] n=%d resets=%d | skipped median %.4f ms [%.4f, %.4f] n=%d resets=%d",
      round, a.median, a.ci95.lo, a.ci95.hi, a.samples, a.l2_resets, b.median, b.ci95.lo, b.ci95.hi, b.samples,
      b.l2_resets)
  end
  report[#report + 1] = string.format("flush %d bytes (%.1fx L2 of %d bytes), %s", with_reset[1].flush.bytes,
    with_reset[1].flush.l2_multiple or 0, with_reset[1].flush.l2_bytes, with_reset[1].flush.how)
  report[#report + 1] = string.format("median of medians: reset %.4f ms, skipped %.4f ms, ratio %.3f (must be < %.2f)",
    reset_ms, skipped_ms, skipped_ms / reset_ms, MARGIN)
  local text = table.concat(report, "\n")
  print(text)
  for round = 1, 3 do
    T.eq(with_reset[round].l2_reset, true, text)
    T.eq(with_reset[round].l2_resets, with_reset[round].flush.count, text)
    T.eq(skipped[round].l2_reset, false, text)
  end
  T.ok(skipped_ms < MARGIN * reset_ms, "persisting lines that survive the flush make the sample faster:\n" .. text)
  s:set_l2_window(nil)
  s:free()
  cuda.l2_reset()
  cuda.l2_persisting(0)
end)

T.done()
