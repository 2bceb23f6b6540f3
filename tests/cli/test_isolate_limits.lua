-- test_isolate_limits.lua — cuda.run_isolated never runs a child with other arguments than the
-- caller gave: more than its limit, more than the system takes, or a zero byte are refused with
-- a clear error before anything runs.
local T = dofile("tests/lua/t.lua")

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
local marker = dir .. "/ran"
local script = dir .. "/child.lua"
T.write(script, "local f = assert(io.open(" .. string.format("%q", marker) .. ", 'w'))\n" ..
  "f:write(select('#', ...)) f:close()\n")

local function child_ran() return T.read(marker) ~= nil end

local function list(n, value)
  local t = {}
  for i = 1, n do t[i] = value or "x" end
  return t
end

T.test("the limit itself runs; one more is refused and no child runs", function()
  local r = cuda.run_isolated(script, { args = list(3) })
  T.eq(r.status, "ok", r.stderr)
  T.eq(T.read(marker), "3")
  os.remove(marker)
  local err = T.raises(function() cuda.run_isolated(script, { args = list(100001) }) end,
    "bad argument #2 to 'cuda.run_isolated'")
  T.ok(err:find("100001 entries; the limit is 100000", 1, true), err)
  T.ok(not child_ran(), "no child ran")
  T.raises(function() cuda.run_isolated(script, { args = list(2000000) }) end, "the limit is 100000")
  T.ok(not child_ran(), "no child ran")
end)

T.test("arguments the system would refuse: an error naming why, no child", function()
  T.raises(function() cuda.run_isolated(script, { args = { string.rep("a", 200000) } }) end,
    "longer than the system allows")
  T.raises(function() cuda.run_isolated(script, { args = list(60000, string.rep("b", 100)) }) end,
    "the system allows")
  T.ok(not child_ran(), "no child ran")
end)

T.test("a zero byte in an argument, the script or the environment is refused", function()
  T.raises(function() cuda.run_isolated(script, { args = { "ok", "a\0b" } }) end, "zero byte")
  T.raises(function() cuda.run_isolated(script .. "\0x") end, "zero byte")
  T.raises(function() cuda.run_isolated(script, { env = { GL_X = "a\0b" } }) end, "zero byte")
  T.ok(not child_ran(), "no child ran")
end)

os.execute("rm -rf " .. dir)
T.test("the list form takes its 256 entries (the Lua stack grows for them)", function()
  local child = os.tmpname()
  T.write(child, "return\n")
  for _, n in ipairs({ 256 }) do
    local entries = {}
    for i = 1, n do entries[i] = { child, { args = list(1) } } end
    local runs = cuda.run_isolated(entries)
    T.eq(#runs, n)
    for i = 1, n do T.eq(runs[i].status, "ok", runs[i].stderr) end
  end
  os.remove(child)
  local err = T.raises(function() cuda.run_isolated(list(257, { child })) end, "a list of 1..256")
  T.ok(err, err)
end)

T.done()
