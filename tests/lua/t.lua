-- t.lua — the tiny assertion library the Lua tests share.
-- Usage: local T = dofile("tests/lua/t.lua"); T.test("name", function() ... end); T.done()
local T = { passed = 0, failed = 0, skipped = 0 }

-- True under compute-sanitizer (gpulab --sanitize): kernels run many times slower and the tool
-- allocates device memory of its own, so timing bounds and exact free-memory checks are left to
-- the native run; the sanitizer run checks what the tool reports.
T.instrumented = os.getenv("GPULAB_SANITIZER") ~= nil

local function fmt(v)
  if type(v) == "string" then return string.format("%q", v) end
  return tostring(v)
end

function T.eq(got, want, what)
  if got ~= want then
    error(string.format("%sexpected %s, got %s", what and (what .. ": ") or "", fmt(want), fmt(got)), 2)
  end
end

function T.ok(cond, what)
  if not cond then error("assertion failed: " .. (what or "?"), 2) end
end

function T.near(got, want, tol, what)
  if math.abs(got - want) > tol then
    error(string.format("%sexpected %s ± %s, got %s", what and (what .. ": ") or "", want, tol, got), 2)
  end
end

-- Calls fn and checks that it raises an error whose message contains `pattern` (plain text).
function T.raises(fn, pattern, what)
  local ok, err = pcall(fn)
  if ok then error((what or "call") .. ": expected an error matching " .. fmt(pattern) .. ", got none", 2) end
  err = tostring(err)
  if pattern and not err:find(pattern, 1, true) then
    error((what or "call") .. ": error " .. fmt(err) .. " does not contain " .. fmt(pattern), 2)
  end
  return err
end

-- Whole-file helpers the tests share: read returns nil for a missing file.
function T.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

function T.write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- A new empty folder under the temporary directory (its path has no quote: os.tmpname's).
function T.tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p '" .. d .. "'"))
  return d
end

-- Runs a shell command with stderr joined to stdout: whether it exited 0, and its output.
function T.shell(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local text = p:read("a")
  return p:close(), text
end

-- The driver stand-in's log (the file GPULAB_FAKE_LOG names): its text ("" before the first
-- entry), its lines (those that start with `prefix`, when given), whether it holds `text`, what
-- was appended to it while fn ran, emptied, and the last line that starts with a prefix (nil
-- when none).
local function fake_log_path()
  return assert(os.getenv("GPULAB_FAKE_LOG"), "run with GPULAB_FAKE_LOG set")
end

function T.log_text() return T.read(fake_log_path()) or "" end

function T.log_lines(prefix)
  local lines = {}
  for l in T.log_text():gmatch("[^\n]+") do
    if not prefix or l:sub(1, #prefix) == prefix then lines[#lines + 1] = l end
  end
  return lines
end

-- the number of log lines that are exactly `line`
function T.log_count(line)
  local n = 0
  for _, l in ipairs(T.log_lines()) do if l == line then n = n + 1 end end
  return n
end

function T.logged(text) return T.log_text():find(text, 1, true) ~= nil end

function T.log_since(fn)
  local f = assert(io.open(fake_log_path(), "rb"))
  local start = f:seek("end")
  f:close()
  fn()
  f = assert(io.open(fake_log_path(), "rb"))
  f:seek("set", start)
  local text = f:read("a")
  f:close()
  return text
end

function T.clear_log() assert(io.open(fake_log_path(), "w")):close() end

function T.last_log_line(prefix)
  local lines = T.log_lines(prefix)
  return lines[#lines]
end

function T.test(name, fn)
  local ok, err = xpcall(fn, debug.traceback)
  if ok then
    T.passed = T.passed + 1
  else
    T.failed = T.failed + 1
    io.stderr:write("FAIL ", name, ": ", tostring(err), "\n")
    -- SIGINT (tests/deadline.sh at the test's deadline): the traceback above says where it was
    if tostring(err):find("interrupted!", 1, true) then
      io.stderr:write("stopped at test '", name, "': interrupted\n")
      os.exit(1)
    end
  end
end

-- After full collections and a sync, every kind of gpulab object counts zero in cuda.stats();
-- returns the stats.
function T.all_released()
  collectgarbage(); collectgarbage()
  cuda.sync()
  collectgarbage()
  local s = cuda.stats()
  for _, key in ipairs({ "arrays", "hosts", "modules", "streams", "events", "graphs", "tensormaps", "prepared" }) do
    T.eq(s[key], 0, key)
  end
  return s
end

-- Calls run() until a finalizer that runs on_gc() has run (at most 300 times: a call that
-- allocates nothing never reaches it); returns whether it ran inside run(). Generational: a minor
-- collection runs once the allocations since the last one reach 1% of the heap, and calls every
-- pending finalizer. collectgarbage("step", 0) runs one now; the next is then brought to within
-- about a kilobyte, so that the first calls reach it, and `pad` small tables move where in the
-- call that happens. Leaves the collector incremental.
function T.until_finalized(run, on_gc, pad)
  collectgarbage("generational", 1, 100)
  collectgarbage("step", 0)
  local gap_kb = collectgarbage("count") / 100
  local in_call, fired, inside = false, false, false
  setmetatable({}, { __gc = function()
    fired = true
    inside = in_call
    on_gc()
  end })
  local ahead_kb = math.floor(gap_kb) - 1
  if ahead_kb >= 1 then collectgarbage("step", ahead_kb) end -- ("step", 0) would collect now
  for _ = 1, pad do local _ = {} end
  for _ = 1, 300 do
    in_call = true
    run()
    in_call = false
    if fired then break end
  end
  collectgarbage("incremental")
  return inside
end

-- Without a usable device a GPU test file calls this: ctest maps exit code 77 to "skipped".
function T.require_gpu()
  local ok, why = cuda.available()
  if not ok then
    print("skipped: " .. tostring(why))
    os.exit(77)
  end
end

-- Ends, from inside fn, the CUPTI session of the cuda.pcsample / cuda.profile call running fn, as a
-- hostile script can: its object sits in the binding's stack slots, which debug.getlocal reads, and
-- its metatable's __close ends it. Returns true when it found one.
function T.close_running_session()
  for level = 2, 12 do
    local info = debug.getinfo(level, "S")
    if not info then break end
    if info.what == "C" then
      for n = 1, 12 do
        local name, v = debug.getlocal(level, n)
        if not name then break end
        local mt = type(v) == "userdata" and debug.getmetatable(v)
        if mt and mt.__close and tostring(mt.__name):match("session") then mt.__close(v) return true end
      end
    end
  end
  return false
end

function T.done()
  print(string.format("%d passed, %d failed", T.passed, T.failed))
  os.exit(T.failed == 0 and 0 or 1)
end

return T
