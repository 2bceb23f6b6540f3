-- Where a launch's host time goes: in the driver's launch call, in gpulab's C function around it
-- (k:launch, prepared()), or in the Lua loop, for the C loop (prepared:launch(n)), prepared() and
-- k:launch(cfg, ...) of a kernel with 4 arguments. Needs a build configured with
-- -DGPULAB_LAUNCH_TIMING=ON (cuda.launch_timing); other builds say so and stop.
-- Usage: gpulab tools/launch_split.lua [--quick] [--rounds=N] [plain|pdl|cluster ...]
-- The paths take turns of CHUNK launches against the C loop (tools/turns.lua), as in
-- tools/bench_launch.lua; per path, the medians of the turns' times and ratios, and the mean
-- ticks per launch in the driver call and in the rest of the C function, converted to ns with
-- the tick rate measured against cuda.now() first. Each round also times a Lua loop with no GPU in
-- it before and after its turns: the host CPU's own speed at that moment.
local quick, rounds, kinds = false, 3, {}
for _, a in ipairs(arg) do
  if a == "--quick" then quick = true
  elseif a:match("^%-%-rounds=%d+$") then rounds = tonumber(a:match("%d+"))
  elseif a == "plain" or a == "pdl" or a == "cluster" then kinds[#kinds + 1] = a
  else
    io.stderr:write("launch_split: unknown argument '", a, "'\n",
      "usage: gpulab tools/launch_split.lua [--quick] [--rounds=N] [plain|pdl|cluster ...]\n")
    os.exit(2)
  end
end
if #kinds == 0 then kinds = { "plain", "pdl", "cluster" } end
if not cuda.launch_timing then
  print("launch_split: this build has no launch timing (configure with -DGPULAB_LAUNCH_TIMING=ON)")
  return
end
if not cuda.available() then
  print("launch_split: no GPU: " .. tostring(select(2, cuda.available())))
  return
end

local CONFIGS = {
  plain = { grid = 1, block = 32 },
  pdl = { grid = 1, block = 32, pdl = true },
  cluster = { grid = 2, block = 32, cluster = 2 },
}
local mod = cuda.load(cuda.compile_file(cuda.home .. "/kernels/bench_launch.cu", { name = "bench_launch.cu" }))
local args4 = mod:kernel("args4")
local a, b = cuda.array("f32", 128), cuda.array("f32", 128)
local turns = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/turns.lua")
local median = turns.median

-- ticks per ns: the counter against the monotonic clock over 0.2 s
local function tick_rate()
  local c0, t0 = cuda.launch_timing().ticks, cuda.now()
  while cuda.now() - t0 < 0.2 do end
  return (cuda.launch_timing().ticks - c0) / ((cuda.now() - t0) * 1e9)
end
local per_ns = tick_rate()
local CHUNK, REPS = quick and 256 or 2048, quick and 4 or 30
print(string.format("launch split on %s: turns of %d launches, %d turns; ticks at %.3f per ns",
  cuda.device().name, CHUNK, REPS, per_ns))

-- a path whose counters are added up over its turns
local function counted(name, fn, sums)
  sums[name] = { driver = 0, driver_calls = 0, call = 0, call_calls = 0 }
  return { name = name, fn = function(n)
    cuda.launch_timing()
    fn(n)
    local t, s = cuda.launch_timing(), sums[name]
    s.driver, s.driver_calls = s.driver + t.driver_ticks, s.driver_calls + t.driver_calls
    s.call, s.call_calls = s.call + t.call_ticks, s.call_calls + t.call_calls
  end }
end

for _, kind in ipairs(kinds) do
  local cfg = CONFIGS[kind]
  local p = args4:prepare(cfg, a, b, 1000, 2.0)
  for round = 1, rounds do
    local sums = {}
    local list = {
      counted("C loop", function(n) p:launch(n) end, sums),
      counted("prepared()", function(n) for _ = 1, n do p() end end, sums),
      counted("k:launch", function(n) for _ = 1, n do args4:launch(cfg, a, b, 1000, 2.0) end end, sums),
    }
    local before = turns.host_reference()
    local ratios, us = turns.run(list, "C loop", CHUNK, REPS)
    local after = turns.host_reference()
    print(string.format("\n%s, 4 arguments, round %d", kind, round))
    print(string.format("  host reference (Lua integer loop, no GPU): %.3f ns per step before the turns, %.3f after",
      before, after))
    print(string.format("  %-12s %9s %8s %11s %16s", "path", "us", "ratio", "driver ns", "C function ns"))
    for _, path in ipairs(list) do
      local s = sums[path.name]
      local driver = s.driver / s.driver_calls / per_ns
      -- the C function's own part: its ticks less the driver call's inside it
      local own = s.call_calls > 0 and (s.call - s.driver) / s.call_calls / per_ns or 0
      print(string.format("  %-12s %9.3f %8.4f %11.1f %16.1f", path.name, median(us[path.name]),
        median(ratios[path.name]), driver, own))
    end
  end
  p:free()
end
