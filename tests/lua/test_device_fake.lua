-- Devices through the driver stand-in: cuda.count, cuda.device fields, dev:attribute names and
-- errors. Run once with one device and once with GPULAB_FAKE_DEVICES=2.
local T = dofile("tests/lua/t.lua")

local ndev = tonumber(os.getenv("GPULAB_FAKE_DEVICES") or "1")

if ndev == 0 then -- the driver loads but cuInit finds no device
  T.test("no device: one clear error", function()
    local ok, why = cuda.available()
    T.eq(ok, false)
    T.ok(why:find("cuInit failed: CUDA error 100", 1, true), why)
    T.raises(function() cuda.count() end, "cuda.count: CUDA driver")
    T.raises(function() cuda.device(0) end, "cuda.device: CUDA driver")
    T.raises(function() cuda.load("x.ptx") end, "cuda.load: CUDA driver")
  end)
  T.done()
end

T.test("count", function()
  T.eq(cuda.count(), ndev)
end)

T.test("device fields", function()
  local d = cuda.device(0)
  T.eq(d.name, "gpulab stand-in")
  T.eq(d.ordinal, 0)
  T.eq(d.arch, "sm_90")
  T.eq(d.cc[1], 9); T.eq(d.cc[2], 0)
  T.eq(d.sm_count, 132)
  T.eq(d.mem_bytes, 150754820096)
  T.eq(d.l2_bytes, 60 * 1024 * 1024)
  T.eq(d.smem_per_block_optin, 227 * 1024)
  T.eq(d.max_threads_per_block, 1024)
  T.eq(d.warp_size, 32)
  T.eq(tostring(d), "cuda.device 0: gpulab stand-in (sm_90, 132 SMs)")
  T.eq(cuda.device().ordinal, 0, "no argument: the current device")
end)

T.test("attribute by short and full name", function()
  local d = cuda.device(0)
  T.eq(d:attribute("MAX_THREADS_PER_BLOCK"), 1024)
  T.eq(d:attribute("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"), 1024)
  T.eq(d:attribute("MULTIPROCESSOR_COUNT"), 132)
  T.eq(d:attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"), 227 * 1024)
  T.eq(d:attribute("COMPUTE_CAPABILITY_MAJOR"), 9)
  T.raises(function() d:attribute("MAX_THREADS_PER_BLOCK\0junk") end, "unknown device attribute")
  -- every name in the table is accepted by the driver stand-in
  local names = cuda.device_attributes()
  T.ok(#names > 100, "#names = " .. #names)
  for _, n in ipairs(names) do T.eq(math.type(d:attribute(n)), "integer", n) end
end)

T.test("attribute errors", function()
  local d = cuda.device(0)
  T.raises(function() d:attribute("NOT_AN_ATTRIBUTE") end,
      "bad argument #1 to 'dev:attribute' (unknown device attribute 'NOT_AN_ATTRIBUTE': use a " ..
      "CU_DEVICE_ATTRIBUTE_* name from cuda.h, with or without the prefix, e.g. \"MAX_THREADS_PER_BLOCK\"; " ..
      "cuda.device_attributes() lists all)")
  T.raises(function() d:attribute("max_threads_per_block") end, "cuda.device_attributes() lists all")
  T.raises(function() d:attribute() end, "bad argument #1 to 'dev:attribute' (attribute name expected, got no value)")
  T.raises(function() d:attribute(12) end, "attribute name expected, got number")
  T.raises(function() d.attribute({}, "WARP_SIZE") end,
    "bad argument #1 to 'dev:attribute' (cuda.device expected, got table)")
  T.raises(function() d.attribute(5, "WARP_SIZE") end, "cuda.device expected, got number")
end)

T.test("device ordinal errors", function()
  T.raises(function() cuda.device(ndev) end,
    string.format("bad argument #1 to 'cuda.device' (device %d does not exist; %d device", ndev, ndev))
  T.raises(function() cuda.device(-1) end, "device -1 does not exist")
  T.raises(function() cuda.device(0.5) end, "device ordinal must be an integer, got 0.5")
  T.raises(function() cuda.device("0") end, "device ordinal expected, got string")
  T.raises(function() cuda.device({}) end, "device ordinal expected, got table")
end)

if ndev > 1 then
  T.test("selecting another device", function()
    local d = cuda.device(1)
    T.eq(d.ordinal, 1)
    T.eq(cuda.device().ordinal, 1)
    T.eq(d:attribute("WARP_SIZE"), 32)
    T.eq(cuda.device(0).ordinal, 0)
  end)
end

T.done()
