-- Runs a lab in its own scope, then collects everything and compares the device's free memory
-- (cuMemGetInfo) with its value before the lab: what a lab allocates must come back once its
-- objects are collected. Usage: gpulab tools/lab_leakcheck.lua labs/x.lua [lab args...]
local lab_path = assert(arg[1], "usage: gpulab tools/lab_leakcheck.lua LAB [args...]")
local TOLERANCE = 2 * 1024 * 1024 -- bytes the driver may keep for itself (page granularity)
local ok, why = cuda.available()
if not ok then
  print("lab_leakcheck: no GPU: " .. tostring(why))
  os.exit(77)
end

-- Warm up first: the context, a module load and a launch make the driver's one-time allocations.
do
  local k = cuda.load(cuda.compile('extern "C" __global__ void warm() {}', { name = "warm.cu" })):kernel("warm")
  k:launch({ grid = 1, block = 1 })
  cuda.sync()
end
collectgarbage(); collectgarbage(); cuda.sync()
local free0 = cuda.mem_info()

-- The lab sees its own arguments, and its os.exit ends only the lab.
local lab_args = { [0] = lab_path, table.unpack(arg, 2) }
local real_exit, real_arg = os.exit, arg
local exit_code
local function lab_exit(code)
  exit_code = code == nil and 0 or (code == true and 0 or (code == false and 1 or code))
  error(lab_exit)
end
arg, os.exit = lab_args, lab_exit -- luacheck: ignore 121 122
local chunk = assert(loadfile(lab_path))
local status, err = pcall(chunk, table.unpack(lab_args))
arg, os.exit = real_arg, real_exit -- luacheck: ignore 121 122
chunk = nil -- luacheck: ignore 311
if not status and err ~= lab_exit then
  print("lab_leakcheck: the lab raised: " .. tostring(err))
  exit_code = 1
end
package.loaded["gpulab.lab"] = nil

for _ = 1, 3 do collectgarbage() end
cuda.sync()
collectgarbage()
local free1 = cuda.mem_info()
local s = cuda.stats()
local delta = free0 - free1
print(string.format("%s: exit %s; device free memory before %.1f MiB, after %.1f MiB (%+.0f KiB held); " ..
  "live arrays %d, modules %d, streams %d, events %d, graphs %d, tensor maps %d, deferred %d",
  lab_path, tostring(exit_code), free0 / 2 ^ 20, free1 / 2 ^ 20, delta / 1024, s.arrays, s.modules, s.streams,
  s.events, s.graphs, s.tensormaps, s.deferred))
local clean = math.abs(delta) <= TOLERANCE and s.arrays == 0 and s.modules == 0 and s.device_bytes == 0
print(clean and "memory back to its starting value" or "memory NOT back to its starting value")
os.exit((clean and exit_code == 0) and 0 or 1)
