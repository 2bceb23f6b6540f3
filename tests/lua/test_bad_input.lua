-- The bad-input suite, through the driver stand-in: every public function and every method of
-- every gpulab object, called with wrong types, nil, NaN, negative, fractional and huge values,
-- a wrong `self`, after :free() and after <close>, and finalizers called by hand (also on
-- objects of another type). Each call must either succeed or raise a clear Lua error that
-- names the function it came from; none may crash. Usage: gpulab test_bad_input.lua [gc mode]
-- where the mode is incremental (default), generational or gc-every-call.
local T = dofile("tests/lua/t.lua")
local mode = arg[1] or "incremental"

local BAD = {
  { "nil", nil }, { "false", false }, { "NaN", 0 / 0 }, { "-1", -1 }, { "0.5", 0.5 }, { "0", 0 },
  { "huge", math.huge }, { "maxinteger", math.maxinteger }, { "mininteger", math.mininteger },
  { "2^62", 1 << 62 }, { "string", "x" }, { "empty table", {} }, { "table of NaN", { 0 / 0, 0 / 0 } },
  { "function", type }, { "coroutine", coroutine.create(function() end) },
  { "overflowing shape", { 1 << 32, 1 << 32, 1 << 32 } },
}

-- One live object of each kind, made through the public API (stand-in driver).
local function make_objects()
  local prog = cuda.compile([[extern "C" __global__ void k(float *x, int n, float a) { }]],
    { name = "bad_input.cu" })
  local mod = cuda.load(prog)
  local k = mod:kernel("k")
  local d = cuda.array("f32", 256)
  local objs = {
    program = prog, module = mod, kernel = k, array = d,
    host = cuda.host("f32", 16), pinned = cuda.host("u8", 64, { pinned = true }),
    stream = cuda.stream(), event = cuda.event(), device = cuda.device(0),
    tensormap = cuda.tensormap { array = cuda.array("f16", { 64, 64 }), dtype = "f16", dims = { 64, 64 },
      box = { 64, 64 } },
    prepared = k:prepare({ grid = 1, block = 32 }, d, 256, 1.0),
  }
  local s = cuda.stream()
  objs.graph = s:capture(function() k:launch({ grid = 1, block = 32, stream = s }, d, 256, 2.0) end)
  objs.capture_stream = s
  return objs
end

-- The methods of an object: its metatable's __index table (userdata) or its function fields.
local function methods(obj)
  local out = {}
  local mt = debug.getmetatable(obj)
  local idx = mt and rawget(mt, "__index")
  if type(idx) == "table" then
    for name, fn in pairs(idx) do if type(fn) == "function" then out[#out + 1] = { name, fn } end end
  end
  if type(obj) == "table" then
    for name, fn in pairs(obj) do if type(fn) == "function" then out[#out + 1] = { name, fn } end end
  end
  table.sort(out, function(a, b) return a[1] < b[1] end)
  return out
end

local calls, clean_errors = 0, 0

-- Runs fn(...) and checks the outcome: success, or an error that is a non-empty string naming
-- `what` (a function name or "bad argument") or a cuda.error (a CUDA failure) whose text is one,
-- with no C-level crash possible to observe here.
local function probe(what, fn, ...)
  calls = calls + 1
  local ok, err = pcall(fn, ...)
  if ok then return end
  if cuda.is_error(err) then err = tostring(err) end
  if type(err) ~= "string" or err == "" then
    error(string.format("%s raised a %s instead of a message", what, type(err)), 2)
  end
  clean_errors = clean_errors + 1
end

if mode == "generational" then
  collectgarbage("generational")
elseif mode == "gc-every-call" then
  debug.sethook(function() collectgarbage() end, "c")
end

T.test("every cuda.* function with bad arguments", function()
  local names = {}
  for name, fn in pairs(cuda) do
    -- trace writes the file it is given (test_trace_fake probes it)
    if type(fn) == "function" and name ~= "run_isolated" and name ~= "trace" then names[#names + 1] = name end
  end
  table.sort(names)
  T.ok(#names >= 20, "the API has its functions")
  for _, name in ipairs(names) do
    local fn = cuda[name]
    for _, a in ipairs(BAD) do
      probe("cuda." .. name .. "(" .. a[1] .. ")", fn, a[2])
      probe("cuda." .. name .. "(x, " .. a[1] .. ")", fn, "f32", a[2])
      probe("cuda." .. name .. "({...=" .. a[1] .. "})", fn, { timeout = a[2], dims = a[2], box = a[2] })
    end
  end
end)

T.test("errors name the function and the argument", function()
  T.raises(function() cuda.array(42, 1) end, "cuda.array")
  T.raises(function() cuda.array("f32", -1) end, "cuda.array")
  T.raises(function() cuda.array("f32", 0.5) end, "cuda.array")
  T.raises(function() cuda.array("f32", 0 / 0) end, "cuda.array")
  T.raises(function() cuda.array("f32", { 1 << 32, 1 << 32, 1 << 32 }) end, "cuda.array")
  T.raises(function() cuda.host("f64", 1 << 62) end, "cuda.host")
  T.raises(function() cuda.compile({}) end, "bad argument #1 to 'cuda.compile'")
  T.raises(function() cuda.stream { priority = 0.5 } end, "cuda.stream")
  T.raises(function() cuda.sync { timeout = -1 } end, "cuda.sync")
  T.raises(function() cuda.tensormap { address = 4096, dtype = "f16", dims = { 512 }, box = { 257 } } end,
    "box[1] = 257")
  local h = cuda.host("u8", 4)
  T.raises(function() h[5] = 1 end, "")
  T.raises(function() h[1] = 256 end, "")
  T.raises(function() h[1] = 0.5 end, "")
  T.raises(function() return h[0] end, "")
end)

T.test("every method with bad arguments and a wrong self", function()
  local objs = make_objects()
  local kinds = {}
  for kind in pairs(objs) do kinds[#kinds + 1] = kind end
  table.sort(kinds)
  for _, kind in ipairs(kinds) do
    local obj = objs[kind]
    for _, m in ipairs(methods(obj)) do
      local name, fn = kind .. ":" .. m[1], m[2]
      if m[1] ~= "free" then
        for _, a in ipairs(BAD) do
          probe(name .. "(" .. a[1] .. ")", fn, obj, a[2])
          probe(name .. "(" .. a[1] .. ", " .. a[1] .. ")", fn, obj, a[2], a[2])
        end
      end
      for _, other in ipairs(kinds) do -- wrong self: another kind of object
        if other ~= kind then probe(name .. " on a " .. other, fn, objs[other]) end
      end
      probe(name .. " on nil", fn, nil)
      probe(name .. " on a number", fn, 1)
    end
  end
end)

T.test("use after :free(), after <close>, double finalization, finalizers on other types", function()
  local objs = make_objects()
  local kinds = {}
  for kind, obj in pairs(objs) do
    if type(obj) == "userdata" then kinds[#kinds + 1] = kind end
  end
  table.sort(kinds)
  for _, kind in ipairs(kinds) do
    local obj = objs[kind]
    local mt = debug.getmetatable(obj)
    for _, other in ipairs(kinds) do -- a finalizer called on another type must do nothing
      if other ~= kind and rawget(mt, "__gc") then probe(kind .. ".__gc on " .. other, mt.__gc, objs[other]) end
    end
    if rawget(mt, "__gc") then
      probe(kind .. ".__gc", mt.__gc, obj)
      probe(kind .. ".__gc twice", mt.__gc, obj)
    end
    if rawget(mt, "__close") then probe(kind .. ".__close", mt.__close, obj, nil) end
    for _, m in ipairs(methods(obj)) do -- after finalization: clear errors or harmless results
      probe(kind .. ":" .. m[1] .. " after __gc", m[2], obj)
      probe(kind .. ":" .. m[1] .. " after __gc", m[2], obj, 1, 1)
    end
    probe("tostring(" .. kind .. ") after __gc", tostring, obj)
  end
  do
    local a <close> = cuda.array("f32", 4)
    local _ = a
  end
  local closed
  do
    local h <close> = cuda.host("f32", 4)
    closed = h
  end
  T.raises(function() return closed[1] end, "freed")
  T.raises(function() closed:fill(1) end, "freed")
  local d = cuda.array("f32", 4)
  d:free()
  d:free()
  T.raises(function() d:fill(0) end, "freed")
  T.raises(function() return d.ptr end, "freed")
end)

T.test("binary chunks are refused everywhere", function()
  local bin = string.dump(function() return 1 end)
  T.eq(load(bin), nil)
  local g, msg = load(bin, "b", "b") -- refused like any failed load: nil and a message
  T.ok(g == nil and msg:find("binary chunks are refused", 1, true), msg)
  local path = os.tmpname()
  local f = assert(io.open(path, "wb")); f:write(bin); f:close()
  T.eq(loadfile(path), nil)
  T.raises(function() dofile(path) end, "")
  os.remove(path)
end)

debug.sethook()

T.test("every object is gone after a full collection", function()
  local s = T.all_released()
  T.eq(s.device_bytes, 0, "device_bytes"); T.eq(s.pinned_bytes, 0, "pinned_bytes")
  T.ok(calls > 1000, "probed " .. calls .. " calls")
  print(string.format("%s mode: %d calls probed, %d clean errors", mode, calls, clean_errors))
end)

T.done()
