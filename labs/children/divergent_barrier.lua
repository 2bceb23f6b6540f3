-- divergent_barrier.lua — a __syncthreads that only part of the block reaches.
package.path = cuda.home .. "/labs/children/?.lua;" .. package.path
local C = require("faults_common")
local k = C.module():kernel("divergent_barrier")
local out = cuda.array("f32", 64)
C.step("run", function()
  k:launch({ grid = 1, block = 64 }, out)
  cuda.sync { timeout = 10 }
end)
