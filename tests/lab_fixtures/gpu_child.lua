-- GPU child for the run_isolated GPU test. Modes:
--   ok     fills a device array with 7, copies it back, prints the sum
--   fault  writes far outside an allocation; the error surfaces at the sync
--   spin   launches a kernel that never ends, says so, then waits for it
local mode = arg[1]
local src = [[
extern "C" __global__ void poke(int *p, unsigned long long off) { p[off] = 1; }
extern "C" __global__ void spin(volatile int *flag) { while (*flag == 0) { } }
]]
local mod = cuda.load(cuda.compile(src, { name = "gpu_child.cu" }))
local d = cuda.array("i32", 1024)
d:fill(0)
if mode == "ok" then
  d:fill(7)
  local h = cuda.host("i32", 1024):copy_from(d)
  local sum = 0
  for i = 1, 1024 do sum = sum + h[i] end
  print("SUM " .. sum)
elseif mode == "fault" then
  mod:kernel("poke"):launch({ grid = 1, block = 1 }, d, 1 << 36) -- 256 GiB past the start
  print("LAUNCHED")
  io.stdout:flush()
  local ok, err = pcall(cuda.sync)
  print("SYNC " .. tostring(ok) .. " " .. tostring(err))
  os.exit(ok and 0 or 3)
elseif mode == "spin" then
  mod:kernel("spin"):launch({ grid = 1, block = 1 }, d)
  print("SPINNING")
  io.stdout:flush()
  cuda.sync()
  print("NOT REACHED")
else
  error("unknown mode " .. tostring(mode))
end
