-- cuda.so from Lua 5.4's own interpreter: `lua5.4 -e 'require "cuda"' this.lua`, with
-- LUA_CPATH_5_4 at the build folder and the driver stand-in (tests/module.cmake). How require
-- finds and opens the module, where cuda.home points, that a script sees what it sees under
-- gpulab (the same transcript of compiles, launches, tensor-map rules, measurements, profiles
-- and errors; a lab's same notebook and results; the harness's children and --gpus sweeps), and
-- cuda.run_isolated, which needs gpulab's host, raising an error that names it.
-- Environment: GPULAB_BIN (gpulab), GL_LUA54 (lua5.4), GL_MODULE_DIR (where cuda.so is built), GL_SOURCE_DIR,
-- GL_MODULE_TO_HOME (the install's path from cuda.so's folder to the data folder), GL_NM,
-- GL_FAKECUPTI, GPULAB_LIBCUDA, GPULAB_FAKE_LOG.
local T = dofile("tests/lua/t.lua")
local cuda = require("cuda")
local json = require("gpulab.json")

local GPULAB = assert(os.getenv("GPULAB_BIN"), "GPULAB_BIN")
local LUA = assert(os.getenv("GL_LUA54"), "GL_LUA54")
local MODULE_DIR = assert(os.getenv("GL_MODULE_DIR"), "GL_MODULE_DIR")
local FAKECUPTI = assert(os.getenv("GL_FAKECUPTI"), "GL_FAKECUPTI")
local LOG = assert(os.getenv("GPULAB_FAKE_LOG"), "GPULAB_FAKE_LOG")

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- Runs a shell command; returns its output (stdout and stderr) and exit code.
local function sh(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local _, _, code = p:close()
  return out, code
end

-- `env lua5.4 -e 'require "cuda"' args` (the module from this test's LUA_CPATH_5_4).
local function lua54(env, args)
  return sh(string.format("%s %s -e %s %s", env or "", q(LUA), q('require "cuda"'), args))
end

local function lines(text)
  local t = {}
  for l in (text .. "\n"):gmatch("(.-)\n") do t[#t + 1] = l end
  return t
end

-- The first line where two texts differ, for a message that shows it.
local function first_difference(a, b)
  local la, lb = lines(a), lines(b)
  for i = 1, math.max(#la, #lb) do
    if la[i] ~= lb[i] then
      return string.format("line %d:\n  gpulab: %s\n  lua5.4: %s", i, tostring(la[i]), tostring(lb[i]))
    end
  end
end

local function deep_equal(a, b, path, skip)
  if skip[path] then return true end
  if type(a) ~= type(b) then return false, path end
  if type(a) ~= "table" then
    if a == b or (a ~= a and b ~= b) then return true end
    return false, path
  end
  for k, v in pairs(a) do
    local ok, where = deep_equal(v, b[k], path .. "/" .. tostring(k), skip)
    if not ok then return false, where end
  end
  for k in pairs(b) do
    if a[k] == nil and not skip[path .. "/" .. tostring(k)] then return false, path .. "/" .. tostring(k) end
  end
  return true
end

T.test("require finds cuda.so on package.cpath; the module is also the global `cuda`", function()
  T.eq(package.searchpath("cuda", package.cpath), MODULE_DIR .. "/cuda.so")
  T.ok(rawequal(package.loaded.cuda, cuda), "package.loaded.cuda")
  T.ok(rawequal(rawget(_G, "cuda"), cuda), "the global, as gpulab's scripts and labs use it")
  T.eq(cuda.version().lua, _VERSION .. cuda.version().lua:sub(#_VERSION + 1), "the interpreter's Lua")
  T.eq(type(cuda.compile), "function")
  T.eq(getmetatable(cuda.host("f32", 1)), "gpulab object", "objects are gpulab's")
end)

T.test("a second require (package.loaded.cuda cleared) gets the same table; older objects keep working", function()
  local h = cuda.host("f32", 4)
  h:fill(2)
  package.loaded.cuda = nil
  local again = require("cuda")
  T.ok(rawequal(again, cuda), "the table luaopen_cuda made first")
  local d = cuda.array("f32", 4)
  d:copy_from(h)
  local back = cuda.host("f32", 4)
  back:copy_from(d)
  T.eq(back[4], 2.0)
end)

T.test("a global named cuda that the program has is left alone", function()
  local out, code = sh(string.format("%s -e 'cuda = 42' -e 'local c = require \"cuda\"; print(cuda, type(c.compile))'",
    q(LUA)))
  T.eq(code, 0, out)
  T.eq(out, "42\tfunction\n")
end)

T.test("cuda.home: the source folder from the build folder, GPULAB_HOME, the data folder beside an install", function()
  T.eq(cuda.home, assert(os.getenv("GL_SOURCE_DIR")), "a module in the build folder reads the source folder")
  local home = T.tmpdir()
  local out = lua54("GPULAB_HOME=" .. q(home), "-e 'print(cuda.home)'")
  T.eq(out, home .. "\n")
  -- an installed layout: <prefix>/<cmod dir>/cuda.so and <prefix>/<data dir>/gpulab
  local prefix = T.tmpdir()
  local cmod = prefix .. "/lib/lua/5.4"
  local data = cmod .. "/" .. assert(os.getenv("GL_MODULE_TO_HOME"), "GL_MODULE_TO_HOME")
  assert(os.execute(string.format("mkdir -p %s %s && cp %s %s/", q(cmod), q(data), q(MODULE_DIR .. "/cuda.so"),
    q(cmod))))
  local want = sh("cd " .. q(data) .. " && pwd -P"):gsub("\n$", "")
  out = sh(string.format("LUA_CPATH_5_4=%s %s -e %s", q(cmod .. "/?.so"), q(LUA),
    q('print(package.searchpath("cuda", package.cpath), require("cuda").home)')))
  T.eq(out, cmod .. "/cuda.so\t" .. want .. "\n")
  os.execute("rm -rf " .. q(prefix) .. " " .. q(home))
end)

T.test("the same transcript as under gpulab: compiles, launches, tensor maps, measure, profile, errors", function()
  local env = table.concat({ "GPULAB_FAKE_LOG=" .. q(LOG), "GPULAB_CUPTI=" .. q(FAKECUPTI),
    "GPULAB_FAKE_ELAPSED_FILE=" .. q(os.tmpname()), "GPULAB_FAKE_FAIL=cuMemAlloc:2:4,cuMemcpyDtoH:700" }, " ")
  local script = "tests/lua/module_transcript.lua"
  local theirs, c1 = sh(string.format("%s %s %s", env, q(GPULAB), script))
  local ours, c2 = lua54(env, script)
  T.eq(c1, 0, theirs)
  T.eq(c2, 0, ours)
  T.ok(#lines(ours) > 30, ours)
  T.ok(ours:find("\nlaunch | launch ", 1, true) and ours:find("\nmeasure | hot | 10 | 0.5", 1, true) and
       ours:find("\nprofile | 1 | ", 1, true), ours)
  T.eq(first_difference(theirs, ours), nil)
end)

T.test("a lab through the harness: the same notebook and results as under gpulab", function()
  local lab = "tests/lab_fixtures/demo_lab.lua"
  local function run(dir, cmd, ...)
    local out, code = cmd(string.format("%s --quick --json %s/r.json --svg %s/p", lab, q(dir), q(dir)), ...)
    T.eq(code, 0, out)
    -- the notebook without the output folder and the lab's wall time (its last line)
    local function unplaced(text)
      local at = text:find(dir, 1, true)
      while at do
        text = text:sub(1, at - 1) .. "OUT" .. text:sub(at + #dir)
        at = text:find(dir, at, true)
      end
      return text
    end
    return unplaced((out:gsub("\ndemo_lab: [%d.]+ ms\n$", "\n"))),
      json.decode(unplaced(assert(T.read(dir .. "/r.json")))), T.read(dir .. "/p-sweep.svg")
  end
  local da, db = T.tmpdir(), T.tmpdir()
  local theirs, a, svg_a = run(da, function(args) return sh(q(GPULAB) .. " " .. args) end)
  local ours, b, svg_b = run(db, function(args) return lua54(nil, args) end)
  T.ok(ours:find("[HOLDS]   bigger n takes longer", 1, true) and ours:find("picture: OUT/p-sweep.svg", 1, true), ours)
  T.eq(first_difference(theirs, ours), nil)
  local skip = { ["/provenance/command"] = true, ["/provenance/command_line"] = true,
    ["/provenance/date_utc"] = true, ["/timings"] = true }
  local same, where = deep_equal(a, b, "", skip)
  T.ok(same, "the results differ at " .. tostring(where))
  T.eq(b.provenance.command[1], LUA)
  T.ok(svg_b and svg_b:find("<svg", 1, true), "a picture")
  T.eq(svg_a, svg_b, "the pictures")
  os.execute("rm -rf " .. q(da) .. " " .. q(db))
end)

T.test("cuda.error objects: cuda.is_error, their fields, and lua5.4 prints an uncaught one", function()
  local bad = "__global__ void k() { undeclared(); }"
  local ok, e = pcall(cuda.compile, bad, { name = "bad.cu", cache = false })
  T.eq(ok, false)
  T.ok(cuda.is_error(e), tostring(e))
  T.eq(e.code, 6); T.eq(e.name, "NVRTC_ERROR_COMPILATION"); T.eq(e.fn, "cuda.compile"); T.eq(e.poisoned, false)
  T.ok(tostring(e):find("^cuda.compile: bad.cu: compilation failed:") and
       tostring(e):find('bad.cu:1: error: identifier "undeclared" is undefined', 1, true), tostring(e))
  T.eq(cuda.is_error(tostring(e)), false)
  T.eq(cuda.is_error({}), false)
  -- uncaught: lua5.4 prints the error's text (its __tostring), as gpulab prints the message
  local out, code = lua54(nil, "-e " .. q(string.format("cuda.compile(%q, {name = 'bad.cu', cache = false})", bad)))
  T.eq(code, 1, out)
  T.ok(out:find("lua5.4: (command line):1: cuda.compile: bad.cu: compilation failed:\nbad.cu:1: error:", 1, true), out)
end)

T.test("cuda.run_isolated raises naming itself; the harness starts its children through lua5.4", function()
  local msg = "cuda.run_isolated: runs the script in a child gpulab process, which only the gpulab executable starts"
  T.raises(function() cuda.run_isolated("tests/lab_fixtures/child_exit.lua", { timeout = 5 }) end, msg)
  T.raises(function() cuda.run_isolated({ { "a.lua" }, { "b.lua" } }) end, msg)
  -- lab:child: every way a child ends reads as under gpulab (exit codes, arguments, environment,
  -- a Lua error, a crash, deadlines)
  local env = "GPULAB_ISOLATE_UNSET=present"
  local lab = "tests/lab_fixtures/children_lab.lua"
  local theirs, c1 = sh(string.format("%s %s %s", env, q(GPULAB), lab))
  local ours, c2 = lua54(env, lab)
  T.eq(c1, 0, theirs)
  T.eq(c2, 0, ours)
  T.ok(ours:find("\nsegv | crashed | nil | 11 | ", 1, true) and ours:find("\nignore | timeout | nil | 15 | ", 1, true),
    ours)
  T.eq(first_difference(theirs, ours), nil)
  -- --gpus's children: L:sweep over the stand-in's three devices, as `gpulab --gpus=all` spreads it
  local dir = T.tmpdir()
  theirs, c1 = sh(string.format("GPULAB_FAKE_DEVICES=3 %s --gpus=all tests/lab_fixtures/sweep_lab.lua --json %s/a.json",
    q(GPULAB), q(dir)))
  ours, c2 = lua54("GPULAB_FAKE_DEVICES=3 GPULAB_GPUS=all",
    "tests/lab_fixtures/sweep_lab.lua --json " .. q(dir .. "/b.json"))
  T.eq(c1, 0, theirs)
  T.eq(c2, 0, ours)
  T.ok(ours:find("fill: 7 configurations over 3 GPUs", 1, true), ours)
  local a = json.decode(assert(T.read(dir .. "/a.json")))
  local b = json.decode(assert(T.read(dir .. "/b.json")))
  T.ok(deep_equal(a.tables, b.tables, "", {}), "the sweep's table")
  T.ok(deep_equal(a.verdicts, b.verdicts, "", {}), "the verdicts")
  T.eq(#b.tables[1].rows, 7)
  os.execute("rm -rf " .. q(dir))
end)

T.test("help() is reachable by require: gpulab.help reads the description under cuda.home", function()
  local text = require("gpulab.help").text(cuda.compile)
  T.ok(text:find("cuda.compile(", 1, true), text)
  T.ok(require("gpulab.help").text(cuda.host("u8", 1)):find("cuda.host", 1, true))
end)

T.test("the state closes cleanly; os.exit leaves through the module's exit handlers (a trace is written)", function()
  local dir = T.tmpdir()
  local out, code = lua54(nil, "-e " .. q(string.format([[
    cuda.trace(%q)
    local k = cuda.load(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry e() { ret; }"):kernel("e")
    k:launch({grid = 1, block = 1})
    cuda.sync()
    os.exit(3)]], dir .. "/t.json")))
  T.eq(code, 3, out)
  local trace = json.decode(assert(T.read(dir .. "/t.json"), "the trace file"))
  local launches = 0
  for _, ev in ipairs(trace.traceEvents) do if tostring(ev.name):find("^e") then launches = launches + 1 end end
  T.ok(launches >= 1, T.read(dir .. "/t.json"))
  out, code = lua54(nil, "-e " .. q("local d = cuda.array('f32', 4); d:fill(1); return"))
  T.eq(code, 0, out)
  T.eq(out, "")
  os.execute("rm -rf " .. q(dir))
end)

T.test("cuda.so exports luaopen_cuda alone and carries no Lua: the interpreter's is used", function()
  local nm = assert(os.getenv("GL_NM"), "GL_NM")
  local defined = sh(string.format("%s -D --defined-only %s", q(nm), q(MODULE_DIR .. "/cuda.so")))
  local names = {}
  for name in defined:gmatch("%s([%w_]+)\n") do names[#names + 1] = name end
  T.eq(table.concat(names, ","), "luaopen_cuda", defined)
  local undefined = sh(string.format("%s -D --undefined-only %s", q(nm), q(MODULE_DIR .. "/cuda.so")))
  T.ok(undefined:find("lua_pushstring", 1, true) and undefined:find("luaL_checkinteger", 1, true), undefined)
end)

T.test("gpulab-scm-1.rockspec: a Lua 5.4 rock built with CMake into the tree's module folders", function()
  local spec = {}
  local chunk = assert(loadfile("gpulab-scm-1.rockspec", "t", spec))
  chunk()
  T.eq(spec.package, "gpulab"); T.eq(spec.version, "scm-1"); T.eq(spec.rockspec_format, "3.0")
  T.eq(spec.dependencies[1], "lua >= 5.4, < 5.5")
  T.eq(spec.build.type, "cmake")
  local v = spec.build.variables
  T.eq(v.CMAKE_INSTALL_PREFIX, "$(PREFIX)"); T.eq(v.LUA_INCLUDE_DIR, "$(LUA_INCDIR)")
  T.eq(v.GPULAB_LUA_CMOD_DIR, "$(LIBDIR)"); T.eq(v.GPULAB_LUA_LMOD_DIR, "$(LUADIR)")
  -- the variables it sets are the build's own
  local cmake = assert(T.read("CMakeLists.txt"))
  for _, name in ipairs({ "GPULAB_LUA_CMOD_DIR", "GPULAB_LUA_LMOD_DIR" }) do
    T.ok(cmake:find("set(" .. name .. " ", 1, true), name .. " is a cache variable of CMakeLists.txt")
  end
end)

T.done()
