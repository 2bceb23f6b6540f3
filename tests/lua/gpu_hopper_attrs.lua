-- GPU test (label gpu) for kernel attributes and cluster occupancy on a Hopper device (H200):
-- a kernel compiled with __cluster_dims__(2,1,1) reports k.cluster_dims, every attribute reads,
-- non_portable_cluster_size_allowed can be set, and k:max_active_clusters answers for clusters of
-- 1..16 blocks of 128 threads. Only the structure is asserted (positive, non-increasing with the
-- cluster size); the numbers are printed (a light kernel gave about 1056/528/248/124/58).
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

T.done()
