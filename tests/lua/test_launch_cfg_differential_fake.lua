-- The remembered check against the full one, on random scripts. A kernel that launches a table
-- whose check passed before reads only that table's values (launch.c, "The checked configuration");
-- here every launch and every prepare of a table that a script keeps changing is repeated at once
-- on a second kernel object of the same function with a fresh copy of the table, which that
-- object has never seen and so checks in full. The two must reach the driver with the same
-- launch, or fail with the same message. The scripts change values and keys (valid and not),
-- the inside of {x, y, z} values, metatables, streams (freed too), kernel attributes, and let
-- tables die so that new ones take their addresses. rawset of a key the table did not have is
-- left out: the remembered check does not see it, as docs/API.md says. Through the driver stand-in;
-- no GPU result is claimed.
local T = dofile("tests/lua/t.lua")

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

.visible .entry other(
	.param .u64 out,
	.param .u32 n
)
{
	ret;
}
]]

local mod = cuda.load(PTX)
local out = cuda.array("u32", 64)
-- each kernel launched by the script, and its twin: the same function, another object
local KERNELS = {
  { mod:kernel("plain"), mod:kernel("plain") },
  { mod:kernel("other"), mod:kernel("other") },
}

local streams = { cuda.stream(), cuda.stream { nonblocking = true } }

local function pick(list) return list[math.random(#list)] end

-- Values for each key: most are accepted, some refused (the messages must match too).
local VALUES = {
  grid = { 1, 2, 3, 4, 6, 8, 16, 32, { 2, 1, 1 }, { 4, 2 }, 0, -1, 2.5, "4" },
  block = { 32, 64, 128, 64.0, { 32, 2 }, { 16, 16, 1 }, 2048, 0 },
  smem = { 0, 1024, 4096, 8192, 1 << 20, -1, 0.5 },
  pdl = { true, false, 1 },
  cluster = { 1, 2, 4, 8, 16, 3, { 2, 1, 1 }, { 2, 2, 1 }, 0 },
  cooperative = { true, false },
  priority = { 0, -1, -3, 2 },
  stream = { 1, 2, 1, 2, 0, "x" }, -- indices into `streams`, or a wrong value
  clutser = { 1 },               -- a misspelt key
}
local KEYS = { "grid", "block", "smem", "pdl", "cluster", "cooperative", "priority", "stream", "clutser" }

local function value_of(key)
  local v = pick(VALUES[key])
  if key == "stream" and type(v) == "number" and v > 0 then v = streams[v] end
  if type(v) == "table" then v = table.move(v, 1, #v, 1, {}) end -- each table value its own
  return v
end

-- A table that usually passes: grid and block from a few values, and often one key more (a
-- table that takes a dead one's address with its values and one key more is the sharpest case).
local function new_cfg()
  local cfg = { grid = pick({ 1, 2 }), block = pick({ 32, 64 }) }
  if math.random(2) == 1 then
    local key = pick({ "pdl", "cluster", "cooperative", "priority", "stream", "stream", "smem" })
    cfg[key] = value_of(key)
  end
  return cfg
end

-- The copy the twin launches: what the table holds, raw, without its metatable. Copies stay
-- alive to the end, so none takes the address of another and the twin checks each in full.
local copies = {}
local function copy_of(cfg)
  local c = {}
  for key, v in next, cfg do c[key] = v end
  copies[#copies + 1] = c
  return c
end

-- What one call did: the launch the driver saw, the prepared launch, or the error.
local function outcome(call, ...)
  T.clear_log()
  local ok, res = pcall(call, ...)
  if not ok then return "error: " .. tostring(res) end
  if call == KERNELS[1][1].prepare then -- every kernel's prepare is this one function
    local text = tostring(res)
    res:free()
    return "prepared: " .. text
  end
  return "launched: " .. (T.last_log_line("launch ") or "nothing logged")
end

local CHANGES = {
  function(cfg) local key = pick(KEYS); cfg[key] = value_of(key) end,
  function(cfg) cfg[pick(KEYS)] = nil end,
  function(cfg) -- an existing key set past any metatable: the remembered check reads it again
    local key = pick(KEYS)
    if rawget(cfg, key) ~= nil then rawset(cfg, key, math.random(2) == 1 and value_of(key) or nil) end
  end,
  function(cfg) -- inside a {x, y, z} value
    local key = pick({ "grid", "block", "cluster" })
    if type(cfg[key]) == "table" then cfg[key][math.random(3)] = pick({ 1, 2, 4, 0 }) end
  end,
  function(cfg) setmetatable(cfg, nil) end,
  function(cfg) setmetatable(cfg, { __index = { cluster = 2 } }) end,
}

-- One random script of `steps` steps. Returns how many launches met a marked table (the
-- remembered check's chances); raises with the first disagreement and the steps before it.
local function run(seed, steps)
  math.randomseed(seed)
  local pool = { new_cfg(), new_cfg(), new_cfg(), new_cfg() }
  local history, marked = {}, 0
  local function note(text)
    history[#history + 1] = text
    if #history > 12 then table.remove(history, 1) end
  end
  local step
  -- kernel pair[1] launches (or prepares) pool[slot], its twin a copy: both must do the same
  local function compare(pair, slot, how)
    local cfg = pool[slot]
    if getmetatable(cfg) ~= nil and rawget(getmetatable(cfg), "__newindex") then marked = marked + 1 end
    local got = outcome(pair[1][how], pair[1], cfg, out, 7)
    local want = outcome(pair[2][how], pair[2], copy_of(cfg), out, 7)
    note(("%s table %d: %s"):format(how, slot, got))
    if got ~= want then
      error(("seed %d, step %d: the remembered check and the full one disagree\n  got:  %s\n  want: %s\n" ..
        "the steps before:\n  %s"):format(seed, step, got, want, table.concat(history, "\n  ")), 0)
    end
  end
  for s = 1, steps do
    step = s
    local op = math.random(20)
    local slot = math.random(#pool)
    if op <= 4 then
      local change = math.random(#CHANGES)
      CHANGES[change](pool[slot])
      note(("change %d to table %d"):format(change, slot))
    elseif op == 5 then -- the old table dies first: the new one may take its address
      pool[slot] = nil
      if math.random(3) > 1 then collectgarbage() end
      -- a few new tables, each launched twice by one kernel, so that it gets the mark: another
      -- kernel that remembers a dead table's check must not take one of them for it
      local pair = pick(KERNELS)
      for _ = 1, math.random(8) do
        pool[slot] = new_cfg()
        note(("new table %d"):format(slot))
        for _ = 1, 2 do compare(pair, slot, "launch") end
        pool[#pool + 1] = pool[slot]
      end
      while #pool > 4 do table.remove(pool) end
    elseif op == 6 then
      local k = pick(KERNELS)[1]
      if math.random(2) == 1 then
        k:set_attribute("non_portable_cluster_size_allowed", math.random(0, 1))
      else
        k:set_max_dynamic_smem(pick({ 0, 4096, 8192 }))
      end
      note("kernel attribute")
    elseif op == 7 then
      local i = math.random(#streams)
      if math.random(2) == 1 then streams[i]:free() else streams[i] = cuda.stream() end
      note(("stream %d freed or replaced"):format(i))
    else
      local pair = pick(KERNELS)
      for _ = 1, math.random(3) do compare(pair, slot, op == 8 and "prepare" or "launch") end
    end
  end
  return marked
end

T.test("the remembered check agrees with the full one on random scripts", function()
  local marked = 0
  for seed = 1, 12 do marked = marked + run(seed, 2000) end
  -- the remembered check had its chances: many launches met a marked table
  T.ok(marked > 4000, "launches of a marked table: " .. marked)
end)

os.exit(T.done())
