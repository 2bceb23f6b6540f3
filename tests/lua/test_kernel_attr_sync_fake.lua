-- Kernel attributes belong to the function, and every kernel object made for it shares them: an
-- attribute set through one object makes the others ask the driver again before their next check.
-- Run with GPULAB_FAKE_FAIL failing the second call of each occupancy query: a kernel that asks
-- again after another object's set gets the injected error, one that trusts its cached answer
-- launches. No GPU result is claimed.
local T = dofile("tests/lua/t.lua")

assert((os.getenv("GPULAB_FAKE_FAIL") or ""):find("cuOccupancyMaxActiveBlocksPerMultiprocessor:999:2", 1, true),
  "run with GPULAB_FAKE_FAIL=cuOccupancyMaxActiveBlocksPerMultiprocessor:999:2,cuOccupancyMaxActiveClusters:999:2")

local PTX = [[
.version 8.0
.target sm_90
.address_size 64

.visible .entry plain(
	.param .u32 n
)
{
	ret;
}
]]
local mod = cuda.load(PTX)

local function refused_by_query(f, query)
  local ok, e = pcall(f)
  T.ok(not ok and cuda.is_error(e), "the driver's query was asked again: " .. tostring(e))
  T.eq(e.name, "CUDA_ERROR_UNKNOWN")
  T.ok(tostring(e):find(query, 1, true), tostring(e))
end

T.test("a cooperative launch asks for occupancy again after another object sets an attribute", function()
  local k, other = mod:kernel("plain"), mod:kernel("plain")
  local coop = { grid = 4, block = 64, cooperative = true }
  for _ = 1, 3 do k:launch(coop, 1) end -- one query (the first), then the answer is cached
  k:launch({ grid = 8, block = 64, cooperative = true }, 1) -- same block and smem: still cached
  other:set_attribute("preferred_shared_memory_carveout", 50)
  refused_by_query(function() k:launch(coop, 1) end, "cuOccupancyMaxActiveBlocksPerMultiprocessor")
end)

T.test("a cluster launch asks for co-resident clusters again after another object sets an attribute", function()
  local k, other = mod:kernel("plain"), mod:kernel("plain")
  local clustered = { grid = 4, block = 64, cluster = 2 }
  for _ = 1, 3 do k:launch(clustered, 1) end
  other:set_attribute("cluster_scheduling_policy_preference", "spread")
  refused_by_query(function() k:launch(clustered, 1) end, "cuOccupancyMaxActiveClusters")
end)

os.exit(T.done())
