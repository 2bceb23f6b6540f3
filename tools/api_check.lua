-- api_check.lua [DESCRIPTION] — the API description (docs/api.lua) against what gpulab really
-- registers, walked at run time. Run under the driver stand-in (test `api_coverage`):
--     GPULAB_LIBCUDA=build/libfakecuda.so build/gpulab tools/api_check.lua
-- Fails (exit 1, one line per problem) when
--   - a function or field of `cuda`, a method or computed field of a class (the __methods and
--     __fields tables of its class metatable, registry[name]: every class keeps them, see
--     bindings/identity.h), a field of a table object (device, program), or a function of
--     gpulab.lab or of a lab object is not described, or
--   - a described function, method, field or class no longer exists.
local root = arg[0]:match("^(.*)/tools/[^/]*$") or "."
package.path = root .. "/lua/?.lua;" .. package.path
local apidoc = require("gpulab.apidoc")
local desc = apidoc.load(arg[1] or (root .. "/docs/api.lua"))

local problems = {}
local function problem(fmt, ...) problems[#problems + 1] = string.format(fmt, ...) end
local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do if type(k) == "string" then keys[#keys + 1] = k end end
  table.sort(keys)
  return keys
end

-- What really exists: names -> "function" | "field", and class -> set of method names.
local actual, actual_methods, actual_fields = {}, {}, {}

for _, k in ipairs(sorted_keys(cuda)) do
  actual["cuda." .. k] = type(cuda[k]) == "function" and "function" or "field"
end

-- A class's methods and computed fields: the names in the __methods and __fields tables of its
-- class metatable. cuda.error's methods are the string library's, applied to the message: Lua's
-- own, described by Lua's manual, not one by one here.
local registry = debug.getregistry()
local function names_in(mt, which, skip)
  local t, names = rawget(mt, which), {}
  if type(t) ~= "table" then return names end
  for k, v in next, t do
    if type(k) == "string" and type(v) == "function" and not (skip and skip[k]) then names[k] = true end
  end
  return names
end
local BORROWED = {["cuda.error"] = string}

for _, name in ipairs(sorted_keys(registry)) do
  local mt = registry[name]
  if name:match("^cuda%.") and type(mt) == "table" and rawget(mt, "__name") == name then
    if type(rawget(mt, "__methods")) ~= "table" then problem("class %s has no __methods table", name) end
    actual_methods[name] = names_in(mt, "__methods", BORROWED[name])
    local fields = names_in(mt, "__fields")
    if next(fields) then actual_fields[name] = fields end
  end
end

-- Objects to probe fields on, made through the stand-in (no kernel runs).
local function make_objects()
  local prog = cuda.compile('extern "C" __global__ void k(float *x, int n) { if (n) x[0] = 1; }')
  local mod = cuda.load(prog)
  local k = mod:kernel("k")
  local d = cuda.array("f32", 64)
  local h = cuda.host("f32", 64)
  local s = cuda.stream()
  local g = s:capture(function() d:fill(0, s) end)
  local tm = cuda.tensormap{array = d, dtype = "f32", dims = {64}, box = {16}}
  return {
    ["cuda.device"] = cuda.device(0), ["cuda.program"] = prog, ["cuda.module"] = mod,
    ["cuda.kernel"] = k, ["cuda.array"] = d, ["cuda.host"] = h, ["cuda.stream"] = s,
    ["cuda.event"] = cuda.event(), ["cuda.graph"] = g, ["cuda.tensormap"] = tm,
    ["cuda.prepared"] = k:prepare({grid = 1, block = 1}, d, 0),
  }
end
local ok_objects, objects = pcall(make_objects)
if not ok_objects then
  problem("cannot make the objects to probe (run under the driver stand-in): %s", tostring(objects))
  objects = {}
end
for class, obj in pairs(objects) do
  if type(obj) == "table" then -- table objects: every raw key is a field
    actual_fields[class] = actual_fields[class] or {}
    for _, k in ipairs(sorted_keys(obj)) do actual_fields[class][k] = true end
  end
end

-- The lab harness.
local lab = require("gpulab.lab")
for _, k in ipairs(sorted_keys(lab)) do
  if type(lab[k]) == "function" then actual["harness." .. k] = "function" end
end
local print_heading = _G.print
_G.print = function() end -- lab.new prints the lab's heading
local ok_lab, L = pcall(lab.new, {name = "api_check", args = {}})
_G.print = print_heading
if ok_lab then
  local methods = {}
  local index = getmetatable(L).__index
  for _, k in ipairs(sorted_keys(index)) do
    if type(index[k]) == "function" and not k:match("^__") then methods[k] = true end
  end
  actual_methods.Lab = methods
else
  problem("lab.new failed: %s", tostring(L))
end

-- Everything real must be described ---------------------------------------------------------
for _, name in ipairs(sorted_keys(actual)) do
  local e = desc.index[name]
  if not e then problem("undocumented: %s (%s)", name, actual[name])
  elseif (e.kind == "field") ~= (actual[name] == "field") then
    problem("%s is described as a %s but is a %s", name, e.kind, actual[name])
  end
end
for _, class in ipairs(sorted_keys(actual_methods)) do
  local methods = actual_methods[class]
  if next(methods) and not desc.classes[class] then problem("undocumented class: %s", class) end
  for _, m in ipairs(sorted_keys(methods)) do
    if not desc.index[class .. ":" .. m] then problem("undocumented: %s:%s (method)", class, m) end
  end
end
for _, class in ipairs(sorted_keys(actual_fields)) do
  local described = {}
  for _, f in ipairs(desc.classes[class] and desc.classes[class].fields or {}) do described[f[1]] = true end
  for _, k in ipairs(sorted_keys(actual_fields[class])) do
    if not described[k] then problem("undocumented: field %s of %s", k, class) end
  end
end

-- Everything described must exist ------------------------------------------------------------
for _, e in ipairs(desc.entries) do
  if e.kind == "function" or (e.kind == "field" and not desc.classes[e.owner]) then
    -- an entry with build = "OPTION" exists only in builds configured with -DOPTION=ON
    if not actual[e.name] and not e.build then problem("described but gone: %s", e.name) end
  elseif e.kind == "method" then
    local methods = actual_methods[e.owner]
    if not methods then problem("described but gone: class %s (of %s)", e.owner, e.name)
    elseif not methods[e.short] then problem("described but gone: %s", e.name) end
  elseif e.kind == "class" then
    if e.name ~= "Lab" and not actual_methods[e.name] then problem("described but gone: class %s", e.name) end
    local obj = objects[e.name] or (e.name == "Lab" and ok_lab and L) or nil
    for _, f in ipairs(e.fields) do
      if obj == nil then break end
      local okf, v = pcall(function() return obj[f[1]] end)
      if not okf or v == nil then
        if f[2]:sub(-1) ~= "?" then problem("described but gone: field %s of %s", f[1], e.name) end
      end
    end
  end
end

table.sort(problems)
for _, p in ipairs(problems) do io.stderr:write("api_check: ", p, "\n") end
if #problems > 0 then
  io.stderr:write(string.format("api_check: %d problem(s); describe them in docs/api.lua, then run tools/gen_api.lua\n",
                                #problems))
  os.exit(1)
end
print(string.format("api_check: %d entries match what gpulab registers", #desc.entries))
