-- tma_lab_runner.lua ARGS... — runs `gpulab ARGS...` (the TMA lab, optionally under
-- --sanitize=TOOL) on a device and exits with its status; skips (77) without one, so the device
-- tests do not pass vacuously on machines without a GPU. GPULAB_BIN names the binary.
local T = dofile("tests/lua/t.lua")
T.require_gpu()

local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local parts = { quote(os.getenv("GPULAB_BIN") or arg[-1]) }
for i = 1, #arg do parts[#parts + 1] = quote(arg[i]) end
local cmd = table.concat(parts, " ")
print("running: " .. cmd)
io.stdout:flush()
local ok, how, code = os.execute(cmd)
if how == "signal" then
  print("killed by signal " .. tostring(code))
  os.exit(1)
end
print(ok and "lab passed" or ("lab failed with status " .. tostring(code)))
os.exit(ok and 0 or (code ~= 77 and code or 1))
