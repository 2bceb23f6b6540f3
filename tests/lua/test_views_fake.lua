-- test_views_fake.lua — device views and offset copies through the driver stand-in: the
-- addresses and byte counts handed to the driver, launch arguments, lifetimes and stats.
-- The stand-in's "device" memory is host memory: nothing here says anything about a GPU.
local T = dofile("tests/lua/t.lua")

-- Lines appended to the stand-in's log while fn runs.
local logged = T.log_since

local function stats_zero()
  collectgarbage(); collectgarbage()
  cuda.sync()
  local s = cuda.stats()
  T.eq(s.arrays, 0, "live arrays"); T.eq(s.hosts, 0, "live host arrays")
  T.eq(s.device_bytes, 0, "device bytes"); T.eq(s.deferred, 0, "deferred releases")
end

T.test("device views: address, fields, copies", function()
  local d = cuda.array("f32", 100)
  local v = d:view(11, 20)
  T.eq(v.ptr, d.ptr + 40); T.eq(v.numel, 20); T.eq(v.nbytes, 80); T.eq(v.dtype, "f32")
  T.ok(tostring(v):find("cuda.array f32[20] view (80 B) 0x", 1, true), tostring(v))
  T.ok(tostring(d:view(1, 5)):find("cuda.array f32[5] view (20 B) 0x", 1, true), "a view from element 1 is a view")
  T.ok(not tostring(d):find("view", 1, true), tostring(d))
  T.eq(cuda.stats().device_bytes, 400, "a view allocates nothing")
  local h = cuda.host("f32", 100):iota(1)
  d:copy_from(h)
  local back = cuda.host("f32", 20):copy_from(v)
  T.eq(back[1], 11); T.eq(back[20], 30)
  v:copy_from(cuda.host("f32", 20):fill(-1))
  local all = cuda.host("f32", 100):copy_from(d)
  T.eq(all[10], 10); T.eq(all[11], -1); T.eq(all[30], -1); T.eq(all[31], 31)
  local m = d:view(1, { 10, 10 })
  T.eq(m.ndim, 2)
  T.raises(function() d:view(95, 10) end,
    "bad argument #2 to 'd:view' (elements 95..104 are past the end (the array has 100))")
  -- offset copies: device to device, host to device, device to host
  local e = cuda.array("f32", 100):fill(0)
  e:copy_from(d, { dst_offset = 50, src_offset = 0, count = 50 })
  local eh = cuda.host("f32", 100):copy_from(e)
  T.eq(eh[50], 0); T.eq(eh[51], 1); T.eq(eh[100], 50)
  e:copy_from(h, { dst_offset = 0, src_offset = 90, count = 10 })
  local part = cuda.host("f32", 5):copy_from(e, { src_offset = 5, count = 5 })
  T.eq(part[1], 96); T.eq(part[5], 100)
  T.raises(function() e:copy_from(d, { count = 101 }) end,
    "bad argument #2 to 'd:copy_from' (field 'count': 101 does not fit (destination has 100 elements of f32 after " ..
    "dst_offset, source 100 elements of f32 after src_offset))")
  T.raises(function() e:copy_from(cuda.array("i32", 100)) end,
      "bad argument #1 to 'd:copy_from' (dtype mismatch (destination f32, source i32); pass {reinterpret=true} to " ..
      "copy the bytes as they are, or {convert=true} to convert the values (host arrays))")
  e:copy_from(cuda.array("i32", 100):fill(0), { reinterpret = true })
  T.raises(function() e:copy_from(cuda.host("f64", 100), { convert = true }) end,
    "bad argument #2 to 'd:copy_from' (field 'convert': converts between host arrays only (destination cuda.array " ..
    "f32, source cuda.host f64): convert into a host array, then copy that)")
  -- 2-D: one driver copy per row, at the pitched addresses
  local grid = cuda.array("f32", { 10, 10 }):copy_from(h)
  local tile = cuda.array("f32", { 3, 2 })
  local text = logged(function() tile:copy_from(grid, { rows = 3, count = 2, src_offset = 12 }) end)
  local _, copies = text:gsub("cuMemcpyDtoD ", "")
  T.eq(copies, 3, "one copy per row: " .. text)
  local th = cuda.host("f32", 6):copy_from(tile)
  T.eq(th[1], 13); T.eq(th[2], 14); T.eq(th[3], 23); T.eq(th[6], 34)
  local s = cuda.stream()
  e:copy_from(d, { stream = s, count = 10, dst_offset = 90 })
  s:sync()
  T.eq(cuda.host("f32", 1):copy_from(e, { src_offset = 99 })[1], 10, "on a stream")
  d, v, h, back, all, m, e, eh, part, s = nil, nil, nil, nil, nil, nil, nil, nil, nil, nil -- luacheck: ignore 311
  grid, tile, th = nil, nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("the parent's memory lives while a view does", function()
  local d = cuda.array("u8", 64):fill(7)
  local v = d:view(33, 32)
  local ptr = d.ptr
  d:free()
  T.eq(cuda.stats().arrays, 1)
  T.eq(cuda.stats().device_bytes, 64, "still allocated")
  T.eq(cuda.host("u8", 32):copy_from(v)[32], 7, "the view still works")
  v:free()
  T.eq(cuda.stats().device_bytes, 0)
  T.raises(function() return v.ptr end, "cuda.array was freed")
  T.ok(ptr ~= 0)
  stats_zero()
end)

T.test("pinned host views in async copies outlive their parent safely", function()
  local s = cuda.stream()
  local p = cuda.host("f64", 64, { pinned = true }):iota(1)
  local pv = p:view(33, 32)
  T.eq(pv.pinned, true)
  T.ok(tostring(pv):find("pinned view", 1, true), tostring(pv))
  local d = cuda.array("f64", 32)
  d:copy_from(pv, s)
  p:free()
  T.eq(cuda.stats().pinned_bytes, 64 * 8, "the view holds the pinned block")
  local back = cuda.host("f64", 32, { pinned = true })
  back:copy_from(d, { stream = s })
  pv:free()
  s:sync()
  T.eq(back[1], 33); T.eq(back[32], 64)
  T.eq(cuda.stats().pinned_bytes, 32 * 8, "only back remains")
  s, p, pv, d, back = nil, nil, nil, nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("views as launch arguments", function()
  local prog = cuda.compile([[extern "C" __global__ void k(float *p, unsigned n, bool flag) {}]],
                            { name = "views.cu" })
  local k = cuda.load(prog):kernel("k")
  local d = cuda.array("f32", 256)
  local v = d:view(65, 64)
  k:launch({ grid = 1, block = 64 }, v, 64, 1)
  local prepared = k:prepare({ grid = 1, block = 64 }, d:view(129, 16), 16, 0)
  prepared()
  d:free() -- the views keep the memory; the launch marks their uses
  v = nil -- luacheck: ignore 311
  prepared = nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("a graph captured with views keeps their memory; replays after the parent is freed", function()
  local s = cuda.stream { nonblocking = true }
  local d = cuda.array("f32", 64):fill(0)
  local src = cuda.array("f32", 64):fill(3)
  local g = s:capture(function()
    d:view(9, 8):copy_from(src:view(1, 8), s)
  end)
  d = nil -- luacheck: ignore 311
  src:free()
  collectgarbage(); collectgarbage()
  T.eq(cuda.stats().device_bytes, 2 * 256, "the graph's views hold both allocations")
  g:launch(s)
  s:sync()
  g:free()
  s:free()
  g, s = nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.test("bool device arrays", function()
  local d = cuda.array("bool", 10)
  d:fill(true)
  local h = cuda.host("bool", 10):copy_from(d)
  T.eq(h[10], true); T.eq(h:sum(), 10)
  d:fill(false)
  T.eq(cuda.host("bool", 10):copy_from(d):sum(), 0)
  T.raises(function() d:fill(1) end, "bad argument #1 to 'd:fill' (bool takes true or false, got number)")
  T.ok(cuda.compare(d, cuda.host("bool", 10)).ok)
  d, h = nil, nil -- luacheck: ignore 311
  stats_zero()
end)

T.done()
