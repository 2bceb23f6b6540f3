-- Child for cuda.run_isolated tests: writes N KiB to stdout and to stderr, interleaved, so a
-- parent that drained only one pipe would deadlock.
local kib = math.tointeger(tonumber(arg[1])) or 1536
local line = string.rep("o", 1023) .. "\n"
local eline = string.rep("e", 1023) .. "\n"
for _ = 1, kib do
  io.stdout:write(line)
  io.stderr:write(eline)
end
io.stdout:write("END\n")
