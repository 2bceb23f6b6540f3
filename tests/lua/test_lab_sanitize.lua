-- gpulab --sanitize=TOOL: the command line and environment compute-sanitizer gets (through a
-- stand-in script that records them and runs the program), exit statuses, the search order
-- (PATH, /usr/local/cuda/bin, $CUDA_HOME/bin), the missing tool and unknown tool names.
local T = dofile("tests/lua/t.lua")
local GPULAB = assert(os.getenv("GPULAB_BIN"), "GPULAB_BIN names the gpulab binary")
local CHILD = "tests/lab_fixtures/sanitize_child.lua"
local SYSTEM_TOOL = "/usr/local/cuda/bin/compute-sanitizer"

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local read = T.read

local function lines(s)
  local t = {}
  for l in (s or ""):gmatch("([^\n]*)\n") do t[#t + 1] = l end
  return t
end

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

-- A folder holding the stand-in as `compute-sanitizer`.
local function fake_tool_dir()
  local d = T.tmpdir()
  local tool = q(d .. "/compute-sanitizer")
  assert(os.execute("cp tests/lab_fixtures/fake-compute-sanitizer " .. tool .. " && chmod 755 " .. tool))
  return d
end

-- Runs gpulab with `args` (a shell-quoted list) and `env` (NAME=value list, applied with env(1)).
-- Returns exit status, stdout, stderr.
local function gpulab(env, args)
  local out, err = os.tmpname(), os.tmpname()
  local cmd = string.format("env %s %s %s >%s 2>%s", table.concat(env, " "), q(GPULAB), args, q(out), q(err))
  local _, _, rc = os.execute(cmd)
  local o, e = read(out), read(err)
  os.remove(out)
  os.remove(err)
  return rc, o, e
end

local self_path -- the absolute path compute-sanitizer must be given
do
  local p = assert(io.popen("readlink -f " .. q(GPULAB)))
  self_path = p:read("l")
  p:close()
end

T.test("racecheck: the tool's options, then gpulab's own command line minus --sanitize", function()
  local dir = fake_tool_dir()
  local log = dir .. "/argv"
  local rc, out, err = gpulab({ "PATH=" .. q(dir .. ":/usr/bin:/bin"), "FAKE_SANITIZER_LOG=" .. q(log),
      "GPULAB_CACHE_DIR=/some/cache", "GPULAB_LINEINFO=0" },
    "--sanitize=racecheck -e 'x=42' " .. CHILD .. " one --sanitize=memcheck 'two words'")
  T.eq(rc, 0, err)
  local want = { "--tool", "racecheck", "--error-exitcode", "99", "--show-backtrace", "device",
    "--target-processes", "all", "--racecheck-report", "all", self_path, "-e", "x=42", CHILD, "one",
    "--sanitize=memcheck", "two words" }
  T.eq(table.concat(lines(read(log)), "\n"), table.concat(want, "\n"))
  -- the program ran under it with its arguments, -e state and line info on, cache folder unchanged
  T.ok(out:find("child args: one --sanitize=memcheck two words\n", 1, true), out)
  T.ok(out:find("x=42\n", 1, true), out)
  T.ok(out:find("GPULAB_LINEINFO=1\n", 1, true), out)
  T.ok(out:find("GPULAB_SANITIZER=racecheck\n", 1, true), out)
  T.ok(out:find("GPULAB_CACHE_DIR=/some/cache\n", 1, true), out)
  os.execute("rm -rf " .. q(dir))
end)

T.test("each tool by name; bare --sanitize means memcheck; options before the script stay", function()
  local dir = fake_tool_dir()
  local log = dir .. "/argv"
  for _, tool in ipairs({ "memcheck", "synccheck", "initcheck" }) do
    local rc, _, err = gpulab({ "PATH=" .. q(dir .. ":/usr/bin:/bin"), "FAKE_SANITIZER_LOG=" .. q(log) },
      "-W --sanitize=" .. tool .. " " .. CHILD)
    T.eq(rc, 0, err)
    local argv = lines(read(log))
    T.eq(argv[2], tool)
    T.ok(not table.concat(argv, " "):find("racecheck-report", 1, true), tool .. " got racecheck options")
    T.eq(argv[#argv - 1], "-W")
    T.eq(argv[#argv], CHILD)
  end
  local rc = gpulab({ "PATH=" .. q(dir .. ":/usr/bin:/bin"), "FAKE_SANITIZER_LOG=" .. q(log) }, "--sanitize " .. CHILD)
  T.eq(rc, 0)
  T.eq(lines(read(log))[2], "memcheck")
  os.execute("rm -rf " .. q(dir))
end)

T.test("exit status: the program's own, and non-zero when the tool reports errors", function()
  local dir = fake_tool_dir()
  local env = { "PATH=" .. q(dir .. ":/usr/bin:/bin"), "FAKE_SANITIZER_LOG=" .. q(dir .. "/argv") }
  local rc = gpulab({ env[1], env[2], "SANITIZE_CHILD_EXIT=5" }, "--sanitize=memcheck " .. CHILD)
  T.eq(rc, 5)
  local rc2, _, err = gpulab({ env[1], env[2], "FAKE_SANITIZER_EXIT=99" }, "--sanitize=memcheck " .. CHILD)
  T.eq(rc2, 99)
  T.ok(err:find("--sanitize=memcheck: compute-sanitizer reported errors", 1, true), err)
  os.execute("rm -rf " .. q(dir))
end)

T.test("unknown tool: an error listing the four, nothing run", function()
  local dir = fake_tool_dir()
  local log = dir .. "/argv"
  local rc, out, err = gpulab({ "PATH=" .. q(dir .. ":/usr/bin:/bin"), "FAKE_SANITIZER_LOG=" .. q(log) },
    "--sanitize=memchek " .. CHILD)
  T.ok(rc ~= 0, "exit status 0")
  T.ok(err:find("--sanitize: unknown tool 'memchek' (known: memcheck, racecheck, synccheck, initcheck)", 1, true), err)
  T.eq(out, "")
  T.ok(not exists(log), "the tool ran")
  local rc2, _, err2 = gpulab({ "PATH=" .. q(dir .. ":/usr/bin:/bin"), "FAKE_SANITIZER_LOG=" .. q(log) },
    "--sanitize= " .. CHILD)
  T.ok(rc2 ~= 0 and err2:find("unknown tool ''", 1, true), err2)
  os.execute("rm -rf " .. q(dir))
end)

T.test("search order: PATH, then $CUDA_HOME/bin; non-executables skipped; missing tool", function()
  if exists(SYSTEM_TOOL) then
    print("skipped: " .. SYSTEM_TOOL .. " exists, so the tool cannot be missing here")
    return
  end
  local empty = T.tmpdir()
  local decoy = T.tmpdir() -- a compute-sanitizer that is not executable: not a candidate
  local f = assert(io.open(decoy .. "/compute-sanitizer", "w"))
  f:write("#!/bin/sh\nexit 0\n")
  f:close()
  local home = T.tmpdir()
  assert(os.execute("mkdir -p " .. q(home .. "/bin")))
  local tooldir = fake_tool_dir()
  assert(os.execute(string.format("cp %s/compute-sanitizer %s/bin/", q(tooldir), q(home))))
  local log = empty .. "/argv"
  -- found through CUDA_HOME when PATH has none
  local logenv = "FAKE_SANITIZER_LOG=" .. q(log)
  local rc, out, err = gpulab({ "PATH=" .. q(decoy .. "::" .. empty), "CUDA_HOME=" .. q(home), logenv },
    "--sanitize=initcheck " .. CHILD)
  T.eq(rc, 0, err)
  T.ok(out:find("GPULAB_LINEINFO=1", 1, true), out)
  T.eq(lines(read(log))[2], "initcheck")
  -- neither: the error says where it looked
  rc, out, err = gpulab({ "PATH=" .. q(decoy .. ":" .. empty), "CUDA_HOME=" .. q(empty), logenv },
    "--sanitize=memcheck " .. CHILD)
  T.ok(rc ~= 0, "exit status 0 without the tool")
  T.ok(err:find("compute-sanitizer not found: searched PATH, /usr/local/cuda/bin and $CUDA_HOME/bin", 1, true), err)
  T.eq(out, "")
  local rc3, _, err3 = gpulab({ "-u CUDA_HOME", "PATH=" .. q(empty) }, "--sanitize=synccheck " .. CHILD)
  T.ok(rc3 ~= 0 and err3:find("compute-sanitizer not found", 1, true), err3)
  for _, d in ipairs({ empty, decoy, home, tooldir }) do os.execute("rm -rf " .. q(d)) end
end)

T.done()
