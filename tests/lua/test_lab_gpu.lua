-- On a GPU: children run by cuda.run_isolated fault or hang on the device while this process
-- keeps a healthy context; and the demo lab takes its GPU path.
local T = dofile("tests/lua/t.lua")
T.require_gpu()
local CHILD = "tests/lab_fixtures/gpu_child.lua"
-- a child's fault is intended: it runs without a sanitizer's injection when this file runs under one
local NO_TOOL = { CUDA_INJECTION64_PATH = false }

-- This process's own device work, before and after each child.
local function parent_still_works(value)
  local d = cuda.array("i32", 4096)
  d:fill(value)
  local h = cuda.host("i32", 4096):copy_from(d)
  T.eq(h[1], value)
  T.eq(h[4096], value)
  d:free()
  h:free()
end

T.test("a child's device work: status ok, result printed", function()
  parent_still_works(1)
  local r = cuda.run_isolated(CHILD, { args = { "ok" }, timeout = 60 })
  T.eq(r.status, "ok", r.stderr)
  T.ok(r.stdout:find("SUM 7168\n", 1, true), r.stdout)
  parent_still_works(2)
end)

T.test("an illegal address in a child: its sync fails, this context is untouched", function()
  local r = cuda.run_isolated(CHILD, { args = { "fault" }, timeout = 60, env = NO_TOOL })
  T.eq(r.status, "error", r.stdout .. r.stderr)
  T.eq(r.code, 3)
  T.ok(r.stdout:find("LAUNCHED\n", 1, true), r.stdout)
  T.ok(r.stdout:find("SYNC false", 1, true), r.stdout)
  T.ok(r.stdout:find("(700)", 1, true) or r.stdout:find("(719)", 1, true), r.stdout)
  parent_still_works(3)
end)

T.test("a kernel that never ends: the child is killed at the deadline, the GPU is usable", function()
  local r = cuda.run_isolated(CHILD, { args = { "spin" }, timeout = 3, env = NO_TOOL })
  T.eq(r.status, "timeout", r.stderr)
  T.ok(r.stdout:find("SPINNING\n", 1, true), r.stdout)
  T.ok(not r.stdout:find("NOT REACHED", 1, true), r.stdout)
  T.ok(r.seconds >= 2.9 and r.seconds < 10, "seconds " .. r.seconds)
  parent_still_works(4)
  -- a fresh process gets the device too (the killed one's context is gone)
  local again = cuda.run_isolated(CHILD, { args = { "ok" }, timeout = 60 })
  T.eq(again.status, "ok", again.stderr)
end)

T.test("the demo lab on a GPU: lab:gpu() true, no 'no GPU' line, exit 0", function()
  local r = cuda.run_isolated("tests/lab_fixtures/demo_lab.lua", { args = { "--quick" }, timeout = 120 })
  T.eq(r.status, "ok", r.stderr)
  T.ok(not r.stdout:find("no GPU:", 1, true), r.stdout)
  T.ok(r.stdout:find("## Verdicts: 1 holds, 1 refuted, 1 unclear", 1, true), r.stdout)
end)

T.done()
