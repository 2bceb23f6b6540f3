-- A capture whose fn never returns: os.exit inside s:capture, with and without closing the Lua
-- state, through the driver stand-in. Closing the state ends the capture and releases the stream
-- and what its release lets go (a partition); in the sanitizer build LeakSanitizer checks each
-- child at its exit (it reported the partition's block before). Also the capture's guard, reached
-- with debug.getlocal and finalized by hand in the middle of fn.
local T = dofile("tests/lua/t.lua")

local GPULAB = arg[-1]
local TMP = os.tmpname()

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Runs `script` in a child gpulab logging to its own stand-in log; returns output, exit status, log.
local function child(script)
  local log = TMP .. ".log"
  os.remove(log)
  local p = assert(io.popen("GPULAB_FAKE_LOG=" .. q(log) .. " " .. q(GPULAB) .. " -e " .. q(script) .. " 2>&1"))
  local out = p:read("a")
  local _, _, rc = p:close()
  return out, rc, T.read(log) or ""
end

local function count(text, word)
  local n = 0
  for _ in text:gmatch(word) do n = n + 1 end
  return n
end

local PTX = [[
.version 8.0
.target sm_90
.address_size 64
.visible .entry work(.param .u64 p) { ret; }
]]
-- b is freed inside the capture (the driver refuses allocations there, so it is made before)
local SETUP = "local k = cuda.load(" .. string.format("%q", PTX) .. "):kernel('work') " ..
              "local a, b = cuda.array('f32', 256), cuda.array('f32', 64) "

T.test("os.exit(0, true) inside s:capture ends the capture and releases the stream", function()
  local out, rc, log = child(SETUP .. [[
    local s = cuda.stream()
    s:capture(function(st)
      k:launch({grid = 1, block = 1, stream = st}, a)
      b:free()   -- a release parked until the capture ends
      os.exit(0, true)
    end)]])
  T.eq(rc, 0, out)
  T.eq(out, "", "child output")
  T.eq(count(log, "capture_begin"), 1, log)
  T.eq(count(log, "capture_end"), 1, "the capture was ended at close: " .. log)
  T.eq(count(log, "stream_destroy"), 1, "the capturing stream was released: " .. log)
  T.eq(count(log, "module_unload"), 1, "the module was unloaded: " .. log)
end)

T.test("os.exit(0, true) inside a capture on a partition's stream lets the partition go", function()
  local out, rc, log = child([[
    local part = cuda.partition{sms = 16}
    local s = part:stream()
    part = nil
    s:capture(function() os.exit(0, true) end)]])
  T.eq(rc, 0, out)
  T.eq(out, "", "child output (LeakSanitizer reported the partition's block here)")
  T.eq(count(log, "capture_end"), 1, log)
  T.eq(count(log, "stream_destroy"), 1, log)
  T.eq(count(log, "green_destroy"), 1, "the partition was destroyed: " .. log)
end)

T.test("os.exit(3, true) after the capturing stream was freed inside fn", function()
  local out, rc, log = child([[
    local s = cuda.stream()
    s:capture(function(st) st:free(); os.exit(3, true) end)]])
  T.eq(rc, 3, out)
  T.eq(out, "", "child output")
  T.eq(count(log, "capture_end"), 1, log)
  T.eq(count(log, "stream_destroy"), 1, log)
end)

T.test("os.exit(0) inside s:capture (no close: nothing runs, nothing is reported)", function()
  for _, stream in ipairs({ "cuda.stream()", "cuda.partition{sms = 16}:stream()" }) do
    local out, rc = child(SETUP .. "local s = " .. stream .. [[
      s:capture(function(st) k:launch({grid = 1, block = 1, stream = st}, a); os.exit(0) end)]])
    T.eq(rc, 0, out)
    T.eq(out, "", "child output")
  end
end)

T.test("a capture's guard finalized by hand in the middle of fn ends it with a clear error", function()
  local s = cuda.stream()
  local a = cuda.array("f32", 16)
  local err = T.raises(function()
    s:capture(function(st)
      local found
      for i = 1, 20 do
        local _, v = debug.getlocal(2, i) -- s:capture's own slots
        if v == nil then break end
        local mt = type(v) == "userdata" and debug.getmetatable(v)
        if mt and mt.__gc and rawget(mt, "__name") == nil then -- not a class: the capture's guard
          mt.__gc(st) -- another object: nothing happens
          mt.__gc(a)
          a:fill(0, st) -- still captured
          mt.__gc(v)
          found = true
        end
      end
      T.ok(found, "s:capture's slots hold its guard")
      a:fill(1, st)
    end)
  end, "s:capture: the capture was ended before fn returned")
  T.ok(err:find("called by hand", 1, true), err)
  -- nothing is left captured: the stream syncs, a new capture works, objects go to zero
  s:sync()
  a:fill(2, s)
  local g = s:capture(function(st) a:fill(3, st) end)
  g:launch(s)
  s:sync()
  g:free()
  s:free()
  a:free()
  collectgarbage()
  collectgarbage()
  local st = cuda.stats()
  T.eq(st.streams, 0, "streams")
  T.eq(st.graphs, 0, "graphs")
  T.eq(st.arrays, 0, "arrays")
end)

os.remove(TMP)
os.remove(TMP .. ".log")
T.done()
