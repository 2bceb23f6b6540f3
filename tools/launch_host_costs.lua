-- What a launch from Lua costs beside the driver's own work, against plain Lua work of known
-- shape done between prepared launches: how many trivial Lua -> C calls k:launch is worth.
-- Usage: build/gpulab tools/launch_host_costs.lua [--quick]
-- The paths take turns of CHUNK launches (sustained: the launches, then a sync), REPS times in a
-- rotating order, and each turn's time is divided by that turn's C loop (prepared:launch(n), no
-- Lua between launches); medians over the turns. tools/bench_launch.lua judges the targets.
-- Each kernel runs twice: plain (cuLaunchKernel) and with pdl = true (cuLaunchKernelEx, whose
-- loop is the cheaper one on the H200). "prepared() + a C call with k:launch's values" is the
-- part of k:launch that no checking can remove: the prepared launch plus one more call into C
-- carrying the same values, none of them read.
local quick = arg[1] == "--quick"
if not cuda.available() then
  print("launch_host_costs: no GPU: " .. tostring(select(2, cuda.available())))
  return
end

local mod = cuda.load(cuda.compile_file(cuda.home .. "/kernels/bench_launch.cu", { name = "bench_launch.cu" }))
local a, b = cuda.array("f32", 128), cuda.array("f32", 128)
local plain, pdl = { grid = 1, block = 32 }, { grid = 1, block = 32, pdl = true }
local empty, args4 = mod:kernel("empty_kernel"), mod:kernel("args4")
-- pdl = true launches through cuLaunchKernelEx, whose loop costs this driver less than
-- cuLaunchKernel's: the same host work is a larger share of it
local KERNELS = {
  { key = "empty", k = empty, args = {}, cfg = plain },
  { key = "args4", k = args4, args = { a, b, 1000, 2.0 }, cfg = plain },
  { key = "empty, pdl=true", k = empty, args = {}, cfg = pdl },
  { key = "args4, pdl=true", k = args4, args = { a, b, 1000, 2.0 }, cfg = pdl },
}

local abs, floor, ceil, max, min = math.abs, math.floor, math.ceil, math.max, math.min
local mtype, toint, rawlen_, rawequal_, type_, t0 = math.type, math.tointeger, rawlen, rawequal, type, {}
local select_ = select

-- the paths for one kernel: name -> fn(n) doing n launches
local function paths_of(k, args, cfg)
  local p = k:prepare(cfg, table.unpack(args))
  local x1, x2, x3, x4 = table.unpack(args)
  local launch = k.launch
  local method, hoisted -- the loops written out, so that no extra Lua call is timed
  if #args == 0 then
    method = function(n) for _ = 1, n do k:launch(cfg) end end
    hoisted = function(n) for _ = 1, n do launch(k, cfg) end end
  else
    method = function(n) for _ = 1, n do k:launch(cfg, x1, x2, x3, x4) end end
    hoisted = function(n) for _ = 1, n do launch(k, cfg, x1, x2, x3, x4) end end
  end
  return p, {
    ["C loop"] = function(n) p:launch(n) end,
    ["prepared()"] = function(n) for _ = 1, n do p() end end,
    ["prepared() + 1 C call"] = function(n) for _ = 1, n do p(); abs(1) end end,
    ["prepared() + 3 C calls"] = function(n) for _ = 1, n do p(); abs(1); abs(1); abs(1) end end,
    ["prepared() + 10 calls, 1 function"] = function(n)
      for _ = 1, n do p(); abs(1); abs(1); abs(1); abs(1); abs(1); abs(1); abs(1); abs(1); abs(1); abs(1) end
    end,
    ["prepared() + 10 calls, 10 functions"] = function(n)
      for _ = 1, n do
        p(); abs(1); floor(1); ceil(1); max(1); min(1); mtype(1); toint(1); rawlen_(t0); rawequal_(1, 1); type_(1)
      end
    end,
    ["prepared() + 20 empty loop turns"] = function(n) for _ = 1, n do p(); for _ = 1, 20 do end end end,
    -- what any launch call from Lua pays before it reads a value: a call into C carrying the
    -- kernel, the configuration and the arguments (select reads only its first)
    ["prepared() + a C call with k:launch's values"] = #args == 0
      and function(n) for _ = 1, n do p(); select_("#", k, cfg) end end
      or function(n) for _ = 1, n do p(); select_("#", k, cfg, x1, x2, x3, x4) end end,
    ["k:launch(cfg, ...)"] = method,
    ["launch(k, cfg, ...), hoisted"] = hoisted,
  }
end

local turns = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/turns.lua")
local median = turns.median

local CHUNK, REPS = quick and 256 or 2048, quick and 4 or 40
local BASE = "C loop"
print(string.format("launch host costs on %s: turns of %d launches, %d turns; ratio to the C loop of the same turn",
  cuda.device().name, CHUNK, REPS))
for _, kern in ipairs(KERNELS) do
  local p, paths = paths_of(kern.k, kern.args, kern.cfg)
  local names, list = {}, {}
  for name in pairs(paths) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do list[#list + 1] = { name = name, fn = paths[name] } end
  local ratios, us = turns.run(list, BASE, CHUNK, REPS)
  print(string.format("\n%s kernel%s", kern.key, #kern.args > 0 and " (2 arrays, an integer, a float)" or ""))
  print(string.format("  %-46s %9s %8s", "path", "us", "ratio"))
  for _, name in ipairs(names) do
    print(string.format("  %-46s %9.3f %8.4f", name, median(us[name]), median(ratios[name])))
  end
  p:free()
end
