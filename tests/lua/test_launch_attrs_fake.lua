-- Launches with attributes (cluster=, cooperative=, pdl=, priority=, l2_window=) through the driver
-- stand-in: every rule checked before the driver, the attributes the driver receives (the stand-in
-- logs them as attrs=...), prepared launches and graphs keeping them, and plain launches keeping
-- cuLaunchKernel. GPULAB_FAKE_CC=8.0 and GPULAB_FAKE_NO_ENTRY=cuLaunchKernelEx runs check the
-- refusals on an older device and an older driver. No GPU result is claimed.
local T = dofile("tests/lua/t.lua")

assert(os.getenv("GPULAB_FAKE_LOG"), "run with GPULAB_FAKE_LOG set")
local OLD_DEVICE = os.getenv("GPULAB_FAKE_CC") == "8.0"
local NO_EX = (os.getenv("GPULAB_FAKE_NO_ENTRY") or ""):find("cuLaunchKernelEx", 1, true) ~= nil

local read_log, clear_log = T.log_lines, T.clear_log
local function lines_matching(prefix)
  local out = {}
  for _, l in ipairs(read_log()) do
    if l:sub(1, #prefix) == prefix then out[#out + 1] = l end
  end
  return out
end
local function last_launch()
  local l = lines_matching("launch ")
  return l[#l]
end

local PTX = [[
.version 8.0
.target sm_90
.address_size 64

.visible .entry plain(
	.param .u64 out,
	.param .u32 n
)
{
	ret;
}

.visible .entry clustered(
	.param .u32 n
)
.explicitcluster
.reqnctapercluster 2, 1, 1
{
	ret;
}

.visible .entry many_regs(
	.param .u32 n
)
.maxnreg 128
{
	ret;
}

.visible .entry big_smem(
	.param .u32 n
)
{
	.shared .align 16 .b8 tile[200000];
	ret;
}
]]

local mod = cuda.load(PTX)
local k = mod:kernel("plain")
local out = cuda.array("u32", 64)
local dev = cuda.device(0)

local function cfg(extra)
  local c = { grid = 8, block = 128 }
  for key, v in pairs(extra) do c[key] = v end
  return c
end

if OLD_DEVICE then
  T.test("an older device refuses clusters and PDL before the driver", function()
    T.raises(function() k:launch(cfg { cluster = 2 }, out, 1) end,
      "field 'cluster': device 0 (compute capability 8.0) cannot launch thread block clusters (they need 9.0")
    T.raises(function() k:launch(cfg { pdl = true }, out, 1) end,
      "field 'pdl': programmatic dependent launch needs compute capability 9.0 or newer; device 0 is 8.0")
    clear_log()
    k:launch(cfg { cooperative = true }, out, 1) -- cooperative launches predate Hopper
    T.ok(last_launch():find("attrs=cooperative:1", 1, true), last_launch())
  end)
  os.exit(T.done())
end

if NO_EX then
  T.test("a driver without cuLaunchKernelEx: one clear error per key, plain launches unchanged", function()
    for key, v in pairs({ cluster = 2, cooperative = true, pdl = true, priority = 0,
                          l2_window = { array = out } }) do
      T.raises(function() k:launch(cfg { [key] = v }, out, 1) end,
        "field '" .. key .. "': needs the driver entry point cuLaunchKernelEx (a CUDA 12.0 driver or newer)")
    end
    clear_log()
    k:launch(cfg {}, out, 1)
    T.eq(#lines_matching("launch plain"), 1)
  end)
  os.exit(T.done())
end

T.test("plain launches keep cuLaunchKernel; false flags add no attribute", function()
  clear_log()
  k:launch(cfg {}, out, 7)
  k:launch(cfg { cooperative = false, pdl = false }, out, 7)
  local l = lines_matching("launch plain")
  T.eq(#l, 2)
  for _, line in ipairs(l) do T.ok(not line:find("attrs=", 1, true), line) end
  T.eq(#lines_matching("cuLaunchKernelEx"), 0)
end)

T.test("cluster: the shape reaches the driver; grid counted in blocks", function()
  clear_log()
  k:launch(cfg { cluster = 2 }, out, 1)
  T.ok(last_launch():find("grid=8,1,1 block=128,1,1 smem=0 stream=0 attrs=cluster:2x1x1 args=", 1, true),
    last_launch())
  k:launch({ grid = { 4, 6 }, block = 64, cluster = { 2, 3 } }, out, 1)
  T.ok(last_launch():find("attrs=cluster:2x3x1 ", 1, true), last_launch())
  k:launch(cfg { cluster = 1 }, out, 1)
  T.ok(last_launch():find("attrs=cluster:1x1x1 ", 1, true), last_launch())
end)

T.test("cluster: rules named with their numbers", function()
  T.raises(function() k:launch(cfg { cluster = 3 }, out, 1) end,
    "bad argument #1 to 'k:launch' (field 'cluster': grid x = 8 is not a multiple of the cluster's x = 3")
  T.raises(function() k:launch({ grid = { 4, 5 }, block = 32, cluster = { 2, 2 } }, out, 1) end,
    "grid y = 5 is not a multiple of the cluster's y = 2")
  T.raises(function() k:launch(cfg { cluster = 0 }, out, 1) end,
    "field 'cluster': x = 0 is out of range 1..16")
  T.raises(function() k:launch(cfg { cluster = 32 }, out, 1) end, "field 'cluster': x = 32 is out of range 1..16")
  T.raises(function() k:launch(cfg { cluster = "2" }, out, 1) end,
    "field 'cluster': number or {x,y,z} expected, got string")
  T.raises(function() k:launch(cfg { cluster = 2.5 }, out, 1) end, "field 'cluster': x: integer expected, got 2.5")
  T.raises(function() k:launch({ grid = { 16, 4 }, block = 32, cluster = { 8, 4 } }, out, 1) end,
    "field 'cluster': (8,4,1) is 32 blocks; the device allows at most 16 per cluster (8 portably)")
  T.raises(function() k:launch({ grid = 16, block = 32, cluster = 16 }, out, 1) end,
    "field 'cluster': (16,1,1) is 16 blocks, above the portable limit of 8: " ..
    "k:set_attribute(\"non_portable_cluster_size_allowed\", 1) allows up to 16")
end)

T.test("cluster of 16 with the non-portable attribute, set on another object for the same function", function()
  local other = mod:kernel("plain") -- the same CUfunction: the launch re-reads the driver's flag
  other:set_attribute("non_portable_cluster_size_allowed", 1)
  clear_log()
  k:launch({ grid = 32, block = 32, cluster = 16 }, out, 1)
  T.ok(last_launch():find("attrs=cluster:16x1x1 ", 1, true), last_launch())
  -- k re-reads the flag it cached once any object set an attribute: refused before the driver,
  -- with the same table (its remembered check is forgotten) and with a new one
  clear_log()
  local same = { grid = 32, block = 32, cluster = 16 }
  for _ = 1, 3 do k:launch(same, out, 1) end -- the third takes the remembered check
  other:set_attribute("non_portable_cluster_size_allowed", 0)
  for _, c in ipairs({ same, { grid = 32, block = 32, cluster = 16 } }) do
    local ok, e = pcall(k.launch, k, c, out, 1)
    T.ok(not ok and not cuda.is_error(e), tostring(e))
    T.ok(tostring(e):find("above the portable limit of 8", 1, true), tostring(e))
  end
  T.eq(#T.log_lines(), 3 + 1) -- three launches and the attribute set; the refused ones never reached it
  T.raises(function() k:max_active_clusters{ block = 32, cluster = 16 } end, "more than 8 needs")
  -- a rule gpulab checks is an argument error, raised before the driver
  local ok2, e2 = pcall(k.launch, k, { grid = 8, block = 32, cluster = 3 }, out, 1)
  T.ok(not ok2 and not cuda.is_error(e2), tostring(e2))
  other:set_attribute("non_portable_cluster_size_allowed", 1)
  k:launch(same, out, 1)
  T.ok(last_launch():find("attrs=cluster:16x1x1 ", 1, true), last_launch())
  other:set_attribute("non_portable_cluster_size_allowed", 0)
end)

T.test("a dynamic shared memory limit lowered through another object is refused before the driver", function()
  local a, b = mod:kernel("plain"), mod:kernel("plain")
  a:set_max_dynamic_smem(100 * 1024)
  local c = { grid = 2, block = 32, smem = 80 * 1024, cluster = 2 }
  b:launch(c, out, 1)
  b:launch(c, out, 1)
  T.eq(b.max_dynamic_smem, 100 * 1024)
  a:set_attribute("max_dynamic_shared_size_bytes", 64 * 1024)
  T.eq(b.max_dynamic_smem, 64 * 1024)
  clear_log()
  T.raises(function() b:launch(c, out, 1) end,
    "field 'smem': 81920 bytes exceed kernel 'plain''s dynamic shared memory limit of 65536 bytes")
  T.raises(function() b:max_active_clusters{ block = 32, smem = 80 * 1024, cluster = 2 } end,
    "81920 bytes exceed kernel 'plain''s dynamic shared memory limit of 65536 bytes")
  T.eq(#T.log_lines(), 0)
  a:set_max_dynamic_smem(0)
end)

T.test("cluster: a shape that cannot be resident is refused with the occupancy the driver reports", function()
  local big = mod:kernel("big_smem")
  -- 1024 threads of 128 registers need 131,072 registers, twice what an SM has: no block fits
  local regs = mod:kernel("many_regs")
  T.eq(regs:occupancy(1024), 0)
  T.raises(function() regs:launch({ grid = 16, block = 1024, cluster = 8 }, 1) end,
    "field 'cluster': no cluster of 8 blocks of 1024 threads with 0 bytes of dynamic shared memory can be " ..
    "resident at once on this device (cuOccupancyMaxActiveClusters = 0")
  -- one block per SM: a cluster of 8 still fits in one GPC
  clear_log()
  big:launch({ grid = 16, block = 1024, cluster = 8 }, 1)
  T.ok(last_launch():find("attrs=cluster:8x1x1 ", 1, true), last_launch())
end)

T.test("compiled-in __cluster_dims__: plain launches use it, contradicting shapes are refused", function()
  local c = mod:kernel("clustered")
  T.eq(c.cluster_dims[1], 2)
  T.eq(c.cluster_dims[2], 1)
  T.eq(c.cluster_dims[3], 1)
  T.eq(k.cluster_dims, nil)
  clear_log()
  c:launch({ grid = 4, block = 32 }, 1)
  T.ok(last_launch():find("launch clustered grid=4,1,1", 1, true) and not last_launch():find("attrs="),
    last_launch())
  T.raises(function() c:launch({ grid = 3, block = 32 }, 1) end,
    "field 'grid': grid x = 3 is not a multiple of the compiled-in __cluster_dims__ cluster's x = 2")
  T.raises(function() c:launch({ grid = 8, block = 32, cluster = 4 }, 1) end,
    "field 'cluster': (4,1,1) contradicts kernel 'clustered''s compiled-in __cluster_dims__(2,1,1)")
  c:launch({ grid = 4, block = 32, cluster = { 2, 1, 1 } }, 1)
  T.ok(last_launch():find("attrs=cluster:2x1x1 ", 1, true), last_launch())
  T.raises(function() c:launch({ grid = 3, block = 32, pdl = true }, 1) end,
    "grid x = 3 is not a multiple of the compiled-in __cluster_dims__ cluster's x = 2")
end)

T.test("cooperative: the grid must fit at once; both numbers named, never shrunk", function()
  local per_sm = k:occupancy(128, 0)
  local limit = per_sm * dev.sm_count
  clear_log()
  k:launch({ grid = limit, block = 128, cooperative = true }, out, 1)
  T.ok(last_launch():find("grid=" .. limit .. ",1,1 block=128,1,1 smem=0 stream=0 attrs=cooperative:1 ", 1, true),
    last_launch())
  T.raises(function() k:launch({ grid = limit + 1, block = 128, cooperative = true }, out, 1) end,
    string.format("field 'cooperative': a cooperative grid of %d blocks exceeds the %d that can be co-resident " ..
      "(%d blocks of 128 threads per SM with 0 bytes of dynamic shared memory x %d SMs)", limit + 1, limit,
      per_sm, dev.sm_count))
  T.raises(function() k:launch({ grid = { limit, 2 }, block = 128, cooperative = true }, out, 1) end,
    string.format("a cooperative grid of %d blocks exceeds the %d", 2 * limit, limit))
  -- another block size: the cached limit is not reused
  local per_sm_1024 = k:occupancy(1024, 0)
  T.raises(function() k:launch({ grid = limit, block = 1024, cooperative = true }, out, 1) end,
    string.format("exceeds the %d that can be co-resident", per_sm_1024 * dev.sm_count))
  T.raises(function() k:launch(cfg { cooperative = 1 }, out, 1) end,
    "field 'cooperative': true or false expected, got number")
  -- with a cluster: co-resident clusters x their size
  local clusters = k:max_active_clusters { block = 128, cluster = 2 }
  T.raises(function() k:launch({ grid = 2 * clusters + 2, block = 128, cluster = 2, cooperative = true }, out, 1) end,
    string.format("exceeds the %d that can be co-resident (%d clusters of 2 blocks", 2 * clusters, clusters))
end)

T.test("pdl and priority", function()
  clear_log()
  k:launch(cfg { pdl = true }, out, 1)
  T.ok(last_launch():find("attrs=pdl:1 ", 1, true), last_launch())
  T.raises(function() k:launch(cfg { pdl = "yes" }, out, 1) end, "field 'pdl': true or false expected, got string")
  local s = cuda.stream { priority = 0 } -- the range the device reports, read by cuda.stream too
  s:free()
  k:launch(cfg { priority = 0 }, out, 1)
  T.ok(last_launch():find("attrs=priority:0 ", 1, true), last_launch())
  local err = T.raises(function() k:launch(cfg { priority = 99 }, out, 1) end, "field 'priority': 99 is out of")
  local greatest = tonumber(err:match("range (%-?%d+)%.%."))
  k:launch(cfg { priority = greatest }, out, 1)
  T.ok(last_launch():find("attrs=priority:" .. greatest .. " ", 1, true), last_launch())
  T.raises(function() k:launch(cfg { priority = 0.5 }, out, 1) end, "field 'priority': integer expected, got 0.5")
  T.raises(function() k:launch(cfg { priority = "0" }, out, 1) end, "field 'priority': integer expected, got string")
  clear_log()
  k:launch({ grid = 8, block = 128, cluster = 2, cooperative = true, pdl = true, priority = 0 }, out, 1)
  T.ok(last_launch():find("attrs=cluster:2x1x1;cooperative:1;pdl:1;priority:0 ", 1, true), last_launch())
end)

T.test("l2_window: checked against the array and the device, kept alive", function()
  clear_log()
  k:launch(cfg { l2_window = { array = out } }, out, 1)
  T.ok(last_launch():find(string.format("attrs=l2_window:0x%x+256@1/persisting/streaming ", out.ptr), 1, true),
    last_launch())
  k:launch(cfg { l2_window = { array = out, bytes = 128, hit_ratio = 0.5, hit = "streaming", miss = "normal" } },
    out, 1)
  T.ok(last_launch():find(string.format("l2_window:0x%x+128@0.5/streaming/normal ", out.ptr), 1, true), last_launch())
  k:launch(cfg { l2_window = { ptr = out.ptr + 64, bytes = 64 } }, out, 1)
  T.ok(last_launch():find(string.format("l2_window:0x%x+64@1/", out.ptr + 64), 1, true), last_launch())
  local function refuses(w, msg) T.raises(function() k:launch(cfg { l2_window = w }, out, 1) end, msg) end
  refuses({ array = out, bytes = 257 }, "field 'l2_window': bytes = 257 is outside the array's 1..256 bytes")
  refuses({ array = out, bytes = 0 }, "bytes = 0 is outside the array's 1..256 bytes")
  refuses({ array = out, hit_ratio = 1.5 }, "field 'l2_window': hit_ratio = 1.5 is outside 0..1")
  refuses({ array = out, hit_ratio = 0 / 0 }, "is outside 0..1")
  refuses({ array = out, hit_ratio = "1" }, "hit_ratio: number expected, got string")
  refuses({ array = out, miss = "persisting" }, "miss: \"streaming\" or \"normal\" expected, got \"persisting\"")
  refuses({ array = out, hit = "persisting\0junk" }, "hit: \"persisting\", \"streaming\" or \"normal\" expected, " ..
    "got \"persisting\" (with a NUL byte)")
  refuses({ array = out, hits = "streaming" }, "unknown field 'hits'")
  refuses({ ptr = out.ptr }, "bytes: required with ptr=")
  refuses({ ptr = -1, bytes = 4 }, "ptr: non-negative integer expected, got -1")
  refuses({ array = out, ptr = out.ptr }, "give array= or ptr=, not both")
  refuses({}, "array= (a cuda.array) or ptr= (a device address) required")
  refuses({ array = cuda.host("u32", 4) }, "array: cuda.array expected, got cuda.host")
  refuses({ ptr = 4096, bytes = 1 << 40 }, "exceeds device 0's largest access-policy window")
  T.raises(function() k:launch(cfg { l2_window = 5 }, out, 1) end, "field 'l2_window': table")
  local freed = cuda.array("u32", 4)
  freed:free()
  refuses({ array = freed }, "array: the cuda.array was freed")
end)

T.test("prepared launches and graphs keep their attributes; the window's array stays alive", function()
  collectgarbage()
  local arrays0 = cuda.stats().arrays
  local p
  do
    local w = cuda.array("f32", 1024)
    p = k:prepare({ grid = 8, block = 128, cluster = 2, pdl = true, l2_window = { array = w } }, out, 3)
  end
  collectgarbage()
  collectgarbage()
  T.eq(cuda.stats().arrays, arrays0 + 1, "the prepared launch holds the window's array")
  T.ok(tostring(p):find("cluster=(2,1,1) pdl l2_window=4096 bytes", 1, true), tostring(p))
  clear_log()
  p()
  p:launch(3)
  local l = lines_matching("launch plain")
  T.eq(#l, 4)
  for _, line in ipairs(l) do T.ok(line:find("attrs=cluster:2x1x1;pdl:1;l2_window:0x", 1, true), line) end
  local s = cuda.stream { nonblocking = true }
  local q = k:prepare({ grid = 8, block = 128, cluster = 2, pdl = true, stream = s }, out, 3)
  local g = s:capture(function()
    q()
    k:launch({ grid = 4, block = 32, cooperative = true, stream = s }, out, 4)
    k:launch({ grid = 4, block = 32, stream = s }, out, 5)
  end)
  clear_log()
  g:launch(s)
  local nodes = lines_matching("graph_node ")
  T.eq(#nodes, 3)
  T.ok(nodes[1]:find("attrs=cluster:2x1x1;pdl:1 ", 1, true), nodes[1])
  T.ok(nodes[2]:find("attrs=cooperative:1 ", 1, true), nodes[2])
  T.ok(not nodes[3]:find("attrs=", 1, true), nodes[3])
  p:free()
  q:free()
  g:free()
  s:free()
  collectgarbage()
  collectgarbage()
  T.eq(cuda.stats().arrays, arrays0, "freeing the prepared launch lets the array go")
end)

T.test("the configuration's key strings are gpulab's own: a replaced registry entry changes nothing", function()
  debug.getregistry()["gpulab.launch_keys"] = 5
  local fresh = mod:kernel("plain") -- a new kernel object reads the keys on its first launch
  clear_log()
  fresh:launch(cfg { cluster = 2 }, out, 1)
  T.ok(last_launch():find("attrs=cluster:2x1x1 ", 1, true), last_launch())
  T.raises(function() fresh:launch(cfg { clsuter = 2 }, out, 1) end, "unknown field 'clsuter'")
end)

T.test("every key and a full l2_window at any Lua stack depth: the stack the reads need is asked for", function()
  -- k:launch reads nine keys, then the window's six: more than the 20 slots a C function is
  -- promised. At some depths the unchecked pushes wrote past the Lua stack (a heap corruption).
  local s = cuda.stream()
  local function go()
    local every_key = { grid = 1, block = 1, smem = 0, stream = s, cooperative = false, pdl = false, priority = 0,
                        l2_window = { array = out, bytes = 16, hit_ratio = 1, hit = "persisting", miss = "streaming" } }
    return pcall(k.launch, k, every_key, out, 1)
  end
  local function at_depth(n, ...)
    if n == 0 then return go() end
    local ok, e = at_depth(n - 1, ...)
    return ok, e
  end
  local expected_ok, expected_err = go()
  for depth = 0, 120 do
    for pad = 0, 3 do
      local ok, err = at_depth(depth, table.unpack({ 1, 2, 3 }, 1, pad))
      T.eq(ok, expected_ok, "depth " .. depth)
      if not ok then T.eq(err, expected_err) end
    end
  end
  s:free()
end)

os.exit(T.done())
