-- helpers.lua — runs the gpulab binary as a child process for the CLI tests.
local H = {}

H.bin = assert(os.getenv("GPULAB_BIN"), "GPULAB_BIN must name the gpulab binary")
H.tmp = os.tmpname()
os.remove(H.tmp)
assert(os.execute("mkdir -p " .. H.tmp))

function H.q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

function H.write(name, text)
  local path = H.tmp .. "/" .. name
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

function H.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- Runs `gpulab ARGS...` (each argument quoted) with optional stdin text, in dir (default tmp).
-- Returns stdout, stderr, exit status.
function H.run(args, opts)
  opts = opts or {}
  local parts = { H.q(opts.bin or H.bin) }
  for _, a in ipairs(args) do parts[#parts + 1] = H.q(a) end
  local input = opts.stdin and H.write("stdin.txt", opts.stdin) or "/dev/null"
  local cmd = string.format("cd %s && %s %s < %s > %s/out.txt 2> %s/err.txt",
    H.q(opts.dir or H.tmp), opts.env or "", table.concat(parts, " "), H.q(input), H.q(H.tmp), H.q(H.tmp))
  local _, how, code = os.execute(cmd)
  if how == "signal" then code = 128 + code end
  return H.read(H.tmp .. "/out.txt"), H.read(H.tmp .. "/err.txt"), code
end

function H.cleanup() os.execute("rm -rf " .. H.q(H.tmp)) end

return H
