-- cuda.run_isolated's list form: every child at once, each with its own deadline, results in
-- order; entry errors say which entry. Concurrency is shown without timing: two children that
-- each wait for the other's file can only both succeed when they run at the same time.
local T = dofile("tests/lua/t.lua")

T.test("two children meet: they run at the same time", function()
  local a, b = os.tmpname(), os.tmpname()
  os.remove(a); os.remove(b)
  local r = cuda.run_isolated({
    { "tests/lab_fixtures/child_rendezvous.lua", { args = { a, b }, timeout = 30 } },
    { "tests/lab_fixtures/child_rendezvous.lua", { args = { b, a }, timeout = 30 } },
  })
  T.eq(#r, 2)
  T.eq(r[1].status, "ok", r[1].stdout .. r[1].stderr)
  T.eq(r[2].status, "ok", r[2].stdout .. r[2].stderr)
  T.ok(r[1].stdout:find("met " .. b, 1, true), "results keep the order of the entries")
  T.ok(r[2].stdout:find("met " .. a, 1, true))
  os.remove(a); os.remove(b)
end)

T.test("each child has its own deadline and outcome", function()
  local r = cuda.run_isolated({
    { "tests/lab_fixtures/child_loop.lua", { timeout = 0.5 } },
    { "tests/lab_fixtures/child_exit.lua", { args = { "7" } } },
    { "tests/lab_fixtures/child_error.lua" },
  })
  T.eq(r[1].status, "timeout")
  T.eq(r[2].status, "error"); T.eq(r[2].code, 7)
  T.eq(r[3].status, "error")
end)

T.test("bad entries are refused before anything runs, naming the entry", function()
  T.raises(function() cuda.run_isolated({}) end, "a list of 1..256 {script, opts} entries expected, got 0")
  T.raises(function() cuda.run_isolated({ "x.lua" }) end, "entry 1 must be {script, opts}, got string")
  T.raises(function() cuda.run_isolated({ { "tests/lab_fixtures/child_exit.lua" }, { 5 } }) end,
    "cuda.run_isolated: entry 2: bad argument #1 to 'cuda.run_isolated' (script path expected, got number)")
  T.raises(function() cuda.run_isolated({ { "a.lua", { bogus = 1 } } }) end, "entry 1: bad argument #2")
  T.raises(function() cuda.run_isolated({ { "a.lua" } }, {}) end, "the list form takes the options in each entry")
end)

T.done()
