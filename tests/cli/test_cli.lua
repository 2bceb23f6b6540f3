-- test_cli.lua — the command line: options like lua(1), scripts and their arguments, errors,
-- text-only loading, and the cuda module.
local T = dofile("tests/lua/t.lua")
local H = dofile("tests/cli/helpers.lua")
local run, write = H.run, H.write

local function has(s, text, what)
  T.ok(s and s:find(text, 1, true), (what or "output") .. " contains " .. text .. ": got " .. tostring(s))
end

T.test("script gets arg table and varargs like lua(1)", function()
  local script = write("args.lua", [[
print(arg[0], arg[1], arg[2], #arg, select("#", ...), ...)
print(arg[-1] == os.getenv("GPULAB_BIN"), arg[-2])
]])
  local out, err, code = run({ script, "one", "two words" })
  T.eq(code, 0, "exit status; stderr: " .. err)
  T.eq(out, script .. "\tone\ttwo words\t2\t2\tone\ttwo words\ntrue\tnil\n")
  out = run({ "-e", "x=1", script, "a" })
  has(out, "\ta\t")
  local opts_script = write("opts.lua", "print(arg[-3] == os.getenv('GPULAB_BIN'), arg[-2], arg[-1], arg[0])\n")
  out = run({ "-e", "x=1", opts_script })
  T.eq(out, "true\t-e\tx=1\t" .. opts_script .. "\n", "interpreter and options at negative indices")
end)

T.test("-e runs in order; inline -eCODE; exit status of os.exit", function()
  local out, _, code = run({ "-e", "a = 1", "-e", "print(a + 1)", "-eprint('inline')" })
  T.eq(code, 0)
  T.eq(out, "2\ninline\n")
  local _, _, c2 = run({ "-e", "os.exit(3)" })
  T.eq(c2, 3, "os.exit status")
  -- -e does not start the REPL or read stdin
  out = run({ "-e", "print('only')" }, { stdin = "print('stdin ran')" })
  T.eq(out, "only\n")
end)

T.test("-l mod and -l g=mod", function()
  write("mymod.lua", "return { v = 'module value' }\n")
  local out, err, code = run({ "-l", "mymod", "-e", "print(mymod.v)" })
  T.eq(code, 0, err)
  T.eq(out, "module value\n")
  out = run({ "-l", "alias=mymod", "-e", "print(alias.v, mymod)" })
  T.eq(out, "module value\tnil\n")
  out = run({ "-lmymod", "-e", "print(mymod.v)" })
  T.eq(out, "module value\n")
  local _, err2, code2 = run({ "-l", "no_such_module_here" })
  T.eq(code2, 1)
  has(err2, "module 'no_such_module_here' not found")
end)

T.test("-v prints the version and does not enter the REPL", function()
  local out, _, code = run({ "-v" }, { stdin = "print('stdin ran')" })
  T.eq(code, 0)
  has(out, "gpulab 0.1.0")
  has(out, "Lua 5.4")
  T.ok(not out:find("stdin ran", 1, true), "-v alone does not run stdin")
end)

T.test("-E ignores LUA_PATH; -W turns warnings on", function()
  local probe = "print(package.path:find('/from/env/', 1, true) ~= nil)"
  local out = run({ "-e", probe }, { env = "LUA_PATH='/from/env/?.lua'" })
  T.eq(out, "true\n", "LUA_PATH is used by default")
  out = run({ "-E", "-e", probe }, { env = "LUA_PATH='/from/env/?.lua'" })
  T.eq(out, "false\n", "-E ignores it")
  local _, err = run({ "-W", "-e", "warn('careful')" })
  T.eq(err, "Lua warning: careful\n")
  _, err = run({ "-e", "warn('careful')" })
  T.eq(err, "", "warnings are off by default")
end)

T.test("SIGINT stops a running script with an error", function()
  -- the script announces that it runs (so the handler is in place) before it loops
  local loop = "io.open('sigint.started', 'w'):close() while true do end"
  local cmd = string.format("cd %s; %s -e %s > /dev/null 2> sigint.err & echo $! > sigint.pid",
    H.q(H.tmp), H.q(H.bin), H.q(loop))
  os.execute(cmd)
  local pid = assert(tonumber(H.read(H.tmp .. "/sigint.pid")))
  for _ = 1, 200 do
    if H.read(H.tmp .. "/sigint.started") then break end
    os.execute("sleep 0.05")
  end
  os.execute("kill -INT " .. pid)
  local err
  for _ = 1, 100 do
    err = H.read(H.tmp .. "/sigint.err") or ""
    if err:find("traceback", 1, true) then break end
    os.execute("sleep 0.05")
  end
  os.execute("kill -KILL " .. pid .. " 2>/dev/null")
  has(err, "interrupted!")
end)

T.test("--help and bad options", function()
  local out, _, code = run({ "--help" })
  T.eq(code, 0)
  has(out, "usage:")
  has(out, "--watch")
  local _, err, c2 = run({ "-z" })
  T.eq(c2, 1)
  has(err, "unrecognized option '-z'")
  has(err, "usage:")
  _, err, c2 = run({ "-e" })
  T.eq(c2, 1)
  has(err, "'-e' needs argument")
  _, err, c2 = run({ "-l" })
  T.eq(c2, 1)
  has(err, "'-l' needs argument")
  _, err, c2 = run({ "--json" })
  T.eq(c2, 1)
  has(err, "'--json' needs a file name")
  _, err, c2 = run({ "--watch" })
  T.eq(c2, 1)
  has(err, "--watch needs a script file")
end)

T.test("-- ends options; - and no script read stdin", function()
  local script = write("-dash.lua", "print('dash script', ...)\n")
  local out, err, code = run({ "--", "-dash.lua", "x" })
  T.eq(code, 0, err)
  T.eq(out, "dash script\tx\n")
  out, err, code = run({ "-", "p", "q" }, { stdin = "print('from stdin', arg[0], ...)" })
  T.eq(code, 0, err)
  T.eq(out, "from stdin\t-\tp\tq\n")
  out = run({}, { stdin = "print(1 + 1)" })
  T.eq(out, "2\n", "stdin that is not a terminal runs as a script")
  T.ok(script)
end)

T.test("syntax errors: file:line: message, non-zero exit", function()
  local script = write("syntax.lua", "local x = 1\nlocal y = = 2\n")
  local out, err, code = run({ script })
  T.eq(code, 1)
  T.eq(out, "")
  has(err, script .. ":2: unexpected symbol near '='")
  out, err, code = run({ "-e", "x = = 1" })
  T.eq(out, "", "errors go to stderr")
  T.eq(code, 1)
  has(err, "(command line):1: unexpected symbol")
  out, err, code = run({ "-" }, { stdin = "x = = 1\n" })
  T.eq(out, "", "errors go to stderr")
  T.eq(code, 1)
  has(err, "stdin:1:")
end)

T.test("runtime errors: file:line: message and a traceback", function()
  local script = write("fails.lua", "local function inner()\n  error('boom')\nend\ninner()\n")
  local out, err, code = run({ script })
  T.eq(code, 1)
  T.eq(out, "")
  has(err, script .. ":2: boom")
  has(err, "stack traceback:")
  has(err, "in local 'inner'")
  has(err, script .. ":4: in main chunk")
  out, err = run({ "-e", "error({})" })
  T.eq(out, "", "errors go to stderr")
  has(err, "(error object is a table value)")
  out, err = run({ "-e", "error(setmetatable({}, {__tostring = function() return 'custom' end}))" })
  T.eq(out, "", "errors go to stderr")
  has(err, "custom")
  -- the first failing action stops the rest
  local out2 = run({ "-e", "error('first')", "-e", "print('second')" })
  T.eq(out2, "")
  -- a missing script
  out, err, code = run({ H.tmp .. "/does_not_exist.lua" })
  T.eq(out, "", "errors go to stderr")
  T.eq(code, 1)
  has(err, "cannot open")
end)

T.test("shebang line is skipped", function()
  local script = write("shebang.lua", "#!/usr/bin/env gpulab\nprint('ran', debug.getinfo(1, 'l').currentline)\n")
  local out, err, code = run({ script })
  T.eq(code, 0, err)
  T.eq(out, "ran\t2\n")
end)

T.test("binary chunks are refused everywhere", function()
  local bytecode = string.dump(function() return 42 end)
  local binfile = write("binary.luac", bytecode)
  write("binmod.lua", bytecode)
  local _, err, code = run({ binfile })
  T.eq(code, 1)
  has(err, "binary chunks are refused")
  _, err, code = run({ "-" }, { stdin = bytecode })
  T.eq(code, 1)
  has(err, "binary chunks are refused")
  _, err, code = run({ "-e", "require('binmod')" })
  T.eq(code, 1)
  has(err, "error loading module 'binmod'")
  has(err, "binary")
  _, err, code = run({ "-l", "binmod" })
  T.eq(code, 1)
  has(err, "binary")
  -- inside this process: load, loadfile, dofile
  local f, msg = load(bytecode)
  T.eq(f, nil)
  has(msg, "binary chunks are refused")
  f, msg = load(bytecode, "x", "b")
  T.eq(f, nil)
  has(msg, "binary chunks are refused")
  f, msg = loadfile(binfile)
  T.eq(f, nil)
  has(msg, "binary")
  T.raises(function() dofile(binfile) end, "binary")
  -- a reader function handing over bytecode piecewise is refused too
  local given = false
  f, msg = load(function() if given then return nil end given = true return bytecode end)
  T.eq(f, nil)
  has(msg, "binary")
  -- text still loads through all of them
  T.eq(load("return 7")(), 7)
  T.eq(dofile(write("text.lua", "return 8")), 8)
  T.eq(loadfile(H.tmp .. "/text.lua", "t", {})(), 8)
end)

T.test("cuda global, require('cuda'); gpulab's lua/ is searched after package.path", function()
  T.eq(type(cuda), "table")
  T.ok(require("cuda") == cuda, "require returns the global")
  local home = cuda.home
  T.ok(type(home) == "string" and #home > 0, "cuda.home")
  T.ok(not package.path:find(home, 1, true), "package.path stays lua's: " .. package.path)
  local probe = "print(package.path:find(cuda.home, 1, true) == nil, require('cuda') == cuda, " ..
    "type(require('gpulab.lab')))"
  local out, err = run({ "-e", probe }, { env = "LUA_PATH='/only/here/?.lua'" })
  T.eq(out, "true\ttrue\ttable\n", err)
end)

T.test("modules found by require load from package.path in the build tree", function()
  write("pathmod.lua", "return 'found ' .. select(2, ...)\n")
  local out, err, code = run({ "-e", "print((require('pathmod')))" })
  T.eq(code, 0, err)
  T.eq(out, "found ./pathmod.lua\n", "the searcher passes the file name like lua's")
end)

T.test("GPULAB_DEPFILE lists the script, required modules and dofile'd files", function()
  write("depmod.lua", "return 1\n")
  write("dephelper.lua", "return 2\n")
  local script = write("depmain.lua", "require('depmod'); dofile('dephelper.lua'); require('string')\n")
  local depfile = H.tmp .. "/deps.txt"
  local _, err, code = run({ "depmain.lua" }, { env = "GPULAB_DEPFILE=" .. H.q(depfile) })
  T.eq(code, 0, err)
  local real = io.popen("cd " .. H.q(H.tmp) .. " && pwd -P"):read("l")
  T.eq(H.read(depfile), real .. "/depmain.lua\n" .. real .. "/depmod.lua\n" .. real .. "/dephelper.lua\n")
  T.ok(script)
  -- without the variable nothing is written anywhere
  os.remove(depfile)
  run({ "depmain.lua" })
  T.eq(H.read(depfile), nil)
end)

T.test("GPULAB_REPLAY never deletes a file :restart did not write", function()
  local victims = {
    write("important.txt", "keep = 1\n"),                          -- any file
    write("gpulab-replay-fake", "1 1\nxx\n"),                     -- the name, not the content
  }
  os.execute("ln -sf " .. H.q(victims[1]) .. " " .. H.q(H.tmp .. "/gpulab-replay-link"))
  victims[3] = H.tmp .. "/gpulab-replay-link"                     -- a link to another file
  for _, path in ipairs(victims) do
    local _, err, code = run({ "-i" },
      { stdin = "print('session ran')\n", env = "GPULAB_REPLAY=" .. H.q(path) })
    T.eq(code, 0, err)
    has(err, "is not a replay file written by :restart", path)
    T.ok(H.read(path) ~= nil, path .. " still exists")
  end
  T.eq(H.read(victims[1]), "keep = 1\n", "content untouched")
  -- the variable is not handed on to programs the session starts
  local out = run({ "-i" },
    { stdin = "print(os.getenv('GPULAB_REPLAY'))\n", env = "GPULAB_REPLAY=" .. H.q(victims[1]) })
  has(out, "nil\n")
end)

T.test(":restart with piped input goes on with the lines after it", function()
  local out, err = run({ "-i" }, { stdin = 'x = 41\n:restart\nprint("after restart", x + 1)\n' })
  has(out, "replayed 1 input", "stdout (stderr: " .. tostring(err) .. ")")
  has(out, "after restart\t42")
end)

H.cleanup()
T.done()
