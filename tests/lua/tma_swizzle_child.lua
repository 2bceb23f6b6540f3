-- tma_swizzle_child.lua SWIZZLE OFFSET CHECK — one TMA box load into a shared buffer that starts
-- OFFSET bytes past a 1024-byte boundary, run in a child process (cuda.run_isolated) because a
-- misaligned copy may fault and poison the context. SWIZZLE: none or 128B; CHECK 1 guards the
-- copy with gl_tma_dst_aligned(dst, map.smem_align). Prints one line:
--   swizzle_probe swizzle=128B offset=128 check=0 align=1024 status=0x0 expected=0 address_bits=64 poison=0 error=
-- expected: 16-byte chunks where a consumer computing the pattern from the buffer start finds
-- them; address_bits: where the pattern computed from the absolute shared address puts them.
local swizzle, offset, check = arg[1] or "128B", tonumber(arg[2] or "0"), tonumber(arg[3] or "0")
local BOX_W, BOX_H = 64, 8 -- u16: 128-byte rows, 8 rows = one 1,024-byte repeat of the 128B pattern
local ROW, CHUNKS = BOX_W * 2, BOX_W * 2 // 16

local prog = cuda.compile_file(cuda.home .. "/kernels/tma_double_buffer.cu", { arch = "sm_90a" })
local kernel = cuda.load(prog):kernel("tma_swizzle_probe")
local n = BOX_W * BOX_H
local src = cuda.host("u16", n)
src:iota(1) -- element i holds i: every 16-byte chunk is unique
local d_in, d_out, d_status = cuda.array("u16", n), cuda.array("u8", n * 2), cuda.array("i32", 4)
d_in:copy_from(src)
d_out:fill(0)
d_status:fill(0)
local tm = cuda.tensormap { array = d_in, dtype = "u16", dims = { BOX_W, BOX_H }, box = { BOX_W, BOX_H },
                            swizzle = swizzle }
local box_bytes = tm.box_bytes

-- Chunk c of row r of the box lands at chunk index slot(r, c) of the buffer under each model.
local function swizzled(addr) -- the 128B pattern: address bits 4..6 XOR bits 7..9
  if swizzle ~= "128B" then return addr end
  return addr ~ (((addr >> 7) & 7) << 4)
end
local function expected_slot(r, c) return (swizzled(r * ROW + c * 16)) // 16 end
local function address_slot(r, c, base) return (swizzled(base + r * ROW + c * 16) - base) // 16 end

local ok, err = pcall(function()
  kernel:launch({ grid = 1, block = 128, smem = box_bytes + 2048 }, tm, d_out, box_bytes, offset, check,
    tm.smem_align, 500000000, d_status)
  cuda.sync { timeout = 10 }
end)
local line = string.format("swizzle_probe swizzle=%s offset=%d check=%d align=%d", swizzle, offset, check,
  tm.smem_align)
if not ok then
  print(line .. " status=0x0 expected=-1 address_bits=-1 poison=-1 error=" .. tostring(err):gsub("%s+", " "))
  os.exit(0)
end
local out, st = cuda.host("u8", n * 2), cuda.host("i32", 4)
out:copy_from(d_out)
st:copy_from(d_status)
-- the chunk found at each slot, identified by its first element (chunk k of the box starts at 8k+1)
local function chunk_at(slot)
  local lo, hi = out[slot * 16 + 1], out[slot * 16 + 2]
  if lo == 0xEE and hi == 0xEE then return "poison" end
  local v = lo + 256 * hi
  return (v - 1) % 8 == 0 and (v - 1) // 8 or "other"
end
local expected, address_bits, poison = 0, 0, 0
local base = 1024 + offset -- any 1024-aligned start gives the same low bits
for slot = 0, box_bytes // 16 - 1 do
  if chunk_at(slot) == "poison" then poison = poison + 1 end
end
for r = 0, BOX_H - 1 do
  for c = 0, CHUNKS - 1 do
    local k = r * CHUNKS + c
    local es, as = expected_slot(r, c), address_slot(r, c, base)
    if es >= 0 and es < box_bytes // 16 and chunk_at(es) == k then expected = expected + 1 end
    if as >= 0 and as < box_bytes // 16 and chunk_at(as) == k then address_bits = address_bits + 1 end
  end
end
print(string.format("%s status=0x%x expected=%d address_bits=%d poison=%d chunks=%d error=", line, st[1], expected,
  address_bits, poison, box_bytes // 16))
