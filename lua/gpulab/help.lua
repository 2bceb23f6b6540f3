-- gpulab.help — the REPL's help(x), read from the API description (docs/api.lua).
--   help()                 the sections and what they describe
--   help(cuda.compile)     the entry of a function of `cuda`, of gpulab.lab, or a method
--   help(arr)              an object's type, fields and methods
--   help("compile")        by name: "cuda.compile", "compile", "cuda.array:view", "view", "cuda.array"
-- help.text(x) returns the text instead of printing it.
local apidoc = require("gpulab.apidoc")

local help = {}
local loaded -- the description, read on first use

local function description()
  if not loaded then loaded = apidoc.load(apidoc.default_path()) end
  return loaded
end

-- Markdown's `code` and **bold** read plainly on a terminal.
local function plain(s) return (s:gsub("%*%*", ""):gsub("`", "")) end

local function indent(text, pad)
  return (pad .. text:gsub("\n", "\n" .. pad)):gsub("%s+$", "")
end

local function render_entry(e)
  local out = {}
  local head = e.kind == "class" and ("class " .. e.name) or (e.sig or e.name)
  if e.kind == "field" then head = head .. ": " .. e.type end
  local rets = {}
  for _, r in ipairs(e.returns) do rets[#rets + 1] = r[1] end
  if #rets > 0 then head = head .. " -> " .. table.concat(rets, ", ") end
  out[#out + 1] = head
  out[#out + 1] = indent(plain(e.summary), "  ")
  for _, p in ipairs(e.params) do
    out[#out + 1] = string.format("  %-14s %-22s %s", p[1], p[2], plain(p[3] or ""))
  end
  if #e.options > 0 then out[#out + 1] = "  options:" end
  for _, o in ipairs(e.options) do
    out[#out + 1] = string.format("    %-16s %-20s %s%s", o[1], o[2], plain(o[4]),
                                  o[3] and (" (default " .. plain(o[3]) .. ")") or "")
  end
  if e.options_of then out[#out + 1] = "  options: as " .. e.options_of end
  if #e.fields > 0 then out[#out + 1] = "  fields:" end
  for _, f in ipairs(e.fields) do
    out[#out + 1] = string.format("    %-22s %-14s %s", f[1], f[2], plain(f[3]))
  end
  for i, r in ipairs(e.returns) do
    if r[2] then out[#out + 1] = string.format("  returns %d: %s %s", i, r[1], plain(r[2])) end
  end
  if #e.errors > 0 then out[#out + 1] = "  errors:" end
  for _, m in ipairs(e.errors) do out[#out + 1] = "    " .. plain(m) end
  if e.text then out[#out + 1] = indent(plain(e.text), "  ") end
  if e.example then
    out[#out + 1] = "  example:"
    out[#out + 1] = indent(e.example, "    ")
  end
  if e.kind == "class" then
    local names = {}
    for _, m in ipairs(description().methods[e.name] or {}) do names[#names + 1] = m.short end
    if #names > 0 then
      out[#out + 1] = "  methods: " .. table.concat(names, " ")
      out[#out + 1] = string.format('  (help("%s:%s") for one)', e.name, names[1])
    end
  end
  return table.concat(out, "\n")
end

local function overview()
  local desc = description()
  local out = {desc.title .. ": help(x) for a function, an object or a name, e.g. help(cuda.compile),"
               .. ' help("view").'}
  for _, s in ipairs(desc.sections) do
    local names = {}
    for _, e in ipairs(s.entries or {}) do
      if e.kind ~= "class" then names[#names + 1] = e.name end
    end
    out[#out + 1] = plain(s.title) .. (#names > 0 and (": " .. table.concat(names, " ")) or "")
  end
  return table.concat(out, "\n")
end

-- function value -> described name, built on first use from what is registered now.
local by_function
local function function_names()
  if by_function then return by_function end
  by_function = {}
  local desc = description()
  for _, e in ipairs(desc.entries) do
    if e.kind == "function" and e.owner == "cuda" and type(cuda) == "table" then
      local f = rawget(cuda, e.short)
      if type(f) == "function" then by_function[f] = e end
    elseif e.kind == "function" and e.owner == "harness" then
      local ok, lab = pcall(require, "gpulab.lab")
      if ok and type(lab[e.short]) == "function" then by_function[lab[e.short]] = e end
    end
  end
  local registry = debug.getregistry()
  for class in pairs(desc.classes) do
    local mt = registry[class]
    local tables = {}
    if type(mt) == "table" then
      tables[#tables + 1] = type(rawget(mt, "__index")) == "table" and mt.__index or nil
      tables[#tables + 1] = type(rawget(mt, "__methods")) == "table" and mt.__methods or nil
      if type(rawget(mt, "__index")) == "function" then
        local _, up = debug.getupvalue(mt.__index, 1)
        tables[#tables + 1] = type(up) == "table" and up or nil
      end
    end
    for _, t in ipairs(tables) do
      for k, f in pairs(t) do
        local e = desc.index[class .. ":" .. tostring(k)]
        if e and type(f) == "function" then by_function[f] = e end
      end
    end
  end
  -- cuda.array and cuda.host look methods up in C (no table to read): ask a small instance.
  local function probe(class, make)
    local ok, obj = pcall(make)
    if not ok then return end
    for _, m in ipairs(desc.methods[class] or {}) do
      local okm, f = pcall(function() return obj[m.short] end)
      if okm and type(f) == "function" then by_function[f] = m end
    end
    pcall(function() obj:free() end)
  end
  if type(cuda) == "table" then
    probe("cuda.host", function() return cuda.host("u8", 1) end)
    if cuda.available() then probe("cuda.array", function() return cuda.array("u8", 1) end) end
  end
  return by_function
end

local function class_of(x)
  local mt = debug.getmetatable(x)
  local name = type(mt) == "table" and rawget(mt, "__name")
  if name == "gpulab.lab" then name = "Lab" end
  return name and description().classes[name]
end

function help.text(x)
  local desc = description()
  if x == nil then return overview() end
  if type(x) == "string" then
    local hits = apidoc.find(desc, x)
    if #hits == 0 then return string.format("help: nothing is described as '%s' (help() lists everything)", x) end
    if #hits == 1 then return render_entry(hits[1]) end
    local names = {}
    for _, e in ipairs(hits) do names[#names + 1] = (e.kind == "class" and "class " or "") .. e.name end
    if #hits == 2 and hits[1].name == hits[2].name then
      return render_entry(hits[1]) .. "\n\n" .. render_entry(hits[2])
    end
    return string.format("help: '%s' is %s; ask for one", x, table.concat(names, ", "))
  end
  if type(x) == "function" then
    local e = function_names()[x]
    if e then return render_entry(e) end
    return "help: this function is not part of gpulab's API (for a method, try help(object))"
  end
  local class = class_of(x)
  if class then return render_entry(class) end
  if rawequal(x, cuda) then return overview() end -- x's own __eq runs no code here
  return string.format("help: a %s is not a gpulab object (help() lists everything)", type(x))
end

function help.help(x)
  print(help.text(x))
end

return help
