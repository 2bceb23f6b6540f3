-- A small lab written against gpulab.lab, used by the harness tests. It exercises every part
-- of the harness; with --fail it reports a failure; the kernel is compiled with or without a GPU.
local lab = require("gpulab.lab")
local L = lab.new{
  name = "demo_lab", title = "Harness demonstration", claims = "none: a test fixture",
  params = {
    { name = "rows", default = 8192, help = "rows per block" },
    { name = "scale", default = 1.5, help = "a float parameter" },
    { name = "fast_path", default = false, help = "a boolean parameter" },
    { name = "label", default = "plain", help = "a string parameter" },
    { name = "fail", default = false, help = "call L:fail at the end" },
  },
}

L:section("Setup")
L:note("rows=" .. L.params.rows .. " scale=" .. L.params.scale .. " fast_path=" .. tostring(L.params.fast_path) ..
  " label=" .. L.params.label .. " quick=" .. tostring(L.quick))
local prog = cuda.compile([[extern "C" __global__ void scale(float *x, float s, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= s; }]],
  { name = "demo_lab.cu", arch = "compute_90" })
L:note("kernel compiled: " .. (prog.ptx:find(".entry scale", 1, true) and "yes" or "no"))
L:record("ptx_bytes", #prog.ptx)

local ok, why = L:gpu()
L:record("gpu_reason", why)

L:section("Measurement")
local rows = {}
for i = 1, 4 do
  rows[i] = { 2 ^ (i * 4), i * 0.125, i % 2 == 0 and "even" or "odd \"quoted\"" }
  L:progress(i, 4, "sweep")
end
rows[5] = { 3, 0 / 0, nil }
L:table({ "n", "time (ms)", "kind" }, rows)
L:verdict("bigger n takes longer", "0.125 ms -> 0.5 ms", true)
L:verdict("time is constant", "it grows", false)
L:verdict("it is a fine day", nil, nil)
L:record("series", { 1, 2.5, 0 / 0 })
L:record("nested", { a = { b = "<&>" } })

L:svg_lines{ file = "sweep.svg", title = "Sweep <1> & \"2\"", x_label = "n", y_label = "ms", log_x = true,
  series = { { name = "measured", points = { { 16, 0.125, lo = 0.12, hi = 0.13 }, { 256, 0.25, lo = 0.23, hi = 0.26 },
               { 4096, 0.375 }, { 65536, 0.5, lo = 0.45, hi = 0.52 } } },
             { name = "with gaps", points = { { 16, 0.2 }, { 100, 0 / 0 }, { 1000, 0.3 } } },
             { name = "band", band = true, points = { { 16, 0.05, lo = 0.04, hi = 0.06 },
               { 65536, 0.07, lo = 0.06, hi = 0.09 } } } } }
L:svg_bars{ file = "bars", title = "Bars", y_label = "GB/s", bars = { { label = "copy", value = 4300, lo = 4200,
  hi = 4350 },
  { label = "tma", value = 4150.5 }, { label = "neg", value = -10 }, { label = "nan", value = 0 / 0 } } }
L:svg_timeline{ file = "timeline.svg", title = "Blocks per SM", x_label = "µs",
  rows = { { label = "SM 0", spans = { { 0, 4, label = "block 0" }, { 4, 9, label = "block 2" } } },
           { label = "SM 1", spans = { { 1, 5, label = "block 1" } } } } }

if L.params.fail then L:fail("asked to fail with --fail") end
if not ok then L:note("stopping here: " .. tostring(why)) end
os.exit(L:finish())
