-- The TMA lab's device-test runner (tests/lua/tma_lab_runner.lua) through the driver stand-in,
-- which passes its device check: under --sanitize it skips (77) when compute-sanitizer is not
-- installed, and without --sanitize it runs the command and passes its status on.
local T = dofile("tests/lua/t.lua")

local GPULAB = arg[-1]
local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function runner(env, args)
  local p = assert(io.popen(env .. " " .. q(GPULAB) .. " tests/lua/tma_lab_runner.lua " .. args .. " 2>&1"))
  local out = p:read("a")
  local _, _, rc = p:close()
  return out, rc
end

local empty = os.tmpname()
os.remove(empty)
assert(os.execute("mkdir " .. q(empty)))

T.test("--sanitize without compute-sanitizer: skipped, the lab is not run", function()
  local out, rc = runner("PATH=" .. q(empty) .. " CUDA_HOME=", "--sanitize=memcheck labs/none.lua")
  if out:find("skipped: no CUDA", 1, true) then return end
  T.eq(rc, 77, out)
  T.ok(out:find("skipped: compute-sanitizer is not installed", 1, true), out)
  T.ok(not out:find("running:", 1, true), out)
end)

T.test("a compute-sanitizer on CUDA_HOME/bin is found and the command runs", function()
  assert(os.execute("mkdir " .. q(empty .. "/bin")))
  local f = assert(io.open(empty .. "/bin/compute-sanitizer", "w"))
  f:write("#!/bin/sh\nexit 0\n")
  f:close()
  assert(os.execute("chmod +x " .. q(empty .. "/bin/compute-sanitizer")))
  -- GPULAB_BIN=false stands for the lab: it runs and fails, and the runner passes that on
  local out, rc = runner("PATH=/usr/bin:/bin CUDA_HOME=" .. q(empty) .. " GPULAB_BIN=false",
    "--sanitize=synccheck x.lua")
  T.ok(out:find("running: 'false' '--sanitize=synccheck' 'x.lua'", 1, true), out)
  T.eq(rc, 1, out)
  out, rc = runner("GPULAB_BIN=true", "x.lua")
  T.eq(rc, 0, out)
  T.ok(out:find("lab passed", 1, true), out)
  os.remove(empty .. "/bin/compute-sanitizer")
  os.remove(empty .. "/bin")
end)

os.remove(empty)
T.done()
