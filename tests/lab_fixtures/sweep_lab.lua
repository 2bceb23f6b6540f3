-- A small lab whose configurations are independent: each allocates an array on the GPU it was
-- given, fills it with its size and reads it back. Run by tests/lua/test_sweep_gpus.lua, once
-- in one process and once with --gpus=all over the driver stand-in's devices.
local lab = require("gpulab.lab")
local L = lab.new { name = "sweep_lab", title = "configurations spread over GPUs",
  params = { { name = "n", default = 7, help = "configurations" },
             { name = "fail_at", default = 0, help = "this configuration raises (0: none)" },
             { name = "exit_at", default = 0, help = "this configuration ends its process with code 7 (0: none)" } } }
L:claim { id = "sums", own = true, text = "every configuration reads back n x size" }
-- made before the sweep and used in it: in a child it is on the child's only GPU
local touch = cuda.load([[
.version 8.0
.target sm_90
.address_size 64
.visible .entry touch(.param .u64 p) { ret; }
]]):kernel("touch")
local pre = L:sweep({ { size = 1 }, { size = 2 } }, function(c) return { size = c.size } end, { name = "warm-up" })
local configs = {}
for i = 1, L.params.n do configs[i] = { size = 16 * i } end
local results, info = L:sweep(configs, function(c, i)
  if i == L.params.fail_at then error("configuration " .. i .. " was told to fail") end
  if i == L.params.exit_at then os.exit(7) end
  local d = cuda.array("f32", c.size)
  d:fill(c.size)
  touch:launch({ grid = 1, block = 1 }, d)
  local h = cuda.host("f32", c.size)
  h:copy_from(d)
  local sum = 0
  for k = 1, c.size do sum = sum + h[k] end
  d:free()
  -- the GPU it ran on: the one CUDA_VISIBLE_DEVICES left it (a child of --gpus sees only that one)
  local visible = os.getenv("CUDA_VISIBLE_DEVICES")
  local gpu = visible and tonumber(visible) or cuda.device().ordinal
  return { i = i, size = c.size, sum = sum, device = gpu, devices_seen = cuda.count() }
end, { name = "fill" })
local rows, ok = {}, true
for i, r in ipairs(results) do
  rows[#rows + 1] = { i, r.size, r.sum, r.device }
  ok = ok and r.i == i and r.sum == r.size * r.size and r.device == (info.device[i] or r.device)
    and (#info.gpus < 2 or r.devices_seen == 1)
end
L:table({ "config", "size", "sum", "device" }, rows)
L:record("devices_used", info.gpus)
L:record("warm_up", pre)
L:verdict("sums", string.format("%d configurations on %d GPU(s)", #results, math.max(1, #info.gpus)), ok)
os.exit(L:finish())
