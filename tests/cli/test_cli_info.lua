-- test_cli_info.lua — what gpulab says about itself: --version (version and the commit built
-- from), -v (also NVRTC's version and the driver's, or why there is no driver, never failing) and
-- --help (the options, a lab's options, every environment variable gpulab reads, help()).
local T = dofile("tests/lua/t.lua")
local H = dofile("tests/cli/helpers.lua")
local run = H.run

local FAKE = os.getenv("GPULAB_FAKECUDA")
local v = cuda.version()

T.test("--version prints the version and the commit embedded at build time", function()
  local out, err, code = run({ "--version" })
  T.eq(code, 0, err)
  T.eq(out, string.format("gpulab %s (commit %s, %s)\n", v.gpulab, v.commit, v.lua))
  if io.open(".git/HEAD") then -- built from this checkout: the commit is git's
    T.ok(v.commit:match("^%x+$"), "a commit hash: " .. v.commit)
  end
end)

T.test("-v names NVRTC and says there is no driver, exit 0", function()
  local out, err, code = run({ "-v" }, { env = "GPULAB_LIBCUDA=/nonexistent/libcuda.so" })
  T.eq(code, 0, err)
  T.eq(err, "", "nothing on stderr")
  local last = out:match("([^\n]*)\n$")
  T.eq(last, string.format("commit %s, NVRTC %s, no CUDA driver: cannot open /nonexistent/libcuda.so "
                           .. "(/nonexistent/libcuda.so: cannot open shared object file: No such file or directory)",
                           v.commit, v.nvrtc))
  T.ok(v.nvrtc:match("^%d+%.%d+$"), "NVRTC's version: " .. v.nvrtc)
  T.ok(out:find("\ngpulab " .. v.gpulab, 1, true), "gpulab's line stays: " .. out)
end)

T.test("-v names the driver's version from cuDriverGetVersion", function()
  if not FAKE then return end
  local out, err, code = run({ "-v" }, { env = "GPULAB_LIBCUDA=" .. H.q(FAKE) })
  T.eq(code, 0, err)
  T.ok(out:find(string.format("commit %s, NVRTC %s, CUDA driver 13.0\n", v.commit, v.nvrtc), 1, true), out)
  -- a driver whose cuInit fails: said, not raised
  out, err, code = run({ "-v", "-e", "print('ran')" }, { env = "GPULAB_LIBCUDA=" .. H.q(FAKE) ..
                                                        " GPULAB_FAKE_FAIL=cuInit:100" })
  T.eq(code, 0, err)
  T.ok(out:find("present but cuInit failed", 1, true), out)
  T.ok(out:find("\nran\n", 1, true), "-e still runs: " .. out)
end)

T.test("-v without NVRTC says so and still runs the rest", function()
  local env = "GPULAB_LIBCUDA=/nonexistent/libcuda.so GPULAB_LIBNVRTC=/nonexistent/libnvrtc.so"
  local out, err, code = run({ "-v", "-e", "print('ran')" }, { env = env })
  T.eq(code, 0, err)
  T.ok(out:find(", NVRTC unavailable, no CUDA driver", 1, true), out)
  T.ok(out:find("\nran\n", 1, true), out)
end)

-- Every GPULAB_ variable the sources name, less those gpulab sets for its own children.
local INTERNAL = { GPULAB_DEPFILE = "--watch", GPULAB_REPLAY = ":restart", GPULAB_SANITIZER = "--sanitize",
                   GPULAB_SWEEP_CHILD = "--gpus", GPULAB_SWEEP_CONFIGS = "--gpus", GPULAB_SWEEP_OUT = "--gpus",
                   GPULAB_SWEEP_PRIOR = "--gpus", GPULAB_EXIT = "a marker line, not a variable" }

local function variables_read()
  local p = io.popen("grep -rhoE '\"GPULAB_[A-Z0-9_]+' host bindings lua/gpulab")
  local names = {}
  for name in p:read("a"):gmatch('"(GPULAB_[A-Z0-9_]+)') do
    if not INTERNAL[name] then names[name] = true end
  end
  p:close()
  return names
end

T.test("--help lists the lab options, every environment variable and help()", function()
  local out, err, code = run({ "--help" })
  T.eq(code, 0, err)
  local names = variables_read()
  T.ok(names.GPULAB_LIBCUDA and names.GPULAB_HOME and names.GPULAB_CACHE_DIR, "the sources were read")
  for name in pairs(names) do
    T.ok(out:find(name .. "%f[^%w_]"), "--help names " .. name)
  end
  for _, name in ipairs({ "CUDA_HOME", "XDG_STATE_HOME", "LUA_INIT", "LUA_PATH" }) do
    T.ok(out:find(name, 1, true), "--help names " .. name)
  end
  -- the options gpulab.lab takes, as its own usage lists them
  local lab = T.read("lua/gpulab/lab.lua")
  local list = assert(lab:match("local list = (%b{})"), "lab.lua lists its options")
  local n = 0
  for opt in list:gmatch('"(%-%-[%w-]+)') do
    n = n + 1
    T.ok(out:find("\n  " .. opt, 1, true), "--help lists the lab option " .. opt)
  end
  T.ok(n >= 5, "lab options found: " .. n)
  T.ok(out:find("Lab options", 1, true))
  T.ok(out:find("help(x)", 1, true) and out:find("help()", 1, true), "mentions help()")
  T.ok(out:find("docs/API.md", 1, true))
  local hout, herr = run({ "-h" })
  T.eq(hout, out, "-h is --help")
  T.eq(herr, "", "on stdout")
end)

T.test("a bad option prints the options only, on stderr", function()
  local out, err, code = run({ "--no-such-option" })
  T.eq(code, 1)
  T.eq(out, "")
  T.ok(err:find("unrecognized option '--no-such-option'", 1, true), err)
  T.ok(err:find("usage:", 1, true), err)
  T.ok(not err:find("Environment:", 1, true), "not the whole help: " .. err)
end)

T.done()
