-- A lab whose one claim flips from run to run (a counter in the file FLIP_STATE), beside a
-- steady one: tools/verdicts.sh must mark the first unstable.
local lab = require("gpulab.lab")
local L = lab.new { name = "flip_lab", title = "A verdict that flips", claims = "a test fixture" }
L:claim { id = "steady", own = true, text = "always holds" }
L:claim { id = "flips", own = true, text = "holds every other run" }
local path = assert(os.getenv("FLIP_STATE"), "FLIP_STATE names the counter file")
local f = io.open(path, "r")
local n = f and tonumber(f:read("a")) or 0
if f then f:close() end
f = assert(io.open(path, "w"))
f:write(tostring(n + 1))
f:close()
L:verdict("steady", "run " .. n, true)
L:verdict("flips", "run " .. n, n % 2 == 0)
os.exit(L:finish())
