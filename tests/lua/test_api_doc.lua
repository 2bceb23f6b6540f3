-- The API description's tools: tools/api_check.lua catches an undocumented function, method or
-- field and a described one that is gone; apidoc refuses a malformed entry; help() finds entries
-- by function, object and name. Runs under the driver stand-in.
local T = dofile("tests/lua/t.lua")
local apidoc = dofile("lua/gpulab/apidoc.lua")
local help = require("gpulab.help")

local BIN = assert(os.getenv("GPULAB_BIN"), "run with GPULAB_BIN set")
local TMP = os.tmpname()
local good = T.read("docs/api.lua")

-- Runs api_check over `text`; returns whether it passed and what it wrote.
local function check(text)
  T.write(TMP, text)
  local p = io.popen(string.format("%s tools/api_check.lua %s 2>&1", BIN, TMP))
  local out = p:read("a")
  local ok = p:close()
  return ok, out
end

local function without(text, plain, repl)
  local i, j = text:find(plain, 1, true)
  assert(i, "the description holds " .. plain)
  return text:sub(1, i - 1) .. (repl or "") .. text:sub(j + 1)
end

T.test("the description matches what gpulab registers", function()
  local ok, out = check(good)
  T.ok(ok, "api_check passes: " .. out)
end)

T.test("an undocumented function fails the check", function()
  local ok, out = check(without(good, '{ "cuda.now", sig = "cuda.now()"', '{ "cuda.now_gone", sig = "cuda.now()"'))
  T.ok(not ok, "api_check fails")
  T.ok(out:find("undocumented: cuda.now (function)", 1, true), out)
  T.ok(out:find("described but gone: cuda.now_gone", 1, true), out)
end)

T.test("an entry for one build's function may be absent from another; others may not", function()
  -- cuda.launch_timing exists only in builds configured with -DGPULAB_LAUNCH_TIMING=ON
  local timing = cuda.launch_timing ~= nil
  local ok, out = check(good)
  T.ok(ok, "api_check passes with or without the launch-timing build: " .. out)
  ok, out = check(without(good, 'build = "GPULAB_LAUNCH_TIMING",', ''))
  T.eq(ok == true, timing, "without build =, the entry must exist: " .. out)
  if not timing then T.ok(out:find("described but gone: cuda.launch_timing", 1, true), out) end
  T.write(TMP, without(good, 'build = "GPULAB_LAUNCH_TIMING",', 'build = true,'))
  T.raises(function() apidoc.load(TMP) end, "cuda.launch_timing: build must be a non-empty string")
end)

T.test("an undocumented method and a gone one fail the check", function()
  local ok, out = check(without(good, '{ "cuda.host:dot", sig', '{ "cuda.host:dot_gone", sig'))
  T.ok(not ok, "api_check fails")
  T.ok(out:find("undocumented: cuda.host:dot (method)", 1, true), out)
  T.ok(out:find("described but gone: cuda.host:dot_gone", 1, true), out)
end)

T.test("an undocumented field of a table object fails the check", function()
  local ok, out = check(without(good, '{"warp_size", "integer", "threads per warp"},'))
  T.ok(not ok, "api_check fails")
  T.ok(out:find("undocumented: field warp_size of cuda.device", 1, true), out)
end)

T.test("an undocumented lab method fails the check", function()
  local ok, out = check(without(good, '{ "Lab:record", sig', '{ "Lab:recorded", sig'))
  T.ok(not ok, "api_check fails")
  T.ok(out:find("undocumented: Lab:record (method)", 1, true), out)
end)

T.test("a malformed entry is refused by name", function()
  T.write(TMP, without(good, 'returns = { {"integer", "devices"} }', 'returns = { {"intger", "devices"} }'))
  T.raises(function() apidoc.load(TMP) end, "cuda.count: return 1: unknown type 'intger'")
  T.write(TMP, without(good, 'summary = "number of devices"', 'summery = "number of devices"'))
  T.raises(function() apidoc.load(TMP) end, "cuda.count: summary must be a non-empty string")
end)

T.test("help finds entries by function, object and name", function()
  T.ok(help.text(cuda.compile):find("cuda.compile(src [, opts]) -> cuda.program", 1, true), "by function")
  T.ok(help.text("compile_file"):find("cuda.compile_file(path [, opts])", 1, true), "by short name")
  T.ok(help.text("view"):find("cuda.array:view, cuda.host:view", 1, true), "an ambiguous name lists both")
  local h = cuda.host("f32", 4)
  T.ok(help.text(h):find("class cuda.host", 1, true), "by object")
  T.ok(help.text(h):find("methods: add apply axpy", 1, true), "an object's methods")
  T.ok(help.text(h.sum):find("h:sum() -> number", 1, true), "a method looked up in C")
  local d = cuda.array("f32", 4)
  T.ok(help.text(d.fill):find("d:fill(v[, stream])", 1, true), "a device array's method")
  T.ok(help.text(cuda.stream().sync):find("s:sync{timeout=}", 1, true), "a method from a table")
  T.ok(help.text(require("gpulab.lab").summarize):find("harness.summarize", 1, true), "a harness function")
  T.ok(help.text("no_such_thing"):find("nothing is described as 'no_such_thing'", 1, true), "unknown name")
  T.ok(help.text(print):find("not part of gpulab's API", 1, true), "a foreign function")
  T.ok(help.text():find("Memory: cuda.array", 1, true), "the overview")
  h:free(); d:free()
end)

T.test("help(x) runs none of x's metamethods", function()
  local ran = {}
  local mt = {}
  for _, m in ipairs({ "__eq", "__index", "__len", "__tostring", "__name_call" }) do
    mt[m] = function() ran[#ran + 1] = m; error("help ran " .. m) end
  end
  local x = setmetatable({}, mt)
  T.ok(help.text(x):find("is not a gpulab object", 1, true))
  T.eq(#ran, 0, "metamethods run: " .. table.concat(ran, ","))
end)

os.remove(TMP)
T.done()
