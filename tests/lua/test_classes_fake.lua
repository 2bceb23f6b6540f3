-- test_classes_fake.lua — every class keeps the one convention (bindings/identity.h): its class
-- metatable, registry[name], has __methods (name -> function) and, for computed fields, __fields
-- (name -> getter). For every registered class: each name in __methods is what obj.name gives
-- (so obj:name(...) calls it), each name in __fields reads through obj.name as its getter
-- answers, and __index is __methods itself for a class without fields. Objects come from
-- tests/lua/class_objects.lua, through the stand-ins.
local T = dofile("tests/lua/t.lua")
local objects = dofile("tests/lua/class_objects.lua")()
local registry = debug.getregistry()

-- Classes with nothing to answer: the CUPTI sessions live inside cuda.profile/cuda.pcsample.
local INTERNAL = { ["cuda.profile_session"] = true, ["cuda.pcsample_session"] = true }

local function classes()
  local names = {}
  for name, mt in pairs(registry) do
    if type(name) == "string" and name:match("^cuda%.") and type(mt) == "table" and rawget(mt, "__name") == name then
      names[#names + 1] = name
    end
  end
  table.sort(names)
  return names
end

local function same(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return rawequal(a, b) end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

local function names(t)
  local list = {}
  for k in pairs(t or {}) do list[#list + 1] = k end
  table.sort(list)
  return list
end

T.test("every class metatable has __methods, and __fields only with getters", function()
  local seen = 0
  for _, name in ipairs(classes()) do
    local mt = registry[name]
    T.eq(type(rawget(mt, "__methods")), "table", name .. ".__methods")
    local fields = rawget(mt, "__fields")
    T.ok(fields == nil or type(fields) == "table", name .. ".__fields is a table or absent")
    for f, getter in pairs(fields or {}) do T.eq(type(getter), "function", name .. ".__fields." .. f) end
    for m, fn in pairs(mt.__methods) do T.eq(type(fn), "function", name .. ".__methods." .. m) end
    -- __index: __methods itself, or a function (the shared lookup for a class with fields, or
    -- a class's own for other keys, h[i]); never another table
    local index = rawget(mt, "__index")
    if type(index) == "table" then
      T.ok(rawequal(index, mt.__methods), name .. ": a table __index is __methods")
    else
      T.eq(type(index), "function", name .. ".__index")
    end
    if fields == nil and name ~= "cuda.error" and name ~= "cuda.host" and name ~= "cuda.array" then
      T.ok(rawequal(index, mt.__methods), name .. ": __index is __methods (no fields)")
    end
    seen = seen + 1
  end
  T.ok(seen >= 15, "classes found: " .. seen)
end)

T.test("every registered class has an object to check (a new class needs one in class_objects.lua)", function()
  for _, name in ipairs(classes()) do
    local mt = registry[name]
    local empty = next(mt.__methods) == nil and next(rawget(mt, "__fields") or {}) == nil
    if not INTERNAL[name] or not empty then
      T.ok(objects[name] ~= nil, "an object of " .. name)
    end
  end
end)

for _, name in ipairs(classes()) do
  local obj, mt = objects[name], registry[name]
  if obj ~= nil then
    T.test(name .. ": every method of __methods is what obj:name calls", function()
      T.ok(next(mt.__methods) ~= nil, name .. " has methods")
      for _, m in ipairs(names(mt.__methods)) do
        local f = obj[m]
        T.eq(type(f), "function", name .. ":" .. m)
        if name ~= "cuda.error" then -- an error's string methods are made per read (errors.c)
          T.ok(rawequal(f, mt.__methods[m]), name .. ":" .. m .. " is the function in __methods")
        end
      end
    end)
    T.test(name .. ": every field of __fields reads through obj.name as its getter answers", function()
      for _, f in ipairs(names(rawget(mt, "__fields"))) do
        local ok, v = pcall(function() return obj[f] end)
        T.ok(ok, name .. "." .. f .. " reads: " .. tostring(v))
        T.ok(same(v, mt.__fields[f](obj)), name .. "." .. f .. " is the getter's value")
      end
    end)
  end
end

T.test("the string methods of a cuda.error apply to its message", function()
  local e = objects["cuda.error"]
  T.eq(e:upper(), tostring(e):upper())
  T.eq(e:len(), #tostring(e))
  T.ok(e:find("no_such_kernel", 1, true), tostring(e))
end)

T.test("a kernel's own metatable answers every field as the class's getters do", function()
  local getters = registry["cuda.kernel"].__fields
  for _, k in ipairs({ objects["cuda.kernel"], objects.clustered }) do
    for _, f in ipairs(names(getters)) do T.ok(same(k[f], getters[f](k)), k.name .. "." .. f) end
  end
  T.ok(same(objects.clustered.cluster_dims, { 2, 1, 1 }), "cluster_dims compiled in")
  T.eq(objects["cuda.kernel"].cluster_dims, nil)
  local k = objects["cuda.kernel"]
  k:set_max_dynamic_smem(1024)
  T.eq(k.max_dynamic_smem, 1024, "a field that changes reads its current value")
end)

T.test("getters refuse an object of another class before reading it", function()
  local s = objects["cuda.stream"]
  for _, name in ipairs(classes()) do
    local fields = rawget(registry[name], "__fields")
    if fields then
      for f, getter in pairs(fields) do
        T.raises(function() return getter(s) end, "expected, got cuda.stream",
          name .. ".__fields." .. f .. "(a stream)")
      end
    end
  end
end)

T.test("what an object answers does not follow a replaced __methods or __fields", function()
  local tm, mt = objects["cuda.tensormap"], registry["cuda.tensormap"]
  local methods, fields = mt.__methods, mt.__fields
  mt.__methods, mt.__fields = { describe = 5 }, { rank = function() return "forged" end }
  local describe, rank = tm.describe, tm.rank
  mt.__methods, mt.__fields = methods, fields
  T.eq(type(describe), "function")
  T.eq(rank, 1)
end)

T.done()
