-- A lab whose children end every way cuda.run_isolated reports (exit codes, arguments and
-- environment passed on, a Lua error, a crash, a deadline, a child that ignores SIGTERM), one
-- line each. test_lua_module.lua runs it under gpulab and under lua5.4, where the harness starts
-- its children itself, and compares the lines.
local L = require("gpulab.lab").new { name = "children_lab", title = "how children end" }
-- One line per child: how it ended, its output (not for one a deadline stopped: how far it got
-- depends on the machine's load), the first line of its errors without the program's name.
local function show(name, r)
  local first_err = (r.stderr:match("^[^\n]*") or ""):gsub("^[^:]*: ", "", 1)
  local out = r.status == "timeout" and "-" or (r.stdout:gsub("%d+", "N"))
  print(table.concat({ name, r.status, tostring(r.code), tostring(r.signal), out, first_err,
    math.type(r.seconds) or type(r.seconds) }, " | "))
end
local FIX = "tests/lab_fixtures/"
show("exit", L:child(FIX .. "child_exit.lua", { args = { "3", "a b", "it's" },
  env = { GPULAB_ISOLATE_TEST = "x y", GPULAB_ISOLATE_UNSET = false } }))
show("error", L:child(FIX .. "child_error.lua"))
show("segv", L:child(FIX .. "child_segv.lua"))
show("loop", L:child(FIX .. "child_loop.lua", { timeout = 1 }))
show("ignore", L:child(FIX .. "child_loop.lua", { args = { "ignore" }, timeout = 1 }))
