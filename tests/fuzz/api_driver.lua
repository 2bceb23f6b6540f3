-- api_driver.lua — turns fuzz bytes into a sequence of gpulab API calls (used by fuzz_api.c and
-- by tests/lua/test_api_sequences.lua with pseudo-random bytes). Every call runs under pcall:
-- errors are the expected answer to bad input; only crashes and sanitizer reports are findings.
local bytes = ...
local pos = 0

local function byte()
  pos = pos + 1
  if pos > #bytes then return nil end
  return bytes:byte(pos)
end

local function pick(list)
  local b = byte() or 0
  return list[b % #list + 1]
end

-- Objects made so far, so later calls can use (and misuse) them.
local pool = {}

-- A module the stand-in can load, so that kernels, prepared launches and graphs join the pool:
-- a plain kernel (a pointer and a count), one with a compiled-in cluster of 2 and one without
-- parameters.
local PTX = [[
.version 8.0
.target sm_90a
.address_size 64

.visible .entry plain(
	.param .u64 p,
	.param .u32 n
)
{
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

.visible .entry none()
{
	ret;
}
]]

local function some(list) -- one of the pool's objects, or nil
  if #list == 0 then return nil end
  return list[(byte() or 0) % #list + 1]
end

-- Launch configurations, the Hopper keys among them, right and wrong.
local CONFIGS = {
  function() return { grid = (byte() or 0) % 8 + 1, block = 32 } end,
  function() return { grid = 2 * ((byte() or 0) % 4 + 1), block = 32, cluster = (byte() or 0) % 18 } end,
  function() return { grid = { 4, 2 }, block = { 32, 1 }, cluster = { 2, (byte() or 0) % 3, 1 }, pdl = true } end,
  function() -- past 264 blocks of 1024 threads, more than the stand-in's H200 holds at once
    return { grid = (byte() or 0) * 2 + 1, block = 1024, cooperative = true, priority = (byte() or 0) % 8 - 4 }
  end,
  function() return { grid = 2, block = 32, pdl = (byte() or 0) % 2 == 0, stream = some(pool) } end,
  function() return { grid = 2, block = 32, l2_window = { array = some(pool), hit_ratio = (byte() or 0) % 5 / 4 } } end,
  function() return { grid = 2, block = 32, l2_window = { array = some(pool), bytes = (byte() or 0) * 16 } } end,
  function() return { grid = 2, block = 32, cluster = 2, clutser = 4 } end,
  function() return { block = 64, smem = 0, cluster = 1 } end,
  function() return { grid = 2, block = 32, pdl = true } end,
  function() return { grid = 4, block = 64, cluster = 2, priority = -1 } end,
}

local scalars = {
  function() return nil end,
  function() return 0 end,
  function() return 1 end,
  function() return -1 end,
  function() return 0.5 end,
  function() return 0 / 0 end,
  function() return math.huge end,
  function() return math.maxinteger end,
  function() return math.mininteger end,
  function() return 1 << 40 end,
  function() return (byte() or 0) + 1 end,
  function() return "f32" end,
  function() return "f16" end,
  function() return "u8" end,
  function() return "nope" end,
  function() return "" end,
  function() return {} end,
  function() return { 4, 4 } end,
  function() return { 1 << 31, 1 << 31, 1 << 31 } end,
  function() return { grid = byte() or 1, block = 32 } end,
  function() return { pinned = true } end,
  function() return { timeout = 0.01 } end,
  function() return { dtype = "f16", dims = { 64, 64 }, box = { 64, 64 } } end,
  function() return print end,
  function() return PTX end,
  function() return pick({ "plain", "clustered", "none" }) end,
  function() return pick({ "non_portable_cluster_size_allowed", "required_cluster_width", "num_regs",
    "required_cluster_height", "required_cluster_depth", "max_dynamic_shared_size_bytes",
    "preferred_shared_memory_carveout", "cluster_scheduling_policy_preference" })
  end,
  function() return pick(CONFIGS)() end,
  function() return pool[#pool > 0 and ((byte() or 0) % #pool + 1) or 1] end,
  function() return pool[#pool > 0 and ((byte() or 0) % #pool + 1) or 1] end,
}

local function arg()
  return pick(scalars)()
end

local function args(n)
  local t = {}
  for i = 1, n do t[i] = arg() end
  return t
end

-- Functions of the cuda table, except ones that would leave the process or take seconds.
local skip = { run_isolated = true, compile = true, compile_file = true, bench = true,
  trace = true } -- trace writes the file it is given
-- cuda.measure samples for its timeout (15 s by default) once a pooled prepared launch gives it
-- work: here it gets a short one, whatever the options say.
local function measure_briefly(fn, opts, ...)
  if opts == nil then opts = {} end
  if type(opts) == "table" then pcall(function() opts.timeout, opts.min_time = 0.2, 0 end) end
  return cuda.measure(fn, opts, ...)
end
local wrapped = { measure = measure_briefly }
-- in the order of their names, so that an input means the same calls in every build
local names = {}
for name, fn in pairs(cuda) do
  if type(fn) == "function" and not skip[name] then names[#names + 1] = name end
end
table.sort(names)
local entry_points = {}
for i, name in ipairs(names) do entry_points[i] = wrapped[name] or cuda[name] end

local function methods_of(obj)
  local mt = debug.getmetatable(obj)
  if type(mt) ~= "table" then return {} end
  local out = {}
  local idx = rawget(mt, "__index")
  if type(idx) == "table" then
    for k, v in pairs(idx) do
      if type(v) == "function" then out[#out + 1] = { k, v } end
    end
  end
  for _, k in ipairs({ "__gc", "__close", "__tostring", "__len", "__index", "__newindex", "__call" }) do
    if type(rawget(mt, k)) == "function" then out[#out + 1] = { k, rawget(mt, k) } end
  end
  table.sort(out, function(a, b) return a[1] < b[1] end)
  return out
end

local function remember(...)
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if type(v) == "userdata" or (type(v) == "table" and getmetatable(v) ~= nil) then
      pool[#pool + 1] = v
      if #pool > 32 then table.remove(pool, 1) end
    end
  end
end

-- Kernels in the pool from the start (the random calls rarely build them): the first byte says
-- whether, so that sequences without them stay.
-- The pool's objects of one class ("cuda.kernel", ...), by their tostring.
local function of_class(class)
  local out = {}
  for _, v in ipairs(pool) do
    if type(v) == "userdata" and tostring(v):sub(1, #class + 1) == class .. " " then out[#out + 1] = v end
  end
  return out
end
if (bytes:byte(1) or 0) % 4 ~= 0 then
  local ok, mod = pcall(cuda.load, PTX)
  if ok then
    if (bytes:byte(1) or 0) % 3 == 0 then remember(mod) end -- then it is freed early, mostly
    for _, name in ipairs({ "plain", "clustered", "none" }) do remember(select(2, pcall(mod.kernel, mod, name))) end
  end
  remember(select(2, pcall(cuda.array, "f32", 64)))
  remember(select(2, pcall(cuda.stream)))
end

-- A launch of a pooled kernel with arguments drawn from the pool and from integers, mostly of
-- the right count: the checks past the argument count get their turn.
-- Configuration tables launched again: a kernel remembers the last one it checked and reads only
-- its values, so the driver keeps a few tables and changes them between launches in every way a
-- script can (values, keys added and removed, rawset, the mark taken off, moved or emptied).
local used, made = {}, 0 -- {kernel, table} pairs, launched again and again
local CFG_KEYS = { "grid", "block", "smem", "stream", "cluster", "cooperative", "pdl", "priority", "l2_window" }
local CHANGES = {
  function(c) c.grid = (byte() or 0) % 3 == 0 and arg() or (byte() or 0) % 8 + 1 end,
  function(c) c.block = (byte() or 0) % 3 == 0 and arg() or 32 * ((byte() or 0) % 4 + 1) end,
  function(c) c.pdl = (byte() or 0) % 2 == 0 end,
  function(c) c.cluster = (byte() or 0) % 5 end,
  function(c) c.stream = some(pool) end,
  function(c) c.smem = (byte() or 0) * 64 end,
  function(c) c.clutser = 1 end,
  function(c) c[pick(CFG_KEYS)] = nil end,
  function(c) rawset(c, pick(CFG_KEYS), arg()) end,
  function(c) setmetatable(c, nil) end,
  function(c)
    local other = pick(used)
    if other and getmetatable(c) then setmetatable(other[2], getmetatable(c)) end
  end,
  function(c)
    local mark = getmetatable(c)
    if type(mark) == "table" then mark.__newindex = nil end
  end,
}

-- A kernel and a configuration: a pair launched before (changed now and then), or a new one.
local function kernel_and_cfg()
  if #used > 0 and (byte() or 0) % 4 ~= 0 then
    local u = pick(used)
    if type(u[2]) == "table" and (byte() or 0) % 4 == 0 then pcall(pick(CHANGES), u[2]) end
    return u[1], u[2]
  end
  local k = some(of_class("cuda.kernel"))
  local cfg = (byte() or 0) % 8 == 0 and arg() or pick(CONFIGS)()
  if k and type(cfg) == "table" then
    made = made + 1
    used[(made - 1) % 6 + 1] = { k, cfg }
  end
  return k, cfg
end

local function launch_one()
  local k, cfg = kernel_and_cfg()
  if k == nil then return end
  local n = (byte() or 0) % 4 == 0 and (byte() or 0) % 4 or #k.params
  local a = {}
  local arrays = of_class("cuda.array")
  for i = 1, n do
    local how = (byte() or 0) % 4
    a[i] = how <= 1 and (byte() or 0) or how == 2 and some(arrays) or some(pool)
  end
  local how = (byte() or 0) % 3
  if how == 0 then
    pcall(k.launch, k, cfg, table.unpack(a, 1, n))
  else
    local ok, p = pcall(k.prepare, k, cfg, table.unpack(a, 1, n))
    if ok then
      remember(p)
      if how == 2 then pcall(p) end
    end
  end
end

local steps = 0
while pos < #bytes and steps < 200 do
  steps = steps + 1
  local op = byte() % 10
  if op <= 2 and #entry_points > 0 then
    local fn = pick(entry_points)
    local a = args((byte() or 0) % 4)
    remember(select(2, pcall(fn, table.unpack(a, 1, 4))))
  elseif op <= 5 and #pool > 0 then
    local obj = pick(pool)
    local ms = methods_of(obj)
    if #ms > 0 then
      local m = pick(ms)
      local a = args((byte() or 0) % 3)
      -- self is usually the object, sometimes another one or garbage (wrong self)
      local self = ((byte() or 0) % 5 == 0) and arg() or obj
      remember(select(2, pcall(m[2], self, a[1], a[2], a[3])))
    end
  elseif op == 8 then
    launch_one()
  elseif op == 9 then
    -- a capture whose body launches, frees or collects
    local s = some(of_class("cuda.stream"))
    if s ~= nil then
      local body = byte() or 0
      remember(select(2, pcall(s.capture, s, function()
        launch_one()
        if body % 3 == 0 then collectgarbage() end
        if body % 5 == 0 then local v = some(pool); if v ~= nil then pcall(function() v:free() end) end end
        launch_one()
      end)))
    end
  elseif op == 6 then
    if (byte() or 0) % 2 == 0 then collectgarbage() else collectgarbage("step", 10) end
  else
    -- field reads and writes on objects, including unknown keys
    local obj = #pool > 0 and pick(pool) or nil
    if obj ~= nil then
      local key = pick({ "ptr", "dtype", "shape", "numel", "nbytes", "name", "params", "box_bytes", 1, 0, -1,
        1 << 40, "nope" })
      pcall(function() return obj[key] end)
      pcall(function() obj[key] = arg() end)
      pcall(tostring, obj)
    end
  end
end
pool = nil
collectgarbage()
collectgarbage()
