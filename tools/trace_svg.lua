-- trace_svg.lua — draws a gpulab trace (cuda.trace / --trace JSON) as an SVG timeline with
-- gpulab.svg: one lane for the host calls and one per stream for the device spans.
--   gpulab tools/trace_svg.lua run.json [run.svg]
local json = require("gpulab.json")
local svg = require("gpulab.svg")

local input, output = arg[1], arg[2]
if not input then
  io.stderr:write("usage: gpulab tools/trace_svg.lua TRACE.json [OUT.svg]\n")
  os.exit(2)
end
output = output or (input:gsub("%.json$", "") .. ".svg")
local f = assert(io.open(input, "r"))
local doc = json.decode(f:read("a"))
f:close()
if type(doc) ~= "table" or type(doc.traceEvents) ~= "table" then
  io.stderr:write("trace_svg: " .. input .. " is not a trace (no traceEvents)\n")
  os.exit(1)
end

local names = {}
for _, e in ipairs(doc.traceEvents) do
  if e.ph == "M" and e.name == "thread_name" and e.pid == 2 then names[e.tid] = e.args.name end
end
local host, lanes, order = { label = "host", spans = {} }, {}, {}
for _, e in ipairs(doc.traceEvents) do
  if e.ph == "X" then
    local span = { e.ts / 1e3, (e.ts + e.dur) / 1e3, label = e.name }
    if e.pid == 1 then
      host.spans[#host.spans + 1] = span
    else
      if not lanes[e.tid] then
        lanes[e.tid] = { label = names[e.tid] or ("track " .. e.tid), spans = {} }
        order[#order + 1] = e.tid
      end
      local lane = lanes[e.tid].spans
      lane[#lane + 1] = span
    end
  end
end
table.sort(order)
local rows = { host }
for _, tid in ipairs(order) do rows[#rows + 1] = lanes[tid] end
svg.write(output, svg.timeline { title = "gpulab trace: " .. input, x_label = "ms since the trace started",
  rows = rows })
print(string.format("%s: %d host spans, %d device lanes", output, #host.spans, #order))
