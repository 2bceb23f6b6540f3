-- test_reentrant_fake.lua — every method of every class and every cuda.* function, called while a
-- script's code frees every gpulab object: (1) the arguments are tables whose metamethods free them
-- all (__index, __len, __tostring, __call, __eq, __lt, __le, __concat), (2) a finalizer that frees
-- them all runs from an allocation inside the call, (3) a callback argument frees them all, (4) a call
-- hook frees them all when the call starts or when it calls a function (a callback, a C step), (5) a
-- finalizer run from an allocation inside the call rewrites every table argument (options with a
-- stream, an L2 window's array, a tensor map's array): each field set to nil or to a string, and in
-- a third of the trials frees them all. Each call must return or raise a message (a string or a cuda.error); none may
-- crash, and the sanitizer build runs the same. Objects come from tests/lua/class_objects.lua,
-- through the stand-ins (tests/classes.cmake's environment).
-- Usage: gpulab test_reentrant_fake.lua [meta|finalizer|callback|hook|rewrite]
local T = dofile("tests/lua/t.lua")
local make_objects = dofile("tests/lua/class_objects.lua")
local registry = debug.getregistry()
local only = arg[1]

-- Functions left out: cuda.run_isolated forks, cuda.trace writes the file it is given.
local SKIP = { ["cuda.run_isolated"] = true, ["cuda.trace"] = true }

-- One object of every class, made once; a trial makes again those a script can free.
local shared = make_objects()

local objs -- the objects of the current trial

local function free_all()
  for _, o in pairs(objs) do -- those without a free (a program, a sass listing) raise, caught here
    if type(o) == "userdata" or type(o) == "table" then pcall(function() o:free() end) end
  end
end

-- own keys: what the call reads (raw) besides; the metamethods answer everything else
local function freeing_table(value, own)
  local function free_then(v) return function() free_all(); return v end end
  local t = {}
  for k, v in pairs(own or {}) do t[k] = v end
  return setmetatable(t, {
    __index = function() free_all(); return value end,
    __len = free_then(1), __tostring = free_then("t"), __call = free_then(nil), __eq = free_then(false),
    __lt = free_then(false), __le = free_then(false), __concat = free_then("c"),
  })
end

-- What precedes the hazardous argument: shapes most functions take, so that the call gets past its
-- first checks. Built from the trial's own objects.
local function leading_args()
  local k, d, s = objs["cuda.kernel"], objs["cuda.array"], objs["cuda.stream"]
  local function launch(st) k:launch({ grid = 1, block = 32, stream = st }, d, 1) end
  return { {}, { launch }, { launch, s }, { "f32" }, { "f32", 16 }, { d }, { s }, { 16 }, { d, d },
    { { grid = 1, block = 32 } }, { { grid = 1, block = 32 }, d }, { objs["cuda.host"] }, { objs["cuda.event"] },
    { "fmachain" }, { "non_portable_cluster_size_allowed" },
    { { grid = 1, block = 32, stream = s, l2_window = { array = d } }, d, 1 } } -- a launch's whole arguments
end
objs = shared
local N_LEADING = #leading_args()

-- Every callable to probe: "class:method" for each class's __methods, "cuda.name" for each function
-- of cuda and of its sub-tables (cuda.nccl, ...). Each entry: name, function, class (or nil).
local function targets()
  local list = {}
  for name, mt in pairs(registry) do
    if type(name) == "string" and name:match("^cuda%.") and type(mt) == "table" and rawget(mt, "__name") == name then
      for m, fn in pairs(rawget(mt, "__methods") or {}) do
        if m ~= "free" then list[#list + 1] = { name .. ":" .. m, fn, name } end
      end
    end
  end
  local function functions(prefix, t)
    for name, v in pairs(t) do
      if type(v) == "function" and not SKIP[prefix .. name] then list[#list + 1] = { prefix .. name, v } end
    end
  end
  functions("cuda.", cuda)
  for name, v in pairs(cuda) do
    if type(v) == "table" and getmetatable(v) == nil then functions("cuda." .. name .. ".", v) end
  end
  table.sort(list, function(a, b) return a[1] < b[1] end)
  return list
end

local calls, messages = 0, 0
local NONE = {} -- trial's `last` when the call gets only the leading arguments
local function call(name, fn, args)
  calls = calls + 1
  local ok, err = pcall(fn, table.unpack(args, 1, args.n))
  if ok then return end
  if cuda.is_error(err) then err = tostring(err) end
  if type(err) ~= "string" or err == "" then error(name .. " raised a " .. type(err) .. " instead of a message", 0) end
  messages = messages + 1
end

-- One trial: fresh objects, the arguments, the call, then everything released. make_last, when
-- given, builds the last argument from the trial's objects instead.
local function trial(target, leading, last, run, make_last)
  objs = make_objects(shared)
  if make_last then last = make_last() end
  local args = { n = 0 }
  local function push(v) args.n = args.n + 1; args[args.n] = v end
  if target[3] then push(objs[target[3]]) end
  for _, v in ipairs(leading_args()[leading]) do push(v) end
  if last ~= NONE then push(last) end
  run(target, args)
  free_all()
  objs = {}
  collectgarbage(); collectgarbage()
end

local VALUES = { false, 16, "x" }
-- cuda.measure reads its options raw and would otherwise measure for its default half second
local OWN = { ["cuda.measure"] = { min_samples = 2, max_samples = 2, min_time = 0, warmup = 0 } }

-- A test of one mode, run unless the command line names another.
local function mode(name, title, fn)
  if not only or only == name then T.test(title, fn) end
end

-- How often a mode's freeing landed where it aims (said with format `what`, of `trials`): more
-- than `least` times, printed either way.
local function landed(what, n, trials, least)
  local said = string.format(what, n, trials)
  T.ok(n > least, said)
  print(said)
end

local function each(fn)
  local one = os.getenv("REENTRANT_TARGET") -- to run one target alone
  for _, target in ipairs(targets()) do
    if not one or target[1] == one then
      for leading = 1, N_LEADING do fn(target, leading) end
    end
  end
end

mode("meta", "metamethods of the arguments free every object", function()
  each(function(target, leading)
    for _, v in ipairs(VALUES) do
      trial(target, leading, freeing_table(v, OWN[target[1]]), function(t, args) call(t[1], t[2], args) end)
    end
  end)
end)

-- Calls the target until a finalizer that runs on_gc() has run; whether it ran inside the call.
local function until_finalized(t, args, pad, on_gc)
  return T.until_finalized(function() call(t[1], t[2], args) end, on_gc, pad)
end

mode("finalizer", "a finalizer run by an allocation inside the call frees every object", function()
  local inside, trials = 0, 0
  each(function(target, leading)
    for _, last in ipairs({ NONE, {} }) do -- no options, empty options
      for _, pad in ipairs({ 0, 6, 12 }) do
        trials = trials + 1
        trial(target, leading, last, function(t, args)
          if until_finalized(t, args, pad, free_all) then inside = inside + 1 end
        end)
      end
    end
  end)
  -- most calls allocate (an error message at least): the finalizer must land in most of them
  landed("the finalizer ran inside the call in %d of %d trials", inside, trials, trials // 2)
end)

mode("callback", "a callback argument frees every object", function()
  each(function(target, leading)
    local freeing = function(...) free_all(); collectgarbage(); return ... end
    trial(target, leading, freeing, function(t, args) call(t[1], t[2], args) end)
    -- the callback first, the leading arguments after it
    trial(target, leading, nil, function(t, args)
      local first = t[3] and 2 or 1
      table.insert(args, first, freeing)
      args.n = args.n + 1
      call(t[1], t[2], args)
    end)
  end)
end)

-- Option tables that hold objects, built from the trial's objects.
local RICH = {
  function() -- a launch configuration with a stream and an L2 window
    return { grid = 1, block = 32, stream = objs["cuda.stream"], l2_window = { array = objs["cuda.array"] } }
  end,
  function() -- a tensor map's spec
    return { array = objs["cuda.array"], dtype = "f32", dims = { 64 }, box = { 16 } }
  end,
  function() return { stream = objs["cuda.stream"], timeout = 1 } end,
  function() return NONE end, -- the leading arguments alone (a launch's configuration among them)
}

-- Every table among args, and the tables in them, each field set to nil (or to a string).
local function rewrite(args, to)
  local seen = {}
  local function walk(t, depth)
    if type(t) ~= "table" or seen[t] or depth > 2 or getmetatable(t) ~= nil then return end
    seen[t] = true
    local keys = {}
    for key, v in pairs(t) do
      keys[#keys + 1] = key
      walk(v, depth + 1)
    end
    for _, key in ipairs(keys) do rawset(t, key, to) end
  end
  for i = 1, args.n do walk(args[i], 1) end
end

mode("rewrite", "a finalizer run inside the call rewrites the argument tables and frees every object", function()
  local inside, trials = 0, 0
  each(function(target, leading)
    for _, make in ipairs(RICH) do
      for _, pad in ipairs({ 0, 6, 12 }) do
        trials = trials + 1
        trial(target, leading, nil, function(t, args)
          local to = pad ~= 6 and "gone" or nil -- and with pad 0 the objects are freed too
          if until_finalized(t, args, pad, function() rewrite(args, to); if pad == 0 then free_all() end end) then
            inside = inside + 1
          end
        end, make)
      end
    end
  end)
  landed("the finalizer ran inside the call in %d of %d trials", inside, trials, trials // 2)
end)

mode("hook", "a call hook frees every object at the entry of the call and of the calls it makes", function()
  local fired, trials = 0, 0
  each(function(target, leading)
    for n = 1, 4 do -- 1: entering the call itself; then the functions it calls (callbacks, its own C steps)
      trials = trials + 1
      trial(target, leading, NONE, function(t, args)
        local count
        debug.sethook(function()
          if count == nil and debug.getinfo(2, "f").func == t[2] then count = 0 end
          if count == nil then return end
          count = count + 1
          if count == n then free_all(); fired = fired + 1 end
        end, "c")
        call(t[1], t[2], args)
        debug.sethook()
      end)
    end
  end)
  landed("the hook freed every object in %d of %d calls", fired, trials, trials // 4)
end)

T.test("every object is released", function()
  objs = shared
  free_all()
  objs, shared = {}, nil
  T.all_released()
  T.ok(calls > 1000, "probed " .. calls .. " calls")
  print(string.format("%s: %d calls, %d raised a message", only or "all", calls, messages))
end)

T.done()
