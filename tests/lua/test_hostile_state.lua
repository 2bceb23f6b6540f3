-- What a script can reach of gpulab's own state, through the driver and CUPTI stand-ins: registry
-- entries (class metatables, the error class, a capture's bookkeeping), the stack slots of a
-- binding that calls back into Lua (debug.setlocal), the user values and C upvalues the bindings
-- keep their references in. None of it may crash gpulab or free what it still uses.
-- Run with GPULAB_FAKE_FAIL=cuMemAllocHost:2:1 (the first pinned allocation fails) and GPULAB_CUPTI set.
local T = dofile("tests/lua/t.lua")

local PTX = [[
.version 8.0
.target sm_90
.address_size 64
.visible .entry work(.param .u64 p) { ret; }
]]
local mod = cuda.load(PTX)
local work = mod:kernel("work")
local registry = debug.getregistry()

-- The class metatables as they were published (help() reads them there), before any is replaced.
local classes = {}
for name, mt in pairs(registry) do
  if type(name) == "string" and name:match("^cuda%.") and type(mt) == "table" and rawget(mt, "__name") == name then
    classes[#classes + 1] = name
  end
end
table.sort(classes)
local kernel_class = registry["cuda.kernel"] -- the published table itself, before a test replaces the entry

T.test("every class is published, and replacing its registry entry changes nothing", function()
  for _, want in ipairs({ "cuda.array", "cuda.host", "cuda.stream", "cuda.event", "cuda.graph", "cuda.module",
                          "cuda.kernel", "cuda.tensormap", "cuda.prepared" }) do
    T.ok(registry[want], want .. " published")
  end
  for _, name in ipairs(classes) do registry[name] = 5 end
  registry["cuda.error"] = 5
  local a = cuda.array("f32", 4)
  T.eq(a.numel, 4)
  local h = cuda.host("f32", 4)
  T.ok(tostring(h):find("cuda.host", 1, true))
  local s = cuda.stream()
  local m2 = cuda.load(PTX)
  local k2 = m2:kernel("work")
  k2:launch({ grid = 1, block = 1, stream = s }, a)
  local p = k2:prepare({ grid = 1, block = 1 }, a)
  p()
  local g = s:capture(function(st) k2:launch({ grid = 1, block = 1, stream = st }, a) end)
  g:launch(s)
  s:sync()
  T.ok(tostring(g):find("cuda.graph", 1, true))
  for _, name in ipairs(classes) do registry[name] = setmetatable({}, { __index = error }) end
  local b = cuda.array("f32", 8)
  T.eq(b.numel, 8)
  -- luacheck: push ignore 311
  a, b, h, p, g, s, m2, k2 = nil, nil, nil, nil, nil, nil, nil, nil
  -- luacheck: pop
  collectgarbage(); collectgarbage()
  T.eq(cuda.stats().arrays, 0, "every array released by its own __gc")
end)

T.test("fields of a published class table replaced: kernels still get their own methods", function()
  local saved = rawget(kernel_class, "__methods")
  T.eq(type(saved), "table")
  kernel_class.__methods = 5
  local k3 = cuda.load(PTX):kernel("work")
  local a = cuda.array("f32", 4)
  k3:launch({ grid = 1, block = 1 }, a)
  T.ok(type(k3.occupancy) == "function", "methods from gpulab's own table")
  kernel_class.__methods = saved
end)

T.test("an object collected under another metatable is still released by its own __gc", function()
  collectgarbage(); collectgarbage()
  local before = cuda.stats()
  do
    local a = cuda.array("f32", 1024)
    debug.setmetatable(a, {}) -- no __gc at all
    local b = cuda.array("f32", 1024)
    debug.setmetatable(b, debug.getmetatable(cuda.host("f32", 1))) -- another class's __gc
    local s = cuda.stream()
    debug.setmetatable(s, { __gc = function() end })
    local c = cuda.array("f32", 16)
    local own = debug.getmetatable(c)
    debug.setmetatable(c, {})
    debug.setmetatable(c, own) -- given back: its own __gc as usual
  end
  collectgarbage(); collectgarbage(); collectgarbage()
  local after = cuda.stats()
  T.eq(after.arrays, before.arrays, "arrays")
  T.eq(after.streams, before.streams, "streams")
  T.eq(after.device_bytes, before.device_bytes, "device bytes")
end)

T.test("a CUDA failure is a cuda.error though registry[\"cuda.error\"] was replaced", function()
  registry["cuda.error"] = 5
  local ok, e = pcall(cuda.host, "f32", 4, { pinned = true })
  T.eq(ok, false)
  T.ok(cuda.is_error(e), tostring(e))
  T.eq(e.code, 2)
  registry["cuda.error"] = {}
  T.ok(cuda.is_error(e), "an error made before stays one")
  -- the string methods of an error come from the loaded string library, which a script can replace
  local loaded = registry._LOADED
  registry._LOADED = 5
  local found = e.find
  registry._LOADED = loaded
  T.eq(found, nil, "no string method without a string library")
  T.ok(e:find("out of memory", 1, true), tostring(e))
end)

T.test("the capture's bookkeeping is not in the registry under any string key", function()
  local s = cuda.stream()
  local a = cuda.array("f32", 4)
  local seen = {}
  local g = s:capture(function(st)
    for k, v in pairs(registry) do
      if type(k) == "string" and type(v) == "table" and k:find("capture", 1, true) then seen[#seen + 1] = k end
      if type(k) == "string" and k:match("^gpulab%.") then registry[k] = 5 end
    end
    work:launch({ grid = 1, block = 1, stream = st }, a)
  end)
  T.eq(#seen, 0, "capture tables in the registry: " .. table.concat(seen, ","))
  registry["gpulab.launch_keys"] = 5
  local fresh = cuda.load(PTX):kernel("work") -- its first launch reads the configuration keys
  fresh:launch({ grid = 1, block = 1, stream = s }, cuda.array("f32", 1))
  a = nil
  collectgarbage(); collectgarbage()
  T.eq(g.objects, 2, "the graph holds the array and the module")
  g:launch(s)
  s:sync()
end)

T.test("C upvalues and gpulab user values cannot be read or replaced from a script", function()
  local s = cuda.stream()
  local arr = cuda.array("f32", 4) -- before the capture: the driver refuses allocations inside one
  local g = s:capture(function(st) work:launch({ grid = 1, block = 1, stream = st }, arr) end)
  arr = nil
  T.eq(debug.getuservalue(g), nil, "getuservalue of a graph")
  T.eq(debug.getuservalue(work), nil, "getuservalue of a kernel")
  local graph_index = debug.getmetatable(g).__index
  T.eq(type(graph_index), "function")
  T.eq(debug.setupvalue(graph_index, 1, 5), nil, "setupvalue of a C function")
  T.eq(g.objects, 2, "the graph's own field reader still works")
  T.eq(type(g.launch), "function")
  local kernel_index = debug.getmetatable(work).__index
  local live = getmetatable(kernel_index).__index
  T.eq(debug.setupvalue(live, 1, cuda.array("f32", 1)), nil, "setupvalue of a kernel's live fields")
  T.eq(type(work.params), "table")
  -- Lua functions and user values of other userdata keep Lua's own behaviour
  local up = 1
  local function f() return up end
  T.eq(debug.setupvalue(f, 1, 2), "up")
  T.eq(f(), 2)
  T.eq(debug.getupvalue(string.gmatch("x", "x"), 1), "")
  T.eq(debug.getuservalue(io.stdout), nil)
end)

-- From inside fn: level 1 is fn, then the C frames of the binding that called it. Clears every
-- slot of every C frame below fn, collects, and goes on using what the binding holds.
local function clear_c_frames()
  local cleared = 0
  for level = 3, 6 do -- 1: this function, 2: fn
    local info = debug.getinfo(level, "S")
    if not info then break end
    if info.what == "C" then
      for n = 1, 12 do
        if debug.setlocal(level, n, nil) then cleared = cleared + 1 end
      end
    end
  end
  collectgarbage(); collectgarbage()
  return cleared
end

T.test("debug.setlocal cannot clear what cuda.measure keeps alive on its stack", function()
  local a = cuda.array("f32", 16)
  local cleared = -1
  local r = cuda.measure(function()
    if cleared < 0 then cleared = clear_c_frames() end
    work:launch({ grid = 1, block = 1 }, a)
  end, { regime = "hot", batch = 1, min_time = 0, min_samples = 2, max_samples = 5 })
  T.eq(cleared, 0, "slots of C frames cleared")
  T.ok(r.samples >= 2)
  -- a Lua frame's locals can still be set, as in Lua
  local function g() local x = 1; debug.setlocal(1, 1, 7); return x end
  T.eq(g(), 7)
end)

T.test("debug.setlocal cannot clear cuda.profile's metric names or s:capture's stream and graph", function()
  local a = cuda.array("f32", 16)
  local cleared = -1
  local rows = cuda.profile(function()
    cleared = clear_c_frames()
    work:launch({ grid = 1, block = 1 }, a)
  end, { metrics = { "dram__bytes.sum" .. string.rep("x", 0), "sm__cycles_elapsed.avg" } })
  T.eq(cleared, 0, "slots of C frames cleared (profile)")
  T.ok(#rows >= 1)
  cleared = -1
  local g = cuda.stream():capture(function(st)
    cleared = clear_c_frames()
    work:launch({ grid = 1, block = 1, stream = st }, a)
  end)
  T.eq(cleared, 0, "slots of C frames cleared (capture)")
  T.eq(g.objects, 2)
  g:launch()
end)

T.test("a script that removes gpulab's private store gets clear errors, never a crash", function()
  local child = os.tmpname()
  T.write(child, [[
local a = cuda.array("f32", 4)
local s = cuda.stream()
local reg = debug.getregistry()
for k in pairs(reg) do if type(k) == "userdata" then reg[k] = nil end end
collectgarbage(); collectgarbage()
local ok, err = pcall(cuda.array, "f32", 4)
assert(not ok and err:find("the metatable of class cuda.array was replaced or removed by a script", 1, true), err)
ok, err = pcall(s.capture, s, function() end)
assert(not ok and err:find("replaced or removed", 1, true), err)
ok, err = pcall(debug.setmetatable, a, {})
assert(not ok and tostring(err):find("private store was removed", 1, true), err)
a:fill(1)
s:sync()
a, s = nil, nil
collectgarbage(); collectgarbage()
assert(cuda.stats().arrays == 0 and cuda.stats().streams == 0)
print("went on")
]])
  local r = cuda.run_isolated(child, { timeout = 60 })
  os.remove(child)
  T.eq(r.status, "ok", r.stderr)
  T.eq(r.stdout, "went on\n")
end)

T.done()
