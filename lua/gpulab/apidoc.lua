-- gpulab.apidoc — reads and checks the API description (docs/api.lua), for tools/gen_api.lua
-- (docs/API.md and the editor stub), the REPL's help() and tools/api_check.lua.
--
-- apidoc.load(path) returns the description with every entry normalised:
--   entry.name   "cuda.compile", "cuda.array:fill", "cuda.home", "cuda.device", "Lab:verdict"
--   entry.kind   "function" | "method" | "field" | "class"
--   entry.owner  the module ("cuda", "harness": gpulab.lab) or, for methods, the class ("cuda.array")
--   entry.short  the name within its owner ("compile", "fill")
-- and desc.index[name] -> function/method/field entry, desc.classes[name] -> class entry (a class
-- may share its name with the function that makes it), desc.methods[class] -> its methods.
-- It raises "docs/api.lua: <entry>: <what is wrong>" for a malformed description.
local apidoc = {}

local KINDS = {["function"] = true, method = true, field = true, class = true}
local BASIC = {string = true, integer = true, number = true, boolean = true, table = true, ["function"] = true,
               any = true, ["nil"] = true, userdata = true, thread = true}

local function fail(where, fmt, ...)
  error(string.format("docs/api.lua: %s: " .. fmt, where, ...), 0)
end

local function check_string(v, where, what, optional)
  if v == nil and optional then return end
  if type(v) ~= "string" or v == "" then fail(where, "%s must be a non-empty string", what) end
end

-- A type as LuaLS writes it: names (class names with dots), unions with |, optional ?, arrays [],
-- table<k, v>, string literals "a"|"b". Returns the class names it refers to.
local function type_names(t)
  local names = {}
  local stripped = t:gsub('"[^"]*"', ""):gsub("table<", " "):gsub("[%[%]<>,|?()]", " ")
  for n in stripped:gmatch("[%a_][%w_%.]*") do names[#names + 1] = n end
  return names
end

local function list_of(v, where, what, fields)
  if v == nil then return {} end
  if type(v) ~= "table" then fail(where, "%s must be a list", what) end
  for i, item in ipairs(v) do
    if type(item) ~= "table" then fail(where, "%s[%d] must be a table {%s}", what, i, table.concat(fields, ", ")) end
    for j, f in ipairs(fields) do
      local optional = f:sub(-1) == "?"
      check_string(item[j], where, string.format("%s[%d] %s", what, i, f:gsub("%?$", "")), optional)
    end
  end
  return v
end

local function normalise(e, where)
  if type(e) ~= "table" then fail(where, "an entry must be a table") end
  local name = e[1]
  check_string(name, where, "the entry's name ([1])")
  where = name
  local kind = e.kind or (name:find(":", 1, true) and "method") or "function"
  if not KINDS[kind] then fail(where, "kind '%s' is not one of function, method, field, class", tostring(kind)) end
  e.kind, e.name = kind, name
  if kind == "method" then
    e.owner, e.short = name:match("^(.+):([%a_][%w_]*)$")
  elseif kind == "class" then
    e.owner, e.short = name:match("^(.-)%.?([%a_][%w_]*)$")
  else
    e.owner, e.short = name:match("^(.+)%.([%a_][%w_]*)$")
  end
  if not e.short then fail(where, "the name does not read owner.name or Class:method") end
  check_string(e.summary, where, "summary")
  check_string(e.text, where, "text", true)
  check_string(e.example, where, "example", true)
  check_string(e.options_of, where, "options_of", true)
  check_string(e.options_param, where, "options_param", true)
  check_string(e.build, where, "build", true)
  if kind == "function" or kind == "method" then check_string(e.sig, where, "sig") end
  if kind == "field" then check_string(e.type, where, "type") end
  e.params = list_of(e.params, where, "params", {"name", "type", "description?"})
  e.returns = list_of(e.returns, where, "returns", {"type", "description?"})
  e.options = list_of(e.options, where, "options", {"name", "type", "default?", "description"})
  e.fields = list_of(e.fields, where, "fields", {"name", "type", "description"})
  e.errors = e.errors or {}
  if type(e.errors) ~= "table" then fail(where, "errors must be a list of strings") end
  for i, m in ipairs(e.errors) do check_string(m, where, "errors[" .. i .. "]") end
  return e
end

-- Loads and checks the description at `path`.
function apidoc.load(path)
  local chunk, err = loadfile(path, "t", {})
  if not chunk then error(err, 0) end
  local desc = chunk()
  if type(desc) ~= "table" or type(desc.sections) ~= "table" then
    error("docs/api.lua: must return {title=, intro=, sections={...}}", 0)
  end
  desc.index, desc.classes, desc.methods, desc.entries = {}, {}, {}, {}
  for si, s in ipairs(desc.sections) do
    local where = "section " .. si .. " (" .. tostring(s.title) .. ")"
    check_string(s.title, where, "title")
    if s.level ~= 2 and s.level ~= 3 then fail(where, "level must be 2 or 3") end
    check_string(s.text, where, "text", true)
    check_string(s.after, where, "after", true)
    for _, e in ipairs(s.entries or {}) do
      normalise(e, where)
      -- classes have names of their own: cuda.array is both a function and the class it returns
      local space = e.kind == "class" and desc.classes or desc.index
      if space[e.name] then fail(e.name, "described twice") end
      space[e.name] = e
      e.section = s
      desc.entries[#desc.entries + 1] = e
    end
  end
  -- references: every class a method belongs to and every type named must be described
  for _, e in ipairs(desc.entries) do
    if e.kind == "method" then
      if not desc.classes[e.owner] then fail(e.name, "method of '%s', which is not a described class", e.owner) end
      desc.methods[e.owner] = desc.methods[e.owner] or {}
      table.insert(desc.methods[e.owner], e)
    end
    local function check_type(t, what)
      for _, n in ipairs(type_names(t)) do
        if not BASIC[n] and not desc.classes[n] then fail(e.name, "%s: unknown type '%s'", what, n) end
      end
    end
    for _, p in ipairs(e.params) do check_type(p[2], "param " .. p[1]) end
    for i, r in ipairs(e.returns) do check_type(r[1], "return " .. i) end
    for _, o in ipairs(e.options) do check_type(o[2], "option " .. o[1]) end
    for _, f in ipairs(e.fields) do check_type(f[2], "field " .. f[1]) end
    if e.type then check_type(e.type, "type") end
  end
  for _, e in ipairs(desc.entries) do
    if e.options_of then
      local o = desc.index[e.options_of]
      if not o or #o.options == 0 then fail(e.name, "options_of '%s' names no entry with options", e.options_of) end
    end
  end
  for _, list in pairs(desc.methods) do table.sort(list, function(a, b) return a.short < b.short end) end
  return desc
end

-- Where the description lies: beside the gpulab files (cuda.home) or, from a source tree, the
-- folder above lua/.
function apidoc.default_path()
  local home = type(cuda) == "table" and type(rawget(cuda, "home")) == "string" and rawget(cuda, "home")
  if home then return home .. "/docs/api.lua" end
  local here = debug.getinfo(1, "S").source:match("^@(.*)/lua/gpulab/apidoc%.lua$")
  return (here or ".") .. "/docs/api.lua"
end

-- Entries whose name is `name` or ends in ".name" / ":name" (help("compile"), help("fill")).
function apidoc.find(desc, name)
  local hits = {}
  if desc.index[name] or desc.classes[name] then
    hits[#hits + 1] = desc.index[name]
    hits[#hits + 1] = desc.classes[name]
    return hits
  end
  for _, e in ipairs(desc.entries) do
    if e.short == name or e.name:sub(-#name - 1) == "." .. name or e.name:sub(-#name - 1) == ":" .. name then
      hits[#hits + 1] = e
    end
  end
  return hits
end

return apidoc
