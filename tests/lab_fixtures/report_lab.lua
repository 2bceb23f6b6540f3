-- A lab for the --html report: claims with sources judged from synthetic measure results (a
-- faster, a same and an unclear comparison), one never judged, a table, three pictures, notes. It
-- asks for the device and goes on without one, so the report is tested where there is no GPU.
local harness = require("gpulab.lab")
local lab = harness.new {
  name = "report_lab", title = "A report <with> & \"markup\"", claims = "a test fixture",
  params = { { name = "n", default = 20, quick = 10, help = "samples per synthetic result" } },
}
lab:claim { id = "faster", source = "Luo et al. 2024, Table 3", text = "the pipelined kernel is faster" }
lab:claim { id = "same", seed = "§3", text = "two equal kernels time the same" }
lab:claim { id = "close", own = true, text = "a 0.5% effect is decided at a 1% margin" }
lab:claim { id = "forgotten", own = true, text = "a claim this lab never judges" }
lab:gpu()

local function result(mean, half, label)
  local n, times = lab.params.n, {}
  for i = 1, n do times[i] = mean + half * ((i - 1) / (n - 1) * 2 - 1) end
  return harness.summarize(times, { regime = "cold", label = label })
end

lab:section("Synthetic results")
lab:note("synthetic times: no GPU is measured here")
local d, ratio, ci, ev = lab:compare(result(1.0, 0.01, "2 stages"), result(2.0, 0.02, "1 stage"), { margin = 0.01 })
lab:verdict("faster", string.format("%s, ratio %.3f [%.3f, %.3f]", d, ratio, ci[1], ci[2]), d == "faster", ev)
local d2, _, _, ev2 = lab:compare(result(1.0, 0.001, "a"), result(1.0, 0.001, "b"), { margin = 0.01 })
lab:verdict("same", d2, d2 == "same", ev2)
local d3, _, _, ev3 = lab:compare(result(1.005, 0.02, "x"), result(1.0, 0.02, "y"), { margin = 0.01, rounds = 0 })
lab:verdict("close", d3, nil, ev3)
lab:table({ "size (B)", "time (ms)", "kind" }, { { 1024, 0.5, "copy" }, { 4096, 1.25, "tma" } })
lab:svg_lines { file = "sweep.svg", title = "Sweep", x_label = "stages", y_label = "ms",
  series = { { name = "time", points = { { 1, 2.0, lo = 1.9, hi = 2.1 }, { 2, 1.0 }, { 3, 1.01 } } } } }
lab:svg_bars { file = "bars.svg", title = "Bandwidth", y_label = "GB/s", threshold = 4300, threshold_label = "copy",
  bars = { { label = "copy", value = 4300 }, { label = "tma", value = 4250, lo = 4230, hi = 4270 } } }
lab:svg_timeline { file = "timeline.svg", title = "Blocks per SM", x_label = "µs",
  rows = { { label = "SM 0", spans = { { 0, 4, kind = "load" }, { 4, 9, kind = "compute" } } },
           { label = "SM 1", spans = { { 1, 5, kind = "load" } } } } }
os.exit(lab:finish())
