-- test_lua_compat.lua — gpulab against the real lua(1) (LUA_BIN, Debian's lua5.4), side by side:
-- each case runs both interpreters with the same arguments, environment and input, and where
-- gpulab must behave as lua(1) the outputs and exit statuses must be equal. The differences
-- gpulab makes on purpose are listed in docs/LUA_DIFFERENCES.md; the cases for them check
-- gpulab's own behaviour.
local T = dofile("tests/lua/t.lua")
local H = dofile("tests/cli/helpers.lua")
local run, write = H.run, H.write

local lua_bin = os.getenv("LUA_BIN") or "lua5.4"

local function has(s, text, what)
  T.ok(s and s:find(text, 1, true), (what or "output") .. " contains " .. text .. ": got " .. tostring(s))
end

-- The interpreter's own name appears in error messages ("lua5.4: ...", "/path/gpulab: ...").
local function neutral(s, bin)
  return (s:gsub(bin:gsub("%p", "%%%0"), "<interpreter>"))
end

-- Runs both; returns {out, err, code} for each, with the interpreter names made neutral.
local function both(args, opts)
  opts = opts or {}
  local r = {}
  for _, who in ipairs({ "lua", "gpulab" }) do
    local bin = who == "lua" and lua_bin or H.bin
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    o.bin = bin
    local out, err, code = run(args, o)
    r[who] = { out = neutral(out, bin), err = neutral(err, bin), code = code }
  end
  return r.lua, r.gpulab
end

-- Checks that gpulab prints, reports and exits exactly as lua(1).
local function same(args, opts, what)
  local l, g = both(args, opts)
  local label = (what or table.concat(args, " ")) .. ": "
  T.eq(g.out, l.out, label .. "stdout")
  T.eq(g.err, l.err, label .. "stderr")
  T.eq(g.code, l.code, label .. "exit status")
  return l
end

T.test("the reference interpreter is there", function()
  local out = run({ "-v" }, { bin = lua_bin })
  has(out, "Lua 5.4", lua_bin .. " -v")
end)

T.test("-v prints Lua's version line first, then gpulab's", function()
  local lua_line = run({ "-v" }, { bin = lua_bin })
  local out, _, code = run({ "-v" })
  T.eq(code, 0)
  T.eq(out:sub(1, #lua_line), lua_line, "first line as lua -v")
  has(out:sub(#lua_line + 1), "gpulab ")
end)

T.test("LUA_INIT: code, @file, LUA_INIT_5_4 first, errors reported, -E ignores it", function()
  same({ "-e", "print(x)" }, { env = "LUA_INIT='x = 10 print(\"init ran\")'" })
  same({ "-e", "print(x)" }, { env = "LUA_INIT='x = 1' LUA_INIT_5_4='x = 54'" })
  local init = write("init.lua", "print('init file', ...)\ny = 7\n")
  same({ "-e", "print(y)" }, { env = "LUA_INIT=@" .. H.q(init) })
  local l = same({ "-e", "print('not reached')" }, { env = "LUA_INIT='error(\"init failed\")'" })
  T.eq(l.code, 1)
  has(l.err, "init failed")
  same({ "-e", "print('x')" }, { env = "LUA_INIT='x = = 1'" }, "a syntax error in LUA_INIT")
  same({ "-e", "print('x')" }, { env = "LUA_INIT=@/no/such/init.lua" }, "a missing LUA_INIT file")
  same({ "-E", "-e", "print(x)" }, { env = "LUA_INIT='x = 10'" }, "-E")
  -- LUA_INIT runs before the script, with `arg` already there
  local script = write("after_init.lua", "print('script', z)\n")
  same({ script, "a" }, { env = "LUA_INIT='z = arg[1]'" })
end)

T.test("LUA_PATH, LUA_PATH_5_4, LUA_CPATH and ';;' are the user's", function()
  local probe = { "-e", "print(package.path) print(package.cpath)" }
  same(probe)
  same(probe, { env = "LUA_PATH='/mine/?.lua'" })
  same(probe, { env = "LUA_PATH='/mine/?.lua;;/after/?.lua'" })
  same(probe, { env = "LUA_PATH='/old/?.lua' LUA_PATH_5_4='/new/?.lua;;'" })
  same(probe, { env = "LUA_CPATH='/c/?.so;;'" })
  same({ "-E", "-e", "print(package.path) print(package.cpath)" },
    { env = "LUA_PATH='/mine/?.lua' LUA_CPATH='/c/?.so'" }, "-E")
  -- gpulab's own modules are still found when the user's path does not list them
  local out, err, code = run({ "-e", "print(type(require('gpulab.lab')))" }, { env = "LUA_PATH='/mine/?.lua'" })
  T.eq(code, 0, err)
  T.eq(out, "table\n")
  -- and a module of the user's with the same name wins
  os.execute("mkdir -p " .. H.q(H.tmp .. "/shadow/gpulab"))
  write("shadow/gpulab/lab.lua", "return 'the user module'\n")
  out = run({ "-e", "print((require('gpulab.lab')))" }, { env = "LUA_PATH='" .. H.tmp .. "/shadow/?.lua'" })
  T.eq(out, "the user module\n")
end)

T.test("loadfile and dofile as Lua's", function()
  write("bom.lua", "\239\187\191print('after a BOM', ...)\nreturn 1, 2\n")
  write("bomhash.lua", "\239\187\191#!/usr/bin/lua\nprint('BOM and #!', debug.getinfo(1, 'l').currentline)\n")
  write("hash.lua", "# a first line that is not Lua\nreturn 'hash'\n")
  write("syntax.lua", "x = = 1\n")
  os.execute("mkdir -p " .. H.q(H.tmp .. "/adir"))
  same({ "-e", "print(dofile('bom.lua'))" })
  same({ "-e", "dofile('bomhash.lua')" })
  same({ "-e", "print(loadfile('hash.lua')())" })
  same({ "-e", "print(loadfile('bom.lua', 'b'))" }, nil, "mode b on text")
  same({ "-e", "print(type(loadfile('bom.lua', 't')))" }, nil, "mode t")
  same({ "-e", "print(pcall(loadfile('bom.lua', 't', nil)))" }, nil, "explicit env = nil")
  same({ "-e", "local e = {print = function(s) io.write('env print ', s, '\\n') end}; loadfile('bom.lua', 'bt', e)()" })
  same({ "-e", "print(loadfile('adir'))" }, nil, "a directory")
  same({ "-e", "print(loadfile('no_such_file.lua'))" }, nil, "a missing file")
  same({ "-e", "print(loadfile('syntax.lua'))" }, nil, "a syntax error")
  same({ "-e", "dofile('no_such_file.lua')" }, nil, "dofile of a missing file")
  same({ "-e", "dofile('syntax.lua')" }, nil, "dofile of a syntax error")
  same({ "-e", "print(pcall(dofile, 'adir'))" }, nil, "dofile of a directory")
  same({ "-e", "print(pcall(loadfile, {}))" }, nil, "a bad argument")
  -- dofile() reads stdin where it stands: what io.read consumed is not read again
  same({ "-e", "print('skipped: ' .. io.read('l')); print(dofile())" },
    { stdin = "the first line\nprint('from stdin') return 5\n" })
  same({ "-e", "print(loadfile()())" }, { stdin = "return 'loadfile of stdin'\n" })
end)

T.test("load as Lua's; only a chunk that really is binary is refused", function()
  same({ "-e", "print(load('return 1 + 1', 'x', 'bt')())" })
  same({ "-e", "print(load('return 1', 'x', 'b'))" }, nil, "mode b on text: nil and a message")
  same({ "-e", "print(load('return 1', '=name', 'x'))" }, nil, "a mode without t")
  same({ "-e", "print(load('x = = 1', '=name'))" })
  same({ "-e", "print(load('x = = 1'))" })
  same({ "-e", "print(pcall(load, 'return 1', 'x', {}))" }, nil, "a bad mode")
  same({ "-e", "print(pcall(load))" }, nil, "no chunk")
  same({ "-e", "print(pcall(load, function() return {} end))" }, nil, "a bad reader")
  same({ "-e", "local p = {'return ', '4', '2'}; local i = 0; print(load(function() i = i + 1; return p[i] end)())" })
  same({ "-e", "print(pcall(load('return x', 'c', 't', nil)))" }, nil, "explicit env = nil")
  same({ "-e", "print(load('return x', 'c', 't', {x = 'from env'})())" })
  same({ "-e", "print(load(string.dump(function() end), 'd', 't'))" }, nil, "binary with mode t")
  -- the deliberate difference: a binary chunk is refused even where the mode allows it
  for _, mode in ipairs({ "b", "bt" }) do
    local out = run({ "-e", "print(load(string.dump(function() return 1 end), 'd', '" .. mode .. "'))" })
    T.eq(out, "nil\tprecompiled binary chunks are refused; gpulab loads source text only\n", mode)
  end
end)

T.test("the script's ... comes from the arg table", function()
  local script = write("dots.lua", "print(select('#', ...), ...)\n")
  same({ script, "a", "b" })
  same({ "-e", "arg = {'x', 'y', 'z'}", script, "a" })
  same({ "-e", "arg[1] = 'changed'; arg[3] = 'three'", script, "a" })
  same({ "-e", "arg = nil", script }, nil, "arg that is not a table")
  same({ "-", "p", "q" }, { stdin = "print(...)\n" })
end)

T.test("-W applies in order with -e", function()
  same({ "-e", "warn('before')", "-W", "-e", "warn('after')" })
  same({ "-W", "-e", "warn('@off') warn('off') warn('@on') warn('on')" })
end)

T.test("the collector starts generational", function()
  same({ "-e", "print(collectgarbage('incremental'), collectgarbage('generational'))" })
end)

T.test("coroutines: resume and wrap give Lua's results and errors", function()
  same({ "-e", "print(coroutine.resume(coroutine.create(function(a) return a, coroutine.yield(a + 1) end), 1))" })
  same({ "-e", "local co = coroutine.wrap(function(a) local b = coroutine.yield(a) return a + b end) " ..
    "print(co(2), co(3), pcall(co))" })
  same({ "-e", "coroutine.wrap(function() error('inside wrap') end)()" })
  same({ "-e", "print(coroutine.resume(coroutine.create(function() error('inside resume') end)))" })
  same({ "-e", "coroutine.resume(42)" }, nil, "resume of a number")
  same({ "-e", "coroutine.wrap(42)" }, nil, "wrap of a number")
  same({ "-e", "local co = coroutine.running() print(coroutine.resume(co))" }, nil, "resume of the running one")
  same({ "-e", "for v in coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i) end end) do io.write(v) end" })
end)

T.test("script and command-line errors read as lua(1)'s", function()
  local bad = write("bad.lua", "local x = 1\nerror('script failed')\n")
  local syntax = write("badsyntax.lua", "print(\n")
  same({ bad })
  same({ syntax })
  same({ "no_such_script.lua" })
  same({ "-e", "error('e failed')" })
  same({ "-e", "x = = 1" })
  same({ "-e", "error({})" }, nil, "a table error value")
  same({ "-e", "error(setmetatable({}, {__tostring = function() return 'tostring error' end}))" })
  -- a module that is not found: lua's list of places, word for word (gpulab's own folder is
  -- named only for gpulab.* modules)
  same({ "-l", "no_such_module_for_test" })
  same({ "-" }, { stdin = "error('from stdin')\n" })
  same({}, { stdin = "print('stdin without a tty', ...)\n" })
  same({ "-e", "os.exit(false)" })
  same({ "-e", "os.exit(7)" })
end)

T.test("-i with piped input: results printed, print's errors, no history written", function()
  local state = H.tmp .. "/state"
  local input = "return 42\nx = {1, 2}\n#x\nprint = nil\n1\nerror('repl error')\n"
  local out, err, code = run({ "-i" }, { stdin = input, env = "XDG_STATE_HOME=" .. H.q(state) })
  T.eq(code, 0, err)
  has(out, "> 42\n")
  has(out, "> 2\n")
  has(err, "error calling 'print' (attempt to call a nil value)\n")
  has(err, "stdin:1: repl error\n")
  T.ok(not err:find(H.bin, 1, true), "no program name before REPL errors: " .. err)
  T.eq(H.read(state .. "/gpulab/history"), nil, "history file for piped input")
  -- _PROMPT and _PROMPT2, as lua(1)
  out = run({ "-i" }, { stdin = "_PROMPT = 'one> ' _PROMPT2 = 2\nfor i = 1, 2 do\nend\n" })
  has(out, "one> 2one> ")
  -- any other value through tostring, its __tostring included (lua.c's get_prompt)
  out = run({ "-i" }, { stdin = "_PROMPT = setmetatable({}, {__tostring = function() return 'obj> ' end}) " ..
    "_PROMPT2 = false\nfor i = 1, 2 do\nend\n" })
  has(out, "obj> falseobj> ")
end)

T.test("require's not-found message lists the places lua(1) lists, not gpulab's own folder", function()
  same({ "-e", "package.path = './?.lua' require 'nope'" })
  same({ "-e", "require 'nope'" })
  same({ "-e", "package.path = '' package.cpath = '' print(pcall(require, 'nope'))" })
  -- a gpulab module that is not there still names gpulab's folder
  local _, err = run({ "-e", "package.path = './?.lua' require 'gpulab.nope'" })
  has(err, "/lua/gpulab/nope.lua'", "stderr")
end)

T.test("-i with piped input: the same errors as lua -i, word for word", function()
  local input = table.concat({
    "error('repl error')",
    "x = = 1",
    "for i = 1, 2 do",
    "  nosuch.field = i",
    "end",
    "return 1, 2",
    "error(setmetatable({}, {__tostring = function() return 'object' end}))",
    "error({})",
    "local t = setmetatable({}, {__tostring = function() error('in tostring') end}) return t",
    "print = function(...) error('print failed') end",
    "42",
    "print = nil",
    "'value'",
    "os.exit(3)",
  }, "\n") .. "\n"
  local l, g = both({ "-i" }, { stdin = input })
  T.eq(g.err, l.err, "stderr")
  T.eq(g.code, l.code, "exit status")
end)

T.test("C modules from Debian load: lua-cjson, lua-lpeg", function()
  for _, m in ipairs({ "cjson", "lpeg" }) do
    T.ok(package.searchpath(m, package.cpath), m .. " is not installed (apt-get install lua-cjson lua-lpeg)")
  end
  local out, err, code = run({ "-e", [[
local cjson = require "cjson"
print(cjson.encode({1, 2, 3}), cjson.decode('{"a": [true, null]}').a[1])
local lpeg = require "lpeg"
local digits = lpeg.C(lpeg.R("09") ^ 1)
print(lpeg.match(digits * "," * digits, "12,345"))
]] })
  T.eq(code, 0, err)
  T.eq(out, "[1,2,3]\ttrue\n12\t345\n")
end)

T.test("the executable exports the whole Lua C API", function()
  local archive = os.getenv("LUA_STATIC_LIB")
  T.ok(archive, "LUA_STATIC_LIB names liblua5.4.a")
  local function symbols(cmd)
    local set, n = {}, 0
    local p = assert(io.popen(cmd))
    for line in p:lines() do
      local name = line:match("^%x*%s+[TDBR]%s+(lua[%w_]*)$")
      local public = name and (name:match("^lua_") or name:match("^luaL_") or name:match("^luaopen_"))
      if public and not set[name] then set[name], n = true, n + 1 end
    end
    p:close()
    return set, n
  end
  local api, n_api = symbols("nm -g --defined-only " .. H.q(archive) .. " 2>/dev/null")
  local exported = symbols("nm -D --defined-only " .. H.q(H.bin))
  T.ok(n_api > 100, "symbols of " .. archive .. ": " .. n_api)
  local missing = {}
  for name in pairs(api) do
    if not exported[name] then missing[#missing + 1] = name end
  end
  table.sort(missing)
  T.eq(table.concat(missing, " "), "", "Lua API functions not exported")
end)

H.cleanup()
T.done()
