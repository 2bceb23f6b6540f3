-- Kernel attributes by name (k:attribute, k:set_attribute, k:attributes), the compiled-in
-- cluster shape (k.cluster_dims) and the cluster occupancy queries (k:max_active_clusters,
-- k:max_cluster_size) through the driver stand-in, plus the stand-in's own parameter parsing
-- (.bf16, 200 parameters) and graphs that keep their launches. The stand-in runs nothing and its
-- cluster numbers come from its documented model (tests/fakecuda/fake_core.c): plumbing only,
-- no GPU result is claimed.
-- Runs three ways (tests/hopper.cmake): plain; GPULAB_FAKE_NO_ENTRY naming the cluster
-- occupancy entry points (an older driver); GPULAB_FAKE_CC=8.0 (a device without clusters).
local T = dofile("tests/lua/t.lua")

local NO_ENTRY = os.getenv("GPULAB_FAKE_NO_ENTRY")
local OLD_CC = os.getenv("GPULAB_FAKE_CC")

local clear_log, matching = T.clear_log, T.log_lines

local PTX = [[
.version 8.0
.target sm_90a
.address_size 64

.visible .entry plain(
	.param .u64 p,
	.param .u32 n
)
{
	.shared .align 4 .b8 tile[1024];
	ret;
}

.visible .entry clustered(
	.param .u64 p
)
.explicitcluster
.reqnctapercluster 2, 1, 1
{
	ret;
}

.visible .entry half_args(
	.param .bf16 b,
	.param .u32 n,
	.param .f16 h
)
{
	ret;
}
]]

-- A kernel of 200 .u32 parameters (the stand-in used to stop at 64).
local function many_params_ptx(n)
  local params = {}
  for i = 1, n do params[i] = string.format("\t.param .u32 a%d", i) end
  return ".version 8.0\n.target sm_90\n.address_size 64\n\n.visible .entry many(\n" ..
         table.concat(params, ",\n") .. "\n)\n{\n\tret;\n}\n"
end

local NAMES = {
  "max_threads_per_block", "shared_size_bytes", "const_size_bytes", "local_size_bytes", "num_regs",
  "ptx_version", "binary_version", "cache_mode_ca", "max_dynamic_shared_size_bytes",
  "preferred_shared_memory_carveout", "cluster_size_must_be_set", "required_cluster_width",
  "required_cluster_height", "required_cluster_depth", "non_portable_cluster_size_allowed",
  "cluster_scheduling_policy_preference",
}

-- The stand-in's cluster model: 7 GPCs of 18 SMs and one of 6; clusters per GPC =
-- floor(SMs × blocks per SM / cluster blocks) where one fits.
local GPCS = { 18, 18, 18, 18, 18, 18, 18, 6 }
local function model_clusters(per_sm, blocks)
  local total = 0
  for _, sms in ipairs(GPCS) do
    if blocks <= sms * per_sm then total = total + (sms * per_sm) // blocks end
  end
  return total
end

local mod = cuda.load(PTX)

if NO_ENTRY then
  T.test("an older driver: the cluster occupancy entry points are missing", function()
    local k = mod:kernel("clustered")
    T.eq(k.cluster_dims[1], 2, "attributes still read")
    T.raises(function() k:max_active_clusters{ block = 128 } end,
      "k:max_active_clusters: this CUDA driver (13.0) lacks cuOccupancyMaxActiveClusters, "
      .. "which needs a CUDA 12.0 driver")
    if NO_ENTRY:find("cuOccupancyMaxPotentialClusterSize", 1, true) then
      T.raises(function() k:max_cluster_size{ block = 128 } end,
        "lacks cuOccupancyMaxPotentialClusterSize, which needs a CUDA 12.0 driver")
    end
  end)
  T.done()
  return
end

if OLD_CC then
  T.test("a device of compute capability 8.0: no clusters", function()
    T.eq(cuda.device(0).cc[1], 8)
    local k = mod:kernel("clustered")
    T.eq(k.cluster_dims, nil, "the driver answers no cluster attributes: read as 0")
    T.eq(k:attribute("required_cluster_width"), 0)
    T.eq(k:attribute("non_portable_cluster_size_allowed"), 0)
    local all = k:attributes()
    T.eq(all.cluster_size_must_be_set, 0); T.eq(all.num_regs, 32)
    T.raises(function() k:max_active_clusters{ block = 128, cluster = 2 } end,
      "k:max_active_clusters: thread block clusters need a device of compute capability 9.0 or newer; device 0 is 8.0")
    T.raises(function() k:max_cluster_size{ block = 128 } end, "compute capability 9.0 or newer")
    T.raises(function() k:set_attribute("non_portable_cluster_size_allowed", 1) end, "CUDA_ERROR_INVALID_VALUE")
  end)
  T.done()
  return
end

T.test("every attribute is readable by name, and k:attributes() lists them all", function()
  local k = mod:kernel("plain")
  local all = k:attributes()
  local n = 0
  for _ in pairs(all) do n = n + 1 end
  T.eq(n, #NAMES, "one entry per CUfunction_attribute")
  for _, name in ipairs(NAMES) do
    T.eq(math.type(k:attribute(name)), "integer", name)
    T.eq(k:attribute(name), all[name], name)
  end
  T.eq(all.num_regs, 32); T.eq(all.num_regs, k.regs)
  T.eq(all.shared_size_bytes, 1024); T.eq(all.shared_size_bytes, k.smem)
  T.eq(all.max_threads_per_block, k.max_threads)
  T.eq(all.ptx_version, 90); T.eq(all.binary_version, 90)
  T.eq(all.preferred_shared_memory_carveout, -1)
  T.eq(all.max_dynamic_shared_size_bytes, k.max_dynamic_smem)
  T.eq(all.cluster_size_must_be_set, 0); T.eq(all.required_cluster_width, 0)
  T.eq(k.cluster_dims, nil, "no compiled-in cluster")
end)

T.test("set/get round trips, and the cached fields follow", function()
  local k = mod:kernel("plain")
  T.eq(k:set_attribute("preferred_shared_memory_carveout", 50), k, "returns the kernel")
  T.eq(k:attribute("preferred_shared_memory_carveout"), 50)
  k:set_attribute("preferred_shared_memory_carveout", -1)
  T.eq(k:attribute("preferred_shared_memory_carveout"), -1)
  k:set_attribute("non_portable_cluster_size_allowed", true)
  T.eq(k:attribute("non_portable_cluster_size_allowed"), 1)
  k:set_attribute("non_portable_cluster_size_allowed", false)
  T.eq(k:attribute("non_portable_cluster_size_allowed"), 0)
  k:set_attribute("cluster_scheduling_policy_preference", "spread")
  T.eq(k:attribute("cluster_scheduling_policy_preference"), 1)
  k:set_attribute("cluster_scheduling_policy_preference", "load_balancing")
  T.eq(k:attribute("cluster_scheduling_policy_preference"), 2)
  k:set_attribute("cluster_scheduling_policy_preference", 0)
  T.eq(k:attribute("cluster_scheduling_policy_preference"), 0)
  k:set_attribute("max_dynamic_shared_size_bytes", 100000)
  T.eq(k.max_dynamic_smem, 100000, "k.max_dynamic_smem kept in sync")
  T.eq(k:attribute("max_dynamic_shared_size_bytes"), 100000)
  k:set_max_dynamic_smem(2048)
  T.eq(k:attribute("max_dynamic_shared_size_bytes"), 2048)
  k:set_attribute("required_cluster_width", 2)
  T.eq(k:attribute("required_cluster_width"), 2)
  k:set_attribute("required_cluster_width", 0)
  T.eq(k:attribute("required_cluster_width"), 0)
end)

T.test("read-only attributes are refused by name", function()
  local k = mod:kernel("plain")
  T.raises(function() k:set_attribute("num_regs", 16) end,
    "bad argument #1 to 'k:set_attribute' ('num_regs' is read-only (set by the compiler))")
  for _, name in ipairs({ "max_threads_per_block", "shared_size_bytes", "const_size_bytes", "local_size_bytes",
                          "ptx_version", "binary_version", "cache_mode_ca", "cluster_size_must_be_set" }) do
    T.raises(function() k:set_attribute(name, 0) end, "'" .. name .. "' is read-only (", name)
  end
end)

T.test("unknown names: near matches and how to list them all", function()
  local k = mod:kernel("plain")
  local err = T.raises(function() k:attribute("num_reg") end, "unknown attribute 'num_reg' (did you mean 'num_regs'?")
  T.ok(err:find("k:attributes() lists every attribute", 1, true), err)
  err = T.raises(function() k:attribute("cluster") end, "did you mean")
  local cluster_names = { "cluster_size_must_be_set", "required_cluster_width", "non_portable_cluster_size_allowed" }
  for _, name in ipairs(cluster_names) do
    T.ok(err:find("'" .. name .. "'", 1, true), err)
  end
  T.ok(not err:find("num_regs", 1, true), err)
  T.raises(function() k:attribute("CU_FUNC_ATTRIBUTE_NUM_REGS") end, "did you mean 'num_regs'?")
  T.raises(function() k:set_attribute("preferred_carveout", 1) end, "'preferred_shared_memory_carveout'")
  T.raises(function() k:attribute("zzzz") end, "unknown attribute 'zzzz' (no attribute has a similar name;")
  T.raises(function() k:attribute(4) end,
    "bad argument #1 to 'k:attribute' (attribute name (string) expected, got number)")
  T.raises(function() k:attribute() end, "attribute name (string) expected, got no value")
end)

T.test("values are range-checked with the numbers before the driver", function()
  local k = mod:kernel("plain")
  clear_log()
  T.raises(function() k:set_attribute("preferred_shared_memory_carveout", 101) end,
    "bad argument #2 to 'k:set_attribute' ('preferred_shared_memory_carveout' = 101 is out of range -1..100")
  T.raises(function() k:set_attribute("preferred_shared_memory_carveout", -2) end, "= -2 is out of range -1..100")
  T.raises(function() k:set_attribute("non_portable_cluster_size_allowed", 2) end, "= 2 is out of range 0..1")
  T.raises(function() k:set_attribute("cluster_scheduling_policy_preference", 3) end, "= 3 is out of range 0..2")
  T.raises(function() k:set_attribute("cluster_scheduling_policy_preference", "fast") end,
    "'cluster_scheduling_policy_preference' value 'fast' is not a policy")
  T.raises(function() k:set_attribute("required_cluster_width", 17) end,
    "'required_cluster_width' = 17 is out of range 0..16")
  local limit = 227 * 1024 - 1024
  T.raises(function() k:set_attribute("max_dynamic_shared_size_bytes", limit + 1) end,
    string.format("'max_dynamic_shared_size_bytes' = %d: the device allows 232448 bytes per block with opt-in, "
                  .. "and kernel 'plain' uses 1024 statically, so 0..%d", limit + 1, limit))
  T.raises(function() k:set_attribute("max_dynamic_shared_size_bytes", -1) end, "= -1: the device allows")
  T.raises(function() k:set_attribute("preferred_shared_memory_carveout", 1.5) end,
    "bad argument #2 to 'k:set_attribute' ('preferred_shared_memory_carveout' value must be an integer, got 1.5)")
  T.raises(function() k:set_attribute("preferred_shared_memory_carveout", "10") end, "must be an integer, got string")
  T.raises(function() k:set_attribute("preferred_shared_memory_carveout", true) end, "must be an integer, got boolean")
  T.raises(function() k:set_attribute("non_portable_cluster_size_allowed", 0.5) end,
    "must be an integer 0/1 or a boolean, got 0.5")
  T.raises(function() k:set_attribute("preferred_shared_memory_carveout") end,
    "value for 'preferred_shared_memory_carveout' expected")
  T.eq(#matching("func_set_attribute"), 0, "nothing reached the driver")
  k:set_attribute("max_dynamic_shared_size_bytes", limit)
  T.eq(k.max_dynamic_smem, limit)
end)

T.test("strings with an embedded NUL are refused", function()
  local k = mod:kernel("plain")
  T.raises(function() k:attribute("num_regs\0junk") end, "attribute name contains a NUL byte at offset 8")
  T.raises(function() k:set_attribute("num_regs\0", 1) end, "NUL byte at offset 8")
  T.raises(function() k:set_attribute("cluster_scheduling_policy_preference", "spread\0junk") end,
    "'cluster_scheduling_policy_preference' value contains a NUL byte at offset 6")
end)

T.test("a compiled-in cluster shape: k.cluster_dims, and its attributes cannot be changed", function()
  local k = mod:kernel("clustered")
  T.eq(#k.cluster_dims, 3)
  T.eq(k.cluster_dims[1], 2); T.eq(k.cluster_dims[2], 1); T.eq(k.cluster_dims[3], 1)
  T.eq(k:attribute("cluster_size_must_be_set"), 1)
  T.eq(k:attribute("required_cluster_width"), 2)
  T.eq(k:attribute("required_cluster_height"), 1)
  clear_log()
  T.raises(function() k:set_attribute("required_cluster_width", 4) end,
    "kernel 'clustered' has its cluster shape compiled in (k.cluster_dims = {2, 1, 1}, from __cluster_dims__): "
    .. "'required_cluster_width' cannot be changed")
  T.raises(function() k:set_attribute("required_cluster_depth", 1) end, "cannot be changed")
  T.eq(#matching("func_set_attribute"), 0)
  -- a plain launch uses the compiled-in shape: the grid must be a multiple of it
  k:launch({ grid = 4, block = 32 }, cuda.array("f32", 4))
  T.eq(#matching("launch clustered grid=4,1,1"), 1)
  local before = #matching("launch ")
  T.raises(function() k:launch({ grid = 3, block = 32 }, cuda.array("f32", 4)) end)
  T.eq(#matching("launch "), before, "refused")
end)

T.test("a cluster shape set at run time: every kernel object checks launches against it", function()
  local k, a = mod:kernel("plain"), cuda.array("f32", 4)
  k:set_attribute("required_cluster_width", 2)
  T.eq(k.cluster_dims[1], 2); T.eq(k.cluster_dims[2], 0); T.eq(k.cluster_dims[3], 0)
  -- a partial shape (as the H200's driver takes it): a launch without cluster= is refused, one with
  -- a cluster that agrees on the axes it sets runs
  clear_log()
  T.raises(function() k:launch({ grid = 4, block = 32 }, a, 1) end,
    "k:launch: kernel 'plain''s required cluster shape is 2x0x0 (set with k:set_attribute): without cluster= "
    .. "the driver refuses it (CUDA_ERROR_INVALID_CLUSTER_SIZE) unless required_cluster_width, _height and "
    .. "_depth are all positive, or all 0")
  T.raises(function() k:launch({ grid = 4, block = 32, cooperative = true }, a, 1) end,
    "required cluster shape is 2x0x0")
  T.raises(function() k:max_cluster_size{ block = 32 } end, "required cluster shape is 2x0x0")
  T.raises(function() k:launch({ grid = 4, block = 32, cluster = 4 }, a, 1) end,
    "field 'cluster': (4,1,1) contradicts kernel 'plain''s run-time required_cluster_*(2,0,0)")
  T.raises(function() k:max_active_clusters{ block = 32, cluster = 4 } end, "contradicts")
  T.eq(#matching("launch "), 0)
  k:launch({ grid = 4, block = 32, cluster = 2 }, a, 1)
  T.eq(#matching("launch plain grid=4,1,1 "), 1)
  T.ok(k:max_active_clusters{ block = 32, cluster = 2 } > 0)
  clear_log()
  k:set_attribute("required_cluster_height", 1):set_attribute("required_cluster_depth", 1)
  -- a launch without cluster= runs in clusters of the shape: the grid must be a multiple of it
  k:launch({ grid = 4, block = 32 }, a, 1)
  T.eq(#matching("launch plain grid=4,1,1 "), 1)
  T.raises(function() k:launch({ grid = 3, block = 32 }, a, 1) end,
    "field 'grid': grid x = 3 is not a multiple of the run-time required_cluster_* cluster's x = 2")
  T.raises(function() k:launch({ grid = 4, block = 32, cluster = 4 }, a, 1) end,
    "field 'cluster': (4,1,1) contradicts kernel 'plain''s run-time required_cluster_*(2,1,1)")
  T.raises(function() k:max_active_clusters{ block = 32, cluster = 4 } end,
    "4x1x1 contradicts kernel 'plain''s run-time required_cluster_* k.cluster_dims = {2, 1, 1}")
  k:launch({ grid = 4, block = 32, cluster = 2 }, a, 1)
  T.eq(#matching("launch plain grid=4,1,1 "), 2)
  T.eq(k:max_active_clusters{ block = 32 }, k:max_active_clusters{ block = 32, cluster = 2 })
  -- an object made now sees a shape set at run time, not one compiled in: it may change it, and
  -- the first object follows
  local k2 = mod:kernel("plain")
  T.eq(k2.cluster_dims[1], 2)
  k2:set_attribute("required_cluster_width", 4)
  T.eq(k.cluster_dims[1], 4)
  T.raises(function() k:launch({ grid = 2, block = 32 }, a, 1) end,
    "grid x = 2 is not a multiple of the run-time required_cluster_* cluster's x = 4")
  -- a table whose check k remembers is checked again after the set
  local same = { grid = 8, block = 32 }
  for _ = 1, 3 do k:launch(same, a, 1) end
  k2:set_attribute("required_cluster_width", 16)
  T.raises(function() k:launch(same, a, 1) end, "grid x = 8 is not a multiple of the run-time required_cluster_*")
  -- cleared: plain launches again, through either object
  k2:set_attribute("required_cluster_width", 0):set_attribute("required_cluster_height", 0)
    :set_attribute("required_cluster_depth", 0)
  T.eq(k.cluster_dims, nil)
  clear_log()
  k:launch({ grid = 3, block = 32 }, a, 1)
  T.eq(#matching("launch plain grid=3,1,1 "), 1)
end)

T.test("a kernel made .explicitcluster and given its shape at run time can change it", function()
  local mod2 = cuda.load([[
.version 8.0
.target sm_90a
.address_size 64

.visible .entry explicit_only(
	.param .u32 n
)
.explicitcluster
{
	ret;
}
]])
  local k = mod2:kernel("explicit_only")
  T.eq(k:attribute("cluster_size_must_be_set"), 1)
  T.eq(k.cluster_dims, nil)
  k:set_attribute("required_cluster_width", 2):set_attribute("required_cluster_height", 1)
    :set_attribute("required_cluster_depth", 1)
  local k2 = mod2:kernel("explicit_only") -- must_be_set and a shape, yet not compiled in
  T.eq(k2.cluster_dims[1], 2)
  k2:set_attribute("required_cluster_width", 4)
  T.eq(k.cluster_dims[1], 4)
  T.raises(function() k:launch({ grid = 2, block = 32 }, 1) end, "run-time required_cluster_*")
end)

T.test("k:max_active_clusters and k:max_cluster_size follow the stand-in's model", function()
  local k = mod:kernel("plain")
  k:set_attribute("non_portable_cluster_size_allowed", 0)
  -- 128 threads, 32 registers: 16 blocks per SM; 1024 threads: 2 (the threads limit)
  T.eq(k:occupancy(128), 16)
  for _, c in ipairs({ 1, 2, 4, 8 }) do
    T.eq(k:max_active_clusters{ block = 128, cluster = c }, model_clusters(16, c), "cluster " .. c)
  end
  T.eq(k:max_active_clusters{ block = 128, cluster = 2 }, 1056)
  T.eq(k:max_active_clusters{ block = { 32, 4 }, cluster = { 2, 2 } }, model_clusters(16, 4))
  T.eq(k:max_active_clusters{ block = 1024, cluster = 8 }, model_clusters(2, 8))
  T.eq(k:max_cluster_size{ block = 128 }, 8)
  k:set_attribute("non_portable_cluster_size_allowed", true)
  T.eq(k:max_cluster_size{ block = 128 }, 16)
  T.eq(k:max_active_clusters{ block = 128, cluster = 16 }, model_clusters(16, 16))
  T.eq(k:max_active_clusters{ block = 1024, cluster = 16 }, model_clusters(2, 16), "the small GPC holds none")
  T.eq(model_clusters(2, 16), 14)
  k:set_attribute("non_portable_cluster_size_allowed", 0)
  -- the compiled-in shape is used when cluster is left out; the same shape may be given
  local kc = mod:kernel("clustered")
  T.eq(kc:max_active_clusters{ block = 128 }, model_clusters(16, 2))
  T.eq(kc:max_active_clusters{ block = 128, cluster = { 2, 1, 1 } }, model_clusters(16, 2))
  T.eq(kc:max_cluster_size{ block = 128, smem = 0 }, 8)
end)

T.test("a non-portable flag set through another kernel object is re-read before refusing", function()
  local k1, k2 = mod:kernel("plain"), mod:kernel("plain")
  k1:set_attribute("non_portable_cluster_size_allowed", 0)
  T.raises(function() k2:max_active_clusters{ block = 128, cluster = 16 } end, "more than 8 needs")
  k1:set_attribute("non_portable_cluster_size_allowed", 1)
  T.eq(k2:max_active_clusters{ block = 128, cluster = 16 }, model_clusters(16, 16))
  k1:set_attribute("non_portable_cluster_size_allowed", 0)
end)

T.test("cluster queries: wrong inputs are refused", function()
  local k = mod:kernel("plain")
  k:set_attribute("non_portable_cluster_size_allowed", 0)
  local fn = "bad argument #1 to 'k:max_active_clusters' ("
  T.raises(function() k:max_active_clusters(128) end, fn .. "{block=, smem=, cluster=} expected, got number)")
  T.raises(function() k:max_active_clusters{ cluster = 2 } end, "field 'block': required")
  T.raises(function() k:max_active_clusters{ block = 0, cluster = 2 } end, "field 'block'")
  T.raises(function() k:max_active_clusters{ block = 0, cluster = 2 } end, "x = 0 is out of range 1..1024")
  T.raises(function() k:max_active_clusters{ block = { 64, 32 }, cluster = 2 } end,
    "2048 threads exceed the limit of 1024 for kernel 'plain'")
  T.raises(function() k:max_active_clusters{ block = 1.5, cluster = 2 } end, "x: integer expected, got 1.5")
  T.raises(function() k:max_active_clusters{ block = 128, cluster = 2, smem = -1 } end,
    "non-negative integer number of bytes expected, got -1")
  T.raises(function() k:max_active_clusters{ block = 128, cluster = 2, smem = 10 ^ 6 } end,
    "exceed kernel 'plain''s dynamic shared memory limit")
  T.raises(function() k:max_active_clusters{ block = 128 } end,
    "field 'cluster': required: kernel 'plain' has no cluster shape of its own (k.cluster_dims is nil)")
  T.raises(function() k:max_active_clusters{ block = 128, cluster = 0 } end, "x = 0 is out of range 1..16")
  T.raises(function() k:max_active_clusters{ block = 128, cluster = 17 } end, "x = 17 is out of range 1..16")
  T.raises(function() k:max_active_clusters{ block = 128, cluster = { 1, 2, 3, 4 } } end,
    "1 to 3 entries expected, got 4")
  T.raises(function() k:max_active_clusters{ block = 128, cluster = "2" } end, "number or {x,y,z} expected, got string")
  T.raises(function() k:max_active_clusters{ block = 128, cluster = { 4, 4 } } end,
    "4x4x1 = 16 blocks; more than 8 needs k:set_attribute(\"non_portable_cluster_size_allowed\", true)")
  T.raises(function() k:max_active_clusters{ block = 128, cluster = { 4, 4, 2 } } end,
    "4x4x2 = 32 blocks; a cluster holds at most 16")
  T.raises(function() k:max_active_clusters{ block = 128, cluster = 2, grid = 4 } end, "unknown field 'grid'")
  T.raises(function() k:max_cluster_size{ block = 128, cluster = 2 } end,
    "bad argument #1 to 'k:max_cluster_size' (unknown field 'cluster' (known: block, smem))")
  T.raises(function() k:max_cluster_size{} end, "field 'block': required")
  local kc = mod:kernel("clustered")
  T.raises(function() kc:max_active_clusters{ block = 128, cluster = 4 } end,
    "4x1x1 contradicts kernel 'clustered''s compiled-in __cluster_dims__ k.cluster_dims = {2, 1, 1}")
  T.raises(function() k.max_active_clusters(5, { block = 1 }) end, "cuda.kernel expected")
end)

T.test("the stand-in sizes .bf16 parameters as 2 bytes", function()
  local k = mod:kernel("half_args") -- its parameter sizes are checked against the driver's
  T.eq(k.params[1].size, 2); T.eq(k.params[2].offset, 4); T.eq(k.params[3].size, 2)
  clear_log()
  k:launch({ grid = 1, block = 1 }, 1.0, 7, 1.0)
  local l = matching("launch half_args")[1]
  T.ok(l and l:match(" args=803f 07000000 003c$"), tostring(l))
end)

T.test("the stand-in takes 200 parameters, byte for byte", function()
  local many = cuda.load(many_params_ptx(200)):kernel("many")
  T.eq(#many.params, 200)
  local args, want = {}, {}
  for i = 1, 200 do
    args[i] = i * 0x01010101 + 0x10
    want[i] = string.format("%02x%02x%02x%02x", args[i] & 0xff, (args[i] >> 8) & 0xff,
                            (args[i] >> 16) & 0xff, (args[i] >> 24) & 0xff)
  end
  clear_log()
  many:launch({ grid = 1, block = 1 }, table.unpack(args))
  local l = matching("launch many")[1]
  T.eq(l and l:match(" args=(.*)$"), table.concat(want, " "))
end)

T.test("a graph keeps the launches it captured and replays their lines", function()
  local k = mod:kernel("plain")
  local s = cuda.stream()
  local a = cuda.array("f32", 16)
  clear_log()
  local g = s:capture(function()
    k:launch({ grid = 2, block = 64, stream = s }, a, 16)
    k:launch({ grid = 3, block = 32, stream = s }, a, 8)
  end)
  local captured = matching("launch plain")
  T.eq(#captured, 2)
  g:launch(s)
  local nodes = matching("graph_node ")
  T.eq(#nodes, 2)
  for i = 1, 2 do T.eq(nodes[i], "graph_node " .. captured[i]:sub(#"launch " + 1)) end
  g:launch(s)
  T.eq(#matching("graph_node "), 4)
  s:sync()
  g:free()
end)

T.test("a graph keeps the attributes of the launches it captured", function()
  local k = mod:kernel("plain")
  local s = cuda.stream()
  local a = cuda.array("f32", 16)
  clear_log()
  local g = s:capture(function()
    k:launch({ grid = 4, block = 32, cluster = 2, pdl = true, stream = s }, a, 1)
    k:launch({ grid = 2, block = 32, stream = s,
               l2_window = { array = a, hit_ratio = 0.5, hit = "persisting", miss = "streaming" } }, a, 2)
  end)
  local captured = matching("launch plain")
  T.eq(#captured, 2)
  g:launch(s)
  local nodes = matching("graph_node plain")
  T.eq(#nodes, 2)
  T.ok(nodes[1]:find(" attrs=cluster:2x1x1;pdl:1 args=", 1, true), nodes[1])
  T.ok(nodes[2]:match(" attrs=l2_window:0x%x+%+64@0%.5/persisting/streaming args="), nodes[2])
  for i = 1, 2 do T.eq(nodes[i], "graph_node " .. captured[i]:sub(#"launch " + 1)) end
  s:sync()
  g:free()
end)

T.done()
