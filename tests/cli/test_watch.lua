-- test_watch.lua — `gpulab --watch`: re-runs when the script, a module it required or a kernel
-- it compiled changes; keeps watching after a failing run; stops on SIGINT. Bounded: every
-- wait has a deadline.
local T = dofile("tests/lua/t.lua")
local H = dofile("tests/cli/helpers.lua")
local q, write, read = H.q, H.write, H.read

local function sleep(s) os.execute("sleep " .. s) end

local function wait_until(what, fn, seconds)
  local deadline = os.time() + (seconds or 10)
  while os.time() <= deadline do
    if fn() then return end
    sleep(0.05)
  end
  error("timed out waiting for " .. what .. "\n--- stdout ---\n" .. tostring(read(H.tmp .. "/watch.out")) ..
        "\n--- stderr ---\n" .. tostring(read(H.tmp .. "/watch.err")), 2)
end

local function count_runs()
  local s = read(H.tmp .. "/runs.txt") or ""
  local n = 0
  for _ in s:gmatch("\n") do n = n + 1 end
  return n, s
end

-- Each run ends with the watcher announcing what it watches: wait for the nth announcement.
local function watching(n)
  wait_until("watch set-up number " .. n, function()
    return select(2, (read(H.tmp .. "/watch.err") or ""):gsub("watching 5 files", "")) == n
  end)
end

local function alive(pid) return os.execute("kill -0 " .. pid .. " 2>/dev/null") == true end

write("wmod.lua", "return 'v1'\n")
write("wk.h", "#define WK_VALUE 1.0f\n")
write("wk.cu", '#include "wk.h"\nextern "C" __global__ void wk(float *x) { x[0] = WK_VALUE; }\n')
write("wdo.lua", "return 'helper'\n")
local script_text = [[
local v = require('wmod')
assert(dofile('wdo.lua') == 'helper')
local ok, e = pcall(loadfile, 'wdo.lua', {}) -- under --watch loadfile is still itself
assert(not ok and e:find("to 'loadfile'", 1, true), e)
assert(cuda.compile_file('wk.cu').ptx:find('wk', 1, true))
local f = assert(io.open('runs.txt', 'a')); f:write(v, '\n'); f:close()
print('ran with ' .. v)
]]
write("watched.lua", script_text)

os.execute(string.format("cd %s; %s --watch watched.lua > watch.out 2> watch.err & echo $! > watch.pid",
  q(H.tmp), q(H.bin)))
local pid = assert(tonumber(read(H.tmp .. "/watch.pid")), "pid of the watcher")

T.test("first run, then a re-run when a required module changes", function()
  wait_until("the first run", function() return count_runs() == 1 end)
  -- five dependencies: the script, the module, the dofile'd helper, the kernel and its header
  watching(1)
  write("wmod.lua", "return 'v2'\n")
  wait_until("the second run", function() return count_runs() == 2 end)
  local _, runs = count_runs()
  T.eq(runs, "v1\nv2\n")
  local out = read(H.tmp .. "/watch.out")
  T.ok(out:find("wmod.lua changed, running again", 1, true), "separator names the file: " .. out)
  T.ok(out:find("%d%d:%d%d:%d%d"), "separator shows the time")
end)

T.test("touching the script re-runs it once (debounced)", function()
  watching(2)
  os.execute("touch " .. q(H.tmp .. "/watched.lua"))
  wait_until("the third run", function() return count_runs() == 3 end)
  sleep(0.5)
  T.eq(count_runs(), 3, "one touch, one run")
end)

T.test("touching a compiled kernel source re-runs", function()
  watching(3)
  os.execute("touch " .. q(H.tmp .. "/wk.cu"))
  wait_until("the fourth run", function() return count_runs() == 4 end)
  T.ok(read(H.tmp .. "/watch.out"):find("wk.cu changed, running again", 1, true), "separator names the kernel")
end)

T.test("a header the kernel includes, replaced by rename as editors do, re-runs", function()
  watching(4)
  write("wk.h.new", "#define WK_VALUE 2.0f\n")
  assert(os.rename(H.tmp .. "/wk.h.new", H.tmp .. "/wk.h"))
  wait_until("the fifth run", function() return count_runs() == 5 end)
  T.ok(read(H.tmp .. "/watch.out"):find("wk.h changed, running again", 1, true), "separator names the header")
end)

T.test("a failing run does not stop the watch", function()
  watching(5)
  write("watched.lua", "error('broken on purpose')\n")
  wait_until("the failure report", function()
    return (read(H.tmp .. "/watch.err") or ""):find("still watching", 1, true)
  end)
  T.ok(read(H.tmp .. "/watch.err"):find("watched.lua:1: broken on purpose", 1, true), "the run's error is shown")
  T.ok(alive(pid), "watcher still running")
  write("watched.lua", script_text)
  wait_until("a run after the fix", function() return count_runs() == 6 end)
end)

T.test("SIGINT ends the watch", function()
  os.execute("kill -INT " .. pid)
  wait_until("the watcher to exit", function() return not alive(pid) end, 5)
end)

if alive(pid) then os.execute("kill -KILL " .. pid) end
H.cleanup()
T.done()
