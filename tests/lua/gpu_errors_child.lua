-- Child process for gpu_errors.lua: a kernel writes to an unmapped address; prints the fields
-- of the cuda.error that cuda.sync raises and of the poisoned-context error after it, then
-- lets the next one end the script uncaught (the parent checks how gpulab printed it).
local SRC = [[
extern "C" __global__ void write_bad(unsigned long long addr) {
  // an address no allocation covers: the first page is never mapped
  *(volatile unsigned *)(addr + 4 * threadIdx.x) = 1u;
}
]]
local k = cuda.load(cuda.compile(SRC, { name = "gpu_errors_child.cu" })):kernel("write_bad")

local function fields(tag, e)
  if not cuda.is_error(e) then
    print(tag .. " no cuda.error: " .. tostring(e))
    return
  end
  local l = e.launches or {}
  local first = l[#l] or {}
  print(string.format("%s is_error=%s code=%s name=%s fn=%s call=%s poisoned=%s n=%s kernel=%s grid=%s block=%s",
    tag, tostring(cuda.is_error(e)), tostring(e.code), tostring(e.name), tostring(e.fn), tostring(e.call),
    tostring(e.poisoned), tostring(l.n), tostring(first.kernel), table.concat(first.grid or {}, ","),
    table.concat(first.block or {}, ",")))
  print(tag .. " TEXT " .. tostring(e))
end

k:launch({ grid = { 2, 1, 1 }, block = 32 }, 16)
local _, e = pcall(cuda.sync)
fields("SYNC", e)
local _, p = pcall(cuda.array, "f32", 4)
fields("NEXT", p)
io.stdout:flush()
cuda.array("f32", 4) -- uncaught: gpulab prints it and exits 1
