-- test_memory_hostile.lua — scripts that try to free an array while the memory bindings work on it:
-- option tables with metamethods, and finalizers that run inside the allocations a call makes.
-- Without a driver only host arrays are used; through the stand-in device arrays too.
local T = dofile("tests/lua/t.lua")
local has_device = cuda.available()

-- An options table whose every metamethod frees `victim` (and counts the calls).
local function hostile_opts(victim, fields)
  local calls = { n = 0 }
  local mt = {}
  for _, ev in ipairs({ "__index", "__len", "__pairs", "__newindex", "__eq" }) do
    mt[ev] = function() calls.n = calls.n + 1; victim:free() end
  end
  return setmetatable(fields or {}, mt), calls
end

T.test("option tables are read raw: an __index that frees the array never runs", function()
  local h = cuda.host("f32", 64)
  local opts, calls = hostile_opts(h)
  h:random(opts)
  T.eq(calls.n, 0, "h:random ran no metamethod")
  T.ok(h[1] >= 0 and h[1] < 1, "and filled the array")
  local a, b = cuda.host("f32", 64):fill(1), cuda.host("f32", 64):fill(1)
  opts, calls = hostile_opts(a, {})
  T.ok(cuda.compare(a, b, opts).ok)
  T.eq(calls.n, 0, "cuda.compare ran no metamethod")
  local c = cuda.host("f32", 64)
  opts, calls = hostile_opts(c, {})
  c:copy_from(a, opts)
  T.eq(calls.n, 0, "copy_from ran no metamethod"); T.eq(c[64], 1)
  local m = cuda.host("f32", { 8, 8 })
  opts, calls = hostile_opts(m, {})
  m:matmul(m:view(1, { 8, 8 }), m:view(1, { 8, 8 }), opts)
  T.eq(calls.n, 0, "matmul ran no metamethod")
  -- a shape table with metamethods is read raw too
  local shape, scalls = hostile_opts(h, { 4, 4 })
  T.eq(h:view(1, shape).numel, 16); T.eq(scalls.n, 0, "the shape's metamethods did not run")
  T.eq(cuda.host("f32", shape).numel, 16)
  -- an option given only through __index is not seen
  local proxy = setmetatable({}, { __index = function() return 5 end })
  T.eq(cuda.host("i32", 4):random(proxy)[1] < 100, true)
  if has_device then
    local d = cuda.array("f32", 64):copy_from(a)
    opts, calls = hostile_opts(d, {})
    T.ok(cuda.compare(d, b, opts).ok, "device operand")
    d:copy_from(b, opts)
    T.eq(calls.n, 0, "no metamethod ran for device arrays either")
  end
end)

-- Runs fn(target) many times while finalizers of fresh garbage free `target`: each call must
-- either succeed or raise "was freed"; the process must not crash (ASan catches a stale read).
local function race_finalizers(make, fn, what)
  local freed_errors, ok_calls = 0, 0
  collectgarbage("incremental", 100, 100) -- small steps often, so allocations run finalizers
  for i = 1, 300 do
    local target = make()
    for _ = 1, (i % 7) + 1 do setmetatable({}, { __gc = function() target:free() end }) end
    local ok, err = pcall(fn, target)
    if ok then ok_calls = ok_calls + 1
    elseif tostring(err):find("was freed", 1, true) then freed_errors = freed_errors + 1
    else error(what .. ": unexpected error: " .. tostring(err)) end
    if i % 50 == 0 then collectgarbage() end
  end
  collectgarbage("incremental", 200, 100)
  collectgarbage(); collectgarbage()
  T.ok(ok_calls + freed_errors == 300, what)
  if os.getenv("GPULAB_TEST_VERBOSE") then print(what, "freed during the call:", freed_errors) end
  return freed_errors
end

T.test("finalizers that free the array during totable, tostring, view, transpose", function()
  local function host() return cuda.host("f64", 2000):iota(1) end
  local function square() return cuda.host("f32", { 40, 50 }):iota() end
  race_finalizers(host, function(h) local t = h:totable(); assert(#t <= 2000) end, "h:totable")
  race_finalizers(host, function(h) return tostring(h) end, "tostring(h)")
  race_finalizers(host, function(h) local v = h:view(2, 10); return v[1] end, "h:view")
  race_finalizers(square, function(h) return h:transpose() end, "h:transpose")
  race_finalizers(host, function(h) return h:random { seed = 4 } end, "h:random")
  race_finalizers(host, function(h) return cuda.compare(h, cuda.host("f64", 2000)) end, "cuda.compare")
  race_finalizers(host, function(h) return cuda.host("f64", 2000):copy_from(h, { count = 2000 }) end, "copy_from")
  if has_device then
    local function dev() return cuda.array("f32", 512) end
    race_finalizers(dev, function(d) local v = d:view(3, 8); return v.ptr end, "d:view")
    race_finalizers(dev, function(d) return tostring(d) end, "tostring(d)")
    race_finalizers(dev, function(d) return cuda.compare(d, cuda.host("f32", 512)) end, "compare(d)")
    race_finalizers(dev, function(d) return cuda.host("f32", 512):copy_from(d, {}) end, "copy_from(d)")
  end
  collectgarbage(); collectgarbage()
  if has_device then cuda.sync() end
  local s = cuda.stats()
  T.eq(s.hosts, 0, "no host array left"); T.eq(s.arrays, 0, "no device array left")
end)

T.test("a view freed, its parent freed, in either order, under every collector mode", function()
  for _, mode in ipairs({ "incremental", "generational" }) do
    collectgarbage(mode)
    for i = 1, 200 do
      local h = cuda.host("u8", 64):fill(i % 256)
      local v = h:view(1 + i % 60, 4)
      if i % 2 == 0 then h:free() else v:free() end
      if i % 3 == 0 then v = nil end -- luacheck: ignore 311
      if v and i % 2 == 0 then T.eq(v[1], i % 256, "view after its parent was freed") end
    end
    collectgarbage(); collectgarbage()
    T.eq(cuda.stats().hosts, 0, mode)
  end
  collectgarbage("incremental")
end)

-- Pseudo-random sequences of host (and, through the stand-in, device) operations on a pool of
-- arrays and views, interleaved with frees, finalizers that free pool members, option tables
-- with hostile metamethods and collections. Every call runs under pcall; only a crash, a
-- sanitizer report or wrong bookkeeping at the end is a failure.
T.test("random interleavings of views, copies, host operations, frees and finalizers", function()
  local seed = 12345
  local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n + 1 end
  local pool = {}
  local function any() return pool[rnd(#pool)] end
  local dtypes = { "f32", "f64", "i32", "u8", "bool", "f16" }
  local makers = {
    function() return cuda.host(dtypes[rnd(#dtypes)], { rnd(8), rnd(8) }) end,
    function() local h = any(); return h and h:view(rnd(4), rnd(4)) end,
    function() return has_device and cuda.array(dtypes[rnd(#dtypes)], rnd(64)) or nil end,
    function() local h = any(); return h and h:transpose() end,
  }
  local ops = {
    function(x) return x:free() end,
    function(x) return x:fill(x.dtype == "bool" or 1) end,
    function(x, y) return x:copy_from(y, hostile_opts(y, { count = rnd(4) - 1 })) end,
    function(x, y) return x:copy_from(y, { convert = true }) end,
    function(x, y) return x:copy_from(y, { reinterpret = true, rows = rnd(3), count = rnd(3) }) end,
    function(x, y) return x:add(y) end,
    function(x, y) return x:axpy(0.5, y) end,
    function(x) return x:sum() end,
    function(x) return x:max() end,
    function(x, y) return x:dot(y) end,
    function(x) return x:apply("relu") end,
    function(x) return x:random(hostile_opts(x)) end,
    function(x, y) return cuda.compare(x, y, hostile_opts(x)) end,
    function(x) return tostring(x) end,
    function(x) return x:totable() end,
    function(x, y, z) return x:matmul(y, z, hostile_opts(z)) end,
    function(x) setmetatable({}, { __gc = function() x:free() end }) end,
    function() collectgarbage("step", rnd(50)) end,
  }
  for _ = 1, 3000 do
    if #pool < 4 or rnd(4) == 1 then
      local ok, v = pcall(makers[rnd(#makers)])
      if ok and v then pool[#pool + 1] = v end
      if #pool > 24 then table.remove(pool, 1) end
    else
      pcall(ops[rnd(#ops)], any(), any(), any())
    end
  end
  pool = nil -- luacheck: ignore 311
  collectgarbage(); collectgarbage()
  if has_device then cuda.sync() end
  local s = cuda.stats()
  T.eq(s.hosts, 0, "no host array left"); T.eq(s.arrays, 0, "no device array left")
  T.eq(s.pinned_bytes, 0, "pinned bytes"); T.eq(s.device_bytes, 0, "device bytes")
end)

T.done()
