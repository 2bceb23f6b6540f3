-- test_memory_fake.lua — device arrays through the driver stand-in: which driver calls are made
-- (read back from GPULAB_FAKE_LOG), that copies move the right bytes, lifetimes and stats.
-- The stand-in's "device" memory is host memory: nothing here says anything about a GPU.
local T = dofile("tests/lua/t.lua")

-- GC stress (tests/memory.cmake): a full collection before every function call.
if os.getenv("GPULAB_TEST_GC") == "every-call" then
  local collecting = false
  debug.sethook(function()
    if collecting then return end
    collecting = true
    collectgarbage()
    collecting = false
  end, "c")
end

local DTYPES = { "f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64" }
-- Lines appended to the stand-in's log while fn runs.
local logged = T.log_since

local function stats_zero()
  collectgarbage(); collectgarbage()
  cuda.sync()
  local s = cuda.stats()
  T.eq(s.arrays, 0, "live arrays")
  T.eq(s.hosts, 0, "live host arrays")
  T.eq(s.device_bytes, 0, "device bytes")
  T.eq(s.pinned_bytes, 0, "pinned bytes")
  T.eq(s.deferred, 0, "deferred releases")
end

T.test("allocation, fields, tostring", function()
  local d = cuda.array("f32", 1024)
  T.eq(d.dtype, "f32"); T.eq(d.numel, 1024); T.eq(d.nbytes, 4096); T.eq(d.shape[1], 1024)
  T.eq(math.type(d.ptr), "integer"); T.ok(d.ptr ~= 0, "non-null address")
  T.eq(tostring(d), string.format("cuda.array f32[1024] (4.0 KiB) 0x%x", d.ptr))
  local m = cuda.array("bf16", { 2, 3, 4 })
  T.eq(m.numel, 24); T.eq(m.nbytes, 48); T.eq(#m.shape, 3); T.eq(m.shape[3], 4)
  T.eq(tostring(m):sub(1, 30), "cuda.array bf16[2x3x4] (48 B) ")
  T.eq(cuda.stats().arrays, 2); T.eq(cuda.stats().device_bytes, 4096 + 48)
  T.eq(d.fill, m.fill, "methods shared")
  T.eq(d.nosuch, nil)
  local ptr = d.ptr
  local text = logged(function() d:free() end)
  T.ok(text:find(string.format("free 0x%x", ptr), 1, true), "cuMemFree logged: " .. text)
  T.eq(tostring(d), "cuda.array f32[1024] (freed)")
  m = nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("every dtype: host -> device -> device -> host round trip", function()
  for _, dt in ipairs(DTYPES) do
    local n = 1000
    local src = cuda.host(dt, n):random { seed = 11 }
    local d1, d2 = cuda.array(dt, n), cuda.array(dt, { 10, 100 })
    T.eq(d1:copy_from(src), d1, "copy_from returns self")
    d2:copy_from(d1)
    local back = cuda.host(dt, n)
    back:copy_from(d2)
    local r = cuda.compare(src, back)
    T.ok(r.ok, dt .. ": round trip mismatches " .. r.mismatches)
    T.ok(cuda.compare(src, d2).ok, dt .. ": compare reads a device array")
    T.ok(cuda.compare(d1, d2).ok, dt .. ": compare of two device arrays")
  end
  stats_zero()
end)

T.test("the copy calls made", function()
  local h = cuda.host("f32", 8):iota()
  local d, e = cuda.array("f32", 8), cuda.array("f32", 8)
  T.ok(logged(function() d:copy_from(h) end):find("cuMemcpyHtoD ", 1, true), "HtoD")
  T.ok(logged(function() e:copy_from(d) end):find("cuMemcpyDtoD ", 1, true), "DtoD")
  T.ok(logged(function() h:copy_from(e) end):find("cuMemcpyDtoH ", 1, true), "DtoH")
  T.eq(h[8], 7)
  -- a pinned host array without a stream copies synchronously
  local p = cuda.host("f32", 8, { pinned = true })
  T.eq(p.pinned, true)
  local text = logged(function() p:copy_from(d) end)
  T.ok(text:find("cuMemcpyDtoH ", 1, true) and not text:find("Async", 1, true), text)
  T.ok(cuda.compare(p, h).ok)
  -- sizes must match; dtypes too, unless the bytes are asked for as they are
  T.raises(function() d:copy_from(cuda.array("f32", 9)) end,
    "bad argument #1 to 'd:copy_from' (size mismatch (destination 32 bytes, source 36 bytes))")
  T.raises(function() h:copy_from(cuda.array("f64", 8)) end,
      "bad argument #1 to 'h:copy_from' (dtype mismatch (destination f32, source f64); pass {reinterpret=true} to " ..
      "copy the bytes as they are, or {convert=true} to convert the values (host arrays))")
  local i = cuda.array("i32", 8)
  T.raises(function() i:copy_from(d) end,
    "bad argument #1 to 'd:copy_from' (dtype mismatch (destination i32, source f32); pass {reinterpret=true} to " ..
    "copy the bytes as they are, or {convert=true} to convert the values (host arrays))")
  i:copy_from(d, { reinterpret = true })
  T.raises(function() h:copy_from(cuda.array("f64", 8), { reinterpret = true }) end,
    "bad argument #1 to 'h:copy_from' (size mismatch (destination 32 bytes, source 64 bytes))")
  T.raises(function() d:copy_from(42) end,
    "bad argument #1 to 'd:copy_from' (cuda.array or cuda.host expected, got number)")
  T.raises(function() d.copy_from(h, d) end, "bad argument #1 to 'd:copy_from' (cuda.array expected, got cuda.host)")
  d, e, i, p, h = nil, nil, nil, nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("async copies from pinned memory on a stream", function()
  local s = cuda.stream()
  local p = cuda.host("f64", 64, { pinned = true }):iota(1)
  local d = cuda.array("f64", 64)
  T.ok(logged(function() d:copy_from(p, s) end):find("cuMemcpyHtoDAsync", 1, true), "HtoDAsync")
  local e = cuda.array("f64", 64)
  T.ok(logged(function() e:copy_from(d, s) end):find("cuMemcpyDtoDAsync", 1, true), "DtoDAsync")
  local q = cuda.host("f64", 64, { pinned = true })
  T.ok(logged(function() q:copy_from(e, s) end):find("cuMemcpyDtoHAsync", 1, true), "DtoHAsync")
  s:sync()
  T.ok(cuda.compare(p, q).ok)
  -- pageable memory with a stream: still in stream order (the driver makes it host-synchronous)
  local h = cuda.host("f64", 64)
  T.ok(logged(function() h:copy_from(e, s) end):find("cuMemcpyDtoHAsync", 1, true), "pageable DtoH on s")
  T.ok(cuda.compare(h, p).ok)
  T.ok(logged(function() e:fill(0, s) end):find("cuMemsetD32Async", 1, true), "memset on a stream")
  T.ok(logged(function() e:fill(2, s) end):find("cuMemcpyHtoDAsync", 1, true), "staged fill on a stream")
  h:copy_from(e, s)
  T.eq(h[64], 2)
  -- a device array freed while a copy on s may use it is released only once s is known done
  local busy = cuda.array("f64", 64)
  busy:copy_from(p, s)
  busy:free()
  T.eq(cuda.stats().arrays, 1 + 1, "d and e remain; busy is no longer live")
  T.raises(function() d:copy_from(p, 42) end, "bad argument #2 to 'd:copy_from' (cuda.stream expected, got number)")
  T.raises(function() d:fill(1, "s") end, "bad argument #2 to 'd:fill' (cuda.stream expected, got string)")
  -- freeing while queued work may use the buffer defers the free until it is known complete
  e:free(); q:free()
  s:sync()
  s, p, d, h = nil, nil, nil, nil
  stats_zero()
end)

T.test("graph capture keeps the arrays of captured copies and fills alive", function()
  local s = cuda.stream { nonblocking = true }
  local d = cuda.array("f64", 8)
  local p = cuda.host("f64", 8, { pinned = true }):iota()
  T.raises(function() s:capture(function() d:fill(1.5, s) end) end,
    "d:fill: this f64 value needs a host staging copy, which a graph capture cannot hold")
  local out = cuda.host("f64", 8, { pinned = true })
  local g = s:capture(function()
    d:fill(0, s)
    d:copy_from(p, s)
    out:copy_from(d, s)
  end)
  T.eq(g.objects, 3, "the graph holds the array and both host buffers")
  d, p, out = nil, nil, nil -- luacheck: ignore 311
  collectgarbage(); collectgarbage()
  T.eq(cuda.stats().arrays, 1, "the graph holds the device array")
  T.eq(cuda.stats().hosts, 2, "and the pinned source and destination")
  g:launch(s)
  s:sync()
  g:free()
  s:free()
  stats_zero()
end)

T.test("fill on the device: memset widths and the staging path", function()
  local function check_fill(dt, v, call)
    local d = cuda.array(dt, 33)
    local text = logged(function() T.eq(d:fill(v), d) end)
    T.ok(text:find(call .. " ", 1, true), dt .. " fill uses " .. call .. ": " .. text)
    local h = cuda.host(dt, 33):copy_from(d)
    for i = 1, 33 do
      if v ~= v then T.ok(h[i] ~= h[i], dt .. " NaN fill") else T.eq(h[i], v, dt .. " element " .. i) end
    end
  end
  check_fill("u8", 200, "cuMemsetD8"); check_fill("i8", -3, "cuMemsetD8")
  check_fill("f16", 1.5, "cuMemsetD16"); check_fill("bf16", -2, "cuMemsetD16"); check_fill("i16", -300, "cuMemsetD16")
  check_fill("f32", 0.25, "cuMemsetD32"); check_fill("u32", 4000000000, "cuMemsetD32")
  check_fill("f32", 0 / 0, "cuMemsetD32")
  -- 8-byte values: a 32-bit memset when both halves agree, otherwise a staged copy
  check_fill("i64", -1, "cuMemsetD32"); check_fill("f64", 0, "cuMemsetD32")
  check_fill("f64", 1.5, "cuMemcpyHtoD"); check_fill("u64", 2 ^ 40 + 7, "cuMemcpyHtoD")
  check_fill("i64", math.mininteger, "cuMemcpyHtoD")
  local d = cuda.array("i16", 4)
  T.raises(function() d:fill(1.5) end, "bad argument #1 to 'd:fill' (i16 takes integers, got 1.5)")
  T.raises(function() d:fill(70000) end, "bad argument #1 to 'd:fill' (70000 is out of range for i16 (-32768..32767))")
  T.raises(function() d:fill("1") end, "bad argument #1 to 'd:fill' (number expected, got string)")
  T.raises(function() d.fill(cuda.host("i16", 4), 1) end,
    "bad argument #1 to 'd:fill' (cuda.array expected, got cuda.host)")
  d = nil
  stats_zero()
end)

T.test("sizes and driver-reported memory", function()
  T.raises(function() cuda.array("f32", 0) end, "bad argument #2 to 'cuda.array' (size must be positive, got 0")
  T.raises(function() cuda.array("f32", { 3, -1 }) end, "dimension 2 size must be positive, got -1")
  T.raises(function() cuda.array("f32", 1.25) end, "size must be an integer, got 1.25")
  T.raises(function() cuda.array("f32", 0 / 0) end, "size must be an integer")
  T.raises(function() cuda.array("f64", { 2 ^ 31, 2 ^ 31 }) end, "the byte size overflows 64 bits")
  T.raises(function() cuda.array("u8", { 2 ^ 40, 2 ^ 40 }) end, "the element count overflows 64 bits")
  T.raises(function() cuda.array("f32", 2 ^ 50) end, "cuda.array: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2)")
  T.eq(cuda.stats().arrays, 0, "a failed allocation leaves nothing live")
  local free0 = cuda.mem_info()
  local d = cuda.array("u8", 1 << 20)
  T.eq(cuda.mem_info(), free0 - (1 << 20), "the driver sees the allocation")
  d:free()
  T.eq(cuda.mem_info(), free0, "and its release")
  stats_zero()
end)

T.test("free, double free, __close, __gc, use after free", function()
  local d = cuda.array("f32", 16)
  local ptr = d.ptr
  local text = logged(function() d:free(); d:free() end)
  local _, nfree = text:gsub(string.format("free 0x%x", ptr), "")
  T.eq(nfree, 1, "freed exactly once")
  T.raises(function() d:fill(1) end, "d:fill: cuda.array was freed")
  T.raises(function() return d.ptr end, "cuda.array was freed")
  T.raises(function() return d.numel end, "cuda.array was freed")
  T.raises(function() d:copy_from(cuda.host("f32", 16)) end, "d:copy_from: cuda.array was freed")
  T.raises(function() cuda.host("f32", 16):copy_from(d) end, "bad argument #1 to 'h:copy_from' (cuda.array was freed)")
  T.raises(function() cuda.compare(d, d) end, "bad argument #1 to 'cuda.compare' (cuda.array was freed)")
  local p = cuda.host("u8", 10, { pinned = true })
  T.ok(logged(function() p:free() end):find("free_host", 1, true), "cuMemFreeHost")
  p:free()
  T.raises(function() return p[1] end, "cuda.host was freed")
  local closed_ptr
  text = logged(function()
    local c <close> = cuda.array("u8", 100)
    closed_ptr = c.ptr
  end)
  T.ok(text:find(string.format("free 0x%x", closed_ptr), 1, true), "__close frees: " .. text)
  -- finalizers called by hand on the wrong type do nothing
  local free = d.free
  free(42); free(cuda.host("f32", 1)); free(nil)
  text = logged(function()
    for _ = 1, 50 do local _ = cuda.array("f32", 256) end
    collectgarbage(); collectgarbage()
  end)
  local _, n = text:gsub("\nfree 0x", "")
  T.ok(n + (text:sub(1, 7) == "free 0x" and 1 or 0) >= 50, "__gc frees every array (" .. n .. ")")
  d = nil
  stats_zero()
end)

T.done()
