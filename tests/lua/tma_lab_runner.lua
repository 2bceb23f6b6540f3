-- tma_lab_runner.lua ARGS... — runs `gpulab ARGS...` (the TMA lab, optionally under
-- --sanitize=TOOL) on a device and exits with its status; skips (77) without one, and under
-- --sanitize without compute-sanitizer, so the device tests neither pass vacuously nor fail
-- for a missing tool. GPULAB_BIN names the binary.
local T = dofile("tests/lua/t.lua")
T.require_gpu()

local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function executable(path) return os.execute("test -x " .. quote(path) .. " && test -f " .. quote(path)) end

-- Searched where `gpulab --sanitize` searches (host/sanitize.c): PATH, /usr/local/cuda/bin, $CUDA_HOME/bin.
local function sanitizer_installed()
  local dirs = {}
  for dir in (os.getenv("PATH") or ""):gmatch("[^:]+") do dirs[#dirs + 1] = dir end
  dirs[#dirs + 1] = "/usr/local/cuda/bin"
  local home = os.getenv("CUDA_HOME")
  if home and home ~= "" then dirs[#dirs + 1] = home .. "/bin" end
  for _, dir in ipairs(dirs) do
    if executable(dir .. "/compute-sanitizer") then return true end
  end
  return false
end

local sanitized = false
for i = 1, #arg do
  if arg[i] == "--sanitize" or arg[i]:match("^%-%-sanitize=") then sanitized = true end
end
if sanitized and not sanitizer_installed() then
  print("skipped: compute-sanitizer is not installed (PATH, /usr/local/cuda/bin, $CUDA_HOME/bin)")
  os.exit(77)
end

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
