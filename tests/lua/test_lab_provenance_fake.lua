-- The device part of a lab's provenance through the driver stand-in: name, UUID (as nvidia-smi
-- writes it), SMs, clocks and memory, and the driver's version. The stand-in's numbers say
-- nothing about a GPU: only that each field is read and written.
local T = dofile("tests/lua/t.lua")
local json = require("gpulab.json")

local d = os.tmpname()
os.remove(d)
assert(os.execute("mkdir -p '" .. d .. "'"))

T.test("dev.uuid reads cuDeviceGetUuid", function()
  T.eq(cuda.device(0).uuid, "GPU-60010203-0405-0607-0809-0a0b0c0d0e0f")
end)

T.test("a lab that reached the device records it in its provenance", function()
  T.write(d .. "/lab.lua", [[
local harness = require("gpulab.lab")
local lab = harness.new{ name = "dev" }
lab:require_gpu()
os.exit(lab:finish())
]])
  local r = cuda.run_isolated(d .. "/lab.lua", { args = { "--json", d .. "/r.json" }, timeout = 60 })
  T.eq(r.code, 0, r.stderr)
  local p = json.decode(T.read(d .. "/r.json")).provenance
  local dev = cuda.device(0)
  T.eq(p.device.name, dev.name)
  T.eq(p.device.uuid, dev.uuid)
  T.eq(p.device.sm_count, dev.sm_count)
  T.eq(p.device.mem_bytes, dev.mem_bytes)
  T.eq(p.device.arch, dev.arch)
  T.ok(type(p.device.sm_clock_mhz) == "number" and p.device.sm_clock_mhz > 0, "SM clock")
  T.ok(p.device.mem_clock_mhz == nil or p.device.mem_clock_mhz > 0, "memory clock")
  T.eq(p.driver, cuda.version().driver)
  T.eq(p.gpu.available, true)
end)

T.test("a lab that used the device without asking lab:gpu() still names it", function()
  T.write(d .. "/quiet.lua", [[
local harness = require("gpulab.lab")
local lab = harness.new{ name = "quiet" }
local a = cuda.array("f32", 16)
a:fill(1)
os.exit(lab:finish())
]])
  local r = cuda.run_isolated(d .. "/quiet.lua", { args = { "--json", d .. "/q.json" }, timeout = 60 })
  T.eq(r.code, 0, r.stderr)
  T.eq(json.decode(T.read(d .. "/q.json")).provenance.device.name, cuda.device(0).name)
end)

T.test("without cuDeviceGetUuid the device has no uuid, and nothing else changes", function()
  T.write(d .. "/uuid.lua", "local dev = cuda.device(0); print(tostring(dev.uuid) .. '|' .. dev.name)\n")
  local r = cuda.run_isolated(d .. "/uuid.lua", { env = { GPULAB_FAKE_NO_ENTRY = "cuDeviceGetUuid" }, timeout = 60 })
  T.eq(r.code, 0, r.stderr)
  T.eq(r.stdout, "nil|gpulab stand-in\n")
end)

os.execute("rm -rf '" .. d .. "'")
T.done()
