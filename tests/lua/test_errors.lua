-- test_errors.lua — the two error forms gpulab raises, pinned through the driver stand-in.
--   bad arguments: plain strings "bad argument #N to 'fn' (...)", numbered as luaL_argerror
--     numbers them (self not counted in a method call), option fields as "field 'x': ...";
--   CUDA and NVRTC failures: cuda.error objects (code, name, fn, call, poisoned, launches,
--     message) whose text is the message a string error had, printed the same by the CLI,
--     the REPL (tests/repl/cuda_error.pty) and cuda.run_isolated.
-- GPULAB_ERRORS_CASE picks the part: "format" (no failure injected), "oom"
-- (GPULAB_FAKE_FAIL=cuMemAlloc:2:1) or "sticky" (GPULAB_FAKE_FAIL=cuCtxSynchronize:700).
local T = dofile("tests/lua/t.lua")

local CASE = os.getenv("GPULAB_ERRORS_CASE") or "format"
local HERE = "tests/lua/test_errors.lua"

local PTX = [[
.version 8.0
.target sm_90
.address_size 64

.visible .entry use_array(
	.param .u64 p
)
{
	ret;
}
]]

-- The message of the error fn raises, which must be a plain string.
local function arg_error(fn, ...)
  local ok, err = pcall(fn, ...)
  T.eq(ok, false, "the call fails")
  T.eq(type(err), "string", "argument errors are plain strings")
  return err
end

-- The cuda.error fn raises.
local function cuda_error(fn, ...)
  local ok, err = pcall(fn, ...)
  T.eq(ok, false, "the call fails")
  T.ok(cuda.is_error(err), "a cuda.error, got " .. type(err) .. ": " .. tostring(err))
  return err
end

local function line_here() return debug.getinfo(2, "l").currentline end

if CASE == "format" then
  T.test("functions: numbered from 1, named as the contract names them, position first", function()
    local line = line_here() + 1
    local err = arg_error(function() return cuda.array("half", 4) end)
    T.eq(err, string.format("%s:%d: bad argument #1 to 'cuda.array' (unknown dtype 'half'; known: f16, bf16, " ..
      "f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool)", HERE, line))
    T.eq(arg_error(cuda.array, "f32", "x"), "bad argument #2 to 'cuda.array' (element count or shape table " ..
      "expected, got string)", "called from C (pcall): no position, as luaL_argerror")
    T.ok(arg_error(function() cuda.run_isolated("") end):find(
      "bad argument #1 to 'cuda.run_isolated' (script path is empty)", 1, true))
    T.ok(arg_error(function() cuda.compile("", { arch = 90 }) end):find(
      "bad argument #2 to 'cuda.compile' (field 'arch': string expected, got number)", 1, true))
  end)

  T.test("methods: self is not counted when called with ':', as luaL_argerror does", function()
    local h = cuda.host("f32", 4)
    -- Lua's own library, for comparison: the same call shapes give the same numbers
    T.ok(arg_error(function() return ("x"):rep("y") end):find("bad argument #1 to 'rep'", 1, true))
    T.ok(arg_error(function() return ("x").rep("x", "y") end):find("bad argument #2 to 'rep'", 1, true))
    T.ok(arg_error(function() h:fill("x") end):find(
      "bad argument #1 to 'h:fill' (number expected, got string)", 1, true))
    T.ok(arg_error(function() h.fill(h, "x") end):find(
      "bad argument #2 to 'h:fill' (number expected, got string)", 1, true))
    T.ok(arg_error(function() h:copy_from(42) end):find(
      "bad argument #1 to 'h:copy_from' (cuda.array or cuda.host expected, got number)", 1, true))
    T.ok(arg_error(function() h.copy_from(42, h) end):find(
      "bad argument #1 to 'h:copy_from' (cuda.host expected, got number)", 1, true))
    local impostor = { fill = h.fill }
    T.ok(arg_error(function() impostor:fill(1) end):find(
      "calling 'h:fill' on bad self (cuda.host expected, got table)", 1, true))
  end)

  T.test("option fields are reported against the options table's argument", function()
    local d, src = cuda.array("f32", 4), cuda.array("f32", 4)
    T.ok(arg_error(function() d:copy_from(src, { count = "x" }) end):find(
      "bad argument #2 to 'd:copy_from' (field 'count': integer expected, got string)", 1, true))
    T.ok(arg_error(function() d:copy_from(src, { cnt = 1 }) end):find(
      "bad argument #2 to 'd:copy_from' (unknown field 'cnt' (known: stream, count,", 1, true))
    T.ok(arg_error(function() d:copy_from(src, { stream = 5 }) end):find(
      "bad argument #2 to 'd:copy_from' (field 'stream': cuda.stream expected, got number)", 1, true))
    local s = cuda.stream()
    T.ok(arg_error(function() s:sync { timeout = "1" } end):find(
      "bad argument #1 to 's:sync' (field 'timeout': number expected, got string)", 1, true))
    local k = cuda.load(PTX):kernel("use_array")
    T.ok(arg_error(function() k:launch({ grid = 0, block = 1 }, d) end):find(
      "bad argument #1 to 'k:launch' (field 'grid': x = 0 is out of range 1..", 1, true))
    T.ok(arg_error(function() k:launch({ grid = 1, block = 1, stream = s }, 1.5) end):find(
      "bad argument #2 to 'k:launch' (use_array parameter 1 (u64): u64 (8 bytes) expected, got 1.5", 1, true))
    local prepared = k:prepare({ grid = 1, block = 1 }, d)
    T.ok(arg_error(function() prepared:set(2, d) end):find(
      "bad argument #1 to 'prepared:set' (argument index 1..1 expected, got 2)", 1, true))
    s:free()
  end)

  T.test("a freed argument is a bad argument; a freed self reads as liolib's closed file", function()
    local d, h = cuda.array("f32", 4), cuda.host("f32", 4)
    d:free()
    T.ok(arg_error(function() h:copy_from(d) end):find(
      "bad argument #1 to 'h:copy_from' (cuda.array was freed)", 1, true))
    T.ok(arg_error(function() d:fill(1) end):find("d:fill: cuda.array was freed", 1, true))
  end)

  T.test("a wait past its deadline raises a cuda.error naming the launches in flight", function()
    local busy = assert(os.getenv("GPULAB_FAKE_BUSY_FILE"), "run with GPULAB_FAKE_BUSY_FILE set")
    local s = cuda.stream()
    local d = cuda.array("f32", 4)
    local k = cuda.load(PTX):kernel("use_array")
    assert(io.open(busy, "w")):close()
    k:launch({ grid = { 2, 3 }, block = 32, stream = s }, d)
    local e = cuda_error(function() s:sync { timeout = 0.05 } end)
    os.remove(busy)
    T.eq(e.code, 909); T.eq(e.name, "CUDA_ERROR_TIMEOUT"); T.eq(e.fn, "s:sync"); T.eq(e.timeout, 0.05)
    T.eq(e.poisoned, false)
    T.eq(e.launches.n, 1); T.eq(e.launches[1].kernel, "use_array"); T.eq(e.launches[1].stream, "stream")
    T.eq(table.concat(e.launches[1].grid, ","), "2,3,1"); T.eq(table.concat(e.launches[1].block, ","), "32,1,1")
    T.ok(tostring(e):find("^s:sync: timed out after 0.05 s waiting for the GPU; 1 launch since the last good " ..
      "sync: use_array<<<%(2,3,1%), 32>>> on a stream"), tostring(e))
    s:sync()
    s:free()
  end)

  T.test("NVRTC failures are cuda.errors too, with the compiler's log", function()
    local line = line_here() + 1
    local e = cuda_error(function() cuda.compile("this is not C++", { name = "bad.cu" }) end)
    T.eq(e.code, 6); T.eq(e.name, "NVRTC_ERROR_COMPILATION"); T.eq(e.fn, "cuda.compile")
    T.eq(e.poisoned, false); T.eq(e.launches.n, 0)
    T.ok(e.log:find("bad.cu:1: error", 1, true), e.log)
    local prefix = string.format("%s:%d: cuda.compile: bad.cu: compilation failed:\n", HERE, line)
    T.eq(e.message:sub(1, #prefix), prefix, "the caller's position, as luaL_error gave it")
  end)

  T.test("a missing kernel is the driver's CUDA_ERROR_NOT_FOUND", function()
    local e = cuda_error(function() cuda.load(PTX):kernel("nope") end)
    T.eq(e.code, 500); T.eq(e.name, "CUDA_ERROR_NOT_FOUND"); T.eq(e.fn, "mod:kernel")
    T.eq(e.call, "cuModuleGetFunction")
    T.ok(tostring(e):find("mod:kernel: no kernel named 'nope' in this module", 1, true), tostring(e))
  end)
end

if CASE == "oom" then
  local e -- the one failed allocation (only the first cuMemAlloc is made to fail)
  T.test("a failed call: every field, and the old text through tostring, .. and string methods", function()
    e = cuda_error(cuda.array, "f32", 16)
    T.eq(e.code, 2); T.eq(e.name, "CUDA_ERROR_OUT_OF_MEMORY"); T.eq(e.fn, "cuda.array"); T.eq(e.call, "cuMemAlloc")
    T.eq(e.poisoned, false); T.eq(e.launches.n, 0); T.eq(#e.launches, 0)
    T.eq(getmetatable(e), "cuda.error")
    T.eq(e.message, tostring(e))
    T.ok(tostring(e):find("^cuda.array: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY %(2%)"), tostring(e))
    T.eq("x: " .. e, "x: " .. e.message); T.eq(e .. "!", e.message .. "!")
    T.eq(e:find("OUT_OF_MEMORY", 1, true), e.message:find("OUT_OF_MEMORY", 1, true))
    T.eq(string.format("%s", e), e.message)
    T.eq(cuda.is_error(e.message), false); T.eq(cuda.is_error({}), false)
  end)

  T.test("error(e, level) passes the object on unchanged", function()
    T.ok(e, "the first test made the error")
    local function rethrow() error(e, 2) end
    local ok, again = pcall(rethrow)
    T.eq(ok, false); T.ok(rawequal(again, e), "the same object, no position added")
    T.ok(cuda.array("f32", 4), "only the first allocation was made to fail")
  end)
end

-- stderr of `gpulab args...` with the driver failing the first context sync.
local function child_stderr(...)
  local bin = arg[-1]
  local err = os.tmpname()
  local words = {}
  for _, a in ipairs({ ... }) do words[#words + 1] = string.format("%q", a) end
  os.execute(string.format("GPULAB_FAKE_FAIL=cuCtxSynchronize:700 %q %s 2>%s", bin, table.concat(words, " "), err))
  local text = T.read(err)
  os.remove(err)
  return text
end

if CASE == "sticky" then
  T.test("a sticky error: poisoned, the launches in flight, then the poisoned error", function()
    local d = cuda.array("f32", 4)
    local k = cuda.load(PTX):kernel("use_array")
    k:launch({ grid = 4, block = 64 }, d)
    k:launch({ grid = 1, block = { 8, 8 } }, d)
    local e = cuda_error(cuda.sync)
    T.eq(e.code, 700); T.eq(e.name, "CUDA_ERROR_ILLEGAL_ADDRESS"); T.eq(e.fn, "cuda.sync")
    T.eq(e.call, "context sync"); T.eq(e.poisoned, true)
    T.eq(e.launches.n, 2); T.eq(#e.launches, 2)
    T.eq(e.launches[2].kernel, "use_array"); T.eq(e.launches[2].stream, "default")
    T.eq(table.concat(e.launches[2].block, ","), "8,8,1")
    T.ok(tostring(e):find("^cuda.sync: context sync: CUDA_ERROR_ILLEGAL_ADDRESS %(700%)"), tostring(e))
    T.ok(tostring(e):find("; 2 launches since the last good sync: use_array<<<4, 64>>> on the default stream, " ..
      "use_array<<<1, (8,8,1)>>> on the default stream\n(the context is now poisoned", 1, true), tostring(e))
    local line = line_here() + 1
    local p = cuda_error(function() return cuda.array("f32", 4) end)
    T.eq(p.code, 700); T.eq(p.poisoned, true); T.eq(p.fn, "cuda.array"); T.eq(p.launches.n, 2)
    T.ok(p.message:find(string.format("^%s:%d: cuda%%.array: context poisoned by cuda%%.sync: ", HERE:gsub("%.", "%%."),
      line)), p.message)
  end)

  T.test("the CLI prints a cuda.error exactly as the string it replaces, traceback included", function()
    local direct = child_stderr("-e", "cuda.sync()")
    T.ok(direct:find("^[^\n]*gpulab: cuda%.sync: context sync: CUDA_ERROR_ILLEGAL_ADDRESS %(700%)"), direct)
    T.ok(direct:find("\nstack traceback:\n\t[C]: in function 'cuda.sync'\n", 1, true), direct)
    local object = child_stderr("-e", "local ok, e = pcall(cuda.sync) error(e)")
    local text = child_stderr("-e", "local ok, e = pcall(cuda.sync) error(tostring(e), 0)")
    T.eq(object, text)
  end)

  T.test("cuda.run_isolated reports the child's cuda.error as before", function()
    local script = os.tmpname()
    T.write(script, "cuda.sync()\n")
    local r = cuda.run_isolated(script, { env = { GPULAB_FAKE_FAIL = "cuCtxSynchronize:700" }, timeout = 60 })
    os.remove(script)
    T.eq(r.status, "error")
    T.ok(r.stderr:find(": cuda.sync: context sync: CUDA_ERROR_ILLEGAL_ADDRESS (700)", 1, true), r.stderr)
    T.ok(r.stderr:find("stack traceback:", 1, true), r.stderr)
  end)
end

T.done()
