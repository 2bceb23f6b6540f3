-- oob_write.lua MODE — one out-of-bounds write, then the calls that follow it.
-- MODE far: 16 GiB past the end (unmapped: a device fault); edge: one element past the end
-- (inside the allocation's padding: silent without a tool).
-- Prints STEP lines for: launch, host work, an unrelated allocation, the sync, the next call.
package.path = cuda.home .. "/labs/children/?.lua;" .. package.path
local C = require("faults_common")
local mode = arg[1] or "far"
local offsets = { far = 1 << 32, edge = 0 }
if not offsets[mode] then
  io.stderr:write("oob_write.lua: MODE must be far or edge\n")
  os.exit(2)
end
local N, BLOCK, BAD_BLOCK, BAD_THREAD = 1000, 128, 3, 17
local k = C.module():kernel("oob_write")
local p = cuda.array("f32", N)
cuda.sync()
print(string.format("SETUP n=%d grid=%d block=%d bad_block=%d bad_thread=%d offset=%d", N, (N + BLOCK - 1) // BLOCK,
  BLOCK, BAD_BLOCK, BAD_THREAD, offsets[mode]))
C.step("launch", function()
  k:launch({ grid = (N + BLOCK - 1) // BLOCK, block = BLOCK }, p, N, BAD_BLOCK, BAD_THREAD, offsets[mode])
end)
C.host_work(100) -- the kernel has long finished (or faulted) by now
C.step("alloc", function() cuda.array("f32", 16):free() end)
C.step("sync", function() cuda.sync { timeout = 20 } end)
C.step("next", function() cuda.array("f32", 16):free() end)
