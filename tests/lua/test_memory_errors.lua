-- test_memory_errors.lua — driver failures injected by the stand-in (GPULAB_FAKE_FAIL, set by
-- tests/memory.cmake) while allocating, copying and after a sticky error. Two runs:
--   memory_fake_oom:    cuMemAlloc:2:2, cuMemAllocHost:2, cuMemcpyHtoD:1:2, cuMemcpyDtoH:1:3
--   memory_fake_sticky: cuMemcpyDtoD:700 (an illegal address poisons the context)
local T = dofile("tests/lua/t.lua")
local spec = os.getenv("GPULAB_FAKE_FAIL") or ""

local function stats_zero()
  collectgarbage(); collectgarbage()
  local s = cuda.stats()
  T.eq(s.arrays, 0, "live arrays"); T.eq(s.hosts, 0, "live host arrays")
  T.eq(s.device_bytes, 0, "device bytes"); T.eq(s.pinned_bytes, 0, "pinned bytes")
end

if spec:find("cuMemAlloc:2:2", 1, true) then
  T.test("out of memory on the second cuMemAlloc", function()
    local a = cuda.array("f32", 100)
    T.raises(function() cuda.array("f32", 100) end, "cuda.array: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2)")
    T.eq(cuda.stats().arrays, 1, "the failed array is not counted")
    T.eq(cuda.stats().device_bytes, 400)
    local c = cuda.array("f32", 100) -- the next one succeeds
    T.ok(c.ptr ~= a.ptr)
    collectgarbage(); collectgarbage() -- the half-built userdata of the failure is finalized harmlessly
    T.eq(cuda.stats().arrays, 2)
    a, c = nil, nil -- luacheck: ignore 311
    stats_zero()
  end)

  T.test("pinned allocation failure", function()
    T.raises(function() cuda.host("f32", 10, { pinned = true }) end,
      "cuda.host: cuMemAllocHost: CUDA_ERROR_OUT_OF_MEMORY (2)")
    local p = cuda.host("f32", 10, { pinned = true }) -- luacheck: ignore 231
    T.eq(cuda.stats().pinned_bytes, 40)
    p = nil
    stats_zero()
  end)

  T.test("failed copy leaves the destination as it was", function()
    local h = cuda.host("i32", 4):iota(1)
    local d = cuda.array("i32", 4)
    d:copy_from(h)
    h:iota(100)
    T.raises(function() d:copy_from(h) end, "d:copy_from: cuMemcpyHtoD: CUDA_ERROR_INVALID_VALUE (1)")
    local back = cuda.host("i32", 4):copy_from(d)
    T.eq(back[4], 4, "the first copy's data")
    d:copy_from(h)
    back:copy_from(d)
    T.eq(back[4], 103)
    h, d, back = nil, nil, nil -- luacheck: ignore 311
    stats_zero()
  end)

  T.test("cuda.compare of a device array whose copy fails", function()
    local h = cuda.host("i32", 4):iota(1)
    local d = cuda.array("i32", 4):copy_from(h)
    T.raises(function() cuda.compare(d, h) end, "cuda.compare: cuMemcpyDtoH: CUDA_ERROR_INVALID_VALUE (1)")
    T.ok(cuda.compare(d, h).ok, "the next compare works")
    h, d = nil, nil
    stats_zero()
  end)
elseif spec:find("cuMemcpyDtoD:700", 1, true) and os.getenv("GPULAB_MEMORY_CASE") == "capture" then
  T.test("frees parked during a capture, then the context poisoned: the bookkeeping still goes", function()
    local a, b = cuda.array("u8", 64), cuda.array("u8", 64)
    local h = cuda.host("u8", 64, { pinned = true })
    local s = cuda.stream { nonblocking = true }
    local parked
    T.raises(function()
      s:capture(function()
        a:free() -- parked until the capture ends
        h:free()
        parked = cuda.stats().deferred
        b:copy_from(b) -- beside a non-blocking capture the default stream runs at once: 700
      end)
    end, "CUDA_ERROR_ILLEGAL_ADDRESS (700)")
    T.eq(parked, 2, "the frees were parked for the capture")
    T.ok(cuda.poisoned(), "the context is poisoned")
    T.eq(cuda.stats().deferred, 0, "nothing waits")
    b = nil -- luacheck: ignore 311
    s = nil -- luacheck: ignore 311
    stats_zero() -- in the sanitizer build LeakSanitizer checks that the blocks' bookkeeping went too
  end)
elseif spec:find("cuMemcpyDtoD:700", 1, true) then
  T.test("a sticky error poisons the context; finalizers leave the handles alone", function()
    local a, b = cuda.array("u8", 64), cuda.array("u8", 64)
    local h = cuda.host("u8", 64, { pinned = true })
    local err = T.raises(function() a:copy_from(b) end, "d:copy_from: cuMemcpyDtoD: CUDA_ERROR_ILLEGAL_ADDRESS (700)")
    T.ok(cuda.poisoned(), "context poisoned after: " .. err)
    T.raises(function() cuda.array("f32", 1) end, "poisoned")
    T.raises(function() a:fill(1) end, "poisoned")
    T.raises(function() h:copy_from(a) end, "poisoned")
    local p = cuda.host("u8", 64) -- pageable host memory needs no context
    p:iota()
    T.eq(p[64], 63)
    a:free(); b = nil; h = nil; p = nil -- luacheck: ignore 311
    stats_zero()
  end)
else
  error("test_memory_errors.lua: unexpected GPULAB_FAKE_FAIL=" .. spec)
end

T.done()
