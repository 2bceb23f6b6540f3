-- gpulab.lab — the harness every lab is written against. A lab reads like a notebook:
--
--   local harness = require("gpulab.lab")
--   local lab = harness.new{ name="launch_anatomy", title="...", claims="seed §1",
--                      params = { {name="rows", default=8192, help="rows per block"} } }
--   lab:section("Setup"); lab:note("...")
--   lab:table({"blocks", "time (ms)"}, rows)
--   lab:verdict("a launch returns before the kernel ends", "host 4 µs vs GPU 20 ms", true)
--   lab:svg_lines{file="sweep.svg", series={...}}
--   os.exit(lab:finish())
--
-- Options come from the script's `arg`: --quick, --json FILE, --svg PREFIX, --help and one
-- --name=value (or --name value) per declared parameter, typed from its default.
local json = require("gpulab.json")
local svg = require("gpulab.svg")
local html = require("gpulab.html")
local output = require("gpulab.output")

local harness = {}
local Lab = {}

-- Argument errors in the format the C bindings use (bindings/errors.h): "bad argument #n to
-- 'fn' (...)", n counted after self for methods, an options table's fields as "field 'x': ...".
-- level: as error()'s, seen from the function that checks its arguments.
local function arg_error(fn, n, msg, level)
  error(string.format("bad argument #%d to '%s' (%s)", n, fn, msg), (level or 2) + 1)
end

local function field_error(fn, n, field, msg, level)
  arg_error(fn, n, string.format("field '%s': %s", field, msg), (level or 2) + 1)
end
-- The first index in 1..n that holds nil, n being the largest positive integer key: a list with a
-- hole stops ipairs early, and # may count to either side of it. nil for a list without holes.
local function first_hole(t)
  local count, max = 0, 0
  for k in next, t do
    if math.type(k) == "integer" and k > 0 then
      count = count + 1
      if k > max then max = k end
    end
  end
  if count == max then return nil end
  for i = 1, max do
    if rawget(t, i) == nil then return i end
  end
end

Lab.__index = Lab
Lab.__name = "gpulab.lab"

-- ---- time ------------------------------------------------------------------------------------

-- Seconds from a monotonic clock for the lab's timings: cuda.now() (microseconds or finer) in
-- gpulab; /proc/uptime (10 ms) or os.time (1 s) only where the cuda module is absent.
local function wall_s()
  if type(cuda) == "table" and type(cuda.now) == "function" then return cuda.now() end
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

local function fail_usage(lab, msg)
  error(setmetatable({ message = string.format("%s: %s (see --help)", lab.name, msg) }, UsageError), 0)
end

local function option_name(p) return (p.name:gsub("_", "-")) end

local function known_options(lab)
  local list = { "--quick", "--json FILE", "--svg PREFIX", "--html FILE", "--help" }
  for _, p in ipairs(lab.param_specs) do
    list[#list + 1] = "--" .. option_name(p) .. (type(p.default) == "boolean" and "" or "=VALUE")
  end
  return table.concat(list, ", ")
end

-- Converts the text of an option to the type of the parameter's default.
local function convert(lab, p, text)
  local opt = "--" .. option_name(p)
  local d = p.default
  if type(d) == "number" then
    local v = tonumber(text)
    if v == nil or v ~= v or v == math.huge or v == -math.huge then
      fail_usage(lab, string.format("option %s expects a number, got '%s'", opt, text))
    end
    if math.type(d) == "integer" then
      local i = math.tointeger(v)
      if i == nil then fail_usage(lab, string.format("option %s expects an integer, got '%s'", opt, text)) end
      v = i
    end
    if p.min and v < p.min then fail_usage(lab, string.format("option %s must be >= %s, got %s", opt, p.min, text)) end
    if p.max and v > p.max then fail_usage(lab, string.format("option %s must be <= %s, got %s", opt, p.max, text)) end
    if p.multiple_of and v % p.multiple_of ~= 0 then
      fail_usage(lab, string.format("option %s must be a multiple of %s, got %s", opt, p.multiple_of, text))
    end
    return v
  elseif type(d) == "boolean" then
    local t = text:lower()
    if t == "true" or t == "1" or t == "yes" or t == "on" then return true end
    if t == "false" or t == "0" or t == "no" or t == "off" then return false end
    fail_usage(lab, string.format("option %s expects true or false, got '%s'", opt, text))
  end
  return text
end

local function find_param(lab, name)
  for _, p in ipairs(lab.param_specs) do
    if p.name == name or option_name(p) == name then return p end
  end
end

-- Options stored by the host (`gpulab --json FILE lab.lua`) live in the Lua registry.
local function host_json_option()
  local ok, reg = pcall(function() return debug and debug.getregistry and debug.getregistry() end)
  if ok and type(reg) == "table" and type(reg["gpulab.json"]) == "string" then return reg["gpulab.json"] end
  return nil
end

local function parse_args(lab, args)
  local i, n = 1, #args
  local function value_of(opt, inline)
    if inline then return inline end
    i = i + 1
    if i > n then fail_usage(lab, string.format("option %s needs a value", opt)) end
    return args[i]
  end
  while i <= n do
    local a = tostring(args[i])
    local name, inline = a:match("^%-%-([^=]+)=(.*)$")
    if not name then name = a:match("^%-%-(.+)$") end
    if a == "--help" or a == "-h" then
      lab.help_requested = true
    elseif name == "quick" then
      if inline then lab.quick = convert(lab, { name = "quick", default = true }, inline) else lab.quick = true end
    elseif name == "json" then
      lab.json_path = value_of("--json", inline)
      if lab.json_path == "" then fail_usage(lab, "option --json needs a file name") end
    elseif name == "svg" then
      lab.svg_prefix = value_of("--svg", inline)
      if lab.svg_prefix == "" then fail_usage(lab, "option --svg needs a file prefix or folder") end
    elseif name == "html" then
      lab.html_path = value_of("--html", inline)
      if lab.html_path == "" then fail_usage(lab, "option --html needs a file name") end
    elseif name and find_param(lab, name) then
      local p = find_param(lab, name)
      lab.params_given[p.name] = true
      if type(p.default) == "boolean" and not inline then
        lab.params[p.name] = true
      else
        lab.params[p.name] = convert(lab, p, value_of("--" .. name, inline))
      end
    elseif name and name:match("^no%-") and find_param(lab, name:sub(4)) and
        type(find_param(lab, name:sub(4)).default) == "boolean" and not inline then
      lab.params[find_param(lab, name:sub(4)).name] = false
      lab.params_given[find_param(lab, name:sub(4)).name] = true
    else
      fail_usage(lab, string.format("unknown option '%s' (known: %s)", a, known_options(lab)))
    end
    i = i + 1
  end
end

local function print_help(lab)
  local out = {}
  out[#out + 1] = string.format("%s%s", lab.name, lab.title and (": " .. lab.title) or "")
  if lab.claims then out[#out + 1] = "claims: " .. lab.claims end
  out[#out + 1] = "options:"
  local rows = {
    { "--quick", "short run (a few seconds) with smaller sweeps" },
    { "--json FILE", "write the results (tables, verdicts, records) as JSON to FILE" },
    { "--svg PREFIX", "write pictures as PREFIX-<name>.svg (or into PREFIX/ when it is a folder)" },
    { "--html FILE", "write a self-contained HTML report (claims, verdicts, evidence, tables, pictures) to FILE" },
    { "--help", "show this help" },
  }
  for _, p in ipairs(lab.param_specs) do
    local form = "--" .. option_name(p) .. (type(p.default) == "boolean" and "" or "=" .. type(p.default):upper())
    local rules = {}
    if p.multiple_of then rules[#rules + 1] = "a multiple of " .. p.multiple_of end
    if p.quick ~= nil then rules[#rules + 1] = "--quick: " .. tostring(p.quick) end
    rows[#rows + 1] = { form, string.format("%s (default %s%s)", p.help or "", tostring(p.default),
      #rules > 0 and "; " .. table.concat(rules, "; ") or "") }
  end
  local w = 0
  for _, r in ipairs(rows) do w = math.max(w, #r[1]) end
  for _, r in ipairs(rows) do out[#out + 1] = string.format("  %-" .. w .. "s  %s", r[1], r[2]) end
  io.stdout:write(table.concat(out, "\n"), "\n")
end

local function check_spec(spec)
  if type(spec) ~= "table" then error("harness.new: expected a table {name=, title=, params=}", 3) end
  if type(spec.name) ~= "string" or spec.name == "" then
    error("harness.new: field 'name' must be a non-empty string", 3)
  end
  for _, f in ipairs { "title", "claims" } do
    if spec[f] ~= nil and type(spec[f]) ~= "string" then
      error(string.format("harness.new: field '%s' must be a string, got %s", f, type(spec[f])), 3)
    end
  end
  local params = spec.params or {}
  if type(params) ~= "table" then error("harness.new: field 'params' must be a list", 3) end
  local seen = {}
  for i, p in ipairs(params) do
    if type(p) ~= "table" or type(p.name) ~= "string" or not p.name:match("^[%a_][%w_]*$") then
      error(string.format("harness.new: params[%d] needs a name made of letters, digits and _", i), 3)
    end
    local t = type(p.default)
    if t ~= "number" and t ~= "boolean" and t ~= "string" then
      error(string.format("harness.new: param '%s' needs a number, boolean or string default", p.name), 3)
    end
    if seen[p.name] or ({ quick = 1, json = 1, svg = 1, html = 1, help = 1 })[p.name] then
      error(string.format("harness.new: param '%s' is declared twice or shadows a harness option", p.name), 3)
    end
    if p.multiple_of ~= nil and (math.type(p.multiple_of) ~= "integer" or p.multiple_of < 1) then
      error(string.format("harness.new: param '%s': multiple_of must be a positive integer", p.name), 3)
    end
    for _, v in ipairs { p.default, p.quick } do
      if p.multiple_of and type(v) == "number" and v % p.multiple_of ~= 0 then
        error(string.format(
          "harness.new: param '%s': %s is not a multiple of %d", p.name, tostring(v), p.multiple_of), 3)
      end
    end
    if p.quick ~= nil and type(p.quick) ~= t then
      error(string.format("harness.new: param '%s': its quick value must have the default's type", p.name), 3)
    end
    for _, bound in ipairs { "min", "max" } do
      local b = p[bound]
      if b ~= nil and (t ~= "number" or type(b) ~= "number" or b ~= b) then
        error(string.format("harness.new: param '%s': %s must be a number and the default a number", p.name, bound), 3)
      end
    end
    for _, v in ipairs { p.default, p.quick } do -- the command line's bounds hold for these too
      if type(v) == "number" and ((p.min and v < p.min) or (p.max and v > p.max)) then
        error(string.format("harness.new: param '%s': %s is outside [%s, %s]", p.name, tostring(v),
          tostring(p.min or "-inf"), tostring(p.max or "inf")), 3)
      end
    end
    seen[p.name] = true
  end
  return params
end

-- ---- outputs, checked before any work ----------------------------------------------------

local is_dir = output.is_dir

local OutputError = { __tostring = function(e) return e.message end }

local function fail_output(lab, what, option, path, why)
  error(setmetatable({ message = string.format("%s: cannot write %s to %s (%s): %s; checked before any work, " ..
    "nothing was run", lab.name, what, path, option, why) }, OutputError), 0)
end

-- A probe file beside where the pictures go: PREFIX/ must be a folder, PREFIX-x.svg's folder must exist.
local function probe_pictures(lab)
  local p = lab.svg_prefix
  if p:sub(-1) == "/" and not is_dir(p) then
    fail_output(lab, "the pictures", "--svg", p, "no such folder")
  end
  local probe = lab:picture_path(".gpulab-write-check.svg")
  local ok, why = output.probe(probe)
  if not ok then fail_output(lab, "the pictures", "--svg", p, why) end
end

-- Every output the lab was asked for is tried before it measures anything.
local function check_outputs(lab)
  if lab.json_path then
    local ok, why = output.probe(lab.json_path)
    if not ok then fail_output(lab, "the JSON results", "--json", lab.json_path, why) end
  end
  if lab.svg_prefix then probe_pictures(lab) end
  if lab.html_path then
    local ok, why = output.probe(lab.html_path)
    if not ok then fail_output(lab, "the HTML report", "--html", lab.html_path, why) end
  end
end

-- The folder of the file that called harness.new (the lab), from its chunk name ("@labs/x.lua"),
-- else from the script's arg[0]; "." when the file has no folder part.
local function lab_folder()
  local src
  for level = 3, 6 do
    local info = debug and debug.getinfo and debug.getinfo(level, "S")
    if not info then break end
    if type(info.source) == "string" and info.source:sub(1, 1) == "@"
        and not info.source:find("gpulab/lab%.lua$") then
      src = info.source:sub(2)
      break
    end
  end
  src = src or (_G.arg and _G.arg[0])
  if type(src) ~= "string" then return "." end
  local dir = src:match("^(.*)/[^/]*$")
  if dir == nil then return "." end
  if dir == "" then return "/" end
  return dir
end

-- harness.new{name=, title=, claims=, params={...}, args=?}: args defaults to the global `arg`.
function harness.new(spec)
  local params = check_spec(spec)
  local lab = setmetatable({
    name = spec.name, title = spec.title, claims = spec.claims,
    quick = false, params = {}, param_specs = params,
    tables = {}, verdicts = {}, records = {}, pictures = {}, notes = {}, failures = {},
    sections = {}, started = wall_s(), cpu_started = os.clock(), params_given = {},
    claim_list = {}, claim_index = {},
    started_clock = (type(cuda) == "table" and cuda.now) and cuda.now() or wall_s(),
  }, Lab)
  lab.dir = lab_folder()
  for _, p in ipairs(params) do lab.params[p.name] = p.default end
  local args = spec.args or _G.arg or {}
  parse_args(lab, args)
  if lab.help_requested then
    print_help(lab)
    os.exit(0)
  end
  -- quick values apply to what the command line left alone, so the printed params are the sizes used
  if lab.quick then
    for _, p in ipairs(params) do
      if p.quick ~= nil and not lab.params_given[p.name] then lab.params[p.name] = p.quick end
    end
  end
  for _, f in ipairs { "budget_s", "quick_budget_s" } do
    if spec[f] ~= nil and (type(spec[f]) ~= "number" or spec[f] <= 0 or spec[f] ~= spec[f]) then
      error("harness.new: field '" .. f .. "' must be a positive number of seconds", 2)
    end
  end
  -- the time the lab may spend measuring again to settle a comparison (see lab:compare)
  lab.budget_s = lab.quick and (spec.quick_budget_s or 30) or (spec.budget_s or 180)
  lab.json_path = lab.json_path or host_json_option() or os.getenv("GPULAB_JSON")
  if lab.json_path == "" then lab.json_path = nil end
  if os.getenv("GPULAB_SWEEP_CHILD") then
    -- a sweep's child runs the lab up to the sweep for its share of configurations alone: the
    -- parent writes the results, the report and every picture (children that wrote them too
    -- would overwrite the parent's files with their own, at the same moment)
    lab.json_path, lab.svg_prefix, lab.html_path = nil, nil, nil
  end
  check_outputs(lab)
  local head = lab.name .. (lab.title and (" — " .. lab.title) or "")
  print(head)
  print(string.rep("=", utf8.len(head) or #head))
  if lab.claims then print("claims: " .. lab.claims) end
  local shown = {}
  for _, p in ipairs(params) do shown[#shown + 1] = string.format("%s=%s", p.name, tostring(lab.params[p.name])) end
  if lab.quick then table.insert(shown, 1, "quick") end
  if #shown > 0 then print("params: " .. table.concat(shown, " ")) end
  return lab
end

-- ---- notebook output ---------------------------------------------------------------------

local function close_section(lab)
  local s = lab.sections[#lab.sections]
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
function harness.format_number(v)
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
  if type(v) == "number" then return harness.format_number(v) end
  return tostring(v)
end

-- lab:table(header, rows [, {title=}]): prints aligned columns (numbers right-aligned) and keeps
-- the raw values for the JSON results.
function Lab:table(header, rows, opts)
  if type(header) ~= "table" then arg_error("lab:table", 1, "list of column names expected") end
  if type(rows) ~= "table" then arg_error("lab:table", 2, "list of rows expected") end
  local hole = first_hole(rows)
  if hole then
    arg_error("lab:table", 2, string.format("row %d is nil; a list of rows without holes expected", hole))
  end
  if opts ~= nil and type(opts) ~= "table" then arg_error("lab:table", 3, "options table {title=} expected") end
  local ncol = #header
  local text, numeric, width = {}, {}, {}
  for c = 1, ncol do width[c] = utf8.len(tostring(header[c])) or #tostring(header[c]) end
  for r, row in ipairs(rows) do
    if type(row) ~= "table" then error(string.format("lab:table: row %d must be a list", r), 2) end
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

-- ---- claims --------------------------------------------------------------------------------

-- lab:claim{id=, text=, source= | seed= | own=}: declared at the top of a lab. `source` cites
-- where the claim comes from, in any words ("Luo et al. 2024, Table 3", a URL, a document and
-- section); `seed="§N"` names a section of the seed notes; `own=true` marks the lab's own
-- question. Exactly one of the three. lab:verdict(id, ...) judges it; a claim never judged is
-- reported UNCLEAR (judged=false in the JSON) at the end.
function Lab:claim(spec)
  if type(spec) ~= "table" then error("lab:claim: expected a table {id=, text=, source=|seed=|own=}", 2) end
  if type(spec.id) ~= "string" or not spec.id:match("^[%w_%.%-]+$") then
    error("lab:claim: field 'id' must be a short name of letters, digits, '_', '.', '-'", 2)
  end
  if type(spec.text) ~= "string" or spec.text == "" then error("lab:claim: field 'text' must be a sentence", 2) end
  if spec.own ~= nil and spec.own ~= true then error("lab:claim: field 'own' must be true when given", 2) end
  local own = spec.own == true
  local given = (own and 1 or 0) + (spec.seed ~= nil and 1 or 0) + (spec.source ~= nil and 1 or 0)
  if given ~= 1 then
    error("lab:claim: '" .. spec.id .. "' needs exactly one of source=\"...\" (any citation), seed=\"§N\" " ..
      "(the seed sentence it tests) or own=true (the lab's own question)", 2)
  end
  if spec.seed ~= nil and (type(spec.seed) ~= "string" or not spec.seed:match("^§%d+$")) then
    error("lab:claim: field 'seed' must name a seed section like \"§3\"", 2)
  end
  if spec.source ~= nil and (type(spec.source) ~= "string" or not spec.source:find("%S")) then
    error("lab:claim: field 'source' must be a non-empty citation string", 2)
  end
  if self.claim_index[spec.id] then error("lab:claim: '" .. spec.id .. "' is declared twice", 2) end
  local source = spec.source or (spec.seed and ("seed " .. spec.seed)) or "the lab's own question"
  local c = { id = spec.id, seed = spec.seed, own = own, text = spec.text, source = source, judged = false }
  self.claim_list[#self.claim_list + 1] = c
  self.claim_index[c.id] = c
  return c
end

-- ---- statistics ----------------------------------------------------------------------------

-- Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom; 1.96 beyond.
local T975 = { 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
  2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
  2.045, 2.042 }

local function finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end

-- harness.summarize(times_ms [, extra]) --> a result shaped like cuda.measure's: mean, median, min,
-- max, stdev, noise (stdev / mean), ci95 = mean ± t·stdev/√n, samples, times; `extra` adds
-- fields (regime, rejected, sm_clock_mhz). Used to pool the samples of two measurements.
function harness.summarize(times, extra)
  if type(times) ~= "table" or #times == 0 then
    arg_error("harness.summarize", 1, "non-empty list of times in ms expected")
  end
  local hole = first_hole(times)
  if hole then
    arg_error("harness.summarize", 1, string.format("sample %d is nil; a list of times without holes expected", hole))
  end
  if extra ~= nil and type(extra) ~= "table" then arg_error("harness.summarize", 2, "table of fields expected") end
  local v, sum = {}, 0
  for i, t in ipairs(times) do
    if not finite(t) or t < 0 then
      error(string.format("harness.summarize: sample %d is %s; times must be finite and >= 0", i, tostring(t)), 2)
    end
    v[i] = t
    sum = sum + t
  end
  table.sort(v)
  local n = #v
  local mean = sum / n
  local ss = 0
  for _, t in ipairs(v) do ss = ss + (t - mean) ^ 2 end
  local sd = n > 1 and math.sqrt(ss / (n - 1)) or 0
  local half = n > 1 and (T975[n - 1] or 1.96) * sd / math.sqrt(n) or math.huge
  local r = {
    mean = mean, median = n % 2 == 1 and v[(n + 1) // 2] or (v[n // 2] + v[n // 2 + 1]) / 2,
    min = v[1], max = v[n], stdev = sd, noise = mean > 0 and sd / mean or 0,
    ci95 = { math.max(0, mean - half), mean + half }, samples = n, rejected = 0, regime = "hot",
    times = {},
  }
  for i, t in ipairs(times) do r.times[i] = t end
  for k, x in pairs(extra or {}) do r[k] = x end
  return r
end

-- The pool of two results of the same measurement: samples concatenated, summarised again.
function harness.pool(a, b)
  for argn, r in ipairs { a, b } do
    if type(r) ~= "table" or type(r.times) ~= "table" then
      arg_error("harness.pool", argn, "a result with its list of times (times=) expected; cuda.stats_of and " ..
        "cuda.bench results keep no times to pool")
    end
  end
  local times = {}
  for _, t in ipairs(a.times) do times[#times + 1] = t end
  for _, t in ipairs(b.times) do times[#times + 1] = t end
  return harness.summarize(times, { regime = a.regime, rejected = (a.rejected or 0) + (b.rejected or 0),
    sm_clock_mhz = a.sm_clock_mhz, engine = a.engine, label = a.label })
end

-- harness.measure(fn, opts) --> cuda.measure(fn, opts) with every one of cuda.measure's options
-- handed on (regime, min_samples, max_samples, min_time, max_noise, timeout, stream, throttle,
-- blocking, warmup, batch, l2_reset) and `label=` copied into the result; engine = "cuda.measure".
-- Any other option raises: an option dropped in silence measures something else than asked.
local MEASURE_OPTS = { "regime", "min_samples", "max_samples", "min_time", "max_noise", "timeout", "stream",
  "throttle", "blocking", "warmup", "batch", "l2_reset" }
local MEASURE_KNOWN = { label = true }
for _, k in ipairs(MEASURE_OPTS) do MEASURE_KNOWN[k] = true end
function harness.measure(fn, opts)
  local t = type(fn)
  if t == "nil" or t == "boolean" or t == "number" or t == "string" then -- callables: cuda.measure checks
    arg_error("harness.measure", 1, "function that enqueues the work expected, got " .. t)
  end
  opts = opts or {}
  if type(opts) ~= "table" then arg_error("harness.measure", 2, "options table expected") end
  for k in pairs(opts) do
    if not MEASURE_KNOWN[k] then
      arg_error("harness.measure", 2, string.format("unknown option '%s' (known: %s, label)", tostring(k),
        table.concat(MEASURE_OPTS, ", ")))
    end
  end
  if type(cuda) ~= "table" or type(cuda.measure) ~= "function" then
    error("harness.measure: this build has no cuda.measure", 2)
  end
  local o = {}
  for _, k in ipairs(MEASURE_OPTS) do o[k] = opts[k] end
  local r = cuda.measure(fn, o)
  r.engine = r.engine or "cuda.measure"
  if opts.label ~= nil then r.label = opts.label end
  return r
end

local function check_result(r, fn, argn)
  if type(r) == "table" and finite(r.mean) and type(r.ci95) == "table" and type(r.ci95[1]) == "number"
      and type(r.ci95[2]) == "number" and not (finite(r.ci95[1]) and finite(r.ci95[2])) then
    -- a summary of fewer than two samples has no interval: say so rather than "not a result"
    arg_error(fn, argn, string.format("the result's 95%% interval is {%s, %s}: a result of %s sample(s) bounds"
      .. " nothing; take at least 2", tostring(r.ci95[1]), tostring(r.ci95[2]), tostring(r.samples or r.n or "?")), 3)
  end
  if type(r) ~= "table" or not finite(r.mean) or type(r.ci95) ~= "table" or not finite(r.ci95[1])
      or not finite(r.ci95[2]) or r.ci95[1] > r.ci95[2] then
    arg_error(fn, argn, "measure result {mean=, ci95={lo, hi}, ...} or a function returning one expected", 3)
  end
  if r.mean <= 0 then
    arg_error(fn, argn, string.format("a mean time of %s: no ratio can be formed", tostring(r.mean)), 3)
  end
end

-- harness.ratio(a, b) --> a.mean / b.mean and its interval {lo, hi} from the bounds of the two 95%
-- intervals (a.lo / b.hi, a.hi / b.lo): each bound is the most extreme ratio the two intervals
-- allow, so the pair covers the true ratio whenever both intervals cover their means (>= 90%
-- for independent runs; wider, never narrower, than a delta-method interval). An interval of b
-- that reaches 0 leaves the upper bound infinite: nothing can be decided from it.
function harness.ratio(a, b)
  check_result(a, "harness.ratio", 1)
  check_result(b, "harness.ratio", 2)
  return a.mean / b.mean, { a.ci95[1] / b.ci95[2], b.ci95[1] > 0 and a.ci95[2] / b.ci95[1] or math.huge }
end

-- The decision for a time ratio interval against `against` (default 1) ± margin.
function harness.decide(ci, margin, against)
  if type(ci) ~= "table" or type(ci[1]) ~= "number" or type(ci[2]) ~= "number" or ci[1] > ci[2] then
    arg_error("harness.decide", 1, "a ratio interval {lo, hi} expected")
  end
  if not finite(margin) or margin < 0 then
    arg_error("harness.decide", 2, "a band half-width >= 0 expected (0.01 is 1%), got " .. tostring(margin))
  end
  if against ~= nil and (not finite(against) or against <= 0) then
    arg_error("harness.decide", 3, "a positive ratio expected, got " .. tostring(against))
  end
  local t = against or 1
  if ci[2] < t * (1 - margin) then return "faster" end
  if ci[1] > t * (1 + margin) then return "slower" end
  if ci[1] >= t * (1 - margin) and ci[2] <= t * (1 + margin) then return "same" end
  return "unclear"
end

-- harness.holds(decisions, rule) --> true | false | nil: the verdict a claim gets from
-- lab:compare's decisions. `decisions` is one decision ("faster", "slower", "same", "unclear")
-- or a list of them (one per size, per pair); rule = {holds = {...}, refuted = {...}, valid = v}
-- lists the decisions that hold and that refute the claim (no word in both). Refuted (false) when
-- a decision is one of `refuted`; holds (true) when every decision is one of `holds`; else nil
-- (unclear): an "unclear" decision, a decision in neither list, no decision at all. valid = false
-- (the evidence cannot be judged: a kernel's output was wrong) gives nil whatever was decided.
local DECISION_WORDS = { faster = true, slower = true, same = true, unclear = true }

local function decision_set(rule, field)
  local list = rule[field]
  if list == nil then return {} end
  if type(list) ~= "table" then field_error("harness.holds", 2, field, "list of decisions expected", 3) end
  local set = {}
  for i, w in ipairs(list) do
    if not DECISION_WORDS[w] or w == "unclear" then
      field_error("harness.holds", 2, field, string.format("entry %d is %s; faster, slower or same expected", i,
        type(w) == "string" and ("'" .. w .. "'") or type(w)), 3)
    end
    set[w] = true
  end
  return set
end

function harness.holds(decisions, rule)
  if type(rule) ~= "table" then arg_error("harness.holds", 2, "rule {holds=, refuted=, valid=} expected") end
  for k in pairs(rule) do
    if k ~= "holds" and k ~= "refuted" and k ~= "valid" then
      arg_error("harness.holds", 2, string.format("unknown field '%s' (known: holds, refuted, valid)", tostring(k)))
    end
  end
  local yes, no = decision_set(rule, "holds"), decision_set(rule, "refuted")
  for w in pairs(yes) do
    if no[w] then field_error("harness.holds", 2, "refuted", "'" .. w .. "' is in holds too") end
  end
  if rule.valid ~= nil and type(rule.valid) ~= "boolean" then
    field_error("harness.holds", 2, "valid", "boolean expected, got " .. type(rule.valid))
  end
  if type(decisions) ~= "table" and type(decisions) ~= "string" then
    arg_error("harness.holds", 1, "a decision or a list of decisions expected, got " .. type(decisions))
  end
  local list = type(decisions) == "table" and decisions or { decisions }
  local n = 0
  for k in next, list do -- a hole would end ipairs early, and the decisions after it go unread
    n = n + 1
    if math.type(k) ~= "integer" or k < 1 then
      arg_error("harness.holds", 1, "a list of decisions expected, got a " .. type(k) .. " key")
    end
  end
  for i = 1, n do
    if rawget(list, i) == nil then
      arg_error("harness.holds", 1, string.format("entry %d is nil; a list of decisions without holes expected", i))
    end
  end
  for i, d in ipairs(list) do
    if not DECISION_WORDS[d] then
      arg_error("harness.holds", 1, string.format("%s is %s; faster, slower, same or unclear expected",
        type(decisions) == "table" and ("entry " .. i) or "the decision",
        type(d) == "string" and ("'" .. d .. "'") or type(d)))
    end
  end
  if rule.valid == false then return nil end
  for _, d in ipairs(list) do if no[d] then return false end end
  if #list == 0 then return nil end
  for _, d in ipairs(list) do if not yes[d] then return nil end end
  return true
end

local function clock_s()
  if type(cuda) == "table" and type(cuda.now) == "function" then return cuda.now() end
  return wall_s()
end

local function pct(x) return string.format("%.2f%%", x * 100) end

-- Why an interval that is neither clearly beyond 1 ± margin nor inside it stays undecided.
local function unclear_reason(ci, margin, spent, against)
  local width = ci[2] - ci[1]
  local t = against or 1
  local why
  if width > 2 * margin * t then
    why = string.format("effect smaller than the noise: the ratio interval [%.4f, %.4f] is %s wide, the " ..
      "margin band around %.4f ±%s", ci[1], ci[2], pct(width), t, pct(margin))
  else
    why = string.format("effect at the margin: the ratio interval [%.4f, %.4f] crosses %.4f ± %s", ci[1], ci[2],
      t, pct(margin))
  end
  if spent then why = why .. "; " .. spent end
  return why
end

-- A result and its re-measurement pooled, for lab:compare: both must keep their samples.
local function pool_for_compare(r, again, argn)
  if type(r.times) ~= "table" or type(again.times) ~= "table" then
    arg_error("lab:compare", argn, "re-measuring pools the samples, and this result keeps none (times=): " ..
      "cuda.measure's results do, cuda.stats_of's and cuda.bench's do not; pass rounds = 0 to compare once", 4)
  end
  return harness.pool(r, again)
end

-- lab:compare(a, b, {margin=0.01, against=1, rounds=3, remeasure=fn}) --> decision, ratio, {lo, hi}, detail
-- a and b are times (measure results, or functions that return one). The decision is about a's
-- time against b's: "faster" (the whole ratio interval below 1 - margin), "slower" (above
-- 1 + margin), "same" (inside 1 ± margin), else undecided. `against` moves the reference from
-- 1 to another ratio (a threshold: a at least 95% of b's speed is a/b <= 1/0.95). Undecided, the harness measures
-- again and pools the samples — calling a and b when they are functions, or remeasure(round)
-- --> a2, b2 — while rounds and the lab's budget last (lab.budget_s since the lab started); only
-- then "unclear", with the reason in detail.reason. detail also holds both pooled results.
function Lab:compare(a, b, opts)
  opts = opts or {}
  if type(opts) ~= "table" then arg_error("lab:compare", 3, "options table {margin=, rounds=, remeasure=} expected") end
  local margin = opts.margin or 0.01
  if not finite(margin) or margin < 0 or margin >= 1 then
    field_error("lab:compare", 3, "margin", "must be a number in [0, 1), got " .. tostring(opts.margin))
  end
  local rounds = opts.rounds or 3
  if math.type(rounds) ~= "integer" or rounds < 0 then
    field_error("lab:compare", 3, "rounds", "must be an integer >= 0")
  end
  local against = opts.against or 1
  if not finite(against) or against <= 0 then
    field_error("lab:compare", 3, "against", "must be a positive ratio, got " .. tostring(opts.against))
  end
  local remeasure = opts.remeasure
  if remeasure ~= nil and type(remeasure) ~= "function" then
    field_error("lab:compare", 3, "remeasure", "must be a function(round) --> a, b")
  end
  local fa, fb = type(a) == "function" and a or nil, type(b) == "function" and b or nil
  if fa then a = fa() end
  if fb then b = fb() end
  check_result(a, "lab:compare", 1)
  check_result(b, "lab:compare", 2)
  local ratio, ci = harness.ratio(a, b)
  local decision = harness.decide(ci, margin, against)
  local done, spent = 0, nil
  while decision == "unclear" and done < rounds do
    if not (fa or fb or remeasure) then break end
    local used = clock_s() - self.started_clock
    if used >= self.budget_s then
      spent = string.format("budget spent (%.0f s of %.0f s)", used, self.budget_s)
      break
    end
    done = done + 1
    local a2, b2
    if remeasure then a2, b2 = remeasure(done) else a2, b2 = fa and fa(), fb and fb() end
    if a2 then
      check_result(a2, "lab:compare (re-measure)", 1)
      a = pool_for_compare(a, a2, 1)
    end
    if b2 then
      check_result(b2, "lab:compare (re-measure)", 2)
      b = pool_for_compare(b, b2, 2)
    end
    ratio, ci = harness.ratio(a, b)
    decision = harness.decide(ci, margin, against)
  end
  if decision == "unclear" and not spent and (fa or fb or remeasure) and rounds > 0 then
    spent = string.format("%d re-measure round%s spent", done, done == 1 and "" or "s")
  end
  local detail = { a = a, b = b, ratio = ratio, ci = ci, margin = margin, against = against, rounds = done }
  if decision == "unclear" then
    detail.reason = unclear_reason(ci, margin, spent, against)
  end
  detail.decision = decision
  return decision, ratio, ci, detail
end

-- How many samples a result holds: cuda.measure's `samples` is a count, cuda.bench's the list.
local function sample_count(r)
  if math.type(r.samples) == "integer" then return r.samples end
  local list = type(r.samples) == "table" and r.samples or r.times
  return type(list) == "table" and #list or 0
end

-- "1.234 ms [1.230, 1.238] n=40 noise 0.3% hot" for people.
function harness.format_result(r, unit, scale)
  if type(r) ~= "table" or type(r.mean) ~= "number" or type(r.ci95) ~= "table" or type(r.ci95[1]) ~= "number"
      or type(r.ci95[2]) ~= "number" then
    arg_error("harness.format_result", 1, "a result {mean=, ci95={lo, hi}, ...} expected")
  end
  unit, scale = unit or "ms", scale or 1
  local f = harness.format_number
  return string.format("%s %s [%s, %s] n=%d noise %s %s", f(r.mean * scale), unit, f(r.ci95[1] * scale),
    f(r.ci95[2] * scale), sample_count(r), pct(r.noise or 0), tostring(r.regime or "?"))
end

-- What the JSON keeps of a result: no raw samples beyond the first 1000.
local function result_summary(r)
  if type(r) ~= "table" then return nil end
  local out = { mean = r.mean, median = r.median, min = r.min, max = r.max, stdev = r.stdev, noise = r.noise,
    ci95 = json.array({ r.ci95[1], r.ci95[2] }), samples = sample_count(r), rejected = r.rejected,
    sm_clock_mhz = r.sm_clock_mhz, regime = r.regime, engine = r.engine, label = r.label }
  return out
end

-- The evidence of a verdict as printed lines and JSON: a compare detail, or {a=, b=} results,
-- or {results={...}} with labels.
local function evidence_of(ev)
  if ev == nil then return nil, {} end
  if type(ev) ~= "table" then arg_error("lab:verdict", 4, "table (a compare detail or results) expected", 3) end
  local lines, out = {}, { intervals = json.array({}) }
  local list = ev.results or { ev.a, ev.b }
  for i, r in ipairs(list) do
    if type(r) == "table" and r.ci95 then
      if type(r.mean) ~= "number" or type(r.ci95) ~= "table" or type(r.ci95[1]) ~= "number"
          or type(r.ci95[2]) ~= "number" then
        arg_error("lab:verdict", 4, string.format("evidence result %d: {mean=, ci95={lo, hi}, ...} expected", i), 3)
      end
      local label = r.label or (i == 1 and "a" or i == 2 and "b" or ("#" .. i))
      lines[#lines + 1] = string.format("%s: %s", label, harness.format_result(r, ev.unit, ev.scale))
      local sum = result_summary(r)
      sum.label = label
      out.intervals[#out.intervals + 1] = sum
    end
  end
  if ev.ci then
    if type(ev.ci) ~= "table" or type(ev.ci[1]) ~= "number" or type(ev.ci[2]) ~= "number"
        or type(ev.ratio) ~= "number" then
      arg_error("lab:verdict", 4, "a compare detail needs ratio= and ci={lo, hi} (lab:compare's fourth result)", 3)
    end
    lines[#lines + 1] = string.format("time ratio a/b %.4f [%.4f, %.4f] against %.4f ± %s -> %s", ev.ratio,
      ev.ci[1], ev.ci[2], ev.against or 1, pct(ev.margin or 0), tostring(ev.decision))
    out.ratio, out.ratio_ci, out.margin = ev.ratio, json.array({ ev.ci[1], ev.ci[2] }), ev.margin
    out.against = ev.against
    out.decision, out.rounds = ev.decision, ev.rounds
  end
  if ev.reason then
    lines[#lines + 1] = "unclear: " .. ev.reason
    out.reason = ev.reason
  end
  return out, lines
end

-- Edit distance between two short strings (for "did you mean" in lab:verdict).
local function distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a:byte(i) == b:byte(j) and 0 or 1))
    end
    prev = cur
  end
  return prev[#b]
end

-- A verdict named by a word that is no declared id is a typo, not a new claim: raise naming the
-- declared ids and the nearest one.
local function undeclared_id(lab, id)
  local ids, best, best_d = {}, nil, math.huge
  for _, c in ipairs(lab.claim_list) do
    ids[#ids + 1] = c.id
    local d = distance(id, c.id)
    if d < best_d then best, best_d = c.id, d end
  end
  if #ids == 0 then
    error(string.format("lab:verdict: '%s' is not a declared claim: this lab declares none " ..
      "(declare it first with lab:claim{id=%q, text=, source=})", id, id), 3)
  end
  error(string.format("lab:verdict: '%s' is not a declared claim (declared: %s; nearest: '%s')", id,
    table.concat(ids, ", "), best), 3)
end

-- lab:verdict(id_or_claim, measured, holds [, evidence]): holds is true, false or nil (unclear).
-- A declared claim is named by its id; a single word (an id's form) that names no declared claim
-- raises; a sentence is an undeclared claim, judged as it is (kept for older labs).
-- evidence (a compare detail or {results={...}}) prints the intervals under the verdict.
function Lab:verdict(claim, measured, holds, evidence)
  if holds ~= nil and type(holds) ~= "boolean" then
    arg_error("lab:verdict", 3, "true, false or nil (unclear) expected")
  end
  local word = verdict_words[holds] or "UNCLEAR"
  claim, measured = tostring(claim), measured ~= nil and tostring(measured) or ""
  local c = self.claim_index[claim]
  if not c and claim:match("^[%w_%.%-]+$") then undeclared_id(self, claim) end
  local ev, lines = evidence_of(evidence)
  local v = {
    claim = c and c.text or claim, measured = measured, verdict = word, section = self:current_section(),
    id = c and c.id or nil, seed = c and c.seed or nil, own = c and c.own or nil, evidence = ev,
    source = c and c.source or nil, judged = true,
  }
  self.verdicts[#self.verdicts + 1] = v
  if c then c.judged = true end
  print(string.format("  %-9s %s%s", "[" .. word .. "]", v.claim, c and (" (" .. c.id .. ")") or ""))
  if measured ~= "" then print(string.format("  %-9s measured: %s", "", measured)) end
  if c then print(string.format("  %-9s source: %s", "", c.source)) end
  for _, l in ipairs(lines) do print(string.format("  %-9s %s", "", l)) end
end

-- Every declared claim without a verdict becomes UNCLEAR "never judged" (once).
function Lab:judge_missing(why)
  for _, c in ipairs(self.claim_list) do
    if not c.judged and not c.never_judged then
      local reason = "never judged" .. (why and (": " .. why) or "")
      self.verdicts[#self.verdicts + 1] = { claim = c.text, measured = reason, verdict = "UNCLEAR",
        id = c.id, seed = c.seed, own = c.own, source = c.source, never_judged = true, judged = false }
      c.never_judged = true
    end
  end
end

-- A copy of `v` that json.encode takes, nothing lost: a list that also carries names which repeat
-- its first two entries (cuda.measure's ci95 = {lo, hi, lo=, hi=}) becomes the plain list; any
-- other table mixing list and name keys becomes an object whose list entries are keyed "1".."n".
local function jsonable(v, path, seen)
  if type(v) ~= "table" then return v end
  if seen[v] then error(path .. ": the table contains itself", 0) end
  if next(v) == nil then return json.encode(v) == "[]" and json.array({}) or {} end
  seen[v] = true
  local n, named, count = 0, {}, 0
  for k in pairs(v) do
    count = count + 1
    if math.type(k) == "integer" and k >= 1 then
      if k > n then n = k end
    elseif type(k) == "string" then
      named[#named + 1] = k
    else
      error(string.format("%s: a key of type %s cannot be written as JSON", path, type(k)), 0)
    end
  end
  local out
  local list_only = #named == 0 and n == count
  local ci_like = n == 2 and count == 2 + #named and #named > 0
  for _, k in ipairs(named) do
    if not ((k == "lo" and v.lo == v[1]) or (k == "hi" and v.hi == v[2])) then ci_like = false end
  end
  if list_only or ci_like then
    out = json.array({})
    for i = 1, n do out[i] = jsonable(v[i], path .. "[" .. i .. "]", seen) end
  else
    out = {}
    for k, x in pairs(v) do
      local name = type(k) == "string" and k or tostring(k)
      out[name] = jsonable(x, path .. "." .. name, seen)
    end
  end
  seen[v] = nil
  return out
end

-- lab:record(key, value): any JSON-able value, a measure result too (see jsonable); kept as a copy.
function Lab:record(key, value)
  if type(key) ~= "string" then arg_error("lab:record", 1, "string key expected") end
  local ok, copy = pcall(jsonable, value, key, {})
  local err
  if ok then ok, err = pcall(json.encode, copy) else err = copy end
  if not ok then error("lab:record: value for '" .. key .. "' cannot be written as JSON: " .. tostring(err), 2) end
  self.records[key] = copy
end

function Lab:fail(msg)
  msg = tostring(msg)
  self.failures[#self.failures + 1] = msg
  io.stderr:write(string.format("%s: FAIL: %s\n", self.name, msg))
end

-- lab:gpu() --> ok, why. Without a device the lab prints it once and should stop measuring.
function Lab:gpu()
  if self.gpu_state == nil then
    local ok, why = false, "the cuda module is not loaded"
    if type(cuda) == "table" and cuda.available then ok, why = cuda.available() end
    self.gpu_state = { available = ok and true or false, reason = not ok and tostring(why) or nil }
    if not ok then print(string.format("no GPU: %s — kernels compiled only", tostring(why))) end
  end
  return self.gpu_state.available, self.gpu_state.reason
end


-- lab:require_gpu([why_text]) --> true with a usable device. Without one the lab ends here: the
-- text (when given) is noted, lab:finish() reports the claims never judged ("no GPU") and writes
-- the outputs, and the process exits 0 (compiling without a device is a successful run).
function Lab:require_gpu(text)
  if text ~= nil and type(text) ~= "string" then arg_error("lab:require_gpu", 1, "string or nil expected") end
  if self:gpu() then return true end
  if text then self:note(text) end
  io.stdout:flush()
  os.exit(self:finish())
end

-- ---- helpers the labs share ---------------------------------------------------------------

-- A word for /bin/sh: single-quoted, embedded quotes closed and escaped.
function harness.shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- The gpulab executable running this script (arg[-k], the interpreter slot of lua(1)'s `arg`).
function harness.gpulab_exe()
  local a = _G.arg or {}
  local i = 0
  while a[i - 1] do i = i - 1 end
  return a[i] or "gpulab"
end

-- A CUDA tool on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin; nil when there is none.
function harness.find_tool(name)
  if os.execute("command -v " .. harness.shell_quote(name) .. " >/dev/null 2>&1") then return name end
  for _, dir in ipairs { os.getenv("CUDA_HOME"), "/usr/local/cuda" } do
    if dir and dir ~= "" and os.execute("test -x " .. harness.shell_quote(dir .. "/bin/" .. name)) then
      return dir .. "/bin/" .. name
    end
  end
end

local function readable(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

-- Where lab:compile finds `path`: an absolute path as is; a relative one beside the lab file
-- (lab.dir) first, then under the gpulab home. Raises naming every place it looked.
function Lab:kernel_path(path)
  if type(path) ~= "string" or path == "" then
    arg_error("lab:kernel_path", 1, "path of a file (beside the lab, under the gpulab home, or absolute) expected")
  end
  if path:sub(1, 1) == "/" then return path end
  local tried = {}
  local home = type(cuda) == "table" and cuda.home or nil
  for _, base in ipairs { self.dir, home } do
    if base then
      local full = base == "." and path or (base:gsub("/*$", "") .. "/" .. path)
      if readable(full) then return full end
      tried[#tried + 1] = full
    end
  end
  arg_error("lab:compile", 1, string.format("no file '%s' (looked at %s)", path, table.concat(tried, ", ")), 3)
end

-- lab:compile(path, opts) --> prog: cuda.compile_file on the path as Lab:kernel_path resolves it,
-- with a note of what was compiled, for which architecture, how long it took and whether the cache
-- hit. The options and the program are kept for the results' provenance.
function Lab:compile(rel, opts)
  if type(rel) ~= "string" or rel == "" then
    arg_error("lab:compile", 1, "path of a .cu file (beside the lab, under the gpulab home, or absolute) expected")
  end
  if opts ~= nil and type(opts) ~= "table" then arg_error("lab:compile", 2, "cuda.compile's options table expected") end
  local o, what = {}, nil
  for k, v in pairs(opts or {}) do if k == "what" then what = v else o[k] = v end end
  local full = self:kernel_path(rel)
  local t0 = clock_s()
  local prog = cuda.compile_file(full, o)
  local ms = (clock_s() - t0) * 1e3
  self:note(string.format("%s compiled for %s in %.1f ms (cache %s)%s", rel, tostring(prog.arch or o.arch),
    ms, prog.cache_hit and "hit" or "miss", what and (": " .. what) or ""))
  self.compiled = self.compiled or {}
  self.compiled[#self.compiled + 1] = { file = rel, path = full, options = o, prog = prog, ms = ms,
    cache_hit = prog.cache_hit and true or false }
  return prog
end

local run_children_here -- below: children where the cuda module has no host to start them

-- True where cuda.run_isolated starts gpulab children (a script run by gpulab); false under Lua's
-- own interpreter (`lua5.4 -e 'require "cuda"'`), whose cuda.run_isolated raises naming itself.
-- gpulab refuses the empty path before it starts anything. Asked once.
local host_runs_children
local function children_by_host()
  if host_runs_children == nil then
    local ok, err = pcall(cuda.run_isolated, "")
    host_runs_children = ok or not tostring(err):find("which only the gpulab executable starts", 1, true)
  end
  return host_runs_children
end

-- lab:child(script, {args=, env=, timeout=}) --> cuda.run_isolated's result: a child gpulab
-- process (under lua5.4: this interpreter, as run_children_here starts it); the lab's timeout
-- applies unless given. Native: a sanitizer's injection is not passed on.
function Lab:child(script, opts)
  opts = opts or {}
  if type(opts) ~= "table" then arg_error("lab:child", 2, "options table {args=, env=, timeout=} expected") end
  if opts.env ~= nil and type(opts.env) ~= "table" then
    field_error("lab:child", 2, "env", "table of NAME = value (or false to unset) expected")
  end
  local env = { CUDA_INJECTION64_PATH = false }
  for k, v in pairs(opts.env or {}) do env[k] = v end
  local o = { args = opts.args, env = env, timeout = opts.timeout or self.child_timeout or 60 }
  if children_by_host() then return cuda.run_isolated(script, o) end
  return run_children_here({ { script, o } })[1]
end

-- harness.spawn(command, {timeout=, kill_after=}) --> a handle; handle:wait() --> {out=, exit=,
-- timed_out=, seconds=}. The command runs under timeout(1) in the background with stdout and
-- stderr together, so several can run at once; exit 124 or 137 means the deadline hit it.
function harness.spawn(command, opts)
  opts = opts or {}
  local limit = opts.timeout or 60
  local cmd = string.format("t0=$(date +%%s%%N); timeout -k %d %d sh -c %s 2>&1; rc=$?; " ..
    "echo; echo \"GPULAB_EXIT $rc $(( ($(date +%%s%%N) - t0) / 1000000 ))\"",
    opts.kill_after or 5, math.max(1, math.ceil(limit)), harness.shell_quote(command))
  local pipe = assert(io.popen(cmd, "r"))
  local h = {}
  function h.wait()
    if h.result then return h.result end
    local out = pipe:read("a") or ""
    pipe:close()
    local body, rc, secs = out:match("^(.-)\n?GPULAB_EXIT (%d+) ?([%d%.]*)%s*$")
    rc = tonumber(rc)
    h.result = { out = body or out, exit = rc, timed_out = rc == 124 or rc == 137,
      seconds = tonumber(secs) and tonumber(secs) / 1000,
      limit = limit }
    return h.result
  end
  return h
end

-- ---- children where gpulab's host is absent ----------------------------------------------------
-- Under Lua's own interpreter cuda.run_isolated cannot start gpulab children. The harness's own
-- children (lab:child, --gpus sweeps) then run through the interpreter running the lab, started
-- as it was (lua(1)'s arg[-k]..arg[-1]) plus `-e 'require "cuda"'`, so that a child written for
-- gpulab finds the global `cuda`: each under timeout(1) in its own process group, all at once,
-- and each comes back as cuda.run_isolated's result ({status=, code= | signal=, seconds=, stdout=,
-- stderr=}; a child ended by a signal reads as exit status 128 + the signal's number).

local function interpreter_command()
  local a, words, first = _G.arg or {}, {}, 0
  while a[first - 1] do first = first - 1 end
  for k = first, -1 do words[#words + 1] = harness.shell_quote(a[k]) end
  words[#words + 1] = "-e " .. harness.shell_quote('require "cuda"')
  return table.concat(words, " ")
end

-- Starts one child and returns its handle: the child is the process group timeout(1) leads, killed
-- whole (what it started too) once the child has ended or the deadline has passed.
local function start_child(script, opts)
  local removed, set = {}, {}
  for k, v in pairs(opts.env or {}) do
    if v == false then removed[#removed + 1] = "-u " .. harness.shell_quote(k)
    else set[#set + 1] = harness.shell_quote(k .. "=" .. tostring(v)) end
  end
  local args = {}
  for i, a in ipairs(opts.args or {}) do args[i] = harness.shell_quote(a) end
  local c = { out = os.tmpname(), err = os.tmpname() }
  local child = string.format("exec env %s %s %s -- %s %s >%s 2>%s", table.concat(removed, " "),
    table.concat(set, " "), interpreter_command(), harness.shell_quote(script), table.concat(args, " "),
    harness.shell_quote(c.out), harness.shell_quote(c.err))
  local cmd = string.format("t0=$(date +%%s%%N); timeout -k 1 %.3f sh -c %s & pid=$!; wait $pid 2>/dev/null; rc=$?; " ..
    "kill -9 -$pid 2>/dev/null; echo \"GPULAB_EXIT $rc $(( ($(date +%%s%%N) - t0) / 1000000 ))\"",
    opts.timeout or 86400, harness.shell_quote(child))
  c.pipe = assert(io.popen(cmd, "r"))
  return c
end

local function take_file(path)
  local f = io.open(path, "rb")
  local text = f and f:read("a") or ""
  if f then f:close() end
  os.remove(path)
  return text
end

-- timeout(1)'s exit status: 124 after the deadline's SIGTERM ended the child, 137 when the SIGKILL
-- a second later did, 128 + n for a child a signal n ended, else the child's own.
local function finish_child(c)
  local out = c.pipe:read("a") or ""
  c.pipe:close()
  local rc, ms = out:match("GPULAB_EXIT (%d+) (%d+)")
  rc = tonumber(rc)
  local r = { seconds = (tonumber(ms) or 0) / 1000, stdout = take_file(c.out), stderr = take_file(c.err) }
  if rc == 124 or rc == 137 then r.status, r.signal = "timeout", rc == 124 and 15 or 9
  elseif rc and rc > 128 then r.status, r.signal = "crashed", rc - 128
  else r.status, r.code = rc == 0 and "ok" or "error", rc end
  return r
end

-- cuda.run_isolated's list form, { {script, opts}, ... } --> { result, ... }, run from here.
function run_children_here(list)
  local started, results = {}, {}
  for i, e in ipairs(list) do started[i] = start_child(e[1], e[2] or {}) end
  for i, c in ipairs(started) do results[i] = finish_child(c) end
  return results
end

-- ---- sweeps over GPUs ------------------------------------------------------------------------
--
-- L:sweep(configs, fn, {name=, timeout=}) --> results, info. fn(config, i) runs one configuration
-- and returns a JSON-able value; results[i] is what it returned for configs[i]. Without --gpus
-- (or GPULAB_GPUS) the configurations run here, one after the other. With `gpulab --gpus=all
-- lab.lua` (or --gpus=0,2) and more than one GPU, one child per GPU runs this same script with
-- the same arguments (cuda.run_isolated's list form, all at once): configuration i goes to GPU
-- (i-1) % n, the child sees only its GPU (CUDA_VISIBLE_DEVICES: it is the child's device 0, so
-- modules and arrays made before the sweep are on it too) and runs only its share when it
-- reaches this sweep, and the parent merges the results in order, so the tables, JSON and
-- verdicts the lab builds from them are the same as in one process. Earlier sweeps are handed to
-- the children (they do not run again). Only independent configurations belong in a sweep.

local function sweep_gpu_list(L)
  local spec = os.getenv("GPULAB_GPUS")
  local ok, reg = pcall(function() return debug and debug.getregistry and debug.getregistry() end)
  if ok and type(reg) == "table" and type(reg["gpulab.gpus"]) == "string" then spec = reg["gpulab.gpus"] end
  if spec == nil or spec == "" then return nil end
  if type(cuda) ~= "table" or not cuda.available or not cuda.available() then return nil end
  local n = cuda.count()
  local list = {}
  if spec == "all" then
    for g = 0, n - 1 do list[#list + 1] = g end
  else
    local named = {}
    for part in spec:gmatch("[^,]+") do
      local g = math.tointeger(tonumber(part))
      if g == nil or g < 0 or g >= n then
        error(string.format("L:sweep: --gpus=%s names GPU '%s', but %d device(s) are present", spec, part, n), 3)
      end
      if named[g] then -- two children on one GPU would time each other's work
        error(string.format("L:sweep: --gpus names GPU %d twice; each GPU runs one child", g), 3)
      end
      named[g] = true
      list[#list + 1] = g
    end
  end
  L.sweep_gpus = list
  return list
end

-- Writes the whole text to path (output.write: a failure puts the earlier file back). Callers
-- make the text first, so a failure to make it leaves an earlier file alone.
local write_text_file = output.write

-- Sweep results cross from a child to the parent as a Lua literal: numbers keep their subtype and
-- every bit (NaN and ±inf included, which JSON has no spelling for), and tables keep any string,
-- number or boolean keys (sparse lists, sizes as keys), so the parent gets what fn returned, as a
-- sweep in one process does. A value that cannot cross (a function, a userdata, a cycle) raises,
-- naming where it is in the result.
local function to_literal(v, where, out, open)
  local t = type(v)
  if t == "number" or t == "string" then
    out[#out + 1] = string.format("%q", v)
  elseif t == "boolean" or t == "nil" then
    out[#out + 1] = tostring(v)
  elseif t == "table" then
    if open[v] then error(where .. " contains itself", 0) end
    open[v] = true
    out[#out + 1] = "{"
    for k, x in next, v do -- next: a __pairs cannot hide or invent entries
      local kt = type(k)
      if kt ~= "string" and kt ~= "number" and kt ~= "boolean" then
        error(string.format("%s has a %s key", where, kt), 0)
      end
      out[#out + 1] = "["
      to_literal(k, where, out, open)
      out[#out + 1] = "]="
      to_literal(x, where .. "[" .. (kt == "string" and string.format("%q", k) or tostring(k)) .. "]", out, open)
      out[#out + 1] = ","
    end
    out[#out + 1] = "}"
    open[v] = nil
  else
    error(string.format("%s is a %s, which cannot cross to another process", where, t), 0)
  end
end

local function literal_of(v, where)
  local out = {}
  to_literal(v, where, out, {})
  return table.concat(out)
end

-- The value written by write_literal_file: the text is loaded with no environment, so it can
-- only build the tables and values it spells.
local function read_literal_file(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  local chunk, err = load("return " .. text, "=" .. path, "t", {})
  if not chunk then error(err, 0) end
  return chunk()
end

local function write_literal_file(path, value, where)
  local written, err = write_text_file(path, literal_of(value, where)) -- made first: see write_text_file
  if not written then error("cannot write " .. path .. ": " .. tostring(err), 2) end
end

-- In a child: the sweep it was started for runs its share, writes it and ends the process.
local function sweep_child_share(index, configs, fn)
  local prior = os.getenv("GPULAB_SWEEP_PRIOR")
  if index < tonumber(os.getenv("GPULAB_SWEEP_CHILD")) then
    local all = prior and prior ~= "" and read_literal_file(prior) or {}
    return all[index] or error("L:sweep: the parent did not hand over sweep " .. index, 3)
  end
  local out = {}
  for part in (os.getenv("GPULAB_SWEEP_CONFIGS") or ""):gmatch("%d+") do
    local i = tonumber(part)
    local ok, r = pcall(fn, configs[i], i)
    if ok and r == nil then ok, r = false, "fn returned nothing (a sweep in children needs a result)" end
    if ok then ok, r = pcall(literal_of, r, "the result") end -- checked here, to name the configuration
    local config_ok, config = pcall(literal_of, configs[i], "the configuration")
    out[#out + 1] = { i = i, result = ok and r or nil, error = not ok and tostring(r) or nil,
      config = config_ok and config or nil }
  end
  write_literal_file(os.getenv("GPULAB_SWEEP_OUT"), { results = out }, "the results")
  io.stdout:flush()
  os.exit(0)
end

-- What a child's CUDA_VISIBLE_DEVICES must say for it to see GPU g (an ordinal of this process)
-- as its only device 0: the g-th entry of ours when we were given one, else g.
local function visible_entry(g)
  local ours = os.getenv("CUDA_VISIBLE_DEVICES")
  if ours == nil or ours == "" then return tostring(g) end
  local list = {}
  for e in ours:gmatch("[^,]+") do list[#list + 1] = e end
  return list[g + 1] or tostring(g)
end

local function sweep_in_children(L, index, configs, gpus, opts)
  local entries, outs, shares = {}, {}, {}
  for k = 1, #gpus do
    local mine = {}
    for i = k, #configs, #gpus do mine[#mine + 1] = i end
    shares[k] = mine
  end
  local prior = nil
  if index > 1 then
    prior = os.tmpname()
    write_literal_file(prior, L.sweep_results, "an earlier sweep's results")
  end
  local args, script = {}, (_G.arg or {})[0]
  for i = 1, #(_G.arg or {}) do args[i] = tostring(_G.arg[i]) end
  for k, g in ipairs(gpus) do
    if #shares[k] > 0 then
      outs[k] = os.tmpname()
      entries[#entries + 1] = { script, { args = args, timeout = opts.timeout or L.child_timeout or 600, env = {
        GPULAB_SWEEP_CHILD = tostring(index), CUDA_VISIBLE_DEVICES = visible_entry(g),
        GPULAB_SWEEP_CONFIGS = table.concat(shares[k], ","), GPULAB_SWEEP_OUT = outs[k],
        GPULAB_SWEEP_PRIOR = prior or false, GPULAB_GPUS = false, GPULAB_JSON = false,
        CUDA_INJECTION64_PATH = false } }, k = k, g = g }
    end
  end
  local list = {}
  for j, e in ipairs(entries) do list[j] = { e[1], e[2] } end
  local runs = children_by_host() and cuda.run_isolated(list) or run_children_here(list)
  local results, device, per_gpu = {}, {}, {}
  local function remove_files()
    for _, e in ipairs(entries) do os.remove(outs[e.k]) end
    if prior then os.remove(prior) end
  end
  for j, e in ipairs(entries) do
    local run, read_ok, data = runs[j], false, nil
    if run.status == "ok" then read_ok, data = pcall(read_literal_file, outs[e.k]) end
    if run.status ~= "ok" or not read_ok or type(data) ~= "table" or type(data.results) ~= "table" then
      remove_files()
      local why = run.status ~= "ok" and "" or
        (": its results could not be read (" .. (read_ok and "no results" or tostring(data)) .. ")")
      error(string.format("L:sweep: the child on GPU %d ended with %s%s%s\n%s", e.g, run.status,
        run.code and (" " .. run.code) or "", why, (run.stderr or ""):sub(-2000)), 3)
    end
    os.remove(outs[e.k])
    for _, item in ipairs(data.results) do
      local why = item.error
      local mine_ok, mine = pcall(literal_of, configs[item.i], "the configuration")
      if not why and mine_ok and item.config ~= mine then
        why = "the child's configuration differs from this process's (a sweep in children runs the " ..
          "lab again in each child: its configurations must come out the same in every run, in the same order)"
      end
      local value
      if not why then
        local chunk, err = load("return " .. tostring(item.result), "=(sweep result)", "t", {})
        local ok, got = false, err
        if chunk then ok, got = pcall(chunk) end
        if ok then value = got else why = "its result could not be read back: " .. tostring(got) end
      end
      if why then
        remove_files()
        error(string.format("L:sweep: configuration %d on GPU %d failed: %s", item.i, e.g, why), 3)
      end
      results[item.i], device[item.i] = value, e.g
    end
    per_gpu[#per_gpu + 1] = { gpu = e.g, configurations = #data.results, seconds = run.seconds }
  end
  if prior then os.remove(prior) end
  return results, device, per_gpu
end

function Lab:sweep(configs, fn, opts)
  if type(configs) ~= "table" or #configs == 0 then error("L:sweep: argument 1 must be a non-empty list of"
    .. " configurations", 2) end
  if type(fn) ~= "function" then error("L:sweep: argument 2 must be a function(config, i)", 2) end
  opts = opts or {}
  if type(opts) ~= "table" then arg_error("L:sweep", 3, "options table {name=, timeout=} expected") end
  if opts.name ~= nil and type(opts.name) ~= "string" then field_error("L:sweep", 3, "name", "string expected") end
  self.sweep_results = self.sweep_results or {}
  local index = #self.sweep_results + 1
  local name = opts.name or ("sweep " .. index)
  if os.getenv("GPULAB_SWEEP_CHILD") then
    local r = sweep_child_share(index, configs, fn)
    self.sweep_results[index] = r
    return r, { name = name, gpus = {}, device = {}, per_gpu = {} }
  end
  local gpus = sweep_gpu_list(self)
  local t0 = wall_s()
  local results, device, per_gpu
  if gpus and #gpus > 1 and #configs > 1 then
    results, device, per_gpu = sweep_in_children(self, index, configs, gpus, opts)
  else
    results, device, per_gpu, gpus = {}, {}, {}, {}
    local here = (type(cuda) == "table" and cuda.available and cuda.available()) and cuda.device().ordinal or nil
    for i, c in ipairs(configs) do
      results[i] = fn(c, i)
      device[i] = here
    end
    if here then
      per_gpu[1] = { gpu = here, configurations = #configs, seconds = wall_s() - t0 }
      gpus[1] = here
    end
  end
  self.sweep_results[index] = results
  local info = { name = name, gpus = gpus, device = device, per_gpu = per_gpu, seconds = wall_s() - t0 }
  self:record("sweep:" .. name, { gpus = json.array(gpus), device = json.array(device), per_gpu = json.array(per_gpu),
    configurations = #configs })
  if #gpus > 1 then
    local parts = {}
    for _, p in ipairs(per_gpu) do
      parts[#parts + 1] = string.format("GPU %d: %d in %.1f s", p.gpu, p.configurations, p.seconds or 0)
    end
    self:note(string.format("%s: %d configurations over %d GPUs in %.1f s (%s)", name, #configs, #per_gpu,
      info.seconds, table.concat(parts, ", ")))
  end
  return results, info
end

-- ---- progress ------------------------------------------------------------------------------

local function progress_enabled(lab)
  if lab.progress_on == nil then
    local env = os.getenv("GPULAB_PROGRESS")
    if env == "1" then lab.progress_on = true
    elseif env == "0" then lab.progress_on = false
    else
      -- pure Lua cannot ask isatty(); the shell can, and inherits our stderr
      local ok = os.execute("test -t 2")
      lab.progress_on = ok == true
    end
  end
  return lab.progress_on
end

-- lab:progress(i, n, label): a bar on stderr while a sweep runs (terminal only).
function Lab:progress(i, n, label)
  if not progress_enabled(self) then return end
  if not finite(i) or not finite(n) or n <= 0 then return end
  local frac = math.max(0, math.min(1, i / n))
  local w = 30
  local filled = math.floor(frac * w + 0.5)
  local function count(x)
    return math.abs(x) < 1e15 and string.format("%.0f", math.floor(x)) or string.format("%.3g", x)
  end
  io.stderr:write(string.format("\r  %s [%s%s] %s/%s\27[K", label and tostring(label) or "",
    string.rep("#", filled), string.rep(".", w - filled), count(i), count(n)))
  if i >= n then io.stderr:write("\n") end
  io.stderr:flush()
end

-- ---- pictures ------------------------------------------------------------------------------

-- Where a picture named `file` goes: PREFIX-file, or PREFIX/file when PREFIX is a folder.
-- A prefix given as a file name ("out/run.svg") loses its extension: out/run-file.svg.
function Lab:picture_path(file)
  if not self.svg_prefix then return nil end
  local p = self.svg_prefix
  if p:sub(-1) == "/" or is_dir(p) then return (p:gsub("/*$", "")) .. "/" .. file end
  return (p:gsub("%.[sS][vV][gG]$", "")) .. "-" .. file
end

local function picture(lab, kind, spec, render)
  if type(spec) ~= "table" then error("lab:svg_" .. kind .. ": expected a table", 3) end
  local file = spec.file
  if type(file) ~= "string" or file == "" or file:find("/") then
    error("lab:svg_" .. kind .. ": field 'file' must be a plain file name like 'sweep.svg'", 3)
  end
  if not file:match("%.svg$") then file = file .. ".svg" end
  for _, earlier in ipairs(lab.pictures) do
    if earlier.file == file then -- the second would overwrite the first, both listed in the results
      error(string.format("lab:svg_%s: field 'file': '%s' was drawn earlier in this run; each picture needs a " ..
        "file of its own", kind, file), 3)
    end
  end
  local text = render(spec) -- rendered even when not written, so bad data shows up in CI
  local path = lab:picture_path(file)
  if path then
    -- a picture that cannot be written is a failure of the run, never the loss of the other outputs
    local ok, err = pcall(svg.write, path, text)
    if ok then
      print("  picture: " .. path)
    else
      lab:fail("cannot write the picture " .. path .. ": " .. tostring(err))
      path = nil
    end
  end
  lab.pictures[#lab.pictures + 1] = { kind = kind, file = file, path = path, title = spec.title,
    section = lab:current_section() }
  lab.picture_texts = lab.picture_texts or {}
  lab.picture_texts[#lab.pictures] = text -- for the --html report; not part of the JSON
  return path, text
end

function Lab:svg_lines(spec) return picture(self, "lines", spec, svg.lines) end
function Lab:svg_bars(spec) return picture(self, "bars", spec, svg.bars) end
function Lab:svg_timeline(spec) return picture(self, "timeline", spec, svg.timeline) end
function Lab:svg_ratio(spec) return picture(self, "ratio", spec, svg.ratio) end

-- ---- the end -------------------------------------------------------------------------------

-- ---- provenance ------------------------------------------------------------------------------

-- The version of the results' JSON layout (docs/RESULTS_SCHEMA.md); raised when a field changes
-- meaning or goes away, not when one is added.
harness.RESULTS_SCHEMA = 1

local function read_line(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local line = f:read("l")
  f:close()
  return line
end

local function host_name()
  local h = read_line("/proc/sys/kernel/hostname") or os.getenv("HOSTNAME")
  if h and h ~= "" then return h end
  local p = io.popen("uname -n 2>/dev/null")
  if p then
    h = p:read("l")
    p:close()
  end
  return (h and h ~= "") and h or "unknown"
end

-- The working folder. $PWD alone can be stale (a parent that changed folder without updating it
-- starts the lab): the shell's pwd prints $PWD only when it names the folder the process is in.
local function working_folder()
  local p = io.popen("pwd 2>/dev/null")
  local dir = p and p:read("l")
  if p then p:close() end
  return (dir and dir ~= "") and dir or os.getenv("PWD")
end

-- The command that ran the lab, as a list (interpreter, its options, the script, its arguments)
-- and as one line a shell takes back.
local function command_line()
  local a = _G.arg or {}
  local lo = 0
  while a[lo - 1] ~= nil do lo = lo - 1 end
  local list, words = json.array({}), {}
  for i = lo, #a do
    local w = tostring(a[i])
    list[#list + 1] = w
    words[#words + 1] = w:match("^[%w%._/=:,%-+@]+$") and w or harness.shell_quote(w)
  end
  return list, table.concat(words, " ")
end

local function device_provenance(lab)
  local usable = lab.gpu_state and lab.gpu_state.available
  if lab.gpu_state == nil and type(cuda) == "table" and type(cuda.available) == "function" then
    -- a lab that used the device without asking lab:gpu() still names it (asked quietly here)
    local ok, avail = pcall(cuda.available)
    usable = ok and avail == true
  end
  if not usable then return nil end
  local ok, dev = pcall(cuda.device)
  if not ok or type(dev) ~= "table" then return { error = tostring(dev) } end
  local function attr(name)
    local aok, v = pcall(dev.attribute, dev, name)
    return aok and v or nil
  end
  local sm_khz, mem_khz = attr("CLOCK_RATE"), attr("MEMORY_CLOCK_RATE")
  return { name = dev.name, ordinal = dev.ordinal, uuid = dev.uuid, arch = dev.arch, sm_count = dev.sm_count,
    mem_bytes = dev.mem_bytes, l2_bytes = dev.l2_bytes, sm_clock_mhz = sm_khz and sm_khz / 1000,
    mem_clock_mhz = mem_khz and mem_khz / 1000, mem_bus_bits = attr("GLOBAL_MEMORY_BUS_WIDTH"),
    cc = dev.cc and json.array({ dev.cc[1], dev.cc[2] }) }
end

-- What lab:compile compiled: the file, the options, and each kernel's resources as the compiler
-- left them in the cubin (prog:resources: registers, shared, local and constant bytes, spills).
local function kernel_provenance(lab)
  local list = json.array({})
  for _, k in ipairs(lab.compiled or {}) do
    local opts = {}
    for key, v in pairs(k.options) do
      if key == "headers" and type(v) == "table" then
        local names = json.array({})
        for name in pairs(v) do names[#names + 1] = tostring(name) end
        table.sort(names)
        v = names
      end
      opts[key] = v
    end
    local okc, opts_copy = pcall(jsonable, opts, "options", {})
    local entry = { file = k.file, path = k.path, options = okc and opts_copy or { error = tostring(opts_copy) },
      compile_ms = k.ms, cache_hit = k.cache_hit, kernels = json.array({}) }
    local plain = {}
    for name, mangled in pairs(k.prog.lowered or {}) do plain[mangled] = name end
    local seen = {}
    for entry_name in (k.prog.ptx or ""):gmatch("%.entry%s+([%w_$]+)") do
      if not seen[entry_name] then
        seen[entry_name] = true
        local item = { name = plain[entry_name] or entry_name, symbol = entry_name }
        if type(k.prog.resources) == "function" and k.prog.cubin then
          local rok, res = pcall(k.prog.resources, k.prog, entry_name)
          if rok and type(res) == "table" then
            for rk, rv in pairs(res) do
              if type(rv) == "number" or type(rv) == "string" or type(rv) == "boolean" then item[rk] = rv end
            end
          else
            item.resources_error = tostring(res)
          end
        end
        entry.kernels[#entry.kernels + 1] = item
      end
    end
    list[#list + 1] = entry
  end
  return list
end

-- Where, when, on what and from which build the results came (the JSON's `provenance`).
function Lab:provenance()
  local v = {}
  if type(cuda) == "table" and type(cuda.version) == "function" then
    local ok, got = pcall(cuda.version)
    if ok and type(got) == "table" then v = got end
  end
  local list, line = command_line()
  return {
    gpulab = { version = v.gpulab, commit = v.commit or "unknown" },
    lua = v.lua or _VERSION, nvrtc = v.nvrtc, driver = v.driver,
    device = device_provenance(self),
    gpu = self.gpu_state,
    date_utc = os.date("!%Y-%m-%dT%H:%M:%SZ"), host = host_name(),
    command = list, command_line = line, cwd = working_folder(),
    lab_dir = self.dir, quick = self.quick, mode = self.quick and "quick" or "full",
    params = self.params, kernels = kernel_provenance(self),
  }
end

function Lab:results()
  close_section(self)
  local params = {}
  for k, v in pairs(self.params) do params[k] = v end
  local sections = json.array({})
  for i, s in ipairs(self.sections) do sections[i] = { title = s.title, seconds = s.seconds } end
  return {
    schema = harness.RESULTS_SCHEMA, provenance = self:provenance(),
    name = self.name, title = self.title, claims = self.claims, quick = self.quick,
    params = params, tables = json.array(self.tables), verdicts = json.array(self.verdicts),
    records = self.records, pictures = json.array(self.pictures), notes = json.array(self.notes),
    failures = json.array(self.failures), gpu = self.gpu_state,
    declared_claims = json.array(self.claim_list),
    budget_s = self.budget_s,
    timings = { total_s = wall_s() - self.started, cpu_s = os.clock() - self.cpu_started, sections = sections },
  }
end

-- Prints the verdict summary, writes the JSON results; returns the exit status for os.exit.
function Lab:finish()
  local why
  if self.gpu_state and not self.gpu_state.available then why = "no GPU" end
  self:judge_missing(why)
  local results = self:results()
  local count = { HOLDS = 0, REFUTED = 0, UNCLEAR = 0 }
  for _, v in ipairs(self.verdicts) do count[v.verdict] = count[v.verdict] + 1 end
  print()
  print(string.format("## Verdicts: %d holds, %d refuted, %d unclear", count.HOLDS, count.REFUTED, count.UNCLEAR))
  for _, v in ipairs(self.verdicts) do
    print(string.format("  %-9s %s%s%s", "[" .. v.verdict .. "]", v.claim, v.id and (" (" .. v.id .. ")") or "",
      v.never_judged and (" — " .. v.measured) or ""))
  end
  if self.html_path then
    local ok, page = pcall(html.report, results, self.picture_texts)
    if not ok then
      self:fail("cannot make the HTML report: " .. tostring(page))
    else
      local written, werr = write_text_file(self.html_path, page)
      if written then
        print("report: " .. self.html_path)
      else
        self:fail("cannot write the HTML report to " .. self.html_path .. ": " .. tostring(werr))
      end
    end
  end
  if self.json_path then
    -- encoded first: a value that cannot be encoded leaves the results of an earlier run as they were
    local encoded, text = pcall(json.encode, results, { indent = "  " })
    local written, werr = false, nil
    if encoded then written, werr = write_text_file(self.json_path, text .. "\n") end
    if written then
      print("results: " .. self.json_path)
    elseif not encoded then
      self:fail("cannot encode the JSON results (" .. self.json_path .. " left as it was): " .. tostring(text))
    else
      self:fail("cannot write the JSON results to " .. self.json_path .. ": " .. tostring(werr))
    end
  end
  -- short runs (a cached compile) in milliseconds: "0.00 s" says nothing
  local total = results.timings.total_s
  print(string.format("%s: %s%s", self.name, total < 1 and string.format("%.1f ms", total * 1e3) or
    string.format("%.2f s", total),
    #self.failures > 0 and string.format(", %d failure(s)", #self.failures) or ""))
  return #self.failures == 0 and 0 or 1
end

Lab.__tostring = function(self) return string.format("gpulab.lab(%s)", self.name) end

return harness
