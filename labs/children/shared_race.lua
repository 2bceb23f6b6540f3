-- shared_race.lua race|fixed [GRID] — neighbour_sum without / with the barrier between the shared
-- memory write and the read of another warp's element; prints how many outputs are wrong.
-- GRID (default 512) blocks of 256 threads: under racecheck a few blocks show the hazard.
package.path = cuda.home .. "/labs/children/?.lua;" .. package.path
local C = require("faults_common")
local variant = arg[1] or "race"
if variant ~= "race" and variant ~= "fixed" then
  io.stderr:write("shared_race.lua: argument must be race or fixed\n")
  os.exit(2)
end
local k = C.module():kernel(variant == "race" and "neighbour_sum<false>" or "neighbour_sum<true>")
local BLOCK, GRID = 256, math.tointeger(tonumber(arg[2] or "512"))
if not GRID or GRID < 1 then
  io.stderr:write("shared_race.lua: GRID must be a positive integer\n")
  os.exit(2)
end
local n = BLOCK * GRID
local h = cuda.host("f32", n)
h:random { seed = 7, lo = -1, hi = 1 }
local x, y = cuda.array("f32", n), cuda.array("f32", n)
x:copy_from(h)
C.step("run", function()
  k:launch({ grid = GRID, block = BLOCK }, x, y)
  cuda.sync { timeout = 20 }
end)
local out = cuda.host("f32", n)
out:copy_from(y)
local wrong = 0
for b = 0, GRID - 1 do
  for t = 0, BLOCK - 1 do
    local i = b * BLOCK + t + 1
    local want = h[i] + h[b * BLOCK + (t + 32) % BLOCK + 1]
    if out[i] ~= want then wrong = wrong + 1 end
  end
end
print(string.format("RESULT wrong=%d of %d", wrong, n))
