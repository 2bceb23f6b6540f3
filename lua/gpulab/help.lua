-- gpulab.help — the REPL's help(x), read from the API description (docs/api.lua).
--   help()                 the sections and what they describe
--   help(cuda.compile)     the entry of a function of `cuda`, of gpulab.lab, or a method
--   help(arr)              an object's type, fields and methods
--   help("compile")        by name: "cuda.compile", "compile", "cuda.array:view", "cuda.array"; a
--                          short name several entries share ("view", "free") shows all of them
-- help.text(x) returns the text instead of printing it. Lines are wrapped at spaces to help.width
-- columns, never inside a name. Sections marked `help = false` in docs/api.lua (the test
-- stand-ins) are left out of help(); docs/API.md still has them.
local apidoc = require("gpulab.apidoc")

local help = {width = 78}
local loaded -- the description, read on first use

local function description()
  if not loaded then loaded = apidoc.load(apidoc.default_path()) end
  return loaded
end

local function shown(e) return e.section.help ~= false end

-- Markdown's `code` and **bold** read plainly on a terminal.
local function plain(s) return (s:gsub("%*%*", ""):gsub("`", "")) end

-- `prefix` as it is, then the words of `text` broken at spaces so that no line is wider than
-- help.width; the lines after the first start with `hang` spaces. A word wider than the room is
-- left whole on a line of its own.
local function wrap(prefix, text, hang)
  local pad = string.rep(" ", hang)
  local out, cur, fresh = {}, prefix, true
  -- a prefix with text of its own (a table row's name and type) may end a line by itself
  local breakable = prefix:find("%S") and #prefix > hang
  for word in text:gmatch("%S+") do
    local sep = fresh and "" or " "
    if #cur + #sep + #word > help.width and (not fresh or breakable) then
      out[#out + 1] = (cur:gsub("%s+$", ""))
      cur, sep = pad, ""
    end
    cur = cur .. sep .. word
    fresh, breakable = false, false
  end
  out[#out + 1] = cur
  return table.concat(out, "\n")
end

-- Markdown text as terminal paragraphs: lines of one paragraph or list item are joined and
-- wrapped; blank lines separate paragraphs; "- " items hang under their text.
local function reflow(text, pad)
  local out, para = {}, nil
  local function flush()
    if para then
      local hang = #pad + (para:match("^[-*] ") and 2 or 0)
      out[#out + 1] = wrap(pad, para, hang)
    end
    para = nil
  end
  for line in (plain(text) .. "\n"):gmatch("(.-)\n") do
    local body = line:match("^%s*(.-)%s*$")
    if body == "" then
      flush()
      if #out > 0 and out[#out] ~= "" then out[#out + 1] = "" end
    elseif body:match("^[-*] ") or body:match("^%d+%. ") or not para then
      flush()
      para = body
    else
      para = para .. " " .. body
    end
  end
  flush()
  while out[#out] == "" do out[#out] = nil end
  return table.concat(out, "\n")
end

-- A row of a table: name and type in fixed columns, the description wrapped under itself; when
-- a long name, type or word leaves it too little room, the description goes on below.
local function row(fmt, text, ...)
  local head = string.format(fmt, ...)
  local longest = 0
  for word in text:gmatch("%S+") do longest = math.max(longest, #word) end
  local fits = #head <= 48 and #head + longest <= help.width
  return wrap(head, text, fits and #head or 8)
end

-- Code is shown as written, only indented.
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
  out[#out + 1] = wrap("", head, 4)
  out[#out + 1] = reflow(e.summary, "  ")
  for _, p in ipairs(e.params) do
    out[#out + 1] = row("  %-14s %-22s ", plain(p[3] or ""), p[1], p[2])
  end
  if #e.options > 0 then out[#out + 1] = "  options:" end
  for _, o in ipairs(e.options) do
    local default = o[3] and (" (default " .. plain(o[3]) .. ")") or ""
    out[#out + 1] = row("    %-16s %-20s ", plain(o[4]) .. default, o[1], o[2])
  end
  if e.options_of then out[#out + 1] = "  options: as " .. e.options_of end
  if #e.fields > 0 then out[#out + 1] = "  fields:" end
  for _, f in ipairs(e.fields) do
    out[#out + 1] = row("    %-22s %-14s ", plain(f[3]), f[1], f[2])
  end
  for i, r in ipairs(e.returns) do
    if r[2] then out[#out + 1] = row("  returns %d: %s ", plain(r[2]), i, r[1]) end
  end
  if #e.errors > 0 then out[#out + 1] = "  errors:" end
  for _, m in ipairs(e.errors) do out[#out + 1] = wrap("    ", plain(m), 6) end
  if e.text then out[#out + 1] = reflow(e.text, "  ") end
  if e.example then
    out[#out + 1] = "  example:"
    out[#out + 1] = indent(e.example, "    ")
  end
  if e.kind == "class" then
    local names = {}
    for _, m in ipairs(description().methods[e.name] or {}) do names[#names + 1] = m.short end
    if #names > 0 then
      out[#out + 1] = wrap("  methods: ", table.concat(names, " "), 11)
      out[#out + 1] = string.format('  (help("%s:%s") for one)', e.name, names[1])
    end
  end
  return table.concat(out, "\n")
end

local function overview()
  local desc = description()
  local out = {wrap("", desc.title .. ": help(x) for a function, an object or a name, e.g."
                    .. ' help(cuda.compile), help("view").', 2)}
  for _, s in ipairs(desc.sections) do
    if s.help ~= false then
      local names = {}
      for _, e in ipairs(s.entries or {}) do
        if e.kind ~= "class" then names[#names + 1] = e.name end
      end
      local title = plain(s.title) .. (#names > 0 and ":" or "")
      out[#out + 1] = wrap("", title .. " " .. table.concat(names, " "), 4)
    end
  end
  return table.concat(out, "\n")
end

-- Every entry a name stands for, the test stand-ins' left out.
local function entries_named(name)
  local hits = {}
  for _, e in ipairs(apidoc.find(description(), name)) do
    if shown(e) then hits[#hits + 1] = e end
  end
  return hits
end

-- All the entries a name stands for, under a line that lists them when there are several.
local function render_named(x)
  local hits = entries_named(x)
  if #hits == 0 then return string.format("help: nothing is described as '%s' (help() lists everything)", x) end
  if #hits == 1 then return render_entry(hits[1]) end
  local names, parts = {}, {}
  for i, e in ipairs(hits) do
    names[i] = (e.kind == "class" and "class " or "") .. e.name
    parts[i] = render_entry(e)
  end
  local list = wrap("", string.format("'%s' names %d entries: %s", x, #hits, table.concat(names, ", ")), 2)
  return list .. "\n\n" .. table.concat(parts, "\n\n")
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
  -- Methods: the __methods table of each class metatable, as gpulab registers it
  -- (registry[class]); read raw, so a script's metamethods never run here.
  local registry = debug.getregistry()
  for class in pairs(desc.classes) do
    local mt = rawget(registry, class)
    local methods = type(mt) == "table" and rawget(mt, "__methods")
    if type(methods) == "table" then
      for k, f in next, methods do
        local e = desc.index[class .. ":" .. tostring(k)]
        if e and type(f) == "function" then by_function[f] = e end
      end
    end
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
  if x == nil then return overview() end
  if type(x) == "string" then return render_named(x) end
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
