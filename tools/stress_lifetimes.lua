-- stress_lifetimes.lua — lifetimes under load: N operations (default 100,000) of launches,
-- allocations and frees, captures and replays, timed-out syncs on a spinning kernel, stream
-- churn, events and collections, spread over several streams. Every N/20 operations it
-- drains (full sync and collection) and samples the process's threads (/proc/self/status),
-- the device's free memory (cuda.mem_info) and cuda.stats(); it prints one table row per
-- sample and fails (exit 1) on growth after the first sample, or if anything is left once all
-- objects are dropped.
--
--   gpulab tools/stress_lifetimes.lua [N] [seed]
--
-- On a GPU the spinning kernel runs for SPIN_NS and the timed-out syncs wait a tenth of that.
-- Against the driver stand-in (GPULAB_FAKE_BUSY_FILE set) work is held in flight by that file
-- instead, so the same operations time out there.
local N = math.tointeger(tonumber(arg and arg[1] or "")) or 100000
local SEED = math.tointeger(tonumber(arg and arg[2] or "")) or 12345
local BUSY = os.getenv("GPULAB_FAKE_BUSY_FILE")
local STREAMS, ARRAYS, GRAPHS = 6, 48, 4
local SPIN_NS, SYNC_TIMEOUT = 2000000, 0.0002
local MEM_SLACK = 64 << 20 -- bytes of free device memory that may come and go (allocator pools)

local ok_driver, why = cuda.available()
if not ok_driver then
  print("stress_lifetimes: skipped: " .. tostring(why))
  os.exit(77)
end

local PTX = [[
.version 8.0
.target sm_90
.address_size 64

.visible .entry touch(
	.param .u64 touch_p,
	.param .u32 touch_n
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<6>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [touch_p];
	ld.param.u32 %r1, [touch_n];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r5, %r2, %r3, %r4;
	setp.ge.u32 %p1, %r5, %r1;
	@%p1 bra $L_done;
	cvta.to.global.u64 %rd2, %rd1;
	mul.wide.u32 %rd3, %r5, 4;
	add.s64 %rd4, %rd2, %rd3;
	st.global.u32 [%rd4], %r5;
$L_done:
	ret;
}

.visible .entry spin(
	.param .u64 spin_ns
)
{
	.reg .pred %p<2>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [spin_ns];
	mov.u64 %rd2, %globaltimer;
	add.s64 %rd3, %rd2, %rd1;
$L_spin:
	mov.u64 %rd4, %globaltimer;
	setp.lt.u64 %p1, %rd4, %rd3;
	@%p1 bra $L_spin;
	ret;
}
]]

-- A small deterministic generator, so a failing run can be repeated with its seed.
local state = SEED
local function rand(n)
  state = (state * 1103515245 + 12345) % 2147483648
  return (state >> 8) % n + 1
end

local function threads()
  for line in io.lines("/proc/self/status") do
    local n = line:match("^Threads:%s+(%d+)")
    if n then return tonumber(n) end
  end
  error("stress_lifetimes: no Threads: line in /proc/self/status")
end

local function busy(on)
  if not BUSY then return end
  if on then assert(io.open(BUSY, "w")):close() else os.remove(BUSY) end
end

local mod = cuda.load(PTX)
local touch, spin = mod:kernel("touch"), mod:kernel("spin")
local streams, arrays, graphs = {}, {}, {}
for i = 1, STREAMS do streams[i] = cuda.stream { nonblocking = i % 2 == 0 } end
local function new_array() local n = 256 * rand(64); return { d = cuda.array("u32", n), n = n } end
for i = 1, ARRAYS do arrays[i] = new_array() end
local counts = setmetatable({}, { __index = function() return 0 end })

local function launch_on(s, a)
  touch:launch({ grid = (a.n + 255) // 256, block = 256, stream = s }, a.d, a.n)
end

-- A sync that must time out: the stream is busy with a spinning kernel (or the stand-in's file).
local function timed_out_sync(s)
  busy(true)
  spin:launch({ grid = 1, block = 32, stream = s }, SPIN_NS)
  local ok, err = pcall(s.sync, s, { timeout = SYNC_TIMEOUT })
  local ok2, err2 = pcall(cuda.sync, { timeout = SYNC_TIMEOUT })
  busy(false)
  if ok and ok2 then counts.syncs_not_timed_out = counts.syncs_not_timed_out + 1 end
  for _, e in ipairs({ not ok and err or nil, not ok2 and err2 or nil }) do
    if not tostring(e):find("timed out", 1, true) then error(e, 0) end
  end
  counts.timeouts = counts.timeouts + (ok and 0 or 1) + (ok2 and 0 or 1)
end

local ops = {
  { 40, "launch", function() launch_on(streams[rand(STREAMS)], arrays[rand(ARRAYS)]) end },
  { 12, "realloc", function() arrays[rand(ARRAYS)] = new_array() end }, -- the old one goes to the collector
  { 8, "free", function()
    local i = rand(ARRAYS)
    launch_on(streams[rand(STREAMS)], arrays[i])
    arrays[i].d:free() -- while its launch may run: deferred
    arrays[i] = new_array()
  end },
  { 5, "capture", function()
    local s = streams[rand(STREAMS)]
    local a, b = arrays[rand(ARRAYS)], arrays[rand(ARRAYS)]
    local ok, g = pcall(s.capture, s, function() launch_on(s, a); launch_on(s, b); launch_on(s, a) end)
    if not ok then -- refused while a timed-out sync's context sync still runs, as it must be
      if not tostring(g):find("still waiting for the GPU", 1, true) then error(g, 0) end
      counts.captures_refused = counts.captures_refused + 1
      return
    end
    g:launch(s); g:launch(streams[rand(STREAMS)]) -- its arrays are alive at this point
    graphs[rand(GRAPHS)] = g
  end },
  { 6, "replay", function()
    local g = graphs[rand(GRAPHS)]
    if not g then return end
    local ok, err = pcall(g.launch, g, streams[rand(STREAMS)])
    if not ok then -- an array it uses was freed by a "free" operation: refused, as it must be
      if not tostring(err):find("freed after the capture", 1, true) then error(err, 0) end
      counts.replays_refused = counts.replays_refused + 1
    end
  end },
  { 1, "timed-out sync", function() timed_out_sync(streams[rand(STREAMS)]) end },
  { 4, "stream churn", function()
    local i = rand(STREAMS)
    launch_on(streams[i], arrays[rand(ARRAYS)])
    streams[i]:free() -- retired with work queued: its final event guards the arrays
    streams[i] = cuda.stream()
  end },
  { 6, "event", function()
    local e = cuda.event { timing = false }
    e:record(streams[rand(STREAMS)])
    e:query()
  end },
  { 4, "query", function() streams[rand(STREAMS)]:query() end },
  { 3, "gc step", function() collectgarbage("step", 0) end },
  { 1, "full gc", function() collectgarbage() end },
}
local total_weight = 0
for _, op in ipairs(ops) do total_weight = total_weight + op[1] end
local function pick_op()
  local r = rand(total_weight)
  for _, op in ipairs(ops) do
    r = r - op[1]
    if r <= 0 then return op end
  end
  return ops[1]
end

local function drain()
  busy(false)
  cuda.sync { timeout = 60 }
  collectgarbage(); collectgarbage()
  cuda.sync { timeout = 60 }
end

local KEYS = { "arrays", "streams", "graphs", "events", "modules", "tensormaps", "prepared", "deferred" }
local function sample(done)
  drain()
  local st = cuda.stats()
  local free = cuda.mem_info()
  return { ops = done, threads = threads(), free = free, device_bytes = st.device_bytes, st = st }
end

local rows = {}
local function print_row(r)
  local cells = { string.format("%8d", r.ops), string.format("%7d", r.threads),
    string.format("%12.1f", r.free / 1048576), string.format("%10.1f", r.device_bytes / 1048576) }
  for _, k in ipairs(KEYS) do cells[#cells + 1] = string.format("%8d", r.st[k]) end
  print(table.concat(cells, " "))
end

-- Warm-up: every kind of operation once before the first sample, so that whatever the driver
-- sets up on first use (its own threads, graph memory) and the watchdog are already there.
for _, op in ipairs(ops) do op[3]() end
timed_out_sync(streams[1])
print(string.format("stress_lifetimes: %d operations, seed %d, %d streams, %d arrays, %s", N, SEED, STREAMS,
  ARRAYS, BUSY and "driver stand-in" or "GPU"))
print("     ops threads free_MiB_dev  live_MiB " ..
  table.concat((function()
    local t = {}
    for i, k in ipairs(KEYS) do t[i] = string.format("%8s", k) end
    return t
  end)(), " "))
local every = math.max(1, N // 20)
rows[1] = sample(0)
print_row(rows[1])
for i = 1, N do
  local op = pick_op()
  op[3]()
  counts[op[2]] = counts[op[2]] + 1
  if i % every == 0 then
    rows[#rows + 1] = sample(i)
    print_row(rows[#rows])
  end
end

-- Growth: against the first sample (pools full from the start, watchdog started).
local failures = {}
local function fail(...) failures[#failures + 1] = string.format(...) end
local base = rows[1]
for _, r in ipairs(rows) do
  if r.threads > base.threads then
    failures[#failures + 1] = string.format("threads grew %d -> %d by op %d", base.threads, r.threads, r.ops)
  end
  if r.free < base.free - MEM_SLACK then
    fail("device free memory fell %.1f MiB by op %d", (base.free - r.free) / 1048576, r.ops)
  end
  for _, k in ipairs({ "streams", "modules", "tensormaps", "prepared" }) do
    if r.st[k] > base.st[k] then fail("%s grew %d -> %d by op %d", k, base.st[k], r.st[k], r.ops) end
  end
  -- the pool's arrays, plus at most two per graph that a capture used and the pool replaced since
  if r.st.arrays > ARRAYS + 2 * GRAPHS then
    fail("%d arrays live at op %d (at most %d expected)", r.st.arrays, r.ops, ARRAYS + 2 * GRAPHS)
  end
  if r.st.graphs > GRAPHS then fail("%d graphs live at op %d", r.st.graphs, r.ops) end
  if r.st.events ~= 0 then failures[#failures + 1] = string.format("%d events live at op %d", r.st.events, r.ops) end
  if r.st.deferred ~= 0 then fail("%d releases still deferred after a full sync at op %d", r.st.deferred, r.ops) end
end

streams, arrays, graphs, touch, spin = nil, nil, nil, nil, nil -- luacheck: ignore 311
mod:free()
mod = nil -- luacheck: ignore 311
for _ = 1, 4 do drain() end
local final = cuda.stats()
for _, k in ipairs(KEYS) do
  if final[k] ~= 0 then failures[#failures + 1] = string.format("%s = %d once everything was dropped", k, final[k]) end
end
if final.device_bytes ~= 0 then failures[#failures + 1] = "device_bytes = " .. final.device_bytes .. " at the end" end

local names = {}
for _, op in ipairs(ops) do names[#names + 1] = string.format("%s %d", op[2], counts[op[2]]) end
print("operations: " .. table.concat(names, ", "))
print(string.format("timed-out syncs: %d (syncs that finished within the timeout: %d); replays refused "
  .. "because an array was freed: %d; captures refused while a timed-out sync was pending: %d", counts.timeouts,
  counts.syncs_not_timed_out, counts.replays_refused, counts.captures_refused))
print(string.format("end: threads %d (first sample %d), device free %.1f MiB (first sample %.1f MiB)", threads(),
  base.threads, cuda.mem_info() / 1048576, base.free / 1048576))
if counts.timeouts == 0 then failures[#failures + 1] = "no sync timed out: the timed-out path was not exercised" end
if #failures > 0 then
  for _, f in ipairs(failures) do print("FAIL " .. f) end
  os.exit(1)
end
print("stress_lifetimes: no growth in threads, device memory or cuda.stats() over " .. N .. " operations")
