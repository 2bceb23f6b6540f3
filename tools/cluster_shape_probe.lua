-- cluster_shape_probe.lua — cluster shapes set at run time (required_cluster_width/height/depth):
-- one line per launch or query, what came back, the cluster size each block reports
-- (%cluster_nctarank) and whether its cluster is explicit. Through gpulab, the refusals its checks
-- make show as Lua errors; run a build from before 1456a89 (which passed these launches to the
-- driver unchecked) to see the driver's own answers (docs/RESULTS.md §32).
-- Usage: build/gpulab tools/cluster_shape_probe.lua   (a device of compute capability 9.0)
local fake = os.getenv("GPULAB_LIBCUDA") ~= nil -- the driver stand-in: compile for it
local SRC = [[
#include <gpulab/cluster.cuh>
extern "C" __global__ void ids(unsigned *nrank, unsigned *expl) {
    if (threadIdx.x == 0) {
        nrank[blockIdx.x] = gl_cluster_nctarank();
        expl[blockIdx.x] = gl_cluster_is_explicit() ? 1u : 0u;
    }
}
extern "C" __global__ void __cluster_dims__(2, 1, 1) fixed(unsigned *nrank, unsigned *expl) {
    if (threadIdx.x == 0) { nrank[blockIdx.x] = gl_cluster_nctarank(); expl[blockIdx.x] = 1u; }
}
]]
local mod = cuda.load(cuda.compile(SRC, { arch = fake and "compute_90" or "sm_90a" }))
local nr, ex = cuda.array("u32", 64), cuda.array("u32", 64)
local function show(what, f)
  nr:fill(0); ex:fill(0)
  local ok, e = pcall(f)
  local ok2, e2 = pcall(cuda.sync)
  local n = cuda.host("u32", 64); n:copy_from(nr)
  local x = cuda.host("u32", 64); x:copy_from(ex)
  local a, b = {}, {}
  for i = 1, 8 do a[i] = n[i]; b[i] = x[i] end
  print(string.format("%-44s ok=%s %s | sync=%s %s | nrank=%s expl=%s", what, tostring(ok),
    ok and "" or tostring(e), tostring(ok2), ok2 and "" or tostring(e2), table.concat(a, ","), table.concat(b, ",")))
end
local function attrs(kk, label)
  local t = {}
  for _, n in ipairs({ "required_cluster_width", "required_cluster_height", "required_cluster_depth",
    "cluster_size_must_be_set" }) do
    local _, v = pcall(kk.attribute, kk, n)
    t[#t + 1] = n:gsub("required_cluster_", ""):gsub("cluster_size_", "") .. "=" .. tostring(v)
  end
  print(label, table.concat(t, " "),
    "cluster_dims=" .. tostring(kk.cluster_dims and table.concat(kk.cluster_dims, ",")))
end
local function set(kk, name, v) print(string.format("set %s=%d:", name, v), pcall(kk.set_attribute, kk, name, v)) end
local function launches(k, tag)
  show(tag .. " plain grid=4", function() k:launch({grid=4, block=32}, nr, ex) end)
  show(tag .. " plain grid=3", function() k:launch({grid=3, block=32}, nr, ex) end)
  show(tag .. " cluster=2 grid=4", function() k:launch({grid=4, block=32, cluster=2}, nr, ex) end)
  show(tag .. " cluster=4 grid=4", function() k:launch({grid=4, block=32, cluster=4}, nr, ex) end)
  show(tag .. " cooperative grid=4", function() k:launch({grid=4, block=32, cooperative=true}, nr, ex) end)
  print(tag .. " max_active_clusters cluster=2", pcall(k.max_active_clusters, k, {block=32, cluster=2}))
  print(tag .. " max_active_clusters cluster=4", pcall(k.max_active_clusters, k, {block=32, cluster=4}))
  print(tag .. " max_cluster_size", pcall(k.max_cluster_size, k, {block=32}))
end
local k = mod:kernel("ids")
attrs(k, "fresh:")
set(k, "required_cluster_width", 2)
attrs(k, "after width=2:")
launches(k, "(2,0,0)")
set(k, "required_cluster_height", 1); set(k, "required_cluster_depth", 1)
attrs(k, "after (2,1,1):")
launches(k, "(2,1,1)")
local k2 = mod:kernel("ids")
attrs(k2, "second object:")
set(k2, "required_cluster_width", 4)
attrs(k, "first object after second's set:")
launches(k2, "(4,1,1) via k2")
set(k2, "required_cluster_width", 0)
attrs(k2, "after width=0:")
launches(k2, "(0,1,1)")
set(k2, "required_cluster_height", 0); set(k2, "required_cluster_depth", 0)
attrs(k2, "after (0,0,0):")
show("(0,0,0) plain grid=3", function() k2:launch({grid=3, block=32}, nr, ex) end)
local f = mod:kernel("fixed")
attrs(f, "fixed:")
set(f, "required_cluster_width", 2)
set(f, "required_cluster_width", 4)
show("fixed plain grid=4", function() f:launch({grid=4, block=32}, nr, ex) end)
