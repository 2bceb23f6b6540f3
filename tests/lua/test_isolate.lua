-- cuda.run_isolated: exit codes, Lua errors, deadlines, crashes, large output on both pipes,
-- environment, argument checking, and that no child is left behind (no zombies, no strays).
local T = dofile("tests/lua/t.lua")
local F = "tests/lab_fixtures/"

local function uptime()
  local f = assert(io.open("/proc/uptime"))
  local v = f:read("n")
  f:close()
  return v
end

local function my_pid()
  local f = assert(io.open("/proc/self/stat"))
  local pid = f:read("n")
  f:close()
  return math.tointeger(pid)
end

-- Children of this process that still exist (a zombie is still listed here).
local function my_children()
  local pid = my_pid()
  local f = assert(io.open(string.format("/proc/%d/task/%d/children", pid, pid)))
  local s = f:read("a")
  f:close()
  return s:match("^%s*(.-)%s*$")
end

-- True while a process with this pid exists and is not a zombie.
local function running(pid)
  local f = io.open(string.format("/proc/%d/stat", pid))
  if not f then return false end
  local s = f:read("a")
  f:close()
  local state = s:match("^%d+ %b() (%a)")
  return state ~= nil and state ~= "Z" and state ~= "X"
end

T.test("exit 0: status ok, args in order, stdout and stderr apart", function()
  local r = cuda.run_isolated(F .. "child_exit.lua", { args = { "0", "two words", 7 } })
  T.eq(r.status, "ok")
  T.eq(r.code, 0)
  T.eq(r.signal, nil)
  T.eq(r.stdout, "args:0|two words|7\nunset:nil\n")
  T.eq(r.stderr, "env:nil\n")
  T.ok(type(r.seconds) == "number" and r.seconds >= 0 and r.seconds < 30, "seconds: " .. tostring(r.seconds))
end)

T.test("a child that ended before its deadline is ok, though a process it left holds the pipes", function()
  local r = cuda.run_isolated(F .. "child_leaves_process.lua", { timeout = 0.5 })
  T.eq(r.status, "ok", "not a timeout: " .. tostring(r.status))
  T.eq(r.code, 0)
  T.eq(r.stdout, "child done\n")
end)

T.test("os.exit(3): status error with code 3", function()
  local r = cuda.run_isolated(F .. "child_exit.lua", { args = { 3 } })
  T.eq(r.status, "error")
  T.eq(r.code, 3)
  T.eq(r.signal, nil)
end)

T.test("a Lua error in the child: status error, the message on stderr", function()
  local r = cuda.run_isolated(F .. "child_error.lua")
  T.eq(r.status, "error")
  T.eq(r.code, 1)
  T.ok(r.stderr:find("deliberate failure in the child", 1, true), r.stderr)
  T.ok(r.stderr:find("stack traceback", 1, true), r.stderr)
end)

T.test("a missing script: status error, gpulab says why", function()
  local r = cuda.run_isolated(F .. "no_such_script.lua")
  T.eq(r.status, "error")
  T.ok(r.code ~= 0)
  T.ok(r.stderr:find("no_such_script.lua", 1, true), r.stderr)
end)

T.test("environment: added, overridden and removed variables", function()
  local r = cuda.run_isolated(F .. "child_exit.lua",
    { env = { GPULAB_ISOLATE_TEST = "value with spaces = and more", HOME = false, GPULAB_ISOLATE_UNSET = false } })
  T.eq(r.status, "ok")
  T.eq(r.stderr, "env:value with spaces = and more\n")
  T.ok(r.stdout:find("unset:nil", 1, true), r.stdout)
  r = cuda.run_isolated(F .. "child_exit.lua", { env = { GPULAB_ISOLATE_UNSET = 42 } })
  T.ok(r.stdout:find("unset:42", 1, true), r.stdout)
end)

T.test("infinite loop with timeout=0.5: status timeout, killed near the deadline", function()
  local t0 = uptime()
  local r = cuda.run_isolated(F .. "child_loop.lua", { timeout = 0.5 })
  local took = uptime() - t0
  T.eq(r.status, "timeout")
  T.eq(r.signal, 15) -- SIGTERM ends a gpulab that does not handle it
  T.eq(r.code, nil)
  T.eq(r.stdout, "started\n")
  T.ok(r.seconds >= 0.45 and r.seconds < 3, "seconds: " .. r.seconds)
  T.ok(took < 4, "returned after " .. took .. " s")
end)

T.test("a process in the group that ignores SIGTERM is killed after the grace period", function()
  local t0 = uptime()
  local r = cuda.run_isolated(F .. "child_loop.lua", { args = { "ignore" }, timeout = 0.5 })
  local took = uptime() - t0
  T.eq(r.status, "timeout")
  T.ok(took < 5, "returned after " .. took .. " s")
end)

T.test("SIGSEGV the child did not get from us: status crashed, signal 11", function()
  -- in a sanitizer build the child's own SEGV handler would turn the signal into exit 1
  local asan = os.getenv("ASAN_OPTIONS")
  local env = { ASAN_OPTIONS = (asan and asan ~= "" and asan .. ":" or "") .. "handle_segv=0" }
  local r = cuda.run_isolated(F .. "child_segv.lua", { timeout = 20, env = env })
  T.eq(r.status, "crashed", r.stderr)
  T.eq(r.signal, 11)
  T.eq(r.code, nil)
  T.ok(r.stdout:match("^pid %d+\n"), r.stdout)
end)

T.test("1.5 MiB on each pipe at once: all of it, in order", function()
  local r = cuda.run_isolated(F .. "child_big.lua", { args = { 1536 }, timeout = 60 })
  T.eq(r.status, "ok")
  T.eq(#r.stdout, 1536 * 1024 + 4)
  T.eq(#r.stderr, 1536 * 1024)
  T.ok(r.stdout:sub(-4) == "END\n")
  T.ok(not r.stdout:find("e", 1, true) and not r.stderr:find("o", 1, true), "streams mixed")
end)

T.test("a background process holding the pipes does not keep the call waiting", function()
  local pidfile = os.tmpname()
  local t0 = uptime()
  local r = cuda.run_isolated(F .. "child_grandchild.lua", { args = { pidfile }, timeout = 20 })
  local took = uptime() - t0
  T.eq(r.status, "ok")
  T.eq(r.stdout, "parent done\n")
  T.ok(took < 6, "returned after " .. took .. " s")
  local f = assert(io.open(pidfile))
  local pid = math.tointeger(f:read("n"))
  f:close()
  os.remove(pidfile)
  T.ok(pid and pid > 1, "pid of the background process")
  -- it was in the child's process group, which is killed when the call returns
  local gone = false
  for _ = 1, 50 do
    if not running(pid) then gone = true break end
    os.execute("sleep 0.05")
  end
  T.ok(gone, "background process " .. pid .. " still running")
end)

T.test("bad arguments name the function and the argument", function()
  local s = F .. "child_exit.lua"
  T.raises(function() cuda.run_isolated() end,
    "bad argument #1 to 'cuda.run_isolated' (script path expected, got no value)")
  T.raises(function() cuda.run_isolated({}) end, "bad argument #1 to 'cuda.run_isolated'")
  T.raises(function() cuda.run_isolated("") end, "bad argument #1 to 'cuda.run_isolated' (script path is empty)")
  T.raises(function() cuda.run_isolated("a\0b") end, "zero byte")
  T.raises(function() cuda.run_isolated(s, 5) end,
    "bad argument #2 to 'cuda.run_isolated' (table expected, got number)")
  T.raises(function() cuda.run_isolated(s, { tmeout = 1 }) end,
    "bad argument #2 to 'cuda.run_isolated' (unknown field 'tmeout'")
  T.raises(function() cuda.run_isolated(s, { [1] = "x" }) end,
    "bad argument #2 to 'cuda.run_isolated' (unexpected number key in the options table (known: args, timeout, " ..
    "env))")
  for _, bad in ipairs({ 0, -1, 0 / 0, -math.huge }) do
    T.raises(function() cuda.run_isolated(s, { timeout = bad }) end,
      "bad argument #2 to 'cuda.run_isolated' (field 'timeout': must be a positive number of seconds)", tostring(bad))
  end
  T.raises(function() cuda.run_isolated(s, { timeout = "1" }) end,
    "bad argument #2 to 'cuda.run_isolated' (field 'timeout': number of seconds expected, got string)")
  T.raises(function() cuda.run_isolated(s, { args = "x" }) end,
    "bad argument #2 to 'cuda.run_isolated' (field 'args': table of strings expected, got string)")
  T.raises(function() cuda.run_isolated(s, { args = { {} } }) end,
    "bad argument #2 to 'cuda.run_isolated' (field 'args': item 1: string expected, got table)")
  T.raises(function() cuda.run_isolated(s, { args = { "a", true } }) end,
    "bad argument #2 to 'cuda.run_isolated' (field 'args': item 2: string expected, got boolean)")
  T.raises(function() cuda.run_isolated(s, { args = { x = "a" } }) end, "must be a list")
  T.raises(function() cuda.run_isolated(s, { args = { "a\0b" } }) end, "zero byte")
  T.raises(function() cuda.run_isolated(s, { env = "A=1" }) end,
    "bad argument #2 to 'cuda.run_isolated' (field 'env': table {NAME=value} expected, got string)")
  T.raises(function() cuda.run_isolated(s, { env = { "A=1" } }) end, "keys must be variable names")
  T.raises(function() cuda.run_isolated(s, { env = { ["A=B"] = "1" } }) end, "bad variable name 'A=B'")
  T.raises(function() cuda.run_isolated(s, { env = { A = true } }) end,
    "bad argument #2 to 'cuda.run_isolated' (field 'env': A: string, number or false expected, got boolean)")
  T.raises(function() cuda.run_isolated(s, { env = { A = "x\0y" } }) end, "zero byte")
end)

T.test("the caller's tables are left as they were", function()
  local args = { 0, "b" }
  local opts = { args = args, env = { GPULAB_ISOLATE_TEST = "k" } }
  local r = cuda.run_isolated(F .. "child_exit.lua", opts)
  T.eq(r.status, "ok")
  T.eq(math.type(args[1]), "integer")
  local n = 0
  for _ in pairs(opts) do n = n + 1 end
  T.eq(n, 2)
end)

T.test("a script name starting with '-' is run as a script", function()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir))
  local f = assert(io.open(dir .. "/-e", "w"))
  f:write("print('dash script')\n")
  f:close()
  local r = cuda.run_isolated(dir .. "/-e")
  T.eq(r.stdout, "dash script\n")
  local cwd_rel = cuda.run_isolated("-e") -- no such file here: an error, not `gpulab -e`
  T.eq(cwd_rel.status, "error")
  os.execute("rm -rf " .. dir)
end)

T.test("Ctrl-C while waiting: the child is stopped and the call raises 'interrupted'", function()
  local gpulab = assert(os.getenv("GPULAB_BIN"), "GPULAB_BIN names the gpulab binary")
  local script, out = os.tmpname(), os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write('print(pcall(cuda.run_isolated, "tests/lab_fixtures/child_loop.lua"))\n')
  f:close()
  -- a second gpulab waits on a never-ending child; SIGINT goes to the waiting process only
  local cmd = string.format("'%s' '%s' >'%s' 2>&1 & p=$!; sleep 1; kill -INT $p; wait $p", gpulab, script, out)
  local t0 = uptime()
  local _, _, rc = os.execute(cmd)
  local took = uptime() - t0
  f = assert(io.open(out))
  local text = f:read("a")
  f:close()
  os.remove(out)
  os.remove(script)
  T.eq(rc, 0, text)
  T.ok(text:find("false\tcuda.run_isolated: interrupted; the child process was stopped", 1, true), text)
  T.ok(took < 5, "took " .. took .. " s")
end)

T.test("no zombies: every child was waited for", function()
  for _ = 1, 5 do cuda.run_isolated(F .. "child_exit.lua", { args = { 2 } }) end
  cuda.run_isolated(F .. "child_loop.lua", { timeout = 0.2 })
  T.eq(my_children(), "")
end)

T.done()
