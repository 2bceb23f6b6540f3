-- fail_workload.lua — one pass over every driver entry point gpulab uses (through the driver
-- stand-in), each step under pcall; then everything is dropped and collected and the script
-- prints cuda.stats(). tests/lua/test_fail_every_call.lua runs it once per injected failure
-- (GPULAB_FAKE_FAIL=name:code:nth) and checks that the counts end at zero.
-- Exit status: 0 when the counts are zero, 1 otherwise.
local PTX = [[
.version 8.0
.target sm_90
.address_size 64

.visible .global .align 4 .u32 counter;

.visible .entry touch(
	.param .u64 p
)
{
	ret;
}
]]

local errors = {}
local function try(fn)
  local ok, err = pcall(fn)
  if not ok then errors[#errors + 1] = tostring(err) end
end

local o = {}
try(function() cuda.count() end)
try(function() o.dev = cuda.device(0); local _ = o.dev.name end)
try(function() cuda.mem_info() end)
try(function() o.mod = cuda.load(PTX) end)
try(function() o.k = o.mod:kernel("touch") end)
try(function() o.counter = o.mod:global("counter", "u32", 1) end)
-- a "cubin" (an ELF header, then the PTX text the stand-in reads): parameters come from the driver
try(function()
  local elf = "\127ELF\2\1\1" .. string.rep("\0", 0x28 - 7) .. string.pack("<I8", 64 + #PTX)
    .. string.rep("\0", 64 - 0x30)
  o.cubin = cuda.load(elf .. PTX)
  o.cubin_k = o.cubin:kernel("touch")
end)
try(function() o.k:occupancy(32, 0) end)
try(function() o.k:set_max_dynamic_smem(1024) end)
try(function() o.s = cuda.stream { nonblocking = true } end)
try(function() o.a = cuda.array("f32", 1024) end)
try(function() o.b = cuda.array("u16", 1024) end)
try(function() o.c = cuda.array("u8", 1024) end)
try(function() o.a:fill(1) end)
try(function() o.b:fill(2) end)
try(function() o.c:fill(3) end)
try(function() o.a:fill(1, o.s) end)
try(function() o.b:fill(2, o.s) end)
try(function() o.c:fill(3, o.s) end)
try(function() o.h = cuda.host("f32", 1024, { pinned = true }) end)
try(function() o.a:copy_from(o.h) end)
try(function() o.h:copy_from(o.a) end)
try(function() o.a:copy_from(o.h, o.s) end)
try(function() o.h:copy_from(o.a, o.s) end)
try(function() o.d = cuda.array("f32", 1024); o.d:copy_from(o.a) end)
try(function() o.d:copy_from(o.a, o.s) end)
try(function() o.k:launch({ grid = 1, block = 32, stream = o.s }, o.a) end)
try(function() o.k:launch({ grid = 1, block = 32 }, o.d) end)
try(function() o.prepared = o.k:prepare({ grid = 1, block = 32, stream = o.s }, o.a); o.prepared() end)
try(function()
  o.e0, o.e1 = cuda.event(), cuda.event()
  o.e0:record(o.s)
  o.k:launch({ grid = 1, block = 32, stream = o.s }, o.a)
  o.e1:record(o.s)
  o.e1:sync()
  o.e1:query()
  o.e1:elapsed(o.e0)
end)
try(function() o.s:wait(o.e0) end)
try(function() o.e1:sync { timeout = 5 } end)
try(function()
  o.g = o.s:capture(function() o.k:launch({ grid = 1, block = 32, stream = o.s }, o.d) end)
  o.g:launch(o.s)
end)
try(function()
  o.tm = cuda.tensormap { array = o.a, dtype = "f32", dims = { 32, 32 }, strides = { 128 }, box = { 16, 16 } }
  o.tm:replace_address(o.d)
end)
-- a second device (GPULAB_FAKE_DEVICES=2): peer access and copies between the devices
local ok_count, ndev = pcall(cuda.count)
if ok_count and ndev >= 2 then
  try(function() cuda.peer(0, 1) end)
  try(function() cuda.peer(0, 1, true) end)
  try(function() cuda.device(1); o.p1 = cuda.array("f32", 1024) end)
  pcall(cuda.device, 0)
  try(function() o.p1:copy_from(o.a) end)
  try(function() o.p1:copy_from(o.a, o.s) end)
end
try(function() o.s:query() end)
try(function() o.s:sync { timeout = 5 } end)
try(function() o.s:sync() end)
try(function() cuda.sync { timeout = 5 } end)
-- releases while work is queued: they are deferred on the stream's events
try(function() o.k:launch({ grid = 1, block = 32, stream = o.s }, o.c); o.c:free() end)
try(function() o.s:free() end)
try(function() cuda.array("u8", 1 << 46) end) -- out of memory: the error path names the error
try(function() cuda.sync() end)

o = nil -- luacheck: ignore 311
collectgarbage(); collectgarbage()
pcall(cuda.sync, { timeout = 5 })
collectgarbage()
local st = cuda.stats()
local bad = {}
for _, key in ipairs({ "arrays", "hosts", "modules", "streams", "events", "graphs", "tensormaps", "prepared",
  "device_bytes", "pinned_bytes", "deferred" }) do
  if st[key] ~= 0 then bad[#bad + 1] = key .. "=" .. tostring(st[key]) end
end
if #bad > 0 then
  io.stderr:write("stats not zero: ", table.concat(bad, " "), "\n")
  for _, e in ipairs(errors) do io.stderr:write("  error: ", e, "\n") end
  os.exit(1)
end
print("stats zero after " .. #errors .. " errors")
