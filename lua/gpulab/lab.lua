-- gpulab.lab — the harness every lab is written against. A lab reads like a notebook:
--
--   local lab = require("gpulab.lab")
--   local L = lab.new{ name="launch_anatomy", title="...", claims="seed §1",
--                      params = { {name="rows", default=8192, help="rows per block"} } }
--   L:section("Setup"); L:note("...")
--   L:table({"blocks", "time (ms)"}, rows)
--   L:verdict("a launch returns before the kernel ends", "host 4 µs vs GPU 20 ms", true)
--   L:svg_lines{file="sweep.svg", series={...}}
--   os.exit(L:finish())
--
-- Options come from the script's `arg`: --quick, --json FILE, --svg PREFIX, --help and one
-- --name=value (or --name value) per declared parameter, typed from its default.
local json = require("gpulab.json")
local svg = require("gpulab.svg")

local lab = {}
local Lab = {}
Lab.__index = Lab
Lab.__name = "gpulab.lab"

-- ---- time ------------------------------------------------------------------------------------

-- Wall-clock seconds with 10 ms resolution from /proc/uptime (pure Lua has only os.time's
-- whole seconds); falls back to os.time where /proc is absent.
local function wall_s()
  local f = io.open("/proc/uptime", "r")
  if f then
    local v = f:read("n")
    f:close()
    if v then return v end
  end
  return os.time()
end

-- ---- options ---------------------------------------------------------------------------------

-- Usage errors are error objects with __tostring: gpulab prints them without a traceback
-- (a wrong option is not a bug in the lab), and tostring(err) gives the message to callers.
local UsageError = { __tostring = function(e) return e.message end }

local function fail_usage(L, msg)
  error(setmetatable({ message = string.format("%s: %s (see --help)", L.name, msg) }, UsageError), 0)
end

local function option_name(p) return (p.name:gsub("_", "-")) end

local function known_options(L)
  local list = { "--quick", "--json FILE", "--svg PREFIX", "--help" }
  for _, p in ipairs(L.param_specs) do
    list[#list + 1] = "--" .. option_name(p) .. (type(p.default) == "boolean" and "" or "=VALUE")
  end
  return table.concat(list, ", ")
end

-- Converts the text of an option to the type of the parameter's default.
local function convert(L, p, text)
  local opt = "--" .. option_name(p)
  local d = p.default
  if type(d) == "number" then
    local v = tonumber(text)
    if v == nil or v ~= v or v == math.huge or v == -math.huge then
      fail_usage(L, string.format("option %s expects a number, got '%s'", opt, text))
    end
    if math.type(d) == "integer" then
      local i = math.tointeger(v)
      if i == nil then fail_usage(L, string.format("option %s expects an integer, got '%s'", opt, text)) end
      v = i
    end
    if p.min and v < p.min then fail_usage(L, string.format("option %s must be >= %s, got %s", opt, p.min, text)) end
    if p.max and v > p.max then fail_usage(L, string.format("option %s must be <= %s, got %s", opt, p.max, text)) end
    return v
  elseif type(d) == "boolean" then
    local t = text:lower()
    if t == "true" or t == "1" or t == "yes" or t == "on" then return true end
    if t == "false" or t == "0" or t == "no" or t == "off" then return false end
    fail_usage(L, string.format("option %s expects true or false, got '%s'", opt, text))
  end
  return text
end

local function find_param(L, name)
  for _, p in ipairs(L.param_specs) do
    if p.name == name or option_name(p) == name then return p end
  end
end

-- Options stored by the host (`gpulab --json FILE lab.lua`) live in the Lua registry.
local function host_json_option()
  local ok, reg = pcall(function() return debug and debug.getregistry and debug.getregistry() end)
  if ok and type(reg) == "table" and type(reg["gpulab.json"]) == "string" then return reg["gpulab.json"] end
  return nil
end

local function parse_args(L, args)
  local i, n = 1, #args
  local function value_of(opt, inline)
    if inline then return inline end
    i = i + 1
    if i > n then fail_usage(L, string.format("option %s needs a value", opt)) end
    return args[i]
  end
  while i <= n do
    local a = tostring(args[i])
    local name, inline = a:match("^%-%-([^=]+)=(.*)$")
    if not name then name = a:match("^%-%-(.+)$") end
    if a == "--help" or a == "-h" then
      L.help_requested = true
    elseif name == "quick" then
      if inline then L.quick = convert(L, { name = "quick", default = true }, inline) else L.quick = true end
    elseif name == "json" then
      L.json_path = value_of("--json", inline)
      if L.json_path == "" then fail_usage(L, "option --json needs a file name") end
    elseif name == "svg" then
      L.svg_prefix = value_of("--svg", inline)
      if L.svg_prefix == "" then fail_usage(L, "option --svg needs a file prefix or folder") end
    elseif name and find_param(L, name) then
      local p = find_param(L, name)
      if type(p.default) == "boolean" and not inline then
        L.params[p.name] = true
      else
        L.params[p.name] = convert(L, p, value_of("--" .. name, inline))
      end
    elseif name and name:match("^no%-") and find_param(L, name:sub(4)) and
        type(find_param(L, name:sub(4)).default) == "boolean" and not inline then
      L.params[find_param(L, name:sub(4)).name] = false
    else
      fail_usage(L, string.format("unknown option '%s' (known: %s)", a, known_options(L)))
    end
    i = i + 1
  end
end

local function print_help(L)
  local out = {}
  out[#out + 1] = string.format("%s%s", L.name, L.title and (": " .. L.title) or "")
  if L.claims then out[#out + 1] = "claims: " .. L.claims end
  out[#out + 1] = "options:"
  local rows = {
    { "--quick", "short run (a few seconds) with smaller sweeps" },
    { "--json FILE", "write the results (tables, verdicts, records) as JSON to FILE" },
    { "--svg PREFIX", "write pictures as PREFIX-<name>.svg (or into PREFIX/ when it is a folder)" },
    { "--help", "show this help" },
  }
  for _, p in ipairs(L.param_specs) do
    local form = "--" .. option_name(p) .. (type(p.default) == "boolean" and "" or "=" .. type(p.default):upper())
    rows[#rows + 1] = { form, string.format("%s (default %s)", p.help or "", tostring(p.default)) }
  end
  local w = 0
  for _, r in ipairs(rows) do w = math.max(w, #r[1]) end
  for _, r in ipairs(rows) do out[#out + 1] = string.format("  %-" .. w .. "s  %s", r[1], r[2]) end
  io.stdout:write(table.concat(out, "\n"), "\n")
end

local function check_spec(spec)
  if type(spec) ~= "table" then error("lab.new: expected a table {name=, title=, params=}", 3) end
  if type(spec.name) ~= "string" or spec.name == "" then
    error("lab.new: field 'name' must be a non-empty string", 3)
  end
  local params = spec.params or {}
  if type(params) ~= "table" then error("lab.new: field 'params' must be a list", 3) end
  local seen = {}
  for i, p in ipairs(params) do
    if type(p) ~= "table" or type(p.name) ~= "string" or not p.name:match("^[%a_][%w_]*$") then
      error(string.format("lab.new: params[%d] needs a name made of letters, digits and _", i), 3)
    end
    local t = type(p.default)
    if t ~= "number" and t ~= "boolean" and t ~= "string" then
      error(string.format("lab.new: param '%s' needs a number, boolean or string default", p.name), 3)
    end
    if seen[p.name] or ({ quick = 1, json = 1, svg = 1, help = 1 })[p.name] then
      error(string.format("lab.new: param '%s' is declared twice or shadows a harness option", p.name), 3)
    end
    seen[p.name] = true
  end
  return params
end

-- lab.new{name=, title=, claims=, params={...}, args=?}: args defaults to the global `arg`.
function lab.new(spec)
  local params = check_spec(spec)
  local L = setmetatable({
    name = spec.name, title = spec.title, claims = spec.claims,
    quick = false, params = {}, param_specs = params,
    tables = {}, verdicts = {}, records = {}, pictures = {}, notes = {}, failures = {},
    sections = {}, started = wall_s(), cpu_started = os.clock(),
  }, Lab)
  for _, p in ipairs(params) do L.params[p.name] = p.default end
  local args = spec.args or _G.arg or {}
  parse_args(L, args)
  if L.help_requested then
    print_help(L)
    os.exit(0)
  end
  L.json_path = L.json_path or host_json_option() or os.getenv("GPULAB_JSON")
  if L.json_path == "" then L.json_path = nil end
  local head = L.name .. (L.title and (" — " .. L.title) or "")
  print(head)
  print(string.rep("=", utf8.len(head) or #head))
  if L.claims then print("claims: " .. L.claims) end
  local shown = {}
  for _, p in ipairs(params) do shown[#shown + 1] = string.format("%s=%s", p.name, tostring(L.params[p.name])) end
  if L.quick then table.insert(shown, 1, "quick") end
  if #shown > 0 then print("params: " .. table.concat(shown, " ")) end
  return L
end

-- ---- notebook output ---------------------------------------------------------------------

local function close_section(L)
  local s = L.sections[#L.sections]
  if s and not s.seconds then s.seconds = wall_s() - s.started end
end

function Lab:section(title)
  close_section(self)
  title = tostring(title)
  self.sections[#self.sections + 1] = { title = title, started = wall_s() }
  print()
  print("## " .. title)
end

function Lab:note(text)
  text = tostring(text)
  self.notes[#self.notes + 1] = { section = self:current_section(), text = text }
  for line in (text .. "\n"):gmatch("(.-)\n") do print("  " .. line) end
end

function Lab:current_section()
  local s = self.sections[#self.sections]
  return s and s.title or nil
end

-- Numbers for people: integers in full, others with 4 significant digits, tiny and huge ones
-- in exponent form.
function lab.format_number(v)
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
  if math.type(v) == "integer" then return string.format("%d", v) end
  if v == math.floor(v) and math.abs(v) < 1e15 then return string.format("%d", math.tointeger(v)) end
  local a = math.abs(v)
  if a >= 1e6 or a < 1e-3 then return string.format("%.3e", v) end
  local s = string.format("%.4g", v)
  if s:find("e") then s = string.format("%.1f", v) end
  return s
end

local function cell_text(v)
  if v == nil then return "-" end
  if type(v) == "number" then return lab.format_number(v) end
  return tostring(v)
end

-- L:table(header, rows [, {title=}]): prints aligned columns (numbers right-aligned) and keeps
-- the raw values for the JSON results.
function Lab:table(header, rows, opts)
  if type(header) ~= "table" then error("L:table: argument 1 must be a list of column names", 2) end
  if type(rows) ~= "table" then error("L:table: argument 2 must be a list of rows", 2) end
  local ncol = #header
  local text, numeric, width = {}, {}, {}
  for c = 1, ncol do width[c] = utf8.len(tostring(header[c])) or #tostring(header[c]) end
  for r, row in ipairs(rows) do
    if type(row) ~= "table" then error(string.format("L:table: row %d must be a list", r), 2) end
    text[r] = {}
    for c = 1, math.max(ncol, #row) do
      local s = cell_text(row[c])
      text[r][c] = s
      if type(row[c]) == "number" then numeric[c] = true end
      width[c] = math.max(width[c] or 0, utf8.len(s) or #s)
    end
  end
  local function pad(s, w, right)
    local fill = string.rep(" ", w - (utf8.len(s) or #s))
    return right and (fill .. s) or (s .. fill)
  end
  local function line(cells)
    local parts = {}
    for c = 1, #width do parts[c] = pad(cells[c] or "", width[c], numeric[c]) end
    return "  " .. table.concat(parts, "  ")
  end
  local head = {}
  for c = 1, #width do head[c] = tostring(header[c] or "") end
  print(line(head))
  local rule = {}
  for c = 1, #width do rule[c] = string.rep("-", width[c]) end
  print("  " .. table.concat(rule, "  "))
  for r = 1, #rows do print(line(text[r])) end
  local raw = json.array({})
  for r, row in ipairs(rows) do
    local copy = json.array({})
    for c = 1, #width do
      local v = row[c]
      if type(v) ~= "number" and type(v) ~= "boolean" and v ~= nil then v = tostring(v) end
      copy[c] = v == nil and "" or v
    end
    raw[r] = copy
  end
  local hcopy = json.array({})
  for c = 1, #width do hcopy[c] = head[c] end
  self.tables[#self.tables + 1] = {
    title = opts and opts.title or self:current_section(), header = hcopy, rows = raw,
  }
end

local verdict_words = { [true] = "HOLDS", [false] = "REFUTED" }

function Lab:verdict(claim, measured, holds)
  if holds ~= nil and type(holds) ~= "boolean" then
    error("L:verdict: argument 3 must be true, false or nil (unclear)", 2)
  end
  local word = verdict_words[holds] or "UNCLEAR"
  claim, measured = tostring(claim), measured ~= nil and tostring(measured) or ""
  self.verdicts[#self.verdicts + 1] = {
    claim = claim, measured = measured, verdict = word, section = self:current_section(),
  }
  print(string.format("  %-9s %s", "[" .. word .. "]", claim))
  if measured ~= "" then print(string.format("  %-9s measured: %s", "", measured)) end
end

function Lab:record(key, value)
  if type(key) ~= "string" then error("L:record: argument 1 must be a string key", 2) end
  local ok, err = pcall(json.encode, value)
  if not ok then error("L:record: value for '" .. key .. "' cannot be written as JSON: " .. err, 2) end
  self.records[key] = value
end

function Lab:fail(msg)
  msg = tostring(msg)
  self.failures[#self.failures + 1] = msg
  io.stderr:write(string.format("%s: FAIL: %s\n", self.name, msg))
end

-- L:gpu() --> ok, why. Without a device the lab prints it once and should stop measuring.
function Lab:gpu()
  if self.gpu_state == nil then
    local ok, why = false, "the cuda module is not loaded"
    if type(cuda) == "table" and cuda.available then ok, why = cuda.available() end
    self.gpu_state = { available = ok and true or false, reason = not ok and tostring(why) or nil }
    if not ok then print(string.format("no GPU: %s — kernels compiled only", tostring(why))) end
  end
  return self.gpu_state.available, self.gpu_state.reason
end

-- ---- progress ------------------------------------------------------------------------------

local function progress_enabled(L)
  if L.progress_on == nil then
    local env = os.getenv("GPULAB_PROGRESS")
    if env == "1" then L.progress_on = true
    elseif env == "0" then L.progress_on = false
    else
      -- pure Lua cannot ask isatty(); the shell can, and inherits our stderr
      local ok = os.execute("test -t 2")
      L.progress_on = ok == true
    end
  end
  return L.progress_on
end

-- L:progress(i, n, label): a bar on stderr while a sweep runs (terminal only).
function Lab:progress(i, n, label)
  if not progress_enabled(self) then return end
  if type(i) ~= "number" or type(n) ~= "number" or n <= 0 then return end
  local frac = math.max(0, math.min(1, i / n))
  local w = 30
  local filled = math.floor(frac * w + 0.5)
  io.stderr:write(string.format("\r  %s [%s%s] %d/%d\27[K", label and tostring(label) or "",
    string.rep("#", filled), string.rep(".", w - filled), math.floor(i), math.floor(n)))
  if i >= n then io.stderr:write("\n") end
  io.stderr:flush()
end

-- ---- pictures ------------------------------------------------------------------------------

local function is_dir(path)
  -- "path/." opens only when path is a folder
  local f = io.open(path .. "/.", "r")
  if f then f:close() end
  return f ~= nil
end

-- Where a picture named `file` goes: PREFIX-file, or PREFIX/file when PREFIX is a folder.
-- A prefix given as a file name ("out/run.svg") loses its extension: out/run-file.svg.
function Lab:picture_path(file)
  if not self.svg_prefix then return nil end
  local p = self.svg_prefix
  if p:sub(-1) == "/" or is_dir(p) then return (p:gsub("/*$", "")) .. "/" .. file end
  return (p:gsub("%.[sS][vV][gG]$", "")) .. "-" .. file
end

local function picture(L, kind, spec, render)
  if type(spec) ~= "table" then error("L:svg_" .. kind .. ": expected a table", 3) end
  local file = spec.file
  if type(file) ~= "string" or file == "" or file:find("/") then
    error("L:svg_" .. kind .. ": field 'file' must be a plain file name like 'sweep.svg'", 3)
  end
  if not file:match("%.svg$") then file = file .. ".svg" end
  local text = render(spec) -- rendered even when not written, so bad data shows up in CI
  local path = L:picture_path(file)
  if path then
    svg.write(path, text)
    print("  picture: " .. path)
  end
  L.pictures[#L.pictures + 1] = { kind = kind, file = file, path = path, title = spec.title }
  return path, text
end

function Lab:svg_lines(spec) return picture(self, "lines", spec, svg.lines) end
function Lab:svg_bars(spec) return picture(self, "bars", spec, svg.bars) end
function Lab:svg_timeline(spec) return picture(self, "timeline", spec, svg.timeline) end

-- ---- the end -------------------------------------------------------------------------------

function Lab:results()
  close_section(self)
  local params = {}
  for k, v in pairs(self.params) do params[k] = v end
  local sections = json.array({})
  for i, s in ipairs(self.sections) do sections[i] = { title = s.title, seconds = s.seconds } end
  return {
    name = self.name, title = self.title, claims = self.claims, quick = self.quick,
    params = params, tables = json.array(self.tables), verdicts = json.array(self.verdicts),
    records = self.records, pictures = json.array(self.pictures), notes = json.array(self.notes),
    failures = json.array(self.failures), gpu = self.gpu_state,
    timings = { total_s = wall_s() - self.started, cpu_s = os.clock() - self.cpu_started, sections = sections },
  }
end

-- Prints the verdict summary, writes the JSON results; returns the exit status for os.exit.
function Lab:finish()
  local results = self:results()
  local count = { HOLDS = 0, REFUTED = 0, UNCLEAR = 0 }
  for _, v in ipairs(self.verdicts) do count[v.verdict] = count[v.verdict] + 1 end
  print()
  print(string.format("## Verdicts: %d holds, %d refuted, %d unclear", count.HOLDS, count.REFUTED, count.UNCLEAR))
  for _, v in ipairs(self.verdicts) do print(string.format("  %-9s %s", "[" .. v.verdict .. "]", v.claim)) end
  if self.json_path then
    local f, err = io.open(self.json_path, "w")
    if not f then
      self:fail("cannot write the JSON results: " .. tostring(err))
    else
      f:write(json.encode(results, { indent = "  " }), "\n")
      f:close()
      print("results: " .. self.json_path)
    end
  end
  print(string.format("%s: %.2f s%s", self.name, results.timings.total_s,
    #self.failures > 0 and string.format(", %d failure(s)", #self.failures) or ""))
  return #self.failures == 0 and 0 or 1
end

Lab.__tostring = function(self) return string.format("gpulab.lab(%s)", self.name) end

return lab
