-- lab.lua --html FILE: one self-contained page per run with every claim, verdict, source and its
-- evidence, the tables, the pictures inline, the notes and the provenance; checked before any
-- work; written without a GPU; never lost when another output fails. The SVG pictures: integer
-- axes get integer ticks, a threshold scales the axis around it, long labels are turned or cut,
-- a timeline's colours have a legend. (tests/html_check.sh opens the page in Chromium.)
local T = dofile("tests/lua/t.lua")
local json = require("gpulab.json")
local svg = require("gpulab.svg")
local html = require("gpulab.html")

local function run(script, args)
  return cuda.run_isolated(script, { args = args, env = { GPULAB_LIBCUDA = "/nonexistent/libcuda.so" },
    timeout = 120 })
end

local FIXTURE = "tests/lab_fixtures/report_lab.lua"

local function count(text, pat)
  local n = 0
  for _ in text:gmatch(pat) do n = n + 1 end
  return n
end

T.test("--html writes one self-contained page with every claim, verdict, source and picture", function()
  local d = T.tmpdir()
  local r = run(FIXTURE, { "--html", d .. "/r.html", "--json", d .. "/r.json" })
  T.eq(r.code, 0, r.stderr)
  T.ok(r.stdout:find("report: " .. d .. "/r.html", 1, true), r.stdout)
  local page = T.read(d .. "/r.html")
  local res = json.decode(T.read(d .. "/r.json"))
  T.ok(page:find("<!DOCTYPE html>", 1, true) == 1, "a document")
  T.ok(page:find("<title>report_lab — A report &lt;with&gt; &amp; &quot;markup&quot;</title>", 1, true),
    "title escaped")
  for _, v in ipairs(res.verdicts) do
    T.ok(page:find('id="claim-' .. v.id .. '"', 1, true), v.id)
    T.ok(page:find(html.escape(v.claim), 1, true), v.claim)
    T.ok(page:find('<span class="badge">' .. v.verdict .. "</span>", 1, true), v.verdict)
    T.ok(page:find("source: " .. html.escape(v.source), 1, true), v.source)
  end
  T.eq(count(page, '<span class="badge">'), #res.verdicts)
  T.ok(page:find("never judged", 1, true), "the unjudged claim says so")
  -- evidence: the intervals and the ratio, and a ratio picture per comparison
  T.ok(page:find("2 stages", 1, true) and page:find("1 stage", 1, true), "interval labels")
  T.ok(page:find("time ratio a/b <b>", 1, true), "the ratio in words")
  T.eq(count(page, '<figure class="ratio%-plot">'), 3)
  -- the lab's pictures inline, without their XML declaration
  T.eq(count(page, '<figure class="picture"'), 3)
  T.eq(count(page, "<svg "), 6)
  T.ok(not page:find("<?xml", 1, true), "no XML declaration inside the page")
  -- the table, the notes, the provenance
  T.ok(page:find("<th>size (B)</th>", 1, true) and page:find('<td class="num">4096</td>', 1, true), "the table")
  T.ok(page:find("synthetic times: no GPU is measured here", 1, true), "the note")
  T.ok(page:find("commit <code>" .. html.escape(res.provenance.gpulab.commit), 1, true), "the commit")
  T.ok(page:find(res.provenance.date_utc, 1, true), "the date")
  T.ok(page:find("none reached: no CUDA driver", 1, true), "no device reached, and why")
  -- self-contained: nothing fetched from anywhere
  T.ok(not page:find("<script", 1, true) and not page:find("<link", 1, true), "no script or link")
  T.ok(not page:find("src=", 1, true) and not page:find("href=", 1, true) and not page:find("url(", 1, true),
    "no external reference")
  local stripped = page:gsub('xmlns="http://www%.w3%.org/2000/svg"', "")
  T.ok(not stripped:find("https?://"), "no address but the SVG namespace")
end)

T.test("--html is checked before any work; a failing JSON never loses the report", function()
  local d = T.tmpdir()
  local r = run(FIXTURE, { "--html", d .. "/missing/r.html" })
  T.eq(r.code, 1)
  T.ok(r.stderr:find("cannot write the HTML report to " .. d .. "/missing/r.html (--html)", 1, true), r.stderr)
  T.ok(not r.stdout:find("## Synthetic", 1, true), r.stdout)
  r = run(FIXTURE, { "--html", "/dev/full" })
  T.eq(r.code, 1)
  T.ok(r.stderr:find("(--html): /dev/full: ", 1, true), r.stderr)
  r = run(FIXTURE, { "--html=" })
  T.eq(r.code, 1)
  T.ok(r.stderr:find("option --html needs a file name", 1, true), r.stderr)
  -- the JSON fails at the end (its folder removed during the run): the report is still written
  assert(os.execute("mkdir -p '" .. d .. "/gone'"))
  T.write(d .. "/lab.lua", string.format([[
local harness = require("gpulab.lab")
local lab = harness.new{ name = "lossy" }
lab:claim { id = "c", own = true, text = "a claim" }
os.execute("rm -rf %s/gone")
lab:verdict("c", "m", true)
os.exit(lab:finish())
]], d))
  r = run(d .. "/lab.lua", { "--json", d .. "/gone/r.json", "--html", d .. "/r.html" })
  T.eq(r.code, 1, r.stderr)
  T.ok(r.stderr:find("cannot write the JSON results", 1, true), r.stderr)
  T.ok(T.read(d .. "/r.html"):find('id="claim-c"', 1, true), "the report survived")
end)

T.test("a lab that ends at require_gpu gets a report with its claims never judged", function()
  local d = T.tmpdir()
  T.write(d .. "/lab.lua", [[
local harness = require("gpulab.lab")
local lab = harness.new{ name = "gpu_only", title = "needs a device" }
lab:claim { id = "fast", source = "a datasheet", text = "the copy reaches 4 TB/s" }
lab:require_gpu("compiled only")
]])
  local r = run(d .. "/lab.lua", { "--html", d .. "/r.html" })
  T.eq(r.code, 0, r.stderr)
  local page = T.read(d .. "/r.html")
  T.ok(page:find('id="claim-fast"', 1, true), page)
  T.ok(page:find("never judged: no GPU", 1, true), "why it was not judged")
  T.ok(page:find("compiled only", 1, true), "the note")
end)

T.test("svg: integer data gets integer ticks; fractional data keeps its steps", function()
  local text = svg.lines { series = { { name = "s", points = { { 1, 1 }, { 2, 3 }, { 3, 2 } } } } }
  for v in text:gmatch('text%-anchor="[a-z]+">([^<]+)</text>') do
    if tonumber(v) then T.ok(tonumber(v) == math.floor(tonumber(v)), "an integer tick: " .. v) end
  end
  local frac = svg.lines { series = { { name = "s", points = { { 1, 0.1 }, { 2, 0.3 } } } } }
  T.ok(frac:find(">0.05</text>", 1, true) or frac:find(">0.1</text>", 1, true), "fractional ticks stay")
end)

T.test("svg: a threshold scales the axis around it instead of from zero", function()
  local text = svg.bars { threshold = 4300,
    bars = { { label = "copy", value = 4300 }, { label = "tma", value = 4250 } } }
  T.ok(not text:find(">0</text>", 1, true), "no zero on an axis around 4250-4300")
  T.ok(text:find('class="threshold"', 1, true), "the threshold is drawn")
  local r = svg.ratio { threshold = 1, margin = 0.01,
    items = { { label = "a/b", value = 0.985, lo = 0.98, hi = 0.99 } } }
  T.ok(r:find('class="band"', 1, true) and r:find("#2ca02c", 1, true), "below the band: green")
  T.ok(not r:find(">0</text>", 1, true), "the ratio axis is around 1")
end)

T.test("svg: long labels are turned or cut, never drawn over each other", function()
  local b = svg.bars { bars = { { label = "a very long category name", value = 1 },
    { label = "another long one", value = 2 } } }
  T.ok(b:find("rotate(-40", 1, true), "category labels turned")
  local l = svg.lines { series = { { name = string.rep("long name ", 10), points = { { 1, 1 }, { 2, 2 } } } } }
  T.ok(l:find("…", 1, true), "a legend entry cut to its room")
end)

T.test("svg: timeline colours follow the span's kind and have a legend", function()
  local t = svg.timeline { rows = { { label = "SM 0", spans = { { 0, 1, kind = "load" }, { 1, 2, kind = "math" },
    { 2, 3, kind = "load" } } } } }
  T.ok(t:find('class="legend"', 1, true), "a legend")
  T.ok(t:find(">load</text>", 1, true) and t:find(">math</text>", 1, true), "each kind named")
  local spans = {}
  for i = 1, 20 do spans[i] = { i, i + 1, label = "block " .. i } end
  local many = svg.timeline { rows = { { label = "SM 0", spans = spans } } }
  T.ok(not many:find('class="legend"', 1, true), "more kinds than colours: one colour, no legend")
end)

T.done()
