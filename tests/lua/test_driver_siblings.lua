-- test_driver_siblings.lua — a libcuda given by path (GPULAB_LIBCUDA=/dir/libcuda.so.1, as in
-- the forward-compatibility package) gets the JIT compiler library beside it loaded first, so
-- its soname lookup finds that copy and not the system driver's. The driver stand-in plays both
-- libraries (copies of libfakecuda.so); /proc/self/maps of a child says what was loaded.
local T = dofile("tests/lua/t.lua")

local gpulab = arg[-1]
local fake = assert(os.getenv("GL_FAKECUDA"), "GL_FAKECUDA not set")
local dir = os.tmpname()
os.remove(dir)
local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
assert(os.execute("mkdir -p " .. q(dir) .. " && cp " .. q(fake) .. " " .. q(dir .. "/libcuda.so.1")))

-- Runs gpulab with GPULAB_LIBCUDA pointing into `dir`; returns what it printed.
local function child()
  local p = assert(io.popen("GPULAB_LIBCUDA=" .. q(dir .. "/libcuda.so.1") .. " " .. q(gpulab) .. " -e " ..
    q("print(cuda.available()); local f = io.open('/proc/self/maps'); io.write(f:read('a')); f:close()") .. " 2>&1"))
  local out = p:read("a")
  p:close()
  return out
end

T.test("no JIT compiler beside libcuda: nothing extra is loaded", function()
  local out = child()
  T.ok(out:find("^true"), "the stand-in is the driver: " .. out:sub(1, 200))
  T.ok(not out:find("libnvidia-ptxjitcompiler", 1, true), "no JIT compiler library mapped")
end)

T.test("the JIT compiler beside libcuda is loaded from that folder", function()
  assert(os.execute("cp " .. q(fake) .. " " .. q(dir .. "/libnvidia-ptxjitcompiler.so.1")))
  local out = child()
  T.ok(out:find("^true"), "the stand-in is the driver: " .. out:sub(1, 200))
  T.ok(out:find(dir .. "/libnvidia-ptxjitcompiler.so.1", 1, true), "mapped from " .. dir)
end)

os.execute("rm -rf " .. q(dir))
T.done()
