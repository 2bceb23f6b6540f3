-- gpu_hopper_launch.lua — Hopper launches on the device, each checked by what the kernels write:
-- a cluster launch's shape (%cluster_ctarank, %clusterid per block), distributed shared memory
-- between the two CTAs of a cluster, clusters of 16 refused without the non-portable attribute and
-- run with it, a PDL chain's values, a cooperative grid.sync kernel's values, an oversized
-- cooperative grid refused by gpulab, and a TMA multicast load landing the same tile in both CTAs.
-- Helpers: kernels/include/gpulab/cluster.cuh; the PDL and cooperative kernels are the lab's
-- (kernels/hopper_clusters.cu).
local T = dofile("tests/lua/t.lua")
T.require_gpu()

local SRC = [[
#include <gpulab/cluster.cuh>

// One record per block: rank in the cluster, cluster size, cluster id, explicit-cluster flag.
extern "C" __global__ void cluster_ids(unsigned *rank, unsigned *nrank, unsigned *cid, unsigned *expl) {
    if (threadIdx.x == 0) {
        rank[blockIdx.x] = gl_cluster_ctarank();
        nrank[blockIdx.x] = gl_cluster_nctarank();
        cid[blockIdx.x] = gl_cluster_linear_id();
        expl[blockIdx.x] = gl_cluster_is_explicit() ? 1u : 0u;
    }
}

// Each CTA stores 1000 + 10 * cluster + rank into the other CTA's `inbox` (st.shared::cluster) and,
// after a cluster barrier, reports its inbox and the other CTA's `mine` (ld.shared::cluster).
extern "C" __global__ void dsm_exchange(unsigned *out) {
    __shared__ unsigned inbox, mine;
    const unsigned rank = gl_cluster_ctarank(), other = rank ^ 1u;
    if (threadIdx.x == 0) {
        inbox = 0xdeadbeefu;
        mine = 5000u + blockIdx.x;
    }
    gl_cluster_sync(); // both CTAs initialised their slots
    if (threadIdx.x == 0) gl_dsmem_st_u32(gl_dsmem_map(&inbox, other), 1000u + 10u * gl_cluster_linear_id() + rank);
    gl_cluster_sync(); // the stores are visible
    if (threadIdx.x == 0) {
        out[2 * blockIdx.x] = inbox;
        out[2 * blockIdx.x + 1] = gl_dsmem_ld_u32(gl_dsmem_map(&mine, other));
    }
    gl_cluster_sync(); // the other CTA's `mine` stays alive until it was read
}

// Rank 0 multicasts the box at (x, y) into both CTAs; each copies what landed to out[block].
extern "C" __global__ void multicast_copy(const __grid_constant__ gl_tensormap_t map, unsigned *out, int x, int y,
                                          int box_words, unsigned long long timeout_ns, int *status) {
    __shared__ __align__(128) unsigned tile[4096];
    __shared__ __align__(8) gl_u64 full;
    const unsigned long long deadline = gl_globaltimer_ns() + timeout_ns;
    for (int i = threadIdx.x; i < box_words; i += blockDim.x) tile[i] = 0xdeadbeefu;
    if (threadIdx.x == 0) {
        gl_mbar_init(&full, 1);
        gl_fence_mbar_init();
    }
    gl_fence_proxy_async_smem(); // the poison is written before the copy may land
    gl_cluster_sync();           // both barriers exist before rank 0 issues
    if (threadIdx.x == 0) {
        gl_mbar_arrive_expect_tx(&full, (unsigned)box_words * 4u);
        if (gl_cluster_ctarank() == 0) gl_tma_load_2d_multicast(tile, &map, x, y, &full, gl_cluster_mask_first(2));
    }
    if (gl_mbar_wait(&full, 0, deadline, status, GL_WAIT_CODE(GL_WAIT_FULL, 0, 0)))
        for (int i = threadIdx.x; i < box_words; i += blockDim.x) out[blockIdx.x * box_words + i] = tile[i];
    gl_cluster_sync();
}
]]

local function compile_module()
  return cuda.load(cuda.compile(SRC, { name = "gpu_hopper_launch.cu", arch = "sm_90a" }))
end
local mod = compile_module()
local lab_mod = cuda.load(cuda.compile_file(cuda.home .. "/kernels/hopper_clusters.cu", { arch = "sm_90a" }))
local dev = cuda.device(0)
local TIMEOUT_NS = 2000000000

local function fetch(d)
  local h = cuda.host(d.dtype, d.numel)
  h:copy_from(d)
  return h
end

-- A refusal raised by gpulab itself (a string), not a cuda.error from the driver.
local function refused_by_gpulab(fn, what)
  local ok, err = pcall(fn)
  T.ok(not ok, what .. ": refused")
  T.ok(not cuda.is_error(err), what .. ": refused before the driver, got a cuda.error: " .. tostring(err))
  return tostring(err)
end

local function names_number(msg, v) return msg:find("%f[%d]" .. v .. "%f[%D]") ~= nil end

local function launch_ids(k, grid, cluster)
  local d = {}
  for i = 1, 4 do
    d[i] = cuda.array("u32", grid)
    d[i]:fill(0xdeadbeef)
  end
  k:launch({ grid = grid, block = 32, cluster = cluster }, d[1], d[2], d[3], d[4])
  cuda.sync { timeout = 10 }
  local h = {}
  for i = 1, 4 do
    h[i] = fetch(d[i])
    d[i]:free()
  end
  return h[1], h[2], h[3], h[4]
end

T.test("a cluster launch of 2: every block's rank and cluster id", function()
  local k = mod:kernel("cluster_ids")
  local rank, nrank, cid, expl = launch_ids(k, 8, 2)
  for b = 1, 8 do
    T.eq(rank[b], (b - 1) % 2, "block " .. (b - 1) .. " rank")
    T.eq(nrank[b], 2, "block " .. (b - 1) .. " cluster size")
    T.eq(cid[b], (b - 1) // 2, "block " .. (b - 1) .. " cluster id")
    T.eq(expl[b], 1, "block " .. (b - 1) .. " sees an explicit cluster")
  end
  -- without the cluster key: clusters of one, no explicit cluster
  rank, nrank, cid, expl = launch_ids(k, 4, nil)
  for b = 1, 4 do
    T.eq(cid[b], b - 1, "plain launch: each block is its own cluster")
    T.eq(rank[b], 0, "plain launch rank")
    T.eq(nrank[b], 1, "plain launch cluster size")
    T.eq(expl[b], 0, "plain launch: no explicit cluster")
  end
end)

T.test("one table launched again and changed in between: each launch has the table's shape", function()
  -- from its third launch the kernel reads the table's values only (the remembered check)
  local k = mod:kernel("cluster_ids")
  local d = {}
  for i = 1, 4 do d[i] = cuda.array("u32", 16) end
  local cfg = { grid = 8, block = 32, cluster = 2 }
  local function run(grid, cluster, what)
    for i = 1, 4 do d[i]:fill(0xffffffff) end
    k:launch(cfg, d[1], d[2], d[3], d[4])
    cuda.sync { timeout = 10 }
    local rank, nrank, cid = fetch(d[1]), fetch(d[2]), fetch(d[3])
    for b = 1, 16 do
      if b <= grid then
        T.eq(nrank[b], cluster, what .. ": block " .. (b - 1) .. " cluster size")
        T.eq(rank[b], (b - 1) % cluster, what .. ": block " .. (b - 1) .. " rank")
        T.eq(cid[b], (b - 1) // cluster, what .. ": block " .. (b - 1) .. " cluster id")
      else
        T.eq(rank[b], 0xffffffff, what .. ": block " .. (b - 1) .. " did not run")
      end
    end
  end
  for n = 1, 3 do run(8, 2, "launch " .. n) end
  cfg.cluster = 4
  run(8, 4, "cluster changed to 4")
  cfg.grid = 16
  run(16, 4, "grid changed to 16")
  cfg.cluster = nil
  run(16, 1, "cluster taken out")
  cfg.cluster = 8
  run(16, 8, "cluster of 8 put back")
  cfg.grid = 12
  refused_by_gpulab(function() k:launch(cfg, d[1], d[2], d[3], d[4]) end, "grid 12, cluster 8")
  for i = 1, 4 do d[i]:free() end
end)

T.test("a grid that is not a multiple of the cluster is refused before the driver", function()
  local k = mod:kernel("cluster_ids")
  local d = cuda.array("u32", 8)
  refused_by_gpulab(function() k:launch({ grid = 7, block = 32, cluster = 2 }, d, d, d, d) end, "grid 7, cluster 2")
  d:free()
end)

T.test("distributed shared memory: the two CTAs of a cluster write and read each other", function()
  local k = mod:kernel("dsm_exchange")
  local grid = 6
  local d = cuda.array("u32", 2 * grid)
  d:fill(0xdeadbeef)
  k:launch({ grid = grid, block = 64, cluster = 2 }, d)
  cuda.sync { timeout = 10 }
  local h = fetch(d)
  for b = 0, grid - 1 do
    local rank, c, other = b % 2, b // 2, b ~ 1
    T.eq(h[2 * b + 1], 1000 + 10 * c + (1 - rank), "block " .. b .. ": what the other CTA stored in its inbox")
    T.eq(h[2 * b + 2], 5000 + other, "block " .. b .. ": the other CTA's word read through the cluster")
  end
  d:free()
end)

T.test("clusters of 16: refused without the non-portable attribute, run with it", function()
  local m = compile_module() -- a fresh function: no attribute set on it yet
  local k = m:kernel("cluster_ids")
  local d = cuda.array("u32", 16)
  local msg = refused_by_gpulab(function() k:launch({ grid = 16, block = 32, cluster = 16 }, d, d, d, d) end,
    "cluster of 16 without the attribute")
  T.ok(names_number(msg, 8), "the message names the portable limit 8: " .. msg)
  T.ok(k:max_cluster_size { block = 32, smem = 0 } >= 8, "max_cluster_size is at least the portable 8")
  k:set_attribute("non_portable_cluster_size_allowed", 1)
  T.eq(k:attribute("non_portable_cluster_size_allowed"), 1, "attribute reads back")
  T.ok(k:max_active_clusters { block = 32, smem = 0, cluster = 16 } >= 1, "clusters of 16 can be resident")
  local rank, nrank, cid = launch_ids(k, 32, 16)
  for b = 1, 32 do
    T.eq(rank[b], (b - 1) % 16, "block " .. (b - 1) .. " rank")
    T.eq(nrank[b], 16, "cluster size")
    T.eq(cid[b], (b - 1) // 16, "cluster id")
  end
  d:free()
  m:free()
end)

T.test("a PDL chain computes the same values as a plain one", function()
  local k = lab_mod:kernel("pdl_step")
  local K, G, B = 16, dev.sm_count, 128
  local n = G * B
  local h = cuda.host("u32", (K + 1) * n)
  local d = cuda.array("u32", (K + 1) * n)
  local s, e, w = cuda.array("u64", K * G), cuda.array("u64", K * G), cuda.array("u64", K * G)
  local stream = cuda.stream { nonblocking = true }
  for _, pdl in ipairs { true, false } do
    h:fill(0xdeadbeef)
    h:view(1, n):iota(7)
    d:copy_from(h, stream) -- on the chain's stream: a non-blocking stream does not wait for the default one
    for j = 0, K - 1 do k:launch({ grid = G, block = B, pdl = pdl, stream = stream }, d, n, j, s, e, w) end
    stream:sync { timeout = 10 }
    local out = fetch(d)
    for j = 1, K do
      for i = 1, n, 97 do
        T.eq(out[j * n + i], 7 + (i - 1) + j, string.format("pdl=%s link %d value %d", tostring(pdl), j, i))
      end
    end
    for i = 1, n do T.eq(out[K * n + i], 7 + (i - 1) + K, "pdl=" .. tostring(pdl) .. " final value " .. i) end
  end
  stream:free()
  for _, x in ipairs { d, s, e, w } do x:free() end
end)

T.test("a cooperative kernel's grid.sync() steps give the values of one launch per step", function()
  local k = lab_mod:kernel("coop_steps")
  local B, S = 256, 9
  local per_sm = k:occupancy(B, 0)
  local G = per_sm * dev.sm_count -- the largest grid that fits at once
  local n = G * B
  local a, b = cuda.array("u32", n), cuda.array("u32", n)
  local h = cuda.host("u32", n)
  h:iota()
  a:copy_from(h)
  b:fill(0xdeadbeef)
  k:launch({ grid = G, block = B, cooperative = true }, a, b, n, S)
  cuda.sync { timeout = 10 }
  local out = fetch(S % 2 == 1 and b or a)
  for i = 1, n do T.eq(out[i], (i - 1 + S) % n + S, "value " .. i) end

  local over = G + 1
  local msg = refused_by_gpulab(function() k:launch({ grid = over, block = B, cooperative = true }, a, b, n, S) end,
    "cooperative grid of " .. over)
  T.ok(names_number(msg, per_sm), "the message names " .. per_sm .. " blocks per SM: " .. msg)
  T.ok(names_number(msg, dev.sm_count), "the message names " .. dev.sm_count .. " SMs: " .. msg)
  a:free()
  b:free()
end)

T.test("a TMA multicast load lands the same tile in both CTAs of the cluster", function()
  local k = mod:kernel("multicast_copy")
  local W, H, bw, bh, x, y = 256, 128, 32, 16, 64, 32
  local h = cuda.host("u32", W * H)
  h:iota()
  local d = cuda.array("u32", W * H)
  d:copy_from(h)
  local tm = cuda.tensormap { array = d, dtype = "u32", dims = { W, H }, box = { bw, bh } }
  T.eq(tm.box_bytes, bw * bh * 4, "box bytes")
  local out = cuda.array("u32", 2 * bw * bh)
  out:fill(0xdeadbeef)
  local status = cuda.array("i32", 4)
  status:fill(0)
  k:launch({ grid = 2, block = 128, cluster = 2 }, tm, out, x, y, bw * bh, TIMEOUT_NS, status)
  cuda.sync { timeout = 10 }
  T.eq(fetch(status)[1], 0, "no tile wait timed out")
  local got = fetch(out)
  for cta = 0, 1 do
    for i = 0, bw * bh - 1 do
      local want = (y + i // bw) * W + x + i % bw
      T.eq(got[cta * bw * bh + i + 1], want, string.format("CTA %d word %d", cta, i))
    end
  end
  for _, o in ipairs { tm, out, status, d } do o:free() end
end)

T.done()
