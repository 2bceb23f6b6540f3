-- A configuration table launched again: a kernel remembers the last table whose check passed, and a
-- launch with it reads only that table's values (launch.c, "The checked configuration"). Through the
-- driver stand-in, every way the table or the kernel can change between launches must reach the
-- driver exactly as a fresh table would: values changed, keys added, removed, misspelt, the mark
-- taken off, streams replaced or freed, kernel attributes set, tables that take a dead one's
-- address, and scripts that tamper with the mark. No GPU result is claimed.
local T = dofile("tests/lua/t.lua")

local clear_log = T.clear_log
local function last_launch() return T.last_log_line("launch ") or "" end
local function has(text) return last_launch():find(text, 1, true) ~= nil end

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
local k = mod:kernel("plain")
local out = cuda.array("u32", 64)

-- Launches k with cfg `n` times (the third launch on reads the remembered check).
local function launch(kernel, cfg, n)
  for _ = 1, n or 1 do kernel:launch(cfg, out, 7) end
end

T.test("a table launched twice gets the mark; once, or with a metatable of its own, it does not", function()
  local once = { grid = 2, block = 32 }
  launch(k, once)
  T.eq(getmetatable(once), nil, "one launch leaves the table alone")
  local twice = { grid = 2, block = 32 }
  launch(k, twice, 2)
  local mark = getmetatable(twice)
  T.eq(type(mark), "table", "the second check marks it")
  T.eq(type(rawget(mark, "__newindex")), "function")
  local wrong = { grid = 2, block = 32, clutser = 2 }
  for _ = 1, 3 do T.raises(function() launch(k, wrong) end, "unknown field 'clutser'") end
  T.eq(getmetatable(wrong), nil, "a table no check passed is never marked")
  local env = {}
  for key, v in pairs(_G) do env[key] = v end
  for _ = 1, 3 do T.raises(function() launch(k, env) end, "field 'grid': required") end
  T.eq(getmetatable(env), nil, "nor a table of globals")
  local own = setmetatable({ grid = 2, block = 32 }, { __index = {} })
  local mt = getmetatable(own)
  launch(k, own, 4)
  T.eq(getmetatable(own), mt, "a metatable of the script's own stays")
end)

T.test("values changed between launches reach the driver", function()
  local cfg = { grid = 2, block = 32, pdl = true }
  launch(k, cfg, 3)
  T.ok(has("grid=2,1,1 block=32,1,1 smem=0 stream=0 attrs=pdl:1 "), last_launch())
  cfg.grid = 6
  launch(k, cfg)
  T.ok(has("grid=6,1,1 block=32,1,1 "), last_launch())
  cfg.block = 64.0 -- a float with an integer value is the same block
  launch(k, cfg)
  T.ok(has("grid=6,1,1 block=64,1,1 "), last_launch())
  cfg.pdl = false
  launch(k, cfg)
  T.ok(not has("attrs="), last_launch())
  cfg.pdl = true
  cfg.smem = 0
  launch(k, cfg, 3)
  cfg.smem = 0.5
  T.raises(function() launch(k, cfg) end, "field 'smem': non-negative integer number of bytes expected, got 0.5")
  cfg.smem = 256
  launch(k, cfg)
  T.ok(has("smem=256 stream=0 attrs=pdl:1 "), last_launch())
  cfg.grid = 0
  T.raises(function() launch(k, cfg) end, "field 'grid': x = 0 is out of range")
  cfg.grid = "4"
  T.raises(function() launch(k, cfg) end, "field 'grid'")
  cfg.grid = { 2, 2 }
  launch(k, cfg, 3)
  T.ok(has("grid=2,2,1 "), last_launch())
  cfg.grid[2] = 3 -- a table value is read every time
  launch(k, cfg)
  T.ok(has("grid=2,3,1 "), last_launch())
end)

T.test("keys added, removed and misspelt after the mark are seen", function()
  local cfg = { grid = 4, block = 32 }
  launch(k, cfg, 3)
  T.ok(getmetatable(cfg) ~= nil, "marked")
  cfg.cluster = 2
  launch(k, cfg)
  T.ok(has("grid=4,1,1 block=32,1,1 smem=0 stream=0 attrs=cluster:2x1x1 "), last_launch())
  launch(k, cfg, 2)
  cfg.cluster = nil
  launch(k, cfg)
  T.ok(not has("attrs="), last_launch())
  cfg.cluster = 4 -- set again after nil: __newindex sees it
  launch(k, cfg)
  T.ok(has("attrs=cluster:4x1x1 "), last_launch())
  cfg.cluster = nil
  launch(k, cfg, 3)
  cfg.clutser = 2
  T.raises(function() launch(k, cfg) end, "unknown field 'clutser'")
  T.raises(function() launch(k, cfg) end, "unknown field 'clutser'")
  cfg.clutser = nil
  launch(k, cfg)
  cfg.cooperative = true
  cfg.priority = -2
  launch(k, cfg)
  T.ok(has("attrs=cooperative:1;priority:-2 "), last_launch())
end)

T.test("a mark taken off, or replaced, takes the remembered check with it", function()
  local cfg = { grid = 4, block = 32 }
  launch(k, cfg, 3)
  local mark = getmetatable(cfg)
  setmetatable(cfg, nil)
  cfg.pdl = true -- no __newindex now
  launch(k, cfg)
  T.ok(has("attrs=pdl:1 "), last_launch())
  setmetatable(cfg, { __index = { cluster = 2 } }) -- inherited keys are not the table's
  launch(k, cfg, 3)
  T.ok(has("attrs=pdl:1 ") and not has("cluster"), last_launch())
  rawset(cfg, "cluster", 2)
  launch(k, cfg)
  T.ok(has("attrs=cluster:2x1x1;pdl:1 "), last_launch())
  -- the mark put back by the script: the kernel forgot the table when its metatable changed
  setmetatable(cfg, mark)
  cfg.cluster = nil
  launch(k, cfg, 3)
  T.ok(has("attrs=pdl:1 ") and not has("cluster"), last_launch())
end)

T.test("streams: replaced, freed, and not kept alive by the kernel", function()
  local s1, s2 = cuda.stream { nonblocking = true }, cuda.stream { nonblocking = true }
  local cfg = { grid = 2, block = 32, stream = s1 }
  launch(k, cfg, 3)
  local first = last_launch():match("stream=(%S+)")
  cfg.stream = s2
  launch(k, cfg, 3)
  local second = last_launch():match("stream=(%S+)")
  T.ok(first ~= second and first ~= "0" and second ~= "0", first .. " " .. second)
  s2:free()
  T.raises(function() launch(k, cfg) end, "field 'stream': the cuda.stream was freed")
  s1:free()
  collectgarbage()
  collectgarbage()
  local streams = cuda.stats().streams
  do
    local s = cuda.stream()
    launch(k, { grid = 1, block = 32, stream = s }, 1)
    local held = { grid = 1, block = 32, stream = s }
    launch(k, held, 4)
  end
  collectgarbage()
  collectgarbage()
  T.eq(cuda.stats().streams, streams, "the remembered check keeps no stream alive")
  -- a prepared launch from a remembered check keeps its stream as one from a full check does
  local s = cuda.stream()
  local cfg2 = { grid = 1, block = 32, stream = s }
  launch(k, cfg2, 3)
  local p = k:prepare(cfg2, out, 1)
  cfg2.stream = nil
  s = nil -- luacheck: ignore 311
  collectgarbage()
  collectgarbage()
  clear_log()
  p()
  T.ok(not has("stream=0 "), last_launch())
  p:free()
end)

T.test("a kernel attribute set forgets the check: limits that went down are refused again", function()
  local k2 = mod:kernel("other")
  k2:set_attribute("non_portable_cluster_size_allowed", 1)
  local cfg = { grid = 32, block = 32, cluster = 16 }
  launch(k2, cfg, 3)
  T.ok(has("attrs=cluster:16x1x1 "), last_launch())
  k2:set_attribute("non_portable_cluster_size_allowed", 0)
  T.raises(function() launch(k2, cfg) end, "above the portable limit of 8")
  k2:set_max_dynamic_smem(8192)
  local big = { grid = 1, block = 32, smem = 8192 }
  launch(k2, big, 3)
  k2:set_max_dynamic_smem(4096)
  T.raises(function() launch(k2, big) end, "8192 bytes exceed kernel 'other''s dynamic shared memory limit of 4096")
end)

T.test("one table for two kernels, two tables for one kernel", function()
  local k2 = mod:kernel("other")
  local a = { grid = 2, block = 32, pdl = true }
  local b = { grid = 3, block = 64 }
  for i = 1, 8 do
    if i == 4 then a.grid, b.block = 4, 128 end
    if i == 6 then a.pdl, b.cluster = nil, 3 end
    local a_attrs = a.pdl and " attrs=pdl:1 " or " args="
    local b_attrs = b.cluster and " attrs=cluster:3x1x1 " or " args="
    local function expect(text) T.ok(has(text), i .. ": " .. last_launch()) end
    launch(k, a)
    expect(("launch plain grid=%d,1,1 block=32,1,1 smem=0 stream=0%s"):format(a.grid, a_attrs))
    launch(k2, a)
    expect(("launch other grid=%d,1,1 block=32,1,1 smem=0 stream=0%s"):format(a.grid, a_attrs))
    launch(k, b)
    expect(("launch plain grid=3,1,1 block=%d,1,1 smem=0 stream=0%s"):format(b.block, b_attrs))
  end
end)

T.test("two tables alternated for one kernel are both remembered; a third takes the older's place", function()
  -- launches x and y in turn, twice, each reaching the driver as its text says
  local function alternate(x, x_text, y, y_text)
    for _ = 1, 2 do
      launch(k, x)
      T.ok(has(x_text), last_launch())
      launch(k, y)
      T.ok(has(y_text), last_launch())
    end
  end
  local a = { grid = 2, block = 32 }
  local b = { grid = 3, block = 64, pdl = true }
  for _ = 1, 3 do
    launch(k, a)
    launch(k, b)
  end
  T.eq(type(getmetatable(a)), "table", "the first table is marked at its second check")
  T.eq(getmetatable(b), getmetatable(a), "and so is the second")
  -- a key put in past __newindex is not seen by a remembered check (launch.c), so a launch that
  -- goes through with it took the remembered check
  rawset(a, "clutser", 1)
  rawset(b, "clutser", 1)
  alternate(a, "grid=2,1,1 block=32,1,1 smem=0 stream=0 args=",
            b, "grid=3,1,1 block=64,1,1 smem=0 stream=0 attrs=pdl:1 ")
  -- values changed in either still reach the driver, and then meet the full check
  a.grid = 5
  T.raises(function() launch(k, a) end, "unknown field 'clutser'")
  rawset(a, "clutser", nil)
  b.block = 128
  T.raises(function() launch(k, b) end, "unknown field 'clutser'")
  rawset(b, "clutser", nil)
  alternate(a, "grid=5,1,1 block=32,1,1 ", b, "grid=3,1,1 block=128,1,1 smem=0 stream=0 attrs=pdl:1 ")
  -- a third table: marking it forgets every remembered check (a table may have taken a dead one's
  -- address), then the newest two are remembered again and the oldest is checked in full
  local c = { grid = 7, block = 32 }
  launch(k, c, 2)
  launch(k, b)
  for _, t in ipairs({ a, b, c }) do rawset(t, "clutser", 1) end
  alternate(b, "grid=3,1,1 block=128,1,1 ", c, "grid=7,1,1 block=32,1,1 ")
  T.raises(function() launch(k, a) end, "unknown field 'clutser'")
end)

T.test("a table at a dead table's address gets its own check", function()
  -- many short-lived tables launched twice each, with and without attributes: some take the
  -- address of one whose check the kernel remembers
  local wrong = 0
  for i = 1, 400 do
    local cfg = { grid = 1 + i % 5, block = 32 }
    if i % 3 == 0 then cfg.pdl = true end
    if i % 7 == 0 then cfg.cluster = 1 end
    launch(k, cfg, 2 + i % 2)
    local want = ("grid=%d,1,1 block=32,1,1 smem=0 stream=0%s"):format(1 + i % 5,
      (i % 7 == 0 and i % 3 == 0) and " attrs=cluster:1x1x1;pdl:1 " or i % 7 == 0 and " attrs=cluster:1x1x1 "
        or i % 3 == 0 and " attrs=pdl:1 " or " args=")
    if not has(want) then wrong = wrong + 1 end
    if i % 50 == 0 then collectgarbage() end
  end
  T.eq(wrong, 0, "launches that differ from their table")
  -- the sharpest case: a table the kernel remembers dies, and one with the same values and one
  -- key more takes its address after another kernel marked it
  local k2 = mod:kernel("other")
  local missed = 0
  for _ = 1, 40 do
    do launch(k, { grid = 1, block = 32 }, 3) end
    collectgarbage()
    collectgarbage()
    local later = {}
    for j = 1, 8 do
      later[j] = { grid = 1, block = 32, pdl = true }
      launch(k2, later[j], 2)
    end
    for j = 1, 8 do
      launch(k, later[j])
      if not has("attrs=pdl:1 ") then missed = missed + 1 end
    end
  end
  T.eq(missed, 0, "launches without the key the new table has")
end)

T.test("a script that tampers with the mark or the key strings gets errors or checked launches", function()
  local cfg = { grid = 2, block = 32 }
  launch(k, cfg, 3)
  local mark = getmetatable(cfg)
  local newindex = mark.__newindex
  T.raises(function() newindex(5, "x", 1) end, "table expected, got number")
  T.raises(function() newindex({}, nil, 1) end, "index is nil")
  local t = {}
  newindex(t, "grid", 3)
  T.eq(t.grid, 3)
  -- the mark on a table gpulab never checked: its first launch is checked in full
  local forged = setmetatable({ grid = 2, block = 32, clutser = 3 }, mark)
  T.raises(function() launch(k, forged) end, "unknown field 'clutser'")
  -- __index on the mark runs no code in a launch (reads are raw)
  local ran = false
  mark.__index = function() ran = true end
  launch(k, cfg, 2)
  T.ok(not ran, "no metamethod runs")
  mark.__index = nil
  -- the key strings k.launch reads the table with, and the mark, are its upvalues, which no
  -- script can replace
  local n = 0
  while debug.getupvalue(k.launch, n + 1) ~= nil do
    T.eq(debug.setupvalue(k.launch, n + 1, "block"), nil, "setupvalue refused")
    n = n + 1
  end
  T.eq(n, 9 + 1, "k.launch's key strings and the mark")
  T.eq(select(2, debug.getupvalue(k.launch, 10)), mark)
  launch(k, cfg, 3)
  cfg.grid = 5
  launch(k, cfg)
  T.ok(has("grid=5,1,1 block=32,1,1 "), last_launch())
  cfg.clutser = 1
  T.raises(function() launch(k, cfg) end, "unknown field 'clutser'")
end)

os.exit(T.done())
