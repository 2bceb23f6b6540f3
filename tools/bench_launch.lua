-- Launch overhead: gpulab against a plain C loop over cuLaunchKernel and against CuPy and
-- cuda.core, all measured in the same run.
-- Usage: build/gpulab tools/bench_launch.lua [--quick] [--rounds=R] [N]
--   (a) raw C (build/bench_launch_raw, a child), (a') the same C loop over cuLaunchKernel inside
--   this process, on this context, kernel and packed arguments (prepared:launch(n), which checks
--   once and then only calls the driver), (b) k:launch with a table config (kept, and
--   built in the loop), (c) a prepared launch, (d) a captured graph of 1000 launches replayed,
--   (e) CuPy and cuda.core (tools/bench_launch_py.py, a child, when python3 has them).
-- Two loop shapes: sustained (N launches back to back, then a sync) and burst (256 launches
-- after a drained queue, only the launching timed: the host's own cost). The paths take turns
-- for R rounds, so that a machine whose speed drifts moves all of them; each round gives every
-- path's ratio to raw C of that round, and the table shows the medians. The ratios are given
-- against both baselines: the child process has its own context and CPU placement, the
-- in-process loop shares everything with the path it is compared with.
-- Targets (issue 15): prepared <= 1.05x raw C, k:launch with a table config <= 1.10x, sustained.
local quick, N, ROUNDS = false, 200000, 3
for _, a in ipairs(arg) do
  if a == "--quick" then quick = true
  elseif a:match("^%-%-rounds=%d+$") then ROUNDS = tonumber(a:match("%d+"))
  elseif tonumber(a) then N = math.tointeger(tonumber(a)) or N end
end
if quick and not tonumber(arg[#arg] or "") then N = 20000 end
local GRAPH_LEN, BURST = 1000, 256
N = math.max(GRAPH_LEN, N // GRAPH_LEN * GRAPH_LEN)

local ok, why = cuda.available()
if not ok then
  print("bench_launch: no GPU: " .. tostring(why))
  os.exit(77)
end

local root = (arg[0]:match("^(.*)/tools/[^/]*$")) or "."
local gpulab_dir = (arg[-1]:match("^(.*)/[^/]*$")) or "."
local dev = cuda.device(0)
local source = root .. "/kernels/bench_launch.cu"
local prog = cuda.compile_file(source, { name = "bench_launch.cu" })
local mod = cuda.load(prog)
local empty, args4 = mod:kernel("empty_kernel"), mod:kernel("args4")
local buf_out, buf_in = cuda.array("f32", 128), cuda.array("f32", 128)

local function run_child(command)
  local p = assert(io.popen(command .. " 2>&1"))
  local text = p:read("a")
  p:close()
  return text
end

-- (a) the C baseline, from the same build, on the same image
local image = os.tmpname()
do
  local out = assert(io.open(image, "wb"))
  out:write(prog.cubin or prog.ptx)
  out:close()
end
local function raw_c()
  local exe = gpulab_dir .. "/bench_launch_raw"
  local f = io.open(exe, "r")
  if not f then return nil, "no " .. exe end
  f:close()
  local text = run_child(string.format("%s %s %d", exe, image, N))
  local r = {}
  for _, key in ipairs({ "empty", "args4", "empty_burst", "args4_burst" }) do
    r[key] = tonumber(text:match("\n?" .. key .. " ([%d.]+)"))
    if not r[key] then return nil, text end
  end
  return r
end

-- (e) CuPy and cuda.core, when this machine's python3 has them
local function python_libs()
  local text = run_child(string.format("python3 %s/tools/bench_launch_py.py %s %d", root, source, N))
  local r, skipped = {}, {}
  for lib, kernel, mode, us in text:gmatch("([%w%.]+) (%w+) (%a+) ([%d.]+)") do
    r[lib] = r[lib] or {}
    r[lib][kernel .. (mode == "burst" and "_burst" or "")] = tonumber(us)
  end
  for line in text:gmatch("skip [^\n]*") do skipped[#skipped + 1] = line end
  return r, skipped
end

local turns_lib = dofile(root .. "/tools/turns.lua")
local time_sustained = turns_lib.sustained -- n launches back to back, the queue drained around them
-- microseconds per launch over about n launches in bursts of BURST, each after a drained
-- queue; only the launching is timed
local function time_bursts(fn, n)
  local total, done = 0, 0
  while done < n do
    cuda.sync()
    local t0 = cuda.now()
    fn(BURST)
    total = total + (cuda.now() - t0)
    done = done + BURST
  end
  cuda.sync()
  return total / done * 1e6
end
-- the best of 3 runs of N launches after a warm-up
local function sustained(fn)
  fn(N // 10)
  local best = math.huge
  for _ = 1, 3 do best = math.min(best, time_sustained(fn, N)) end
  return best
end
local function burst(fn)
  fn(BURST)
  local best = math.huge
  for _ = 1, 3 do best = math.min(best, time_bursts(fn, N)) end
  return best
end

local cfg = { grid = 1, block = 32 }
local launch_empty = function(n) for _ = 1, n do empty:launch(cfg) end end
local launch_args4 = function(n) for _ = 1, n do args4:launch(cfg, buf_out, buf_in, 1000, 2.0) end end
local built_empty = function(n) for _ = 1, n do empty:launch({ grid = 1, block = 32 }) end end
local built_args4 = function(n)
  for _ = 1, n do args4:launch({ grid = 1, block = 32 }, buf_out, buf_in, 1000, 2.0) end
end
local prepared_empty = empty:prepare(cfg)
local prepared_args4 = args4:prepare(cfg, buf_out, buf_in, 1000, 2.0)
-- graphs need a capturable stream: the prepared launches are bound to it
local s = cuda.stream { nonblocking = true }
local function graph_of(k, ...)
  local launch = k:prepare({ grid = 1, block = 32, stream = s }, ...)
  local g = s:capture(function() for _ = 1, GRAPH_LEN do launch() end end)
  return g, launch
end
local graph_empty, graph_empty_launch = graph_of(empty)
local graph_args4, graph_args4_launch = graph_of(args4, buf_out, buf_in, 1000, 2.0)

local RAW, INPROC = "(a) raw C cuLaunchKernel", "(a') C loop in this process"
local PATHS = {
  { name = INPROC,
    empty = function(n) prepared_empty:launch(n) end, args4 = function(n) prepared_args4:launch(n) end },
  { name = "(b) k:launch, table config", empty = launch_empty, args4 = launch_args4, target = 1.10 },
  { name = "(b') k:launch, table built per call", empty = built_empty, args4 = built_args4 },
  { name = "(c) prepared launch", empty = function(n) for _ = 1, n do prepared_empty() end end,
    args4 = function(n) for _ = 1, n do prepared_args4() end end, target = 1.05 },
  { name = string.format("(d) graph of %d launches, replayed", GRAPH_LEN), graph = true,
    empty = function(n) for _ = 1, n // GRAPH_LEN do graph_empty:launch(s) end end,
    args4 = function(n) for _ = 1, n // GRAPH_LEN do graph_args4:launch(s) end end },
}
local KEYS = { "empty", "args4", "empty_burst", "args4_burst" }

-- rounds[r][path name][key] = microseconds
local rounds, skipped, raw_err = {}, {}, nil
for round = 1, ROUNDS do
  local got = {}
  local raw, err = raw_c()
  if raw then got[RAW] = raw else raw_err = err end
  for _, p in ipairs(PATHS) do
    local r = { empty = sustained(p.empty), args4 = sustained(p.args4) }
    if not p.graph then r.empty_burst, r.args4_burst = burst(p.empty), burst(p.args4) end
    got[p.name] = r
  end
  local py, skip = python_libs()
  for lib, r in pairs(py) do got["(e) " .. lib] = r end
  skipped = skip
  rounds[round] = got
  io.stderr:write(string.format("bench_launch: round %d of %d done\n", round, ROUNDS))
end
os.remove(image)

-- Interleaved: the paths of this process take turns of CHUNK launches, REPS times, the order
-- rotating every turn, so that drift over milliseconds moves them all; each turn gives every
-- path's ratio to (a') of that turn. This decides the targets: (a') shares the process, the
-- context, the kernel and the packed arguments with the paths it is compared with.
local CHUNK, REPS = quick and 512 or 2048, quick and 8 or 40
local INTERLEAVED = {}
for _, p in ipairs(PATHS) do
  if not p.graph then INTERLEAVED[#INTERLEAVED + 1] = p end
end
local turns = {} -- turns[key][path name] = { per-turn ratio to (a') }
for _, key in ipairs({ "empty", "args4", "empty_burst", "args4_burst" }) do
  local kernel = key:match("^(%w+)")
  local paths = {}
  for _, p in ipairs(INTERLEAVED) do paths[#paths + 1] = { name = p.name, fn = p[kernel] } end
  turns[key] = turns_lib.run(paths, INPROC, CHUNK, REPS, key:find("_burst$") and time_bursts or time_sustained)
end

local median = turns_lib.median
-- the median over rounds of a path's microseconds, or of its ratio to `base` of the same round
local function median_of(name, key, base)
  local values = {}
  for _, got in ipairs(rounds) do
    local v, b = got[name] and got[name][key], base and got[base] and got[base][key]
    if v and (not base or b) then values[#values + 1] = base and v / b or v end
  end
  return median(values)
end

-- quartiles of a list (sorted in place)
local function quartiles(list)
  table.sort(list)
  local function at(q) return list[math.max(1, math.min(#list, math.floor(q * (#list - 1) + 1.5)))] end
  return at(0.25), median(list), at(0.75)
end

local names = { RAW }
for _, p in ipairs(PATHS) do names[#names + 1] = p.name end
for _, lib in ipairs({ "cupy", "cuda.core" }) do names[#names + 1] = "(e) " .. lib end
print(string.format("launch overhead on %s, N = %d, %d rounds%s (medians over rounds; ratios to (a) raw C in " ..
  "a child / (a') the C loop in this process, of the same round)", dev.name, N, ROUNDS, quick and ", quick" or ""))
if raw_err then print("(a) raw C baseline unavailable: " .. tostring(raw_err)) end
for _, line in ipairs(skipped) do print(line) end
print(string.format("%-38s %8s %13s %8s %13s | %8s %13s %8s %13s", "path", "empty us", "/(a) /(a')", "4-arg us",
  "/(a) /(a')", "burst e.", "/(a) /(a')", "burst 4a", "/(a) /(a')"))
local function ratio_text(r) return r and string.format("%.3f", r) or "-" end
local function cell(name, key)
  local us = median_of(name, key)
  if not us then return string.format("%8s %13s", "-", "-") end
  return string.format("%8.3f %6s %6s", us, ratio_text(median_of(name, key, RAW)), ratio_text(median_of(name, key,
    INPROC)))
end
for _, name in ipairs(names) do
  if median_of(name, "empty") then
    print(string.format("%-38s %s %s | %s %s", name, cell(name, "empty"), cell(name, "args4"),
      cell(name, "empty_burst"), cell(name, "args4_burst")))
  end
end
print(string.format("interleaved: turns of %d launches, %d turns per column; ratio to (a') of the same turn, " ..
  "median [quartiles]", CHUNK, REPS))
print(string.format("%-38s %22s %22s | %22s %22s", "path", "empty", "4-arg", "burst empty", "burst 4-arg"))
local interleaved_ratio = {}
for _, p in ipairs(INTERLEAVED) do
  local cells = {}
  for _, key in ipairs(KEYS) do
    local q1, q2, q3 = quartiles(turns[key][p.name])
    interleaved_ratio[p.name .. key] = q2
    cells[#cells + 1] = string.format("%.3f [%.3f, %.3f]", q2, q1, q3)
  end
  print(string.format("%-38s %22s %22s | %22s %22s", p.name, cells[1], cells[2], cells[3], cells[4]))
end
local by_name = {}
for _, p in ipairs(PATHS) do
  by_name[p.name] = p
  if p.target then
    for _, key in ipairs({ "empty", "args4" }) do
      local ratio = interleaved_ratio[p.name .. key]
      print(string.format("target %-34s %-6s %.3fx the C loop in this process, interleaved (limit %.2fx, " ..
        "sustained): %s; rounds: %s against (a), %s against (a')", p.name, key, ratio, p.target,
        ratio <= p.target and "MET" or "MISSED", ratio_text(median_of(p.name, key, RAW)),
        ratio_text(median_of(p.name, key, INPROC))))
    end
  end
end
-- against the Python launchers, the same kernels in the same run
for _, lib in ipairs({ "cupy", "cuda.core" }) do
  local other = "(e) " .. lib
  if median_of(other, "empty") then
    for _, p in ipairs({ by_name["(b) k:launch, table config"], by_name["(c) prepared launch"] }) do
      local parts = {}
      for _, key in ipairs(KEYS) do
        local mine, theirs = median_of(p.name, key), median_of(other, key)
        if mine and theirs then parts[#parts + 1] = string.format("%s %.2fx", key, mine / theirs) end
      end
      print(string.format("%-30s vs %-9s (time ratio, below 1 is faster): %s", p.name, lib,
        table.concat(parts, ", ")))
    end
  end
end

prepared_empty:free(); prepared_args4:free(); graph_empty_launch:free(); graph_args4_launch:free()
graph_empty:free(); graph_args4:free()
s:free()
buf_out:free(); buf_in:free()
