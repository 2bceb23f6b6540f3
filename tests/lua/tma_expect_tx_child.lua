-- tma_expect_tx_child.lua MODE [MODE...] — the transaction-count protocol on the device, run in a
-- child process (cuda.run_isolated) because a protocol mistake may hang or poison a context.
-- MODE: exact (count = bytes delivered), large (count + 16: the phase never completes), small
-- (count = one box of `nboxes`: the phase completes early). One line per mode:
--   expect_tx mode=small expect=8192 delivered=65536 status=0x0 block=-1 thread=-1 waited_us=0 poison=28672 wrong=0
-- then "context healthy" once an exact run after all of them was verified.
local NBOXES, BOX_W, BOX_H = 8, 64, 64 -- u16: 8,192 bytes per box
-- How long a wait inside the kernel may take: 0.5 s, 5 s under compute-sanitizer (GPULAB_LINEINFO)
local DEADLINE_NS = os.getenv("GPULAB_LINEINFO") and 5000000000 or 500000000

local prog = cuda.compile_file(cuda.home .. "/kernels/tma_double_buffer.cu", { arch = "sm_90a" })
local mod = cuda.load(prog)
local kernel = mod:kernel("tma_expect_tx_demo")

local W = BOX_W * NBOXES
local n = W * BOX_H
local src = cuda.host("u16", n)
for i = 1, n do src[i] = (i * 7 + 3) % 65000 end -- never 0xFFFF, the shared-memory poison
local d_in = cuda.array("u16", n)
d_in:copy_from(src)
local d_out = cuda.array("u16", n)
local d_status = cuda.array("i32", 4)
local tm = cuda.tensormap { array = d_in, dtype = "u16", dims = { W, BOX_H }, box = { BOX_W, BOX_H } }
local delivered = tm.box_bytes * NBOXES
kernel:set_max_dynamic_smem(delivered + 1024) -- 65 KB of boxes: above the 48 KB default

-- out holds the boxes one after another; element i of box b, row r, column c came from (r, b*BOX_W + c).
local function source_index(i)
  local per_box = BOX_W * BOX_H
  local b, rest = (i - 1) // per_box, (i - 1) % per_box
  local r, c = rest // BOX_W, rest % BOX_W
  return r * W + b * BOX_W + c + 1
end

local function run(mode)
  local expect = ({ exact = delivered, large = delivered + 16, small = tm.box_bytes })[mode]
  if not expect then error("unknown mode " .. tostring(mode) .. " (exact, large, small)") end
  d_out:fill(0xFFFE) -- never in the input (< 65000) nor the poison
  d_status:fill(0)
  kernel:launch({ grid = 1, block = 256, smem = delivered + 1024 }, tm, d_out, NBOXES, BOX_W,
    tm.box_bytes, expect, DEADLINE_NS, d_status)
  cuda.sync { timeout = 10 }
  local out, st = cuda.host("u16", n), cuda.host("i32", 4)
  out:copy_from(d_out)
  st:copy_from(d_status)
  local poison, wrong, unwritten = 0, 0, 0
  for i = 1, n do
    local v = out[i]
    if v == 0xFFFF then poison = poison + 1
    elseif v == 0xFFFE then unwritten = unwritten + 1
    elseif v ~= src[source_index(i)] then wrong = wrong + 1 end
  end
  local status = st[1]
  print(string.format("expect_tx mode=%s expect=%d delivered=%d status=0x%x block=%d thread=%d " ..
    "waited_us=%d poison=%d unwritten=%d wrong=%d", mode, expect, delivered, status,
    status ~= 0 and st[2] or -1, status ~= 0 and st[3] or -1, status ~= 0 and st[4] // 1000 or 0,
    poison, unwritten, wrong))
  io.stdout:flush()
  return status, poison, unwritten, wrong
end

for i = 1, #arg do run(arg[i]) end
local status, poison, unwritten, wrong = run("exact")
if status == 0 and poison == 0 and unwritten == 0 and wrong == 0 then
  print("context healthy: an exact run afterwards completed and matched the input")
else
  print("context NOT healthy")
  os.exit(1)
end
tm:free()
