-- lifetimes_driver.lua — turns fuzz bytes into an interleaving of gpulab API calls, metamethods
-- that run inside those calls (option tables whose __index frees objects), finalizers (__gc of
-- plain tables that free, use or resurrect gpulab objects), captures, replays, timed-out syncs
-- (GPULAB_FAKE_BUSY_FILE holds the stand-in's work in flight), forged metatables and forced
-- collections. Used by fuzz_lifetimes.c and, with pseudo-random bytes, by
-- tests/lua/test_lifetime_sequences.lua. Errors are expected answers; a crash, a sanitizer
-- report, or bookkeeping left over at the end (cuda.stats() not zero) is a finding.
local bytes = ...
local pos = 0
-- What was live before this sequence: the fuzzer runs many Lua states in one process, and an
-- object a finalizer creates while a state is closing gets no finalizer of its own (Lua 5.4
-- does not register finalizers during lua_close), so its count stays with the process.
local before = cuda.stats()
local BUSY = os.getenv("GPULAB_FAKE_BUSY_FILE")

local function byte()
  pos = pos + 1
  return pos <= #bytes and bytes:byte(pos) or 0
end

local PTX = [[
.version 8.0
.target sm_90
.address_size 64

.visible .entry touch(
	.param .u64 p
)
{
	ret;
}

.visible .entry with_tensormap(
	.param .u32 n,
	.param .align 64 .b8 tm[128],
	.param .u64 out
)
{
	ret;
}
]]

local pool = {}       -- gpulab objects, by slot
local revived = {}    -- objects brought back by finalizers
local capturing = nil -- the stream under capture, while inside s:capture

local function pick()
  local n = #pool
  if n == 0 then return nil end
  return pool[byte() % n + 1]
end

local function of_type(name)
  local start = byte()
  for i = 1, #pool do
    local o = pool[(start + i) % #pool + 1]
    local ok, s = pcall(tostring, o)
    if ok and type(s) == "string" and s:find(name, 1, true) == 1 then return o end
  end
  return nil
end

local function remember(o)
  if o == nil then return end
  if #pool >= 24 then table.remove(pool, byte() % #pool + 1) end
  pool[#pool + 1] = o
end

local function busy(on)
  if not BUSY then return end
  if on then local f = io.open(BUSY, "w"); if f then f:close() end else os.remove(BUSY) end
end

local function free_some()
  for _ = 1, byte() % 3 + 1 do
    local o = pick()
    if o then pcall(function() o:free() end) end
  end
end

local mod, k, ktm
local finished = false -- set at the end: finalizers run later must not load the module again
local function kernels()
  if finished then return false end
  if not mod then
    local ok, m = pcall(cuda.load, PTX)
    if not ok then return false end
    mod = m
    k, ktm = m:kernel("touch"), m:kernel("with_tensormap")
    remember(mod)
  end
  return true
end

-- Tables launched before come back half the time: a kernel remembers the last one it checked,
-- and its stream may have been freed or collected since.
local old_cfgs, cfgs_made = {}, 0

local function new_launch_cfg()
  local cfg = { grid = 1, block = 32 }
  local s = capturing or of_type("cuda.stream")
  if s and byte() % 2 == 0 then cfg.stream = s end
  local attrs = byte() % 8 -- launch attributes: cuLaunchKernelEx, and an L2 window's array kept alive
  if attrs == 1 then cfg.pdl = true
  elseif attrs == 2 then cfg.cluster, cfg.priority = 1, 0
  elseif attrs == 3 then cfg.cooperative = true
  elseif attrs >= 4 and attrs <= 5 then
    local a = of_type("cuda.array")
    if a then cfg.l2_window = { array = a, hit_ratio = 0.5 } end
  end
  if byte() % 4 == 0 then -- the options table runs code while k:launch reads it
    return setmetatable(cfg, { __index = function() free_some(); collectgarbage("step", 1) end })
  end
  return cfg
end

local function launch_cfg()
  if not old_cfgs then return new_launch_cfg() end -- a finalizer run after the sequence
  if #old_cfgs > 0 and byte() % 2 == 0 then return old_cfgs[byte() % #old_cfgs + 1] end
  local cfg = new_launch_cfg()
  cfgs_made = cfgs_made + 1
  old_cfgs[(cfgs_made - 1) % 4 + 1] = cfg
  return cfg
end

local ops
local function run_op(depth)
  local op = ops[byte() % #ops + 1]
  pcall(op, depth)
end

ops = {
  function() remember(cuda.array(({ "f32", "u8", "f16" })[byte() % 3 + 1], byte() * 16 + 16)) end,
  function() remember(cuda.host("f32", byte() + 1, { pinned = byte() % 2 == 0 })) end,
  function() remember(cuda.stream { nonblocking = byte() % 2 == 0 }) end,
  function() remember(cuda.event()) end,
  function()
    local a = of_type("cuda.array")
    if a then
      remember(cuda.tensormap { array = a, dtype = "u8", dims = { 16, 1 }, strides = { 16 }, box = { 16, 1 } })
    end
  end,
  function() if kernels() then k:launch(launch_cfg(), of_type("cuda.array") or 0) end end,
  function()
    local tm = of_type("cuda.tensormap")
    if kernels() and tm then ktm:launch(launch_cfg(), 1, tm, 0) end
  end,
  function() if kernels() then remember(k:prepare(launch_cfg(), of_type("cuda.array") or 0)) end end,
  function() local prepared = of_type("cuda.prepared"); if prepared then prepared() end end,
  function() local o = pick(); if o then o:free() end end,
  function() -- a finalizer that frees, uses or revives other objects
    local victim, user = pick(), pick()
    local mode = byte() % 4
    setmetatable({ victim }, { __gc = function(t)
      if mode == 0 and t[1] then pcall(function() t[1]:free() end)
      elseif mode == 1 and t[1] then revived[#revived + 1] = t[1]
      elseif mode == 2 and user and kernels() then pcall(k.launch, k, { grid = 1, block = 1 }, user)
      else pcall(cuda.array, "u8", 64) end
    end })
  end,
  function() -- revived objects (their own finalizer may have run) used again
    local o = revived[byte() % math.max(#revived, 1) + 1]
    if o then
      pcall(tostring, o)
      pcall(function() return o.ptr, o.numel end)
      if kernels() then pcall(k.launch, k, { grid = 1, block = 1 }, o) end
      pcall(function() o:free() end)
    end
  end,
  function(depth)
    local s = of_type("cuda.stream")
    if s and not capturing and depth < 2 then
      remember(s:capture(function()
        capturing = s
        for _ = 1, byte() % 6 do run_op(depth + 1) end
        capturing = nil
      end))
    end
    capturing = nil
  end,
  function() local g = of_type("cuda.graph"); if g then g:launch(of_type("cuda.stream")) end end,
  function()
    local tm, a = of_type("cuda.tensormap"), of_type("cuda.array")
    if tm and a then tm:replace_address(a) end
  end,
  function() busy(byte() % 2 == 0) end,
  function() cuda.sync { timeout = 0.002 } end,
  function() local s = of_type("cuda.stream"); if s then s:sync { timeout = 0.002 } end end,
  function() local s = of_type("cuda.stream"); if s then s:query() end end,
  function()
    local e, s = of_type("cuda.event"), of_type("cuda.stream")
    if e then e:record(s); e:sync { timeout = 0.002 } end
  end,
  function() if byte() % 2 == 0 then collectgarbage() else collectgarbage("step", byte()) end end,
  function() -- a forged metatable for one call, then put back
    local o, other = pick(), pick()
    if o and other and o ~= other then
      local mine = debug.getmetatable(o)
      debug.setmetatable(o, debug.getmetatable(other))
      local methods = rawget(debug.getmetatable(other), "__index")
      if type(methods) == "table" then
        for name, m in pairs(methods) do
          if type(m) == "function" and name ~= "capture" and byte() % 3 == 0 then pcall(m, o, 1) end
        end
      end
      pcall(tostring, o)
      debug.setmetatable(o, mine)
    end
  end,
  function() local o = pick(); if o then debug.setuservalue(o, false, byte() % 3 + 1) end end,
  function()
    local a, h = of_type("cuda.array"), of_type("cuda.host")
    if a and h then a:copy_from(h, of_type("cuda.stream")) end
  end,
  function() cuda.stats() end,
}

-- In a function of its own, so no stale register of this chunk keeps an object alive at the end.
local function run_all()
  local steps = 0
  while pos < #bytes and steps < 300 do
    steps = steps + 1
    run_op(0)
  end
  busy(false)
  finished = true
  pool, revived, mod, k, ktm, old_cfgs = nil, nil, nil, nil, nil, nil
end
run_all()

-- Everything dropped and collected: gpulab's bookkeeping must read what it read before.
-- objects that finalizers resurrect or create, and objects held by finalized ones (a kernel's
-- module, which stats do not see going), need further cycles
for _ = 1, 8 do
  collectgarbage()
  cuda.sync { timeout = 5 }
end
local st = cuda.stats()
for _, key in ipairs({ "arrays", "hosts", "modules", "streams", "events", "graphs", "tensormaps", "prepared",
  "device_bytes", "pinned_bytes", "deferred" }) do
  if st[key] ~= before[key] then
    error("bookkeeping left after the sequence: " .. key .. " = " .. tostring(st[key]))
  end
end
