-- gpulab.lab: option parsing (every form, bad values, --help), the printed notebook (tables,
-- verdicts, summary), the JSON results read back, the no-GPU path and the progress bar.
-- Labs run as child processes through cuda.run_isolated, as a user would run them.
local T = dofile("tests/lua/t.lua")
local harness = require("gpulab.lab")
local json = require("gpulab.json")
local DEMO = "tests/lab_fixtures/demo_lab.lua"

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function run(script, args, env)
  return cuda.run_isolated(script, { args = args, env = env, timeout = 60 })
end

local PARAMS = {
  { name = "rows", default = 8192, help = "rows per block" },
  { name = "scale", default = 1.5, help = "a float" },
  { name = "fast_path", default = false, help = "a flag" },
  { name = "label", default = "plain", help = "a string" },
}

-- harness.new with an explicit argument list (its printed header goes to stdout; harmless here).
local function parse(args)
  return harness.new{ name = "t", params = PARAMS, args = args }
end

T.test("defaults, typed from each parameter's default", function()
  local lab = parse({})
  T.eq(lab.quick, false)
  T.eq(lab.params.rows, 8192)
  T.eq(math.type(lab.params.rows), "integer")
  T.eq(lab.params.scale, 1.5)
  T.eq(lab.params.fast_path, false)
  T.eq(lab.params.label, "plain")
  T.eq(lab.name, "t")
end)

T.test("every option form", function()
  local out = T.tmpdir()
  local lab = parse({ "--quick", "--rows=64", "--scale", "2.25",
    "--fast-path", "--label", "x y", "--json", out .. "/r.json",
    "--svg=" .. out .. "/" })
  T.eq(lab.quick, true)
  T.eq(lab.params.rows, 64)
  T.eq(math.type(lab.params.rows), "integer")
  T.eq(lab.params.scale, 2.25)
  T.eq(lab.params.fast_path, true)
  T.eq(lab.params.label, "x y")
  T.eq(lab.json_path, out .. "/r.json")
  T.eq(lab.svg_prefix, out .. "/")
  T.eq(io.open(out .. "/r.json"), nil, "the write check leaves no file behind")
  lab = parse({ "--rows", "1e3", "--scale=-3", "--fast_path=false", "--label=", "--json=" .. out .. "/a.json", "--svg",
    out .. "/x",
    "--quick=no" })
  T.eq(lab.params.rows, 1000)
  T.eq(math.type(lab.params.rows), "integer")
  T.eq(lab.params.scale, -3)
  T.eq(lab.params.fast_path, false)
  T.eq(lab.params.label, "")
  T.eq(lab.json_path, out .. "/a.json")
  T.eq(lab.svg_prefix, out .. "/x")
  T.eq(lab.quick, false)
  lab = parse({ "--fast-path=yes", "--no-fast-path" })
  T.eq(lab.params.fast_path, false)
  lab = parse({ "--fast_path=1", "--rows=0x10" })
  T.eq(lab.params.fast_path, true)
  T.eq(lab.params.rows, 16)
end)

T.test("bad values and unknown options are refused with the known ones listed", function()
  local function bad(args, want)
    local err = T.raises(function() parse(args) end, want, table.concat(args, " "))
    T.ok(err:find("see --help", 1, true), err)
  end
  bad({ "--rows=1.5" }, "t: option --rows expects an integer, got '1.5'")
  bad({ "--rows=abc" }, "option --rows expects a number, got 'abc'")
  bad({ "--rows", "nan" }, "expects a number, got 'nan'")
  bad({ "--scale=inf" }, "expects a number, got 'inf'")
  bad({ "--scale=" }, "expects a number, got ''")
  bad({ "--rows=1e400" }, "expects a number")
  bad({ "--fast-path=maybe" }, "option --fast-path expects true or false, got 'maybe'")
  bad({ "--rows" }, "option --rows needs a value")
  bad({ "--json" }, "option --json needs a value")
  bad({ "--json=" }, "option --json needs a file name")
  bad({ "--svg" }, "option --svg needs a value")
  bad({ "--no-rows" }, "unknown option '--no-rows'")
  bad({ "--quick=perhaps" }, "expects true or false")
  local err = T.raises(function() parse({ "--colums=3" }) end, "unknown option '--colums=3'")
  local known = "known: --quick, --json FILE, --svg PREFIX, --html FILE, --help, --rows=VALUE, --scale=VALUE, " ..
    "--fast-path, --label=VALUE"
  T.ok(err:find(known, 1, true), err)
  T.raises(function() parse({ "positional" }) end, "unknown option 'positional'")
  T.raises(function() parse({ "-q" }) end, "unknown option '-q'")
end)

T.test("harness.new checks its own declaration", function()
  T.raises(function() harness.new() end, "harness.new: expected a table")
  T.raises(function() harness.new{ args = {} } end, "field 'name' must be a non-empty string")
  T.raises(function() harness.new{ name = "x", args = {}, params = { { name = "a b", default = 1 } } } end,
    "params[1] needs a name")
  T.raises(function() harness.new{ name = "x", args = {}, params = { { name = "a", default = {} } } } end,
    "param 'a' needs a number, boolean or string default")
  T.raises(function() harness.new{ name = "x", args = {}, params = { { name = "quick", default = 1 } } } end,
    "shadows a harness option")
  local twice = { { name = "a", default = 1 }, { name = "a", default = 2 } }
  T.raises(function() harness.new{ name = "x", args = {}, params = twice } end,
    "declared twice")
end)

T.test("a bad option from the command line: exit 1, message without a traceback", function()
  local r = run(DEMO, { "--rows=many" })
  T.eq(r.status, "error")
  T.eq(r.code, 1)
  T.ok(r.stderr:find("demo_lab: option --rows expects a number, got 'many' (see --help)", 1, true), r.stderr)
  T.ok(not r.stderr:find("traceback", 1, true), r.stderr)
  T.eq(r.stdout, "")
end)

T.test("--help lists every parameter with its default and help, exits 0", function()
  local r = run(DEMO, { "--rows=5", "--help" })
  T.eq(r.status, "ok", r.stderr)
  for _, want in ipairs({ "demo_lab: Harness demonstration", "claims: none: a test fixture", "--quick", "--json FILE",
    "--svg PREFIX", "--rows=NUMBER", "rows per block (default 8192)", "--scale=NUMBER", "(default 1.5)",
    "--fast-path ", "a boolean parameter (default false)", "--label=STRING", "(default plain)" }) do
    T.ok(r.stdout:find(want, 1, true), "help lacks " .. want .. ":\n" .. r.stdout)
  end
  T.ok(not r.stdout:find("## Setup", 1, true), "the lab ran after --help")
  T.eq(run(DEMO, { "-h" }).stdout, r.stdout)
end)

T.test("the notebook: header, aligned table, verdict lines and summary", function()
  local r = run(DEMO, { "--quick", "--rows", "77", "--label=x" })
  T.eq(r.status, "ok", r.stderr)
  local out = r.stdout
  T.ok(out:find("demo_lab — Harness demonstration\n", 1, true), out)
  T.ok(out:find("params: quick rows=77 scale=1.5 fast_path=false label=x fail=false", 1, true), out)
  T.ok(out:find("rows=77 scale=1.5 fast_path=false label=x quick=true", 1, true), out)
  T.ok(out:find("\n## Measurement\n", 1, true), out)
  -- numbers right-aligned, text left-aligned, nil as '-', NaN as 'nan'
  local want_table = table.concat({
    "      n  time (ms)  kind        ",
    "  -----  ---------  ------------",
    "     16      0.125  odd \"quoted\"",
    "    256       0.25  even        ",
    "   4096      0.375  odd \"quoted\"",
    "  65536        0.5  even        ",
    "      3        nan  -           ",
  }, "\n")
  T.ok(out:find(want_table, 1, true), "table:\n" .. out)
  T.ok(out:find("  [HOLDS]   bigger n takes longer\n            measured: 0.125 ms -> 0.5 ms\n", 1, true), out)
  T.ok(out:find("  [REFUTED] time is constant\n", 1, true), out)
  T.ok(out:find("  [UNCLEAR] it is a fine day\n", 1, true), out)
  T.ok(out:find("## Verdicts: 1 holds, 1 refuted, 1 unclear\n", 1, true), out)
  T.ok(out:find("no GPU: ", 1, true) and out:find(" — kernels compiled only\n", 1, true), out)
  T.ok(out:find("kernel compiled: yes", 1, true), out)
  -- no --svg: pictures are rendered but not written
  T.ok(not out:find("picture:", 1, true), out)
  T.eq(r.stderr, "") -- stderr is a pipe here: no progress bar
end)

T.test("number formatting for tables", function()
  local f = harness.format_number
  T.eq(f(3), "3")
  T.eq(f(3.0), "3")
  T.eq(f(-2 ^ 40), "-1099511627776")
  T.eq(f(12.345678), "12.35")
  T.eq(f(0.5), "0.5")
  T.eq(f(1e-7), "1.000e-07")
  T.eq(f(123456789.5), "1.235e+08")
  T.eq(f(999999.5), "999999.5")
  T.eq(f(123456.789), "123456.8") -- mid-size numbers are never in exponent form
  T.eq(f(0 / 0), "nan")
  T.eq(f(math.huge), "inf")
  T.eq(f(-math.huge), "-inf")
  T.eq(f(math.mininteger), tostring(math.mininteger))
end)

T.test("lab:table, lab:verdict and lab:record check their arguments", function()
  local lab = parse({})
  T.raises(function() lab:table("x", {}) end, "bad argument #1 to 'lab:table' (list of column names expected)")
  T.raises(function() lab:table({ "a" }, 5) end, "bad argument #2 to 'lab:table' (list of rows expected)")
  T.raises(function() lab:table({ "a" }, { 5 }) end, "lab:table: row 1 must be a list")
  T.raises(function() lab:verdict("c", "m", "yes") end,
    "bad argument #3 to 'lab:verdict' (true, false or nil (unclear) expected)")
  T.raises(function() lab:record(1, 2) end, "bad argument #1 to 'lab:record' (string key expected)")
  T.raises(function() lab:record("f", print) end, "lab:record: value for 'f' cannot be written as JSON")
  T.raises(function() lab:svg_lines{ file = "../x.svg", series = {} } end, "field 'file' must be a plain file name")
  T.raises(function() lab:svg_bars(3) end, "lab:svg_bars: expected a table")
end)

T.test("--json FILE: well-formed results with everything the lab produced", function()
  local dir = T.tmpdir()
  local path = dir .. "/demo.json"
  local r = run(DEMO, { "--quick", "--json", path, "--scale=3" })
  T.eq(r.status, "ok", r.stderr)
  T.ok(r.stdout:find("results: " .. path, 1, true), r.stdout)
  local text = read(path)
  local res = json.decode(text)
  T.eq(res.name, "demo_lab")
  T.eq(res.title, "Harness demonstration")
  T.eq(res.quick, true)
  T.eq(res.params.scale, 3)
  T.eq(res.params.rows, 8192)
  T.eq(res.params.fast_path, false)
  T.eq(#res.verdicts, 3)
  T.eq(res.verdicts[1].verdict, "HOLDS")
  T.eq(res.verdicts[1].claim, "bigger n takes longer")
  T.eq(res.verdicts[1].section, "Measurement")
  T.eq(res.verdicts[2].verdict, "REFUTED")
  T.eq(res.verdicts[3].verdict, "UNCLEAR")
  T.eq(#res.tables, 1)
  T.eq(res.tables[1].title, "Measurement")
  T.eq(res.tables[1].header[2], "time (ms)")
  T.eq(res.tables[1].rows[2][1], 256)
  T.eq(res.tables[1].rows[1][3], 'odd "quoted"')
  T.eq(res.tables[1].rows[5][2], nil) -- NaN is written as null
  T.ok(text:find('%[%s*3,%s*null,%s*""%s*%]'), "NaN row: " .. text)
  T.eq(res.records.series[2], 2.5)
  T.eq(res.records.series[3], nil)
  T.eq(res.records.nested.a.b, "<&>")
  T.ok(res.records.ptx_bytes > 0)
  T.eq(res.gpu.available, false)
  T.ok(type(res.gpu.reason) == "string" and res.gpu.reason ~= "")
  T.eq(#res.pictures, 3)
  T.eq(res.pictures[2].file, "bars.svg")
  T.ok(res.timings.total_s >= 0 and res.timings.cpu_s >= 0)
  T.eq(#res.timings.sections, 2)
  T.eq(res.timings.sections[1].title, "Setup")
  T.eq(#res.failures, 0)
  -- a second reader: Python's json module where it exists (CI has python3)
  if os.execute("command -v python3 >/dev/null 2>&1") then
    local ok = os.execute("python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); " ..
      "assert d[\"name\"]==\"demo_lab\" and len(d[\"verdicts\"])==3' '" .. path .. "'")
    T.ok(ok, "python3 cannot read " .. path)
  end
  os.execute("rm -rf '" .. dir .. "'")
end)

T.test("JSON path from gpulab --json FILE (before the script) and from GPULAB_JSON", function()
  local dir = T.tmpdir()
  local host_opt = dir .. "/host.json"
  local f = assert(io.open(dir .. "/run.sh", "w"))
  f:write('exec "$1" --json "$2" tests/lab_fixtures/demo_lab.lua --quick\n')
  f:close()
  local self_exe = assert(os.getenv("GPULAB_BIN"), "GPULAB_BIN names the gpulab binary")
  local ok = os.execute(string.format("sh '%s/run.sh' '%s' '%s' >/dev/null", dir, self_exe, host_opt))
  T.ok(ok, "gpulab --json FILE lab.lua failed")
  T.eq(json.decode(read(host_opt)).name, "demo_lab")
  local env_path = dir .. "/env.json"
  local r = run(DEMO, { "--quick" }, { GPULAB_JSON = env_path })
  T.eq(r.status, "ok", r.stderr)
  T.eq(json.decode(read(env_path)).quick, true)
  -- the lab's own option wins over the environment
  local own = dir .. "/own.json"
  r = run(DEMO, { "--json=" .. own }, { GPULAB_JSON = env_path .. ".unused" })
  T.eq(r.status, "ok", r.stderr)
  T.ok(io.open(own) ~= nil and io.open(env_path .. ".unused") == nil, "wrong JSON file written")
  os.execute("rm -rf '" .. dir .. "'")
end)

T.test("an unwritable JSON path fails the lab before any work (exit 1)", function()
  local r = run(DEMO, { "--json", "/nonexistent-dir/x.json" })
  T.eq(r.status, "error")
  T.eq(r.code, 1)
  T.ok(r.stderr:find("demo_lab: cannot write the JSON results to /nonexistent-dir/x.json (--json): ", 1, true),
    r.stderr)
  T.ok(r.stderr:find("checked before any work", 1, true), r.stderr)
  T.ok(not r.stderr:find("traceback", 1, true), r.stderr)
  T.ok(not r.stdout:find("## Setup", 1, true), "nothing ran: " .. r.stdout)
  -- a file that opens but cannot take the bytes (a full disk): found by the write check, exit 1
  r = run(DEMO, { "--json", "/dev/full" })
  T.eq(r.code, 1, r.stderr)
  T.ok(r.stderr:find("cannot write the JSON results to /dev/full (--json): /dev/full: ", 1, true), r.stderr)
  T.ok(not r.stdout:find("results: /dev/full", 1, true), r.stdout)
end)

T.test("results that cannot be encoded fail the lab and leave an earlier JSON file as it was", function()
  local dir = T.tmpdir()
  local script, out = dir .. "/unencodable.lua", dir .. "/out.json"
  local f = assert(io.open(script, "w"))
  f:write([[
local L = require("gpulab.lab").new { name = "unencodable" }
L:claim { id = "c", own = true, text = "a claim" }
L:table({ "a" }, { { 1 } }, { title = print }) -- a function cannot be encoded
L:verdict("c", "measured", true)
os.exit(L:finish())
]])
  f:close()
  f = assert(io.open(out, "w"))
  f:write('{"earlier": true}\n')
  f:close()
  local r = run(script, { "--json", out })
  T.eq(r.code, 1, r.stderr)
  T.ok(r.stderr:find("cannot encode the JSON results (" .. out .. " left as it was)", 1, true), r.stderr)
  f = assert(io.open(out))
  T.eq(f:read("a"), '{"earlier": true}\n', "the earlier results are kept")
  f:close()
  os.execute("rm -rf '" .. dir .. "'")
end)

T.test("lab:fail makes finish() return 1 and is listed in the JSON", function()
  local dir = T.tmpdir()
  local r = run(DEMO, { "--fail", "--json", dir .. "/f.json" })
  T.eq(r.status, "error")
  T.eq(r.code, 1)
  T.ok(r.stderr:find("demo_lab: FAIL: asked to fail with --fail", 1, true), r.stderr)
  T.ok(r.stdout:find("1 failure(s)", 1, true), r.stdout)
  T.eq(json.decode(read(dir .. "/f.json")).failures[1], "asked to fail with --fail")
  os.execute("rm -rf '" .. dir .. "'")
end)

T.test("no GPU: lab:gpu() is false once, the lab compiles and exits 0", function()
  local r = run("tests/lab_fixtures/nogpu_lab.lua", {}, { GPULAB_LIBCUDA = "/nonexistent/libcuda.so" })
  T.eq(r.status, "ok", r.stderr)
  local _, count = r.stdout:gsub("no GPU: ", "")
  T.eq(count, 1)
  T.ok(r.stdout:find("kernels compiled only", 1, true), r.stdout)
  T.ok(r.stdout:match("compiled %d+ bytes of PTX"), r.stdout)
  T.ok(not r.stdout:find("## Measurement", 1, true), r.stdout)
  local lab = parse({})
  local ok1, why1 = lab:gpu()
  local ok2, why2 = lab:gpu()
  T.eq(ok1, false)
  T.eq(ok2, false)
  T.eq(why1, why2)
end)

T.test("progress bar: forced on by GPULAB_PROGRESS=1, off by =0 and on a pipe", function()
  local r = run(DEMO, {}, { GPULAB_PROGRESS = "1" })
  T.eq(r.status, "ok", r.stderr)
  T.ok(r.stderr:find("\r  sweep [########", 1, true), r.stderr)
  T.ok(r.stderr:find("] 4/4", 1, true), r.stderr)
  T.ok(r.stderr:sub(-1) == "\n", "the bar ends its line")
  T.ok(not r.stdout:find("sweep [", 1, true), "the bar went to stdout")
  T.eq(run(DEMO, {}, { GPULAB_PROGRESS = "0" }).stderr, "")
  T.eq(run(DEMO, {}, { GPULAB_PROGRESS = false }).stderr, "")
end)

T.test("--svg PREFIX and --svg FOLDER/ place the pictures", function()
  local dir = T.tmpdir()
  local r = run(DEMO, { "--svg", dir .. "/demo" })
  T.eq(r.status, "ok", r.stderr)
  for _, f in ipairs({ "demo-sweep.svg", "demo-bars.svg", "demo-timeline.svg" }) do
    T.ok(r.stdout:find("picture: " .. dir .. "/" .. f, 1, true), r.stdout)
    T.ok(read(dir .. "/" .. f):find("<svg", 1, true), f)
  end
  r = run(DEMO, { "--svg", dir .. "/named.svg" })
  T.eq(r.status, "ok", r.stderr)
  T.ok(read(dir .. "/named-bars.svg"):find("</svg>", 1, true))
  r = run(DEMO, { "--svg=" .. dir })
  T.eq(r.status, "ok", r.stderr)
  T.ok(read(dir .. "/sweep.svg"):find("</svg>", 1, true))
  -- a missing folder is found before any work, with a message and no traceback
  r = run(DEMO, { "--svg", dir .. "/missing/x" })
  T.eq(r.status, "error")
  T.ok(r.stderr:find("cannot write the pictures to " .. dir .. "/missing/x (--svg)", 1, true), r.stderr)
  T.ok(not r.stderr:find("traceback", 1, true), r.stderr)
  T.ok(not r.stdout:find("## Setup", 1, true), r.stdout)
  r = run(DEMO, { "--svg", dir .. "/missing/" })
  T.eq(r.code, 1)
  T.ok(r.stderr:find("(--svg): no such folder", 1, true), r.stderr)
  T.eq(io.open(dir .. "/.gpulab-write-check.svg"), nil, "the write check leaves no file behind")
  os.execute("rm -rf '" .. dir .. "'")
end)

T.done()
