-- A small lab written against gpulab.lab, used by the harness tests. It exercises every part
-- of the harness; with --fail it reports a failure; the kernel is compiled with or without a GPU.
local harness = require("gpulab.lab")
local lab = harness.new{
  name = "demo_lab", title = "Harness demonstration", claims = "none: a test fixture",
  params = {
    { name = "rows", default = 8192, help = "rows per block" },
    { name = "scale", default = 1.5, help = "a float parameter" },
    { name = "fast_path", default = false, help = "a boolean parameter" },
    { name = "label", default = "plain", help = "a string parameter" },
    { name = "fail", default = false, help = "call lab:fail at the end" },
  },
}

lab:section("Setup")
lab:note("rows=" .. lab.params.rows .. " scale=" .. lab.params.scale ..
  " fast_path=" .. tostring(lab.params.fast_path) ..
  " label=" .. lab.params.label .. " quick=" .. tostring(lab.quick))
local prog = cuda.compile([[extern "C" __global__ void scale(float *x, float s, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= s; }]],
  { name = "demo_lab.cu", arch = "compute_90" })
lab:note("kernel compiled: " .. (prog.ptx:find(".entry scale", 1, true) and "yes" or "no"))
lab:record("ptx_bytes", #prog.ptx)

local ok, why = lab:gpu()
lab:record("gpu_reason", why)

lab:section("Measurement")
local rows = {}
for i = 1, 4 do
  rows[i] = { 2 ^ (i * 4), i * 0.125, i % 2 == 0 and "even" or "odd \"quoted\"" }
  lab:progress(i, 4, "sweep")
end
rows[5] = { 3, 0 / 0, nil }
lab:table({ "n", "time (ms)", "kind" }, rows)
lab:verdict("bigger n takes longer", "0.125 ms -> 0.5 ms", true)
lab:verdict("time is constant", "it grows", false)
lab:verdict("it is a fine day", nil, nil)
lab:record("series", { 1, 2.5, 0 / 0 })
lab:record("nested", { a = { b = "<&>" } })

lab:svg_lines{ file = "sweep.svg", title = "Sweep <1> & \"2\"", x_label = "n", y_label = "ms", log_x = true,
  series = { { name = "measured", points = { { 16, 0.125, lo = 0.12, hi = 0.13 }, { 256, 0.25, lo = 0.23, hi = 0.26 },
               { 4096, 0.375 }, { 65536, 0.5, lo = 0.45, hi = 0.52 } } },
             { name = "with gaps", points = { { 16, 0.2 }, { 100, 0 / 0 }, { 1000, 0.3 } } },
             { name = "band", band = true, points = { { 16, 0.05, lo = 0.04, hi = 0.06 },
               { 65536, 0.07, lo = 0.06, hi = 0.09 } } } } }
lab:svg_bars{ file = "bars", title = "Bars", y_label = "GB/s", bars = { { label = "copy", value = 4300, lo = 4200,
  hi = 4350 },
  { label = "tma", value = 4150.5 }, { label = "neg", value = -10 }, { label = "nan", value = 0 / 0 } } }
lab:svg_timeline{ file = "timeline.svg", title = "Blocks per SM", x_label = "µs",
  rows = { { label = "SM 0", spans = { { 0, 4, label = "block 0" }, { 4, 9, label = "block 2" } } },
           { label = "SM 1", spans = { { 1, 5, label = "block 1" } } } } }

if lab.params.fail then lab:fail("asked to fail with --fail") end
if not ok then lab:note("stopping here: " .. tostring(why)) end
os.exit(lab:finish())
