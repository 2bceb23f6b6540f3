-- Launch overhead: gpulab against a plain C loop over cuLaunchKernel and against CuPy and
-- cuda.core, all measured in the same run.
-- Usage: build/gpulab tools/bench_launch.lua [--quick] [--rounds=R] [N]
--   (a) raw C (build/bench_launch_raw, a child), (a') the same C loop over cuLaunchKernel inside
--   this process, on this context, kernel and packed arguments (prepared:launch(n), which checks
--   once and then only calls the driver), (b) k:launch with a table config (kept: from its third
--   launch the kernel's remembered check reads only its values; and (b') built in the loop: the
--   full check every time), (c) a prepared launch, (d) a captured graph of 1000 launches replayed,
--   (e) CuPy and cuda.core (tools/bench_launch_py.py, a child, when python3 has them): once per
--   round, and in the interleaved turns from a second child that times one turn per command, so
--   that gpulab's time over theirs is also taken turn by turn, at one moment.
-- Two loop shapes: sustained (N launches back to back, then a sync) and burst (256 launches
-- after a drained queue, only the launching timed: the host's own cost). The paths take turns
-- for R rounds, so that a machine whose speed drifts moves all of them; each round gives every
-- path's ratio to raw C of that round, and the table shows the medians. The ratios are given
-- against both baselines: the child process has its own context and CPU placement, the
-- in-process loop shares everything with the path it is compared with.
-- Targets (issue 15): prepared <= 1.05x raw C, k:launch with a table config <= 1.10x, sustained.
-- Launches with attributes, one section each (cluster = 2 with grid 2, pdl = true, cooperative =
-- true; block 32): (a) the raw C child's cuLaunchKernelEx loop with the same attribute, (a') the
-- prepared launch's own C loop (prepared:launch(n), cuLaunchKernelEx), (b) k:launch with a table
-- config holding the key, (c) a prepared launch, (e) cuda.core's LaunchConfig with the attribute;
-- the same targets against their (a'), in turns of their own. These sections run N_ATTR = N/8
-- launches per timing (at least 2048) so that the whole run stays within the plain one's budget.
-- The plain section runs first and keeps its own targets: both hold in the same run.
local quick, N, ROUNDS = false, 200000, 3
for _, a in ipairs(arg) do
  if a == "--quick" then quick = true
  elseif a:match("^%-%-rounds=%d+$") then ROUNDS = tonumber(a:match("%d+"))
  elseif tonumber(a) then N = math.tointeger(tonumber(a)) or N end
end
if quick and not tonumber(arg[#arg] or "") then N = 20000 end
local GRAPH_LEN, BURST = 1000, 256
N = math.max(GRAPH_LEN, N // GRAPH_LEN * GRAPH_LEN)
local N_ATTR = math.max(8 * BURST, N // 8)

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
local KEYS = { "empty", "args4", "empty_burst", "args4_burst" }
-- values[key] for each "key value" line of the child (the plain keys, and "<kind>_<key>" for its
-- cuLaunchKernelEx loops) and its "skip ..." lines; nil and the child's output when a plain key
-- is missing
local function raw_c()
  local exe = gpulab_dir .. "/bench_launch_raw"
  local f = io.open(exe, "r")
  if not f then return nil, "no " .. exe end
  f:close()
  local text = run_child(string.format("%s %s %d %d", exe, image, N, N_ATTR))
  local r, skips = {}, {}
  for line in text:gmatch("[^\n]+") do
    local key, us = line:match("^([%w_]+) ([%d.]+)$")
    if key then r[key] = tonumber(us)
    elseif line:match("^skip ") then skips[#skips + 1] = "(a) raw C: " .. line end
  end
  for _, key in ipairs(KEYS) do
    if not r[key] then return nil, text end
  end
  return r, skips
end

-- (e) CuPy and cuda.core, when this machine's python3 has them: r[lib][key], key as raw_c's
local function python_libs()
  local text = run_child(string.format("python3 %s/tools/bench_launch_py.py %s %d %d", root, source, N, N_ATTR))
  local r, skipped = {}, {}
  for line in text:gmatch("[^\n]+") do
    local lib, kernel, mode, us = line:match("^([%w%.]+) ([%w_]+) (%a+) ([%d.]+)$")
    if lib then
      r[lib] = r[lib] or {}
      r[lib][kernel .. (mode == "burst" and "_burst" or "")] = tonumber(us)
    elseif line:match("^skip ") then skipped[#skipped + 1] = line end
  end
  return r, skipped
end

-- the four values of one section ("" for the plain launches, "cluster_", ...), or nil if none
local function keyed(values, prefix)
  local r, any = {}, false
  for _, key in ipairs(KEYS) do
    r[key] = values[prefix .. key]
    any = any or r[key] ~= nil
  end
  return any and r or nil
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
-- the best of 3 runs of n launches after a warm-up
local function sustained(fn, n)
  fn(n // 10)
  local best = math.huge
  for _ = 1, 3 do best = math.min(best, time_sustained(fn, n)) end
  return best
end
local function burst(fn, n)
  fn(BURST)
  local best = math.huge
  for _ = 1, 3 do best = math.min(best, time_bursts(fn, n)) end
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
-- A section: paths of this process timed N times per round and in turns against its `inproc` path,
-- beside the raw C child's and the Python launchers' values of the same `prefix`.
local PLAIN = { prefix = "", raw = RAW, inproc = INPROC, paths = PATHS, n = N, rounds = {},
  base_words = "the C loop in this process" }

-- Launches with one attribute each, through cuLaunchKernelEx in every path
local ATTR_KINDS = {
  { kind = "cluster", cfg = { grid = 2, block = 32, cluster = 2 },
    what = "cluster = 2 (CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION 2x1x1), grid 2, block 32" },
  { kind = "pdl", cfg = { grid = 1, block = 32, pdl = true },
    what = "pdl = true (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 1), grid 1, block 32" },
  { kind = "cooperative", cfg = { grid = 1, block = 32, cooperative = true },
    what = "cooperative = true (CU_LAUNCH_ATTRIBUTE_COOPERATIVE 1), grid 1, block 32" },
}
local RAW_EX, INPROC_EX = "(a) raw C cuLaunchKernelEx", "(a') C Ex loop in this process"

-- Launches each kernel with the attribute, prepares both and launches the prepared ones, then
-- syncs: the two prepared launches, or nil and the error
local function probe(attr_cfg)
  local pe, pa
  local worked, err = pcall(function()
    empty:launch(attr_cfg)
    args4:launch(attr_cfg, buf_out, buf_in, 1000, 2.0)
    pe, pa = empty:prepare(attr_cfg), args4:prepare(attr_cfg, buf_out, buf_in, 1000, 2.0)
    pe()
    pa:launch(2)
    cuda.sync()
  end)
  if worked then return pe, pa end
  if pe then pe:free() end
  if pa then pa:free() end
  return nil, tostring(err)
end

local function attr_section(a, pe, pa)
  local attr_cfg = a.cfg
  return { kind = a.kind, what = a.what, prefix = a.kind .. "_", raw = RAW_EX, inproc = INPROC_EX, n = N_ATTR,
    rounds = {}, prepared = { pe, pa }, base_words = "its C cuLaunchKernelEx loop in this process", paths = {
      { name = INPROC_EX, empty = function(n) pe:launch(n) end, args4 = function(n) pa:launch(n) end },
      { name = "(b) k:launch, table config", target = 1.10,
        empty = function(n) for _ = 1, n do empty:launch(attr_cfg) end end,
        args4 = function(n) for _ = 1, n do args4:launch(attr_cfg, buf_out, buf_in, 1000, 2.0) end end },
      { name = "(c) prepared launch", target = 1.05,
        empty = function(n) for _ = 1, n do pe() end end, args4 = function(n) for _ = 1, n do pa() end end },
    } }
end

-- attr_notes: why attribute sections are missing (one line when k:launch has no such keys at all)
local SECTIONS, attr_notes = { PLAIN }, {}
for i, a in ipairs(ATTR_KINDS) do
  local pe, pa = probe(a.cfg)
  if pe then
    SECTIONS[#SECTIONS + 1] = attr_section(a, pe, pa)
  elseif i == 1 and pa:find("unknown field", 1, true) then
    attr_notes[1] = "attribute columns (cluster, pdl, cooperative) skipped: this build's k:launch does not take " ..
      "the launch keys (" .. pa .. ")"
    break
  else
    attr_notes[#attr_notes + 1] = string.format("%s columns skipped: %s", a.kind, pa)
  end
end

-- rounds[r][path name][key] = microseconds, one table per section
local skipped, raw_err = {}, nil
for round = 1, ROUNDS do
  local raw, more = raw_c()
  if not raw then raw_err = more end
  for _, sec in ipairs(SECTIONS) do
    local got = { [sec.raw] = raw and keyed(raw, sec.prefix) }
    for _, p in ipairs(sec.paths) do
      local r = { empty = sustained(p.empty, sec.n), args4 = sustained(p.args4, sec.n) }
      if not p.graph then r.empty_burst, r.args4_burst = burst(p.empty, sec.n), burst(p.args4, sec.n) end
      got[p.name] = r
    end
    sec.rounds[round] = got
  end
  local py, skip = python_libs()
  for _, sec in ipairs(SECTIONS) do
    for lib, r in pairs(py) do sec.rounds[round]["(e) " .. lib] = keyed(r, sec.prefix) end
  end
  skipped = skip
  for _, line in ipairs(raw and more or {}) do skipped[#skipped + 1] = line end
  io.stderr:write(string.format("bench_launch: round %d of %d done\n", round, ROUNDS))
end
os.remove(image)

-- (e) in the interleaved turns: the Python launchers in a child that times one turn per command
-- it reads (bench_launch_py.py --serve), so that they take their turns beside this process's
-- paths and a ratio between them is taken at one moment. Commands go through a named pipe, the
-- answers come back on the child's output. nil and the reason when python3 cannot serve.
local function python_server(cpu)
  local fifo = os.tmpname()
  os.remove(fifo)
  if not os.execute("mkfifo " .. fifo .. " 2>/dev/null") then return nil, "(e) in turns: mkfifo failed" end
  -- the shell opens the pipe for reading before it runs python3 (found or not), so opening it
  -- for writing below never waits on a child that is not there
  local answers = io.popen(string.format("exec python3 %s/tools/bench_launch_py.py --serve %s%s <%s 2>&1", root,
    source, cpu and " " .. cpu or "", fifo))
  local commands = answers and io.open(fifo, "w")
  os.remove(fifo)
  if not commands then return nil, "(e) in turns: the child's pipe could not be opened" end
  local server = { cells = {}, notes = {}, alive = true }
  local line = answers:read("l")
  while line and not line:match("^ready") do
    server.notes[#server.notes + 1] = line
    line = answers:read("l")
  end
  if not line then
    commands:close()
    answers:close()
    return nil, "(e) in turns: the child ended before it was ready: " .. table.concat(server.notes, " | ")
  end
  for i, note in ipairs(server.notes) do server.notes[i] = "(e) in turns: " .. note end
  for cell in line:gmatch("%S+:%S+") do server.cells[cell] = true end
  -- microseconds per launch of one turn of n launches of lib's kernel in `mode`, or nil
  function server.turn(lib, kernel, mode, n)
    if not server.alive then return nil end
    commands:write(string.format("%s %s %s %d\n", lib, kernel, mode, n))
    commands:flush()
    for answer in answers:lines() do
      local us = answer:match("^us ([%d.]+)$")
      if us then return tonumber(us) end
      server.notes[#server.notes + 1] = "(e) in turns: " .. answer
      if answer:match("^error ") then return nil end
    end
    server.alive = false -- the child ended: no more commands (a write would find no reader)
    server.notes[#server.notes + 1] = string.format("(e) in turns: the child ended during a turn of %s %s %s",
      lib, kernel, mode)
    return nil
  end
  -- closing the commands ends the child (it reads to the end of its input)
  function server.close()
    commands:close()
    answers:close()
  end
  return server
end

-- Pins this process's main thread to the CPU it last ran on, with taskset, so that the Python
-- child's main thread can be put on the same one: on the lent H200 hosts (KVM guests) the host
-- CPU's speed moved by up to 2x within seconds (docs/RESULTS.md §37), and a ratio between two
-- processes whose launching threads sit on different vCPUs may carry a difference between them.
-- The driver's own threads keep every CPU: pinned beside the launching thread, they made the C
-- loop slower (§34). Returns the CPU, or nil and why not.
local function pin_to_current_cpu()
  local f = io.open("/proc/self/stat", "r")
  local stat = f and f:read("a")
  if f then f:close() end
  local pid, after_name = (stat or ""):match("^(%d+) %(.*%) (.*)$")
  if not pid then return nil, "no /proc/self/stat" end
  local fields = {}
  for word in after_name:gmatch("%S+") do fields[#fields + 1] = word end
  local cpu = fields[39 - 2] -- field 39, "processor"; the words start at field 3
  if not (cpu and cpu:match("^%d+$")) then return nil, "no CPU in /proc/self/stat" end
  if not os.execute(string.format("taskset -p -c %s %s >/dev/null 2>&1", cpu, pid)) then
    return nil, "taskset failed"
  end
  return cpu
end

-- The Python paths of a section in turns of `key` ("args4_burst": lib's "<prefix>args4" in bursts).
local PY_LIBS = { "cupy", "cuda.core" }
local function python_paths(server, sec, key)
  local kernel, mode = sec.prefix .. key:match("^(%w+)"), key:find("_burst$") and "burst" or "sustained"
  local paths = {}
  for _, lib in ipairs(PY_LIBS) do
    if server and server.cells[lib .. ":" .. kernel] then
      paths[#paths + 1] = { name = "(e) " .. lib, fn = kernel,
        time = function(_, n) return server.turn(lib, kernel, mode, n) end }
    end
  end
  return paths
end

-- Interleaved: the paths of this process take turns of CHUNK launches, REPS times, the order
-- rotating every turn, so that drift over milliseconds moves them all; each turn gives every
-- path's ratio to (a') of that turn. This decides the targets: (a') shares the process, the
-- context, the kernel and the packed arguments with the paths it is compared with. Each section
-- takes its turns on its own, against its own (a'); the Python launchers take theirs in the same
-- rotation, from their own process.
local CHUNK, REPS = quick and 512 or 2048, quick and 8 or 40
local pinned, pin_err = pin_to_current_cpu()
local pin_note = pinned and string.format("interleaved turns: the launching threads of this process and of the " ..
  "Python child pinned to CPU %s (the driver's threads not)", pinned) or
  "interleaved turns: not pinned to one CPU (" .. pin_err .. ")"
local server, server_err = python_server(pinned)
for _, line in ipairs(server and server.notes or { server_err }) do skipped[#skipped + 1] = line end
local notes_before_turns = server and #server.notes
for _, sec in ipairs(SECTIONS) do
  sec.interleaved = {}
  for _, p in ipairs(sec.paths) do
    if not p.graph then sec.interleaved[#sec.interleaved + 1] = p end
  end
  sec.turns = {} -- turns[key][path name] = { per-turn ratio to (a') }
  sec.each_turn = {} -- each_turn[key] = { { [path name] = us }, ... }, turn by turn
  sec.host_ref = {} -- turns_lib.host_reference() before each key's turns and after the last
  for _, key in ipairs(KEYS) do
    local kernel = key:match("^(%w+)")
    local paths = python_paths(server, sec, key)
    for _, p in ipairs(sec.interleaved) do paths[#paths + 1] = { name = p.name, fn = p[kernel] } end
    sec.host_ref[#sec.host_ref + 1] = turns_lib.host_reference()
    local ratios, _, each = turns_lib.run(paths, sec.inproc, CHUNK, REPS,
      key:find("_burst$") and time_bursts or time_sustained)
    sec.turns[key], sec.each_turn[key] = ratios, each
  end
  sec.host_ref[#sec.host_ref + 1] = turns_lib.host_reference()
end
if server then
  server.close()
  for i = notes_before_turns + 1, #server.notes do skipped[#skipped + 1] = server.notes[i] end
end

local median = turns_lib.median
-- the median over a section's rounds of a path's microseconds, or of its ratio to `base` of the
-- same round
local function median_of(sec, name, key, base)
  local values = {}
  for _, got in ipairs(sec.rounds) do
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

local function ratio_text(r) return r and string.format("%.3f", r) or "-" end

-- the table over rounds, the interleaved table, the targets and the comparisons with the Python
-- launchers of one section; `label` prefixes its target lines
local function print_section(sec, label)
  local names = { sec.raw }
  for _, p in ipairs(sec.paths) do names[#names + 1] = p.name end
  for _, lib in ipairs({ "cupy", "cuda.core" }) do names[#names + 1] = "(e) " .. lib end
  print(string.format("%-38s %8s %13s %8s %13s | %8s %13s %8s %13s", "path", "empty us", "/(a) /(a')", "4-arg us",
    "/(a) /(a')", "burst e.", "/(a) /(a')", "burst 4a", "/(a) /(a')"))
  local function cell(name, key)
    local us = median_of(sec, name, key)
    if not us then return string.format("%8s %13s", "-", "-") end
    return string.format("%8.3f %6s %6s", us, ratio_text(median_of(sec, name, key, sec.raw)),
      ratio_text(median_of(sec, name, key, sec.inproc)))
  end
  for _, name in ipairs(names) do
    if median_of(sec, name, "empty") then
      print(string.format("%-38s %s %s | %s %s", name, cell(name, "empty"), cell(name, "args4"),
        cell(name, "empty_burst"), cell(name, "args4_burst")))
    end
  end
  print(string.format("interleaved: turns of %d launches, %d turns per column; ratio to (a') of the same turn, " ..
    "median [quartiles]", CHUNK, REPS))
  local ref = {}
  for i, ns in ipairs(sec.host_ref) do ref[i] = string.format("%.2f", ns) end
  print(string.format("host reference before each column's turns and after the last (a Lua loop with no GPU): " ..
    "%s ns per step", table.concat(ref, ", ")))
  print(string.format("%-38s %22s %22s | %22s %22s", "path", "empty", "4-arg", "burst empty", "burst 4-arg"))
  local interleaved_ratio = {}
  local rows = {}
  for _, p in ipairs(sec.interleaved) do rows[#rows + 1] = p.name end
  for _, lib in ipairs(PY_LIBS) do rows[#rows + 1] = "(e) " .. lib end
  for _, name in ipairs(rows) do
    local cells, any = {}, false
    for _, key in ipairs(KEYS) do
      local q1, q2, q3 = quartiles(sec.turns[key][name] or {})
      interleaved_ratio[name .. key] = q2
      cells[#cells + 1] = q2 and string.format("%.3f [%.3f, %.3f]", q2, q1, q3) or "-"
      any = any or q2 ~= nil
    end
    if any then print(string.format("%-38s %22s %22s | %22s %22s", name, cells[1], cells[2], cells[3], cells[4])) end
  end
  local us_parts = {}
  for _, name in ipairs(rows) do
    local cells = {}
    for _, key in ipairs(KEYS) do
      local us = {}
      for _, got in ipairs(sec.each_turn[key]) do us[#us + 1] = got[name] end
      local m = median(us)
      cells[#cells + 1] = m and string.format("%.3f", m) or "-"
    end
    if cells[1] ~= "-" or cells[2] ~= "-" then
      local short = name:match("^%(e%)") and name or name:match("^(%(%S+%))")
      us_parts[#us_parts + 1] = string.format("%s %s", short, table.concat(cells, "/"))
    end
  end
  print("microseconds per launch in these turns (medians; empty/4-arg/burst empty/burst 4-arg): " ..
    table.concat(us_parts, ", "))
  local by_name = {}
  for _, p in ipairs(sec.paths) do
    by_name[p.name] = p
    if p.target then
      for _, key in ipairs({ "empty", "args4" }) do
        local ratio = interleaved_ratio[p.name .. key]
        print(string.format("target %-34s %-6s %.3fx %s, interleaved (limit %.2fx, " ..
          "sustained): %s; rounds: %s against (a), %s against (a')", label .. p.name, key, ratio, sec.base_words,
          p.target, ratio <= p.target and "MET" or "MISSED", ratio_text(median_of(sec, p.name, key, sec.raw)),
          ratio_text(median_of(sec, p.name, key, sec.inproc))))
      end
    end
  end
  -- against the Python launchers in the same turns: the time ratio of each turn that timed both
  for _, lib in ipairs(PY_LIBS) do
    local other = "(e) " .. lib
    for _, name in ipairs({ "(b) k:launch, table config", "(c) prepared launch" }) do
      local parts = {}
      for _, key in ipairs(KEYS) do
        local per_turn = {}
        for _, got in ipairs(sec.each_turn[key]) do
          if got[name] and got[other] then per_turn[#per_turn + 1] = got[name] / got[other] end
        end
        local q1, q2, q3 = quartiles(per_turn)
        if q2 then parts[#parts + 1] = string.format("%s %.3fx [%.3f, %.3f]", key, q2, q1, q3) end
      end
      if #parts > 0 then
        print(string.format("%-30s vs %-9s interleaved (time ratio per turn, below 1 is faster; median " ..
          "[quartiles]): %s", label .. name, lib, table.concat(parts, ", ")))
      end
    end
  end
  -- against the Python launchers' own runs between the rounds (medians taken at other moments)
  for _, lib in ipairs(PY_LIBS) do
    local other = "(e) " .. lib
    if median_of(sec, other, "empty") then
      for _, p in ipairs({ by_name["(b) k:launch, table config"], by_name["(c) prepared launch"] }) do
        local parts = {}
        for _, key in ipairs(KEYS) do
          local mine, theirs = median_of(sec, p.name, key), median_of(sec, other, key)
          if mine and theirs then parts[#parts + 1] = string.format("%s %.2fx", key, mine / theirs) end
        end
        print(string.format("%-30s vs %-9s rounds (time ratio of medians, below 1 is faster): %s", label .. p.name, lib,
          table.concat(parts, ", ")))
      end
    end
  end
end

print(string.format("launch overhead on %s, N = %d, %d rounds%s (medians over rounds; ratios to (a) raw C in " ..
  "a child / (a') the C loop in this process, of the same round)", dev.name, N, ROUNDS, quick and ", quick" or ""))
if raw_err then print("(a) raw C baseline unavailable: " .. tostring(raw_err)) end
print(pin_note)
for _, line in ipairs(skipped) do print(line) end
print_section(PLAIN, "")
for _, line in ipairs(attr_notes) do print(line) end
for i = 2, #SECTIONS do
  local sec = SECTIONS[i]
  print()
  print(string.format("launches with %s: N = %d per timing, %d rounds (every path through cuLaunchKernelEx; " ..
    "ratios to (a) the raw C cuLaunchKernelEx loop in a child / (a') the prepared launch's own C loop)", sec.what,
    sec.n, ROUNDS))
  print_section(sec, sec.kind .. " ")
end

prepared_empty:free(); prepared_args4:free(); graph_empty_launch:free(); graph_args4_launch:free()
for i = 2, #SECTIONS do
  for _, p in ipairs(SECTIONS[i].prepared) do p:free() end
end
graph_empty:free(); graph_args4:free()
s:free()
buf_out:free(); buf_in:free()
