-- What the lab harness writes, and what it refuses: gpulab.output's trial of an output path (a new
-- file, an existing one, an empty one, a FIFO without a reader, devices, the lab's own stdout),
-- a write that fails part way (the earlier file is put back), UTF-8 in JSON and HTML, and the
-- harness functions' argument errors for inputs a lab author can pass by mistake.
local T = dofile("tests/lua/t.lua")
local harness = require("gpulab.lab")
local output = require("gpulab.output")
local json = require("gpulab.json")
local html = require("gpulab.html")

local BIN = os.getenv("GPULAB_BIN")

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

T.test("output.probe keeps what is there and leaves nothing behind", function()
  local dir = T.tmpdir()
  T.eq(output.probe(dir .. "/new.json"), true)
  T.ok(not exists(dir .. "/new.json"), "the probe file was removed")
  T.write(dir .. "/old.json", "earlier results")
  T.eq(output.probe(dir .. "/old.json"), true)
  T.eq(T.read(dir .. "/old.json"), "earlier results")
  T.write(dir .. "/empty.json", "")
  T.eq(output.probe(dir .. "/empty.json"), true)
  T.eq(T.read(dir .. "/empty.json"), "", "the probe byte was cut off again")
  local ok, why = output.probe(dir)
  T.eq(ok, false)
  T.ok(why:find("is a folder", 1, true), why)
  ok, why = output.probe(dir .. "/no/such/folder.json")
  T.eq(ok, false)
  T.ok(why:find("No such file", 1, true), why)
  T.eq(output.probe("/dev/null"), true)
  if exists("/dev/full") then
    ok, why = output.probe("/dev/full")
    T.eq(ok, false, "a full device fails at the flush")
    T.ok(why:find("/dev/full", 1, true), why)
  end
  for _, name in ipairs({ "/dev/stdout", "/dev/stderr", "/dev/fd/1", "/proc/self/fd/1", "-" }) do
    ok, why = output.probe(name)
    T.eq(ok, false, name)
    T.ok(why:find("the lab's own standard output", 1, true), why)
  end
  os.execute("rm -rf '" .. dir .. "'")
end)

T.test("output.probe of a FIFO without a reader neither blocks nor writes into it", function()
  local dir = T.tmpdir()
  if not os.execute("mkfifo '" .. dir .. "/pipe' 2>/dev/null") then
    print("  (no mkfifo here: skipped)")
    return
  end
  T.eq(output.probe(dir .. "/pipe"), true)
  os.execute("rm -rf '" .. dir .. "'")
end)

T.test("a write that fails part way puts the earlier file back; a new one is removed", function()
  if not BIN then
    print("  (GPULAB_BIN not set: skipped)")
    return
  end
  local dir = T.tmpdir()
  local script = dir .. "/write.lua"
  T.write(script, 'local ok, why = require("gpulab.output").write(arg[1], string.rep("y", 300000))\n' ..
    'print(ok, why)\n')
  T.write(dir .. "/prev.json", "earlier results\n")
  -- a file size limit of 64 blocks stands in for a disk that fills up during the write
  local ok, text = T.shell(string.format("trap '' XFSZ; ulimit -f 64 && %s %s %s/prev.json", BIN, script, dir))
  T.ok(ok, text)
  T.ok(text:find("false", 1, true) and text:find("the earlier file was put back", 1, true), text)
  T.eq(T.read(dir .. "/prev.json"), "earlier results\n")
  ok, text = T.shell(string.format("trap '' XFSZ; ulimit -f 64 && %s %s %s/fresh.json", BIN, script, dir))
  T.ok(ok and text:find("false", 1, true), text)
  T.ok(not exists(dir .. "/fresh.json"), "no half file is left")
  os.execute("rm -rf '" .. dir .. "'")
end)

T.test("JSON and HTML text is valid UTF-8 whatever bytes a label holds", function()
  T.eq(output.valid_utf8("plain µs"), "plain µs")
  T.eq(output.valid_utf8("a\xffb"), "a\u{FFFD}b")
  T.eq(output.valid_utf8("cut \xc2"), "cut \u{FFFD}")
  local text = json.encode({ label = "odd \xff\xfe", cut = ("µs"):sub(1, 1), ok = "µs" })
  T.ok(utf8.len(text), text)
  T.eq(json.decode(text).ok, "µs")
  T.ok(utf8.len(html.escape("x\xe2\x82 <y>")))
  T.eq(html.escape("a<\xff>"), "a&lt;\u{FFFD}&gt;")
end)

T.test("--json naming the lab's own standard output is refused before any work", function()
  if not BIN then return end
  local ok, text = T.shell(string.format("%s tests/lab_fixtures/demo_lab.lua --quick --json /dev/stdout", BIN))
  T.ok(not ok, text)
  T.ok(text:find("the lab's own standard output", 1, true), text)
  T.ok(text:find("nothing was run", 1, true), text)
end)

T.test("harness functions name the argument for a lab author's mistakes", function()
  local lab = harness.new { name = "t", args = {} }
  T.raises(function() lab:table({ "a" }, { { 1 }, nil, { 3 } }) end,
    "bad argument #2 to 'lab:table' (row 2 is nil")
  T.raises(function() lab:table({ "a" }, { { 1 } }, 5) end, "bad argument #3 to 'lab:table'")
  T.raises(function() harness.summarize({ 1.0, 1.1, [4] = 50.0 }) end,
    "bad argument #1 to 'harness.summarize' (sample 3 is nil")
  T.raises(function() harness.summarize({ 1.0 }, "x") end, "bad argument #2 to 'harness.summarize'")
  T.raises(function() harness.pool({ mean = 1, ci95 = { 1, 1 } }, { mean = 1, ci95 = { 1, 1 } }) end,
    "bad argument #1 to 'harness.pool' (a result with its list of times")
  T.raises(function() harness.decide({ 0.9, 1.1 }) end, "bad argument #2 to 'harness.decide'")
  T.raises(function() harness.decide("x", 0.01) end, "bad argument #1 to 'harness.decide'")
  T.raises(function() harness.decide({ 0.9, 1.1 }, 0.01, 0) end, "bad argument #3 to 'harness.decide'")
  T.raises(function() harness.format_result({ mean = 1 }) end, "bad argument #1 to 'harness.format_result'")
  -- a cuda.bench result keeps its samples as a list: format_result counts them
  T.ok(harness.format_result({ mean = 1, ci95 = { 0.9, 1.1 }, samples = { 1, 1, 1 } }):find("n=3", 1, true))
  T.raises(function() harness.holds({ [1] = "faster", [3] = "slower" }, { holds = { "faster" } }) end,
    "bad argument #1 to 'harness.holds' (entry 2 is nil")
  T.raises(function() harness.measure(nil) end, "bad argument #1 to 'harness.measure'")
  T.raises(function() lab:compile("x.cu", "sm_90") end, "bad argument #2 to 'lab:compile'")
  T.raises(function() lab:kernel_path(5) end, "bad argument #1 to 'lab:kernel_path'")
  T.raises(function() lab:child("x.lua", { env = "A=1" }) end, "bad argument #2 to 'lab:child' (field 'env'")
  T.raises(function() lab:sweep({ 1 }, function(c) return c end, { name = {} }) end,
    "bad argument #3 to 'L:sweep' (field 'name'")
  T.raises(function() lab:verdict("a sentence", "x", true, { ci = { 0.9, 1.1 } }) end,
    "bad argument #4 to 'lab:verdict' (a compare detail needs ratio=")
  T.raises(function() lab:verdict("a sentence", "x", true, { a = { ci95 = { 1, 2 } } }) end,
    "bad argument #4 to 'lab:verdict' (evidence result 1")
  T.raises(function() lab:svg_lines { file = "w.svg", width = "700", series = {} } end,
    "svg.lines: field 'width' must be a number of pixels")
  lab:svg_lines { file = "a.svg", width = 700.5, series = {} } -- rounded to whole pixels
  T.raises(function() lab:svg_bars { file = "a.svg", bars = {} } end, "'a.svg' was drawn earlier in this run")
  lab.progress_on = true
  lab:progress(1e300, 1e300, "huge") -- no integer representation: printed, not raised
  lab:progress(0 / 0, 10, "nan")
end)

T.test("harness.new checks the spec's strings and the parameters' bounds", function()
  T.raises(function() harness.new { name = "a", claims = { "seed §1" }, args = {} } end,
    "harness.new: field 'claims' must be a string")
  T.raises(function() harness.new { name = "a", title = 5, args = {} } end, "field 'title' must be a string")
  T.raises(function() harness.new { name = "a", args = {}, params = { { name = "n", default = 8, min = "1" } } } end,
    "param 'n': min must be a number")
  T.raises(function() harness.new { name = "a", args = {}, params = { { name = "n", default = 8, max = 4 } } } end,
    "param 'n': 8 is outside [-inf, 4]")
  T.raises(function()
    harness.new { name = "a", args = {}, params = { { name = "n", default = 2, quick = 0, min = 1 } } }
  end, "param 'n': 0 is outside [1, inf]")
end)

T.test("provenance.cwd is the folder the lab runs in, whatever $PWD says", function()
  if not BIN then return end
  local dir = T.tmpdir()
  local ok, text = T.shell(string.format("PWD=/ %s tests/lab_fixtures/demo_lab.lua --quick --json %s/r.json", BIN, dir))
  T.ok(ok, text)
  local _, here = T.shell("pwd -P")
  T.eq(json.decode(T.read(dir .. "/r.json")).provenance.cwd, (here:gsub("\n$", "")))
  os.execute("rm -rf '" .. dir .. "'")
end)

T.done()
