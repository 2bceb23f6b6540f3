-- cuda.trace and gpulab --trace through the driver stand-in: the JSON parses, holds one host span
-- per launch, copy, memset, graph launch and sync (kernel name, grid, block, stream), a device span
-- for GPU work (timed by the stand-in's events: it runs nothing, so only their presence and order
-- are checked), track names for the streams, and bad input is refused.
local T = dofile("tests/lua/t.lua")
local json = require("gpulab.json")

local DIR = assert(os.getenv("GPULAB_TRACE_DIR"), "run with GPULAB_TRACE_DIR set")
os.execute("mkdir -p '" .. DIR .. "'")
local GPULAB = arg[-1]

local PTX = [[
.version 8.0
.target sm_90
.address_size 64
.visible .entry scale(.param .u64 p, .param .u32 n)
{
	ret;
}
]]

local function load_trace(path)
  local text = assert(T.read(path), "no trace written at " .. path)
  return json.decode(text)
end

local function spans(doc, pid, cat)
  local out = {}
  for _, e in ipairs(doc.traceEvents) do
    if e.ph == "X" and e.pid == pid and (cat == nil or e.cat == cat) then out[#out + 1] = e end
  end
  return out
end

T.test("launches, copies, memset, graph launch and syncs appear with their details", function()
  local path = DIR .. "/script.json"
  local mod = cuda.load(PTX)
  local k = mod:kernel("scale")
  local d = cuda.array("f32", 256)
  local h = cuda.host("f32", 256)
  local st = cuda.stream()
  cuda.trace(path)
  T.eq(cuda.trace(), path)
  k:launch({grid = 8, block = 32}, d, 256)
  k:launch({grid = {2, 2}, block = {16, 2}, stream = st}, d, 256)
  d:copy_from(h)
  h:copy_from(d)
  d:fill(0)
  local g = st:capture(function() k:launch({grid = 1, block = 1, stream = st}, d, 1) end)
  g:launch(st)
  st:sync()
  cuda.sync()
  local sum = cuda.trace(false)
  T.eq(cuda.trace(), nil)
  T.eq(sum.path, path)
  T.eq(sum.dropped, 0)
  local doc = load_trace(path)
  local launches = spans(doc, 1, "launch")
  T.eq(#launches, 3, "two launches and the captured one")
  T.eq(launches[1].name, "scale")
  T.eq(json.encode(launches[1].args.grid), "[8,1,1]")
  T.eq(json.encode(launches[1].args.block), "[32,1,1]")
  T.eq(json.encode(launches[2].args.grid), "[2,2,1]")
  T.eq(json.encode(launches[2].args.block), "[16,2,1]")
  T.eq(launches[1].args.stream, "0", "the default stream")
  T.ok(launches[2].args.stream ~= "0", "the second launch is on its stream")
  local copies = spans(doc, 1, "copy")
  T.eq(#copies, 3)
  T.eq(copies[1].name, "copy HtoD"); T.eq(copies[1].args.bytes, 1024)
  T.eq(copies[2].name, "copy DtoH")
  T.eq(copies[3].name, "memset")
  T.eq(#spans(doc, 1, "graph"), 1)
  local syncs = spans(doc, 1, "sync")
  T.eq(#syncs, 2)
  T.eq(syncs[1].name, "s:sync"); T.eq(syncs[2].name, "cuda.sync")
  -- host spans in submission order, non-negative durations
  local host = spans(doc, 1)
  T.eq(#host, sum.spans)
  for i, e in ipairs(host) do
    T.ok(e.dur >= 0, "duration")
    if i > 1 then T.ok(e.ts >= host[i - 1].ts, "host spans in order") end
  end
  -- device spans: every launch outside the capture, the copies, memset and the graph launch;
  -- the launch captured into the graph has none (an event there would become a graph node)
  local kernels = spans(doc, 2, "kernel")
  T.eq(#kernels, 2)
  T.eq(kernels[2].tid, launches[2].args.track, "the device span is on its stream's track")
  T.eq(#spans(doc, 2), sum.device_spans)
  T.eq(sum.device_spans, 2 + 3 + 1)
  local named = {}
  for _, e in ipairs(doc.traceEvents) do
    if e.ph == "M" and e.name == "thread_name" then named[e.tid] = e.args.name end
  end
  T.eq(named[1], "default stream")
  T.ok(named[launches[2].args.track]:find("^stream 0x"), "the stream's track is named")
  T.eq(doc.gpulab.spans, sum.spans)
end)

T.test("no deferred driver events are left behind", function()
  local before = cuda.stats()
  cuda.trace(DIR .. "/again.json")
  cuda.sync()
  cuda.trace(false)
  T.eq(cuda.stats().events, before.events)
  T.eq(#spans(load_trace(DIR .. "/again.json"), 1, "sync"), 1)
end)

T.test("a profile while tracing: both see every launch", function()
  local k = cuda.load(PTX):kernel("scale")
  local d = cuda.array("f32", 16)
  cuda.trace(DIR .. "/profiled.json")
  local rows = cuda.profile(function()
    for i = 1, 3 do k:launch({grid = i, block = 32}, d, 16) end
  end, {metrics = {"dram__bytes.sum"}})
  local sum = cuda.trace(false)
  T.eq(#rows, 3)
  T.eq(table.concat(rows[3].grid, ","), "3,1,1")
  local launches = spans(load_trace(DIR .. "/profiled.json"), 1, "launch")
  T.eq(#launches, 3)
  T.eq(sum.spans, 4, "three launches and the profile's sync")
end)

T.test("bad input", function()
  T.raises(function() cuda.trace(42) end, "bad argument #1 to 'cuda.trace' (file name or false expected, got number)")
  T.raises(function() cuda.trace("") end,
    "bad argument #1 to 'cuda.trace' (file name of 1..4095 bytes without a NUL byte expected)")
  T.raises(function() cuda.trace(DIR .. "/no/such/dir/t.json") end, "cuda.trace: cannot write")
  T.raises(function() cuda.trace(false) end, "cuda.trace: no trace is being recorded")
  cuda.trace(DIR .. "/twice.json")
  T.raises(function() cuda.trace(DIR .. "/other.json") end, "cuda.trace: already tracing to")
  cuda.trace(false)
end)

local function run(args)
  local p = io.popen(GPULAB .. " " .. args .. " 2>&1")
  local out = p:read("a")
  local ok, _, code = p:close()
  return ok and 0 or code, out
end

T.test("gpulab --trace FILE script writes the script's timeline, also when it ends with os.exit", function()
  local script = DIR .. "/child.lua"
  T.write(script, [[
local k = cuda.load(...):kernel("scale")
local d = cuda.array("f32", 4)
for i = 1, 3 do k:launch({grid = i, block = 32}, d, 4) end
cuda.sync()
os.exit(0)
]])
  local ptx = DIR .. "/child.ptx"
  T.write(ptx, PTX)
  local out_path = DIR .. "/cli.json"
  os.remove(out_path)
  local code, out = run("--trace " .. out_path .. " " .. script .. " " .. ptx)
  T.eq(code, 0, out)
  local doc = load_trace(out_path)
  local launches = spans(doc, 1, "launch")
  T.eq(#launches, 3)
  T.eq(json.encode(launches[3].args.grid), "[3,1,1]")
  T.eq(#spans(doc, 2, "kernel"), 3)
  code, out = run("--trace=" .. DIR .. "/cli2.json -e 'cuda.sync()'")
  T.eq(code, 0, out)
  T.eq(#spans(load_trace(DIR .. "/cli2.json"), 1, "sync"), 1)
  -- drawn as an SVG timeline by the harness's svg module
  code, out = run("tools/trace_svg.lua " .. out_path .. " " .. DIR .. "/cli.svg")
  T.eq(code, 0, out)
  T.ok(out:find("4 host spans, 1 device lanes", 1, true), out)
  local pic = T.read(DIR .. "/cli.svg")
  T.ok(pic:find("<svg", 1, true) and pic:find("</svg>", 1, true) and pic:find(">default stream<", 1, true), pic)
  code, out = run("--trace")
  T.ok(code ~= 0 and out:find("'--trace' needs a file name", 1, true), out)
end)

T.test("kernel names of any bytes and a NaN elapsed time still give valid JSON", function()
  local bad = "k\xff\xfe"
  local long = string.rep("a", 126) .. "\xc3\xa9" .. "z" -- the e-acute straddles the 127-byte cut
  local entry = ".visible .entry %s(.param .u64 p, .param .u32 n)\n{\n\tret;\n}\n"
  local ptx = ".version 8.0\n.target sm_90\n.address_size 64\n" .. entry:format(bad) .. entry:format(long)
  local mod = cuda.load(ptx)
  local k1, k2 = mod:kernel(bad), mod:kernel(long)
  local d = cuda.array("u32", 4)
  local elapsed = DIR .. "/elapsed"
  for _, nan in ipairs({ false, true }) do
    if nan then T.write(elapsed, "1 nan 2 nan\n") end
    local path = DIR .. (nan and "/nan.json" or "/names.json")
    cuda.trace(path)
    k1:launch({ grid = 1, block = 1 }, d, 4)
    k2:launch({ grid = 1, block = 1 }, d, 4)
    cuda.sync()
    cuda.trace(false)
    local text = assert(T.read(path))
    T.ok(utf8.len(text) ~= nil, "the file is UTF-8")
    T.ok(not text:find("nan", 1, true) and not text:find("inf", 1, true), "no NaN or infinity in the numbers")
    local doc = json.decode(text)
    local names = {}
    for _, e in ipairs(doc.traceEvents) do if e.ph == "X" then names[e.name] = true end end
    T.ok(names["k\u{fffd}\u{fffd}"], "invalid bytes become U+FFFD")
    T.ok(names[string.rep("a", 126)], "a name cut at 127 bytes ends at a character boundary")
  end
  os.remove(elapsed)
end)

T.done()
