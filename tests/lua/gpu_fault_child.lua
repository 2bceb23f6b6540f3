-- Child process for gpu_core.lua: provokes a fault the parent cannot survive in-process and
-- prints what gpulab reported. Usage: gpulab tests/lua/gpu_fault_child.lua illegal|hang
local mode = arg[1]

local SRC = [[
extern "C" __global__ void write_bad(unsigned long long addr) {
  // an address no allocation covers: the first page is never mapped
  *(volatile unsigned *)(addr + 4 * threadIdx.x) = 1u;
}
extern "C" __global__ void spin_forever(volatile unsigned *flag) {
  while (*flag == 0u) { }
}
extern "C" __global__ void nop() {}
]]

local mod = cuda.load(cuda.compile(SRC, { name = "gpu_fault_child.cu" }))

if mode == "illegal" then
  local k = mod:kernel("write_bad")
  local nop = mod:kernel("nop") -- looked up before the fault: afterwards every GPU call fails
  k:launch({ grid = 1, block = 32 }, 16)
  local _, err = pcall(cuda.sync)
  print("SYNC " .. tostring(err))
  local ok
  ok, err = pcall(nop.launch, nop, { grid = 1, block = 1 })
  print("NEXT " .. tostring(err))
  print("AVAILABLE", cuda.available())
  os.exit(ok and 1 or 0)
elseif mode == "hang" then
  local flag = cuda.array("u32", 1)
  flag:fill(0)
  local s = cuda.stream { nonblocking = true }
  mod:kernel("spin_forever"):launch({ grid = 1, block = 1, stream = s }, flag)
  local ok, err = pcall(s.sync, s, { timeout = 1 })
  print((ok and "NO TIMEOUT " or "TIMEOUT ") .. tostring(err))
  io.stdout:flush()
  -- a timeout does not poison anything: release the kernel by setting its flag from the host
  -- (the copy goes through the default stream, which does not wait for a non-blocking one)
  local one = cuda.host("u32", 1)
  one[1] = 1
  local released = pcall(flag.copy_from, flag, one)
  released = released and pcall(s.sync, s, { timeout = 10 })
  print(released and "RELEASED" or "STILL RUNNING")
  io.stdout:flush()
  -- if it still runs, leave without finalizers waiting for it (the driver tears it down)
  os.exit(ok and 1 or 0, released)
else
  io.stderr:write("usage: gpu_fault_child.lua illegal|hang\n")
  os.exit(2)
end
