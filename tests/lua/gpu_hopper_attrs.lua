-- GPU test (label gpu) for kernel attributes and cluster occupancy on a Hopper device (H200):
-- a kernel compiled with __cluster_dims__(2,1,1) reports k.cluster_dims, every attribute reads,
-- non_portable_cluster_size_allowed can be set, and k:max_active_clusters answers for clusters of
-- 1..16 blocks of 128 threads. Only the structure is asserted (positive, non-increasing with the
-- cluster size); the numbers are printed (a light kernel gave about 1056/528/248/124/58). A cluster
-- shape set at run time (required_cluster_*) is what the blocks of a launch without cluster= report,
-- and attributes set through one kernel object hold for another object of the same function.
local T = dofile("tests/lua/t.lua")
T.require_gpu()

local d = cuda.device()
if d.cc[1] < 9 then
  print("skipped: needs compute capability 9.0 (clusters); this device is " .. d.arch)
  os.exit(77)
end

local SRC = [[
extern "C" __global__ void __cluster_dims__(2, 1, 1) paired(float *out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = (float)blockIdx.x;
}
extern "C" __global__ void light(float *out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
}
// one record per block: the number of CTAs in its cluster (1 when launched without clusters)
extern "C" __global__ void cluster_size(unsigned *nrank) {
  unsigned n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  if (threadIdx.x == 0) nrank[blockIdx.x] = n;
}
]]

local NAMES = {
  "max_threads_per_block", "shared_size_bytes", "const_size_bytes", "local_size_bytes", "num_regs",
  "ptx_version", "binary_version", "cache_mode_ca", "max_dynamic_shared_size_bytes",
  "preferred_shared_memory_carveout", "cluster_size_must_be_set", "required_cluster_width",
  "required_cluster_height", "required_cluster_depth", "non_portable_cluster_size_allowed",
  "cluster_scheduling_policy_preference",
}

local mod = cuda.load(cuda.compile(SRC, { name = "hopper_attrs.cu", arch = "sm_90a" }))

T.test("compiled-in cluster shape and every attribute on the device", function()
  local k = mod:kernel("paired")
  T.eq(k.cluster_dims[1], 2); T.eq(k.cluster_dims[2], 1); T.eq(k.cluster_dims[3], 1)
  T.eq(k:attribute("cluster_size_must_be_set"), 1)
  local all = k:attributes()
  for _, name in ipairs(NAMES) do
    T.eq(math.type(all[name]), "integer", name)
    T.eq(k:attribute(name), all[name], name)
  end
  T.eq(all.num_regs, k.regs); T.eq(all.binary_version, 90)
  T.raises(function() k:set_attribute("required_cluster_width", 4) end, "cannot be changed")
  T.eq(k:max_active_clusters{ block = 128 } > 0, true)
end)

T.test("non-portable clusters and co-resident clusters of 1..16 blocks", function()
  local k = mod:kernel("light")
  k:set_attribute("non_portable_cluster_size_allowed", true)
  T.eq(k:attribute("non_portable_cluster_size_allowed"), 1)
  T.eq(k:max_cluster_size{ block = 128 }, 16)
  local last = math.huge
  local line = {}
  for _, c in ipairs({ 1, 2, 4, 8, 16 }) do
    local n = k:max_active_clusters{ block = 128, cluster = c }
    line[#line + 1] = string.format("%d:%d", c, n)
    T.ok(n > 0, "cluster " .. c .. " gives " .. n)
    T.ok(n <= last, "non-increasing with the cluster size")
    last = n
  end
  print("max_active_clusters (cluster:clusters) " .. table.concat(line, " "))
end)

-- the cluster size every block of a launch of k with cfg reports
local function cluster_sizes(k, cfg)
  local records = cuda.array("u32", 64):fill(0)
  k:launch(cfg, records)
  cuda.sync()
  local h = cuda.host("u32", 64)
  h:copy_from(records)
  local got = {}
  for i = 1, cfg.grid do got[i] = h[i] end
  return table.concat(got, ",")
end

-- a refusal raised by gpulab itself (a string), not a cuda.error from the driver
local function refused_by_gpulab(fn, what)
  local ok, err = pcall(fn)
  T.ok(not ok and type(err) == "string", "refused by gpulab: " .. tostring(err))
  T.ok(err:find(what, 1, true), err)
end

T.test("a cluster shape set at run time: launches without cluster= run in it, every object sees it", function()
  local k = mod:kernel("cluster_size")
  T.eq(cluster_sizes(k, { grid = 4, block = 32 }), "1,1,1,1")
  k:set_attribute("required_cluster_width", 2)
  -- a partial shape: the driver refuses a launch without cluster=, and runs one that agrees
  refused_by_gpulab(function() k:launch({ grid = 4, block = 32 }, cuda.array("u32", 4)) end,
    "required cluster shape is 2x0x0")
  T.eq(cluster_sizes(k, { grid = 4, block = 32, cluster = 2 }), "2,2,2,2")
  k:set_attribute("required_cluster_height", 1):set_attribute("required_cluster_depth", 1)
  T.eq(k:attribute("cluster_size_must_be_set"), 0, "set at run time, not compiled in")
  T.eq(cluster_sizes(k, { grid = 4, block = 32 }), "2,2,2,2")
  T.eq(cluster_sizes(k, { grid = 4, block = 32, cluster = 2 }), "2,2,2,2")
  refused_by_gpulab(function() k:launch({ grid = 3, block = 32 }, cuda.array("u32", 4)) end,
    "grid x = 3 is not a multiple of the run-time required_cluster_* cluster's x = 2")
  refused_by_gpulab(function() k:launch({ grid = 4, block = 32, cluster = 4 }, cuda.array("u32", 4)) end,
    "contradicts kernel 'cluster_size''s run-time required_cluster_*(2,1,1)")
  local k2 = mod:kernel("cluster_size")
  T.eq(k2.cluster_dims[1], 2)
  k2:set_attribute("required_cluster_width", 4)
  T.eq(k.cluster_dims[1], 4)
  T.eq(cluster_sizes(k, { grid = 8, block = 32 }), "4,4,4,4,4,4,4,4")
  k2:set_attribute("required_cluster_width", 0)
  refused_by_gpulab(function() k:launch({ grid = 4, block = 32 }, cuda.array("u32", 4)) end,
    "required cluster shape is 0x1x1")
  k2:set_attribute("required_cluster_height", 0):set_attribute("required_cluster_depth", 0)
  T.eq(k.cluster_dims, nil)
  T.eq(cluster_sizes(k, { grid = 3, block = 32 }), "1,1,1")
end)

T.test("attributes set through another kernel object for the same function", function()
  local k, other = mod:kernel("cluster_size"), mod:kernel("cluster_size")
  other:set_attribute("non_portable_cluster_size_allowed", 1)
  local cfg = { grid = 16, block = 32, cluster = 16 }
  T.eq(cluster_sizes(k, cfg), string.rep("16", 16, ","))
  T.eq(cluster_sizes(k, cfg), string.rep("16", 16, ","))
  other:set_attribute("non_portable_cluster_size_allowed", 0)
  refused_by_gpulab(function() k:launch(cfg, cuda.array("u32", 16)) end, "above the portable limit of 8")
  other:set_max_dynamic_smem(100 * 1024)
  T.eq(k.max_dynamic_smem, 100 * 1024)
  k:launch({ grid = 1, block = 32, smem = 80 * 1024 }, cuda.array("u32", 1))
  other:set_max_dynamic_smem(0)
  refused_by_gpulab(function() k:launch({ grid = 1, block = 32, smem = 80 * 1024 }, cuda.array("u32", 1)) end,
    "81920 bytes exceed kernel 'cluster_size''s dynamic shared memory limit of 0 bytes")
  cuda.sync()
end)

T.done()
