-- illegal_access.lua — seed §5: triaging a device illegal memory access.
--
-- Claims: a device fault is asynchronous: the launch returns success and a later call (one
-- that has nothing to do with the bug) reports it; CUDA_LAUNCH_BLOCKING=1 moves the report to
-- the launch; after such an error the context is unusable (a new process is the recovery);
-- compute-sanitizer's memcheck names kernel, source line, thread and block, racecheck finds
-- shared-memory hazards, synccheck barrier misuse; none of them proves a cross-stream protocol
-- correct. Every faulty run happens in a child process (cuda.run_isolated), so this process
-- keeps a healthy context; the children live in labs/children/. The tool runs use children
-- sized for the tool (a few blocks: racecheck instruments every shared-memory access), each with
-- its own deadline; a run that hits it is reported as timed out, apart from a tool that could not run.
local harness = require("gpulab.lab")

local lab = harness.new {
  name = "illegal_access",
  title = "Illegal access: asynchronous errors, poisoned contexts and the sanitizers",
  claims = "seed §5",
  params = {
    { name = "sanitizers", default = true, help = "run the compute-sanitizer parts (when the tool exists)" },
    { name = "timeout", default = 120, quick = 60, min = 5, max = 1200, help = "deadline per child process (s)" },
    { name = "tool_grid", default = 8, min = 1, max = 512,
      help = "blocks of the race and stream children run under the tools" },
  },
}
local P = lab.params
lab.child_timeout = P.timeout
local CHILDREN = cuda.home .. "/labs/children/"
package.path = CHILDREN .. "?.lua;" .. package.path
local C = require("faults_common")
local shell_quote = harness.shell_quote

lab:claim { id = "async_report", seed = "§5", text = "a faulting launch returns success; a later, unrelated call " ..
  "reports the error (an asynchronous error is reported at a later synchronisation point, by an API that is not " ..
  "where it went wrong)" }
lab:claim { id = "launch_blocking", own = true,
  text = "with CUDA_LAUNCH_BLOCKING=1 the error is reported by the launch itself" }
lab:claim { id = "poisoned", own = true,
  text = "after the fault the context is poisoned: the next call fails too, without touching the bug" }
lab:claim { id = "edge_silent", own = true, text = "a write just past the end is silent without a tool" }
lab:claim { id = "memcheck_names", seed = "§5", text = "memcheck names the kernel, the source line, the thread and " ..
  "the block (memcheck: access errors)" }
lab:claim { id = "memcheck_edge", seed = "§5", text = "memcheck finds the write just past the end that ran silently " ..
  "natively" }
lab:claim { id = "racecheck", seed = "§5", text =
  "racecheck reports the shared-memory race and is clean on the fixed " ..
  "twin (racecheck: shared-memory hazards)" }
lab:claim { id = "synccheck", seed = "§5", text = "synccheck reports a barrier only part of the block reaches " ..
  "(synccheck: synchronisation misuse)" }
lab:claim { id = "no_tool_proves", seed = "§5", text = "no tool proves a cross-stream protocol correct: a missing " ..
  "s2:wait(e) goes unreported" }

-- The source line of the planted bug, to check what memcheck names.
local function bug_line()
  local n = 0
  for line in io.lines(cuda.home .. "/kernels/faults.cu") do
    n = n + 1
    if line:find("the bug: index past the end", 1, true) then return n end
  end
end

local function short(text, max)
  text = tostring(text or ""):gsub("%s+", " ")
  max = max or 140
  return #text > max and text:sub(1, max - 3) .. "..." or text
end

-- ---------------------------------------------------------------------------------------------
lab:section("Setup")
local prog = lab:compile("kernels/faults.cu", { arch = "sm_90a", std = "c++17", names = C.NAMES,
  what = "oob_write, neighbour_sum<false|true>, divergent_barrier, slow_producer, consumer" })
lab:note(#prog.cubin .. " B of cubin")
local LINE = bug_line()
lab:note(string.format("the planted bug: kernels/faults.cu:%d, thread 17 of block 3 of oob_write", LINE))
lab:require_gpu()

-- Runs a child natively; returns {steps={name={ok=,text=}}, order={...}, raw=result}.
-- Natively even when this lab itself runs under `gpulab --sanitize=TOOL`: the tool's injection
-- (CUDA_INJECTION64_PATH) is not passed on, so the planted faults behave as they do without it.
local function child(script, args, env)
  local r = lab:child(CHILDREN .. script, { args = args, env = env })
  local steps, order = {}, {}
  for name, text in (r.stdout or ""):gmatch("STEP (%w+): ([^\n]*)") do
    steps[name] = { ok = text:match("^ok") ~= nil, text = text }
    order[#order + 1] = name
  end
  return { steps = steps, order = order, raw = r, result = (r.stdout or ""):match("RESULT ([^\n]*)") }
end

local function first_error(run)
  for _, name in ipairs(run.order) do
    if not run.steps[name].ok then return name, run.steps[name].text end
  end
end

local function step_cell(run, name)
  local s = run.steps[name]
  if not s then return "(not reached)" end
  return short(s.text, 90)
end

-- ---------------------------------------------------------------------------------------------
lab:section("An out-of-bounds write, natively")
local async = child("oob_write.lua", { "far" })
local blocking = child("oob_write.lua", { "far" }, { CUDA_LAUNCH_BLOCKING = "1" })
local edge = child("oob_write.lua", { "edge" })
local rows = {}
for _, name in ipairs { "launch", "alloc", "sync", "next" } do
  rows[#rows + 1] = { name, step_cell(async, name), step_cell(blocking, name), step_cell(edge, name) }
end
lab:table({ "step", "16 GiB past the end", "same, CUDA_LAUNCH_BLOCKING=1", "1 element past the end" }, rows)
lab:note(
  "steps: launch; 100 ms of host work with no CUDA call; an unrelated cuda.array; cuda.sync; one more cuda.array")
for label, run in pairs { async = async, blocking = blocking, edge = edge } do
  lab:record(label, { status = run.raw.status, code = run.raw.code, stdout = run.raw.stdout,
    stderr = short(run.raw.stderr, 2000) })
  if #run.order == 0 then lab:fail(label .. " child printed no steps: " .. short(run.raw.stderr, 400)) end
end

-- Picture: each child's steps on one time line; the step that reported the error is marked.
local function step_spans(run)
  local spans, t = {}, 0
  for _, name in ipairs(run.order) do
    local us = tonumber(run.steps[name].text:match("%((%d+) us%)$")) or 0
    local ms = us / 1000
    spans[#spans + 1] = { t, t + ms, label = name .. (run.steps[name].ok and "" or " (error)") }
    t = t + ms
    if name == "launch" then
      spans[#spans + 1] = { t, t + 100, label = "host work" }
      t = t + 100
    end
  end
  return spans
end
lab:svg_timeline { file = "illegal_access_steps.svg", title = "Where the out-of-bounds write was reported",
  x_label = "ms since the launch call", rows = {
    { label = "async", spans = step_spans(async) },
    { label = "blocking", spans = step_spans(blocking) },
    { label = "edge", spans = step_spans(edge) },
  } }
lab:note("picture rows: async = 16 GiB past the end; blocking = the same with CUDA_LAUNCH_BLOCKING=1; "
  .. "edge = one element past the end")

local where, text = first_error(async)
lab:verdict("async_report",
  string.format("launch %s; first error at '%s': %s", async.steps.launch and async.steps.launch.text or "?",
    tostring(where), short(text, 120)),
  async.steps.launch ~= nil and async.steps.launch.ok and where ~= nil and where ~= "launch")
local bwhere = first_error(blocking)
lab:verdict("launch_blocking",
  string.format("first error at '%s' (%s)", tostring(bwhere), short(bwhere and blocking.steps[bwhere].text, 100)),
  (function()
    if bwhere == nil then return nil end -- nothing failed: no evidence either way
    return bwhere == "launch"
  end)())
local next_text = async.steps.next and async.steps.next.text or ""
lab:verdict("poisoned",
  short(next_text, 160), async.steps.next ~= nil and not async.steps.next.ok and next_text:find("poison") ~= nil)
local edge_err = first_error(edge)
lab:verdict("edge_silent",
  edge_err and ("error at " .. edge_err) or "every step succeeded", edge_err == nil and #edge.order == 4)

-- ---------------------------------------------------------------------------------------------
lab:section("A cross-stream protocol, natively")
local missing = child("stream_protocol.lua", { "missing" })
local waited = child("stream_protocol.lua", { "waited" })
local stale_missing = tonumber((missing.result or ""):match("stale=(%d+)"))
local stale_waited = tonumber((waited.result or ""):match("stale=(%d+)"))
lab:table({ "consumer stream", "result" }, {
  { "no s2:wait(e)", missing.result or short(missing.raw.stderr, 100) },
  { "s2:wait(e) on the producer's event", waited.result or short(waited.raw.stderr, 100) },
})
if stale_waited ~= 0 then lab:fail("the waited protocol read stale data: " .. tostring(waited.result)) end

-- ---------------------------------------------------------------------------------------------
lab:section("compute-sanitizer")
if not P.sanitizers then
  lab:note("--no-sanitizers: skipped")
  lab:judge_missing("--no-sanitizers")
  os.exit(lab:finish())
end
local SANITIZER = harness.find_tool("compute-sanitizer")
if not SANITIZER then
  lab:note("compute-sanitizer not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin): the tool verdicts are skipped")
  lab:judge_missing("compute-sanitizer not found")
  os.exit(lab:finish())
end

-- All tool runs start at once (each is its own process) and are read in turn, each under its own
-- deadline. The race and stream children run tool_grid blocks: the tools report per access, so
-- the hazard shows in the first block and a small grid lets the tool finish well inside it.
local G = tostring(P.tool_grid)
local runs = {
  { key = "memcheck_edge", tool = "memcheck", script = "oob_write.lua", args = "edge" },
  { key = "racecheck_race", tool = "racecheck", script = "shared_race.lua", args = "race " .. G },
  { key = "racecheck_fixed", tool = "racecheck", script = "shared_race.lua", args = "fixed " .. G },
  { key = "synccheck_divergent", tool = "synccheck", script = "divergent_barrier.lua", args = "" },
  { key = "memcheck_streams", tool = "memcheck", script = "stream_protocol.lua", args = "missing " .. G },
  { key = "racecheck_streams", tool = "racecheck", script = "stream_protocol.lua", args = "missing " .. G },
  { key = "synccheck_streams", tool = "synccheck", script = "stream_protocol.lua", args = "missing " .. G },
}
for _, r in ipairs(runs) do
  local cmd = string.format("%s --sanitize=%s %s %s", shell_quote(harness.gpulab_exe()), r.tool,
    shell_quote(CHILDREN .. r.script), r.args)
  r.handle = harness.spawn(cmd, { timeout = P.timeout })
end

-- What one tool run came to: "finished" (the tool's banner and its summary, exit 0 or 99),
-- "timed out" (the deadline stopped it: exit 124/137), or "could not run" (anything else, or a
-- tool that refused the device, which may still exit 99).
local function outcome(r)
  local out = r.out
  r.reports = 0
  for _ in out:gmatch("Race reported") do r.reports = r.reports + 1 end
  for _ in out:gmatch("Potential %u+ hazard") do r.reports = r.reports + 1 end
  for _ in out:gmatch("Invalid __%a+__ %a+ of size") do r.reports = r.reports + 1 end
  for _ in out:gmatch("Barrier error") do r.reports = r.reports + 1 end
  if r.timed_out then return "timed out" end
  if not (r.exit == 0 or r.exit == 99) or not out:find("COMPUTE%-SANITIZER")
      or out:find("Device not supported", 1, true) then
    return "could not run"
  end
  return "finished"
end

local by_key = {}
for i, r in ipairs(runs) do
  lab:progress(i, #runs, "sanitizer runs")
  local res = r.handle.wait()
  r.out, r.exit, r.timed_out, r.seconds = res.out, res.exit, res.timed_out, res.seconds
  r.errors = tonumber(r.out:match("ERROR SUMMARY: (%d+) error")) or
      tonumber(r.out:match("RACECHECK SUMMARY: (%d+) hazard"))
  r.hazards = tonumber(r.out:match("RACECHECK SUMMARY: (%d+) hazard"))
  r.outcome = outcome(r)
  by_key[r.key] = r
  lab:record(r.key, { exit = r.exit, errors = r.errors, outcome = r.outcome, seconds = r.seconds,
    reports = r.reports, output = r.out:sub(1, 4000) })
end

local srows = {}
for _, r in ipairs(runs) do
  local first = r.out:match("=========%s+([^\n]*[Ee]rror[^\n]*)") or r.out:match("=========%s+(Invalid[^\n]*)") or
      r.out:match("=========%s+(Race[^\n]*)") or ""
  srows[#srows + 1] = { r.tool, r.script .. " " .. r.args, tostring(r.exit), tostring(r.errors or "?"),
    r.outcome, r.seconds and string.format("%.1f", r.seconds) or "?", short(first, 70) }
end
lab:table({ "tool", "child", "exit", "errors", "outcome", "seconds", "first report" }, srows)
lab:note(string.format("exit 99: the tool reported errors; 0: it reported none; 124: the run hit its %d s deadline",
  P.timeout))

-- A claim is judged only from runs whose tool finished. A run that timed out is said to have
-- timed out (with what it had printed by then), never folded into "could not run".
local function tool_problem(list)
  for _, r in ipairs(list) do
    if r.outcome == "timed out" then
      return string.format("%s on %s %s timed out at its %d s deadline%s", r.tool, r.script, r.args, P.timeout,
        r.reports > 0 and string.format(" after printing %d report(s) (%s); its summary never came", r.reports,
          short(r.out:match("=========%s+(Error: Race[^\n]*)") or r.out:match("=========%s+(Invalid[^\n]*)") or
            r.out:match("=========%s+(Barrier[^\n]*)") or "", 90))
        or ", before printing any report")
    elseif r.outcome == "could not run" then
      local why = r.out:match("=========%s+(Error[^\n]*)") or r.out:match("([^\n]*not supported[^\n]*)") or
          ("exit " .. tostring(r.exit))
      return string.format("%s on %s could not run: %s", r.tool, r.script, short(why, 100))
    end
  end
end

local function tool_verdict(id, measured, list, holds)
  local problem = tool_problem(list)
  if problem then
    lab:verdict(id, problem, nil)
  else
    lab:verdict(id, measured, holds)
  end
end

-- memcheck: kernel, line, thread, block
local mc = by_key.memcheck_edge
-- read from the first report on: its "at" line names kernel and file:line (the order of the two
-- has changed between tool versions), then "by thread (x,y,z) in block (x,y,z)"
local report = mc.out:match("(Invalid __global__ write.*)") or ""
local kernel = report:match("(oob_write)")
local line = tonumber(report:match("faults%.cu:(%d+)"))
local thread = report:match("by thread %((%d+,%d+,%d+)%)")
local block = report:match("in block %((%d+,%d+,%d+)%)")
tool_verdict("memcheck_names",
  string.format("kernel %s, faults.cu:%s (bug at :%d), thread (%s), block (%s)", tostring(kernel), tostring(line),
    LINE, tostring(thread), tostring(block)),
  { mc }, kernel ~= nil and line == LINE and thread == "17,0,0" and block == "3,0,0")
tool_verdict("memcheck_edge",
  string.format("native: %s; memcheck exit %s with %s error(s)", edge_err and "error" or "no error", tostring(mc.exit),
    tostring(mc.errors)),
  { mc }, edge_err == nil and mc.exit == 99 and (mc.errors or 0) > 0)

local race, fixed = by_key.racecheck_race, by_key.racecheck_fixed
tool_verdict("racecheck",
  string.format("%s blocks without the barrier: exit %s, %s hazard(s) in %.1f s; with it: exit %s, %s hazard(s)", G,
    tostring(race.exit), tostring(race.hazards), race.seconds or 0, tostring(fixed.exit), tostring(fixed.hazards)),
  { race, fixed }, race.exit == 99 and (race.hazards or 0) > 0 and fixed.exit == 0)

local sc = by_key.synccheck_divergent
tool_verdict("synccheck",
  string.format("exit %s, %s error(s): %s", tostring(sc.exit), tostring(sc.errors),
    short(sc.out:match("(Barrier error[^\n]*)") or sc.out:match("(Divergent[^\n]*)") or "", 80)),
  { sc }, sc.exit == 99 and (sc.errors or 0) > 0)

local clean = true
local parts, stream_runs = {}, {}
for _, key in ipairs { "memcheck_streams", "racecheck_streams", "synccheck_streams" } do
  local r = by_key[key]
  stream_runs[#stream_runs + 1] = r
  parts[#parts + 1] = string.format("%s exit %s", r.tool, tostring(r.exit))
  if r.exit ~= 0 then clean = false end
end
local holds
-- evidence needs the bug to be real (stale data without the wait) and the fix to work
if clean and stale_missing and stale_missing > 0 and stale_waited == 0 then holds = true
elseif not clean then holds = false end -- a tool flagged it: the claim would be refuted
tool_verdict("no_tool_proves",
  string.format("natively the consumer read %s stale elements (%s with the wait); %s", tostring(stale_missing),
    tostring(stale_waited), table.concat(parts, ", ")), stream_runs, holds)
lab:note(
  "re-verify in normal asynchronous execution afterwards: the tools serialise work, which can hide a race in time")

os.exit(lab:finish())
