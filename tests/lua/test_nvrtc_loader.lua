-- test_nvrtc_loader.lua — NVRTC where the CUDA folder is not on the loader path. Run by
-- tests/loader/no_loader_path.sh inside a mount namespace whose loader cache lists no folder
-- with libnvrtc, LD_LIBRARY_PATH unset, the compile cache empty. libnvrtc opens its builtins
-- library by soname at the first compile; gpulab must have loaded it from libnvrtc's folder.
local T = dofile("tests/lua/t.lua")

local gpulab = arg[-1]
local nvrtc_dir = assert(os.getenv("GL_NVRTC_DIR"), "GL_NVRTC_DIR (the toolkit's library folder) not set")
local cuda_include = assert(os.getenv("GL_CUDA_INCLUDE"), "GL_CUDA_INCLUDE not set")
local scratch = assert(os.getenv("GL_TEST_TMP"), "GL_TEST_TMP not set")
local major = tonumber((cuda.version().nvrtc or ""):match("^(%d+)")) or 0

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Runs a chunk in a fresh gpulab (a fresh NVRTC load) with extra environment; output, success.
local function child(env, chunk)
  local script = scratch .. "/child.lua"
  T.write(script, chunk)
  local p = assert(io.popen(env .. " " .. q(gpulab) .. " " .. q(script) .. " 2>&1"))
  local out = p:read("a")
  return out, p:close()
end

-- Half precision from the toolkit's header and math functions: both come from NVRTC's builtins.
local SRC = [[
#include <cuda_fp16.h>
extern "C" __global__ void scale_half(const __half *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = sinf(__half2float(x[i])) * __expf(-(float)i) + sqrtf((float)n);
}
]]

T.test("first compile with an empty cache (cuda_fp16.h, math) needs the builtins library", function()
  T.eq(cuda.version().nvrtc:match("^%d+%.%d+$") ~= nil, true, "NVRTC loaded: " .. tostring(cuda.version().nvrtc))
  local p = cuda.compile(SRC, { name = "half.cu", include_dirs = { cuda_include } })
  T.eq(p.cache_hit, false, "cache_hit")
  T.ok(p.ptx:find(".entry scale_half", 1, true), "ptx has the entry")
  T.ok(p.ptx:find("sin.approx", 1, true) or p.ptx:find("ex2.approx", 1, true), "math lowered into the PTX")
  T.eq(p.cubin:sub(1, 4), "\127ELF", "cubin built")
  local again = cuda.compile(SRC, { name = "half.cu", include_dirs = { cuda_include } })
  T.eq(again.cache_hit, true, "second compile from the cache")
end)

T.test("a compile in a fresh process with its own empty cache", function()
  local out, ok = child("GPULAB_CACHE_DIR=" .. q(scratch .. "/cache2"),
    "local p = cuda.compile('extern \"C\" __global__ void k(float *x) { x[0] = logf(x[1]); }')\n" ..
    "assert(not p.cache_hit); print(p.ptx:find('.entry k', 1, true) and 'compiled')")
  T.ok(ok and out:find("compiled", 1, true), "child output: " .. out)
end)

T.test("libnvrtc without its builtins beside it: the error names the file, the folder, the setting", function()
  local lonely = scratch .. "/lonely"
  assert(os.execute("mkdir -p " .. q(lonely) .. " && ln -sf " .. q(nvrtc_dir .. "/libnvrtc.so." .. major) .. " " ..
    q(lonely .. "/libnvrtc.so." .. major)))
  local out, ok = child("GPULAB_CACHE=0 GPULAB_LIBNVRTC=" .. q(lonely .. "/libnvrtc.so." .. major),
    "cuda.compile('extern \"C\" __global__ void k() {}')")
  T.eq(ok, nil, "the compile fails: " .. out)
  T.ok(out:find("cuda.compile: NVRTC " .. major .. ".", 1, true), "names the function and NVRTC: " .. out)
  T.ok(out:find("needs libnvrtc-builtins.so." .. major .. ".", 1, true), "names the missing file: " .. out)
  T.ok(out:find("neither in " .. lonely .. " (the folder of libnvrtc.so." .. major .. ")", 1, true),
    "says where it looked: " .. out)
  T.ok(out:find("set GPULAB_LIBNVRTC=/path/to/libnvrtc.so." .. major, 1, true), "says what to set: " .. out)
end)

T.test("no libnvrtc at the given path: the error lists where gpulab looked", function()
  local out, ok = child("GPULAB_CACHE=0 GPULAB_LIBNVRTC=/nonexistent/libnvrtc.so.99",
    "cuda.compile('extern \"C\" __global__ void k() {}')")
  T.eq(ok, nil, "the compile fails: " .. out)
  T.ok(out:find("cuda.compile: cannot open NVRTC", 1, true), "names the function: " .. out)
  T.ok(out:find("GPULAB_LIBNVRTC=/nonexistent/libnvrtc.so.99", 1, true), "says where it looked: " .. out)
  T.ok(out:find("set GPULAB_LIBNVRTC=", 1, true), "says what to set: " .. out)
end)

T.done()
