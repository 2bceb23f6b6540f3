-- stream_protocol.lua missing|waited [GRID] — a producer on one stream, a consumer on another
-- (GRID consumer blocks of 256 threads, default 4096: a small grid for the tool runs).
-- "waited" makes the consumer's stream wait for the producer's event; "missing" forgets it.
-- Prints how many elements the consumer copied before the producer wrote them (stale).
package.path = cuda.home .. "/labs/children/?.lua;" .. package.path
local C = require("faults_common")
local variant = arg[1] or "missing"
if variant ~= "missing" and variant ~= "waited" then
  io.stderr:write("stream_protocol.lua: argument must be missing or waited\n")
  os.exit(2)
end
local mod = C.module()
local producer, consumer = mod:kernel("slow_producer"), mod:kernel("consumer")
local BLOCK = 256
local grid = math.tointeger(tonumber(arg[2] or "4096"))
if not grid or grid < 1 then
  io.stderr:write("stream_protocol.lua: GRID must be a positive integer\n")
  os.exit(2)
end
local N = grid * BLOCK
local buf, copy = cuda.array("f32", N), cuda.array("f32", N)
buf:fill(-1)
copy:fill(-2)
cuda.sync()
local s1, s2 = cuda.stream { nonblocking = true }, cuda.stream { nonblocking = true }
local produced = cuda.event()
C.step("run", function()
  producer:launch({ grid = 1, block = 1024, stream = s1 }, buf, N, 20 * 1000 * 1000) -- stalls 20 ms
  produced:record(s1)
  if variant == "waited" then s2:wait(produced) end
  consumer:launch({ grid = grid, block = BLOCK, stream = s2 }, buf, copy, N)
  cuda.sync { timeout = 20 }
end)
local h = cuda.host("f32", N)
h:copy_from(copy)
local stale = 0
for i = 1, N do if h[i] ~= i - 1 then stale = stale + 1 end end
print(string.format("RESULT stale=%d of %d", stale, N))
