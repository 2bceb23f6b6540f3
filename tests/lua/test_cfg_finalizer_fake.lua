-- A launch configuration (or a tensor map's spec) is the script's table: a finalizer run by an
-- allocation inside k:prepare, k:launch (during a capture), s:set_l2_window or cuda.tensormap may
-- take the stream or the array out of it, or put something else there. The call must go on with
-- the objects it checked (a prepared launch, a graph and a tensor map keep those alive, not
-- whatever the table holds afterwards) or raise; never read the table again. Before, k:prepare
-- read `stream` and `l2_window.array` again after its allocation: a prepared launch then held a
-- stream nothing kept alive (a use after free when it was called), and a window table replaced
-- by a string crashed the process; cuda.tensormap pinned whatever array the table held after
-- its allocation, not the one whose address it encoded.
-- Through the driver stand-in; no GPU result is claimed.
local T = dofile("tests/lua/t.lua")

local clear_log = T.clear_log
local function last_launch() return T.last_log_line("launch ") end

local PTX = [[
.version 8.0
.target sm_90a
.address_size 64

.visible .entry none()
{
	ret;
}
]]
local k = cuda.load(PTX):kernel("none")

-- Every object a trial made is gone (the module of `k` stays).
local function released()
  collectgarbage(); collectgarbage()
  cuda.sync()
  collectgarbage()
  local st = cuda.stats()
  for _, key in ipairs({ "arrays", "streams", "graphs", "prepared" }) do T.eq(st[key], 0, key) end
end

-- Calls call() until a finalizer that runs on_gc() has run (T.until_finalized). Returns whether it
-- ran inside call() and what the last call returned (ok, result).
local function with_finalizer_inside(call, on_gc, pad)
  local ok, result
  local inside = T.until_finalized(function() ok, result = pcall(call) end, on_gc, pad)
  return inside, ok, result
end

-- Runs trial(pad) for pads 0..40; each returns whether its finalizer landed inside the call.
local function trials(what, trial)
  local inside = 0
  for pad = 0, 40 do
    if trial(pad) then inside = inside + 1 end
  end
  print(string.format("%s: the finalizer ran inside the call in %d of 41 trials", what, inside))
  T.ok(inside >= 1, what .. ": the finalizer never ran inside the call")
end

T.test("k:prepare keeps the window's array it checked, whatever the table holds afterwards", function()
  trials("k:prepare, l2_window replaced", function(pad)
    local a = cuda.array("f32", 64)
    local ptr = a.ptr
    local cfg = { grid = 1, block = 32, l2_window = { array = a } }
    a = nil -- luacheck: ignore
    local inside, ok, p = with_finalizer_inside(function() return k:prepare(cfg) end,
      function() cfg.l2_window = "replaced" end, pad)
    cfg = nil -- luacheck: ignore
    collectgarbage(); collectgarbage()
    if ok then -- the prepared launch holds the array: still alive, and the window covers it
      clear_log()
      p()
      T.ok(last_launch():find(string.format("l2_window:0x%x+", ptr), 1, true), last_launch())
    else
      T.ok(tostring(p):find("l2_window", 1, true), tostring(p))
    end
    return inside
  end)
  released()
end)

-- the stream= of the stand-in's last launch line ("0" for the default stream)
local function last_stream() return last_launch():match(" stream=(%S+)") end

T.test("k:prepare keeps the stream it checked, whatever the table holds afterwards", function()
  trials("k:prepare, stream taken out", function(pad)
    local weak = setmetatable({ s = cuda.stream() }, { __mode = "v" })
    local cfg = { grid = 1, block = 32, stream = weak.s }
    local inside, ok, p = with_finalizer_inside(function() return k:prepare(cfg) end,
      function() cfg.stream = nil end, pad)
    cfg = nil -- luacheck: ignore
    collectgarbage(); collectgarbage()
    T.ok(ok, tostring(p))
    clear_log()
    p() -- on the stream it was made with, which it keeps alive; or on the default stream
    T.ok(last_stream() == "0" or weak.s ~= nil, "launched on a stream that was collected")
    T.eq(inside and last_stream() == "0", false, "a finalizer inside k:prepare changed its stream")
    cuda.sync()
    p = nil -- luacheck: ignore
    collectgarbage(); collectgarbage()
    T.eq(cuda.stats().streams, 0, "streams once the prepared launch is gone")
    return inside
  end)
  released()
end)

T.test("k:prepare refuses a stream or window array freed during the call", function()
  for _, what in ipairs({ "stream", "window" }) do
    trials("k:prepare, " .. what .. " freed", function(pad)
      local s, a = cuda.stream(), cuda.array("f32", 64)
      local cfg = { grid = 1, block = 32 }
      if what == "stream" then cfg.stream = s else cfg.l2_window = { array = a } end
      local inside, ok, err = with_finalizer_inside(function() return k:prepare(cfg) end,
        function() if what == "stream" then s:free() else a:free() end end, pad)
      if inside then
        T.ok(not ok, what .. ": freed inside k:prepare, yet it made a prepared launch")
        T.ok(tostring(err):find("freed", 1, true), tostring(err))
      end
      return inside
    end)
  end
  released()
end)

-- The finalizer lands somewhere in s:capture; in k:launch's own noting of the graph's objects it
-- lands rarely (that table seldom grows), so this holds the invariant more than it reaches the
-- slot: the launch now notes the array from its stack, never from the table.
T.test("a captured launch keeps the window's array it checked", function()
  trials("k:launch in a capture, l2_window.array replaced", function(pad)
    local s = cuda.stream { nonblocking = true }
    local weak = setmetatable({ a = cuda.array("f32", 64), other = cuda.array("f32", 64) }, { __mode = "v" })
    local names = { [string.format("0x%x", weak.a.ptr)] = "a", [string.format("0x%x", weak.other.ptr)] = "other" }
    local window = { array = weak.a }
    local cfg = { grid = 1, block = 32, stream = s, l2_window = window }
    local replacement = weak.other
    clear_log()
    local inside, ok, g = with_finalizer_inside(function()
      return s:capture(function() k:launch(cfg) end)
    end, function() window.array = replacement end, pad)
    local used = names[last_launch():match("l2_window:(0x%x+)%+")] -- the array the launch was given
    window, cfg, replacement = nil, nil, nil -- luacheck: ignore
    collectgarbage(); collectgarbage()
    T.ok(ok, tostring(g))
    T.ok(used ~= nil, last_launch())
    T.ok(weak[used] ~= nil, "the graph let the array of its launch (" .. tostring(used) .. ") go")
    g:launch(s)
    s:sync()
    g = nil -- luacheck: ignore
    collectgarbage(); collectgarbage()
    T.eq(cuda.stats().arrays, 0, "arrays once the graph is gone")
    return inside
  end)
  released()
end)

T.test("s:set_l2_window keeps the array it checked", function()
  trials("s:set_l2_window, array replaced", function(pad)
    local s = cuda.stream()
    local a, other = cuda.array("f32", 64), cuda.array("f32", 64)
    local window = { array = a }
    local inside, ok, err = with_finalizer_inside(function() s:set_l2_window(window) end,
      function() window.array = other end, pad)
    T.ok(ok, tostring(err))
    local got = s:l2_window() -- the array the stream keeps is the one the driver's window covers
    T.ok(rawequal(got.array, a) or rawequal(got.array, other), "the stream keeps neither array")
    T.eq(got.ptr, got.array.ptr, "the driver's window and the array the stream keeps")
    return inside
  end)
  released()
end)

T.test("cuda.tensormap pins the array it encoded", function()
  trials("cuda.tensormap, array replaced", function(pad)
    local weak = setmetatable({ a = cuda.array("u8", 4096), other = cuda.array("u8", 8192) }, { __mode = "v" })
    local spec = { array = weak.a, dtype = "u8", dims = { 64, 64 }, strides = { 64 }, box = { 16, 16 } }
    local replacement = weak.other
    local inside, ok, tm = with_finalizer_inside(function() return cuda.tensormap(spec) end,
      function() spec.array = replacement end, pad)
    spec, replacement = nil, nil -- luacheck: ignore
    collectgarbage(); collectgarbage()
    if ok then -- the map covers the array it keeps alive
      T.ok(tm.array ~= nil, "the map keeps no array")
      T.eq(tm.address, tm.array.ptr, "the encoded address and the array the map keeps")
    else
      T.ok(tostring(tm):find("during the call", 1, true), tostring(tm))
    end
    tm = nil -- luacheck: ignore
    return inside
  end)
  released()
end)

T.test("a prepared launch whose stream a finalizer frees inside the call (during a capture) raises", function()
  -- noting a captured launch's objects allocates; in generational mode with a big young
  -- generation, that allocation runs the pending finalizer inside the call
  for _, form in ipairs({ "configured", "given" }) do
    local cap = cuda.stream { nonblocking = true }
    local s2 = cuda.stream { nonblocking = true }
    local p = form == "configured" and k:prepare({ grid = 1, block = 32, stream = s2 })
      or k:prepare({ grid = 1, block = 32 })
    local fired_inside, inside, ok, err = nil, false, nil, nil
    clear_log()
    cap:capture(function()
      collectgarbage("restart")
      collectgarbage("generational", 1, 100)
      setmetatable({}, { __gc = function() fired_inside = inside; s2:free() end })
      local big = {} -- luacheck: ignore 241 (allocated for the collector's sake)
      for j = 1, 1 << 16 do big[j] = true end
      inside = true
      if form == "configured" then ok, err = pcall(p) else ok, err = pcall(p, s2) end
      inside = false
    end)
    collectgarbage("incremental")
    T.eq(fired_inside, true, form .. ": the finalizer ran inside the call")
    T.eq(ok, false, form)
    T.ok(tostring(err):find("stream: the cuda.stream was freed during the call", 1, true), tostring(err))
    T.ok(not (last_launch() or ""):find("stream=0 ", 1, true), "nothing went to the default stream")
    p:free()
    cap:free()
  end
  released()
end)

T.done()
