-- A lab whose one claim flips from run to run (a counter in the file FLIP_STATE), beside a
-- steady one: tools/verdicts.sh must mark the first unstable.
local harness = require("gpulab.lab")
local lab = harness.new { name = "flip_lab", title = "A verdict that flips", claims = "a test fixture" }
lab:claim { id = "steady", own = true, text = "always holds" }
lab:claim { id = "flips", own = true, text = "holds every other run" }
local path = assert(os.getenv("FLIP_STATE"), "FLIP_STATE names the counter file")
local f = io.open(path, "r")
local n = f and tonumber(f:read("a")) or 0
if f then f:close() end
f = assert(io.open(path, "w"))
f:write(tostring(n + 1))
f:close()
lab:verdict("steady", "run " .. n, true)
lab:verdict("flips", "run " .. n, n % 2 == 0)
os.exit(lab:finish())
