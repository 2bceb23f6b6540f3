-- Kernels named as the script wrote them, through NVRTC and the driver stand-in
-- (GPULAB_LIBCUDA=libfakecuda.so): a kernel asked for as "scale<2>" prints and errs as scale<2>,
-- its parameters by their declarations ("float* x"), from the demangled entry name and the
-- source NVRTC compiled; without the source (a PTX load, a table pairing an image with names)
-- the demangled types or the PTX types name them.
local T = dofile("tests/lua/t.lua")
local json = require("gpulab.json")

-- compute_90: PTX only, so the stand-in reads the signatures from the image
local SRC = [[
template <int N> __global__ void scale(float *x, float s, int n) { if (n) x[0] = s * N; }
namespace ops {
template <typename T> __global__ void axpy(T* y, const T* __restrict__ x, T a, unsigned long long n) {
  if (n) y[0] += a * x[0];
}
}
extern "C" __global__ void plain(const float * __restrict__ in, float *out, unsigned n, bool flag) {
  if (flag) out[0] = in[n];
}
extern "C" __global__ void unnamed(int *, short) {}
#if 0
extern "C" __global__ void twice(int a) {}
#else
extern "C" __global__ void twice(int b) {}
#endif
]]
local prog = cuda.compile(SRC, { name = "names.cu", arch = "compute_90",
                                 names = { "scale<2>", "ops::axpy<double>" } })
local CFG = { grid = 1, block = 1 }

-- "cuda.kernel name(params)": tostring without the resource counts after it
local function head(k) return (tostring(k):gsub(": %d+ regs, .*$", "")) end

T.test("a templated kernel prints as its name expression, with its parameters' declarations", function()
  local m = cuda.load(prog)
  local k = m:kernel("scale<2>")
  T.eq(k.name, "scale<2>")
  T.eq(head(k), "cuda.kernel scale<2>(float* x, float s, int n)")
  -- a spacing variant finds the same kernel and keeps the spelling it was asked for
  local k2 = m:kernel("scale< 2 >")
  T.eq(head(k2), "cuda.kernel scale< 2 >(float* x, float s, int n)")
  local a = m:kernel("ops::axpy<double>")
  T.eq(head(a),
    "cuda.kernel ops::axpy<double>(double* y, const double* x, double a, unsigned long long n)")
  m:free()
end)

T.test("launch errors name the kernel and the parameter as declared", function()
  local m = cuda.load(prog)
  local k = m:kernel("scale<2>")
  T.raises(function() k:launch(CFG, "hello", 1, 2) end,
    "bad argument #2 to 'k:launch' (scale<2> parameter 1 (float* x): u64 (8 bytes) expected, got a string of " ..
    "5 bytes)")
  T.raises(function() k:launch(CFG, cuda.array("f32", 4), 1, 2.5) end,
    "bad argument #4 to 'k:launch' (scale<2> parameter 3 (int n): u32 (4 bytes) expected, got 2.5 (not an integer))")
  T.raises(function() k:launch(CFG, 1) end, "k:launch: kernel 'scale<2>' takes 3 arguments, got 1")
  T.raises(function() k:prepare(CFG, 1, {}, 3) end,
    "bad argument #3 to 'k:prepare' (scale<2> parameter 2 (float s): f32 (4 bytes) expected, got table)")
  local d = cuda.array("f32", 4)
  local prepared = k:prepare(CFG, d, 1, 2)
  T.raises(function() prepared:set(1, 0.5) end,
    "bad argument #2 to 'prepared:set' (scale<2> parameter 1 (float* x): u64 (8 bytes) expected, got 0.5")
  d:free()
  T.raises(function() prepared() end, "cuda.prepared: scale<2> parameter 1 (float* x): the cuda.array was freed")
  prepared:free()
  local a = m:kernel("ops::axpy<double>")
  local y = cuda.array("f64", 4)
  T.raises(function() a:launch(CFG, y, y, "x", 1) end,
    "(ops::axpy<double> parameter 3 (double a): f64 (8 bytes) expected, got a string of 1 bytes)")
  y:free(); m:free()
end)

T.test("an extern \"C\" kernel's parameters are named from its source", function()
  local m = cuda.load(prog)
  local k = m:kernel("plain")
  T.eq(head(k), "cuda.kernel plain(const float* __restrict__ in, float* out, unsigned n, bool flag)")
  T.raises(function() k:launch(CFG, 1.5, 0, 0, true) end,
    "(plain parameter 1 (const float* __restrict__ in): u64 (8 bytes) expected, got 1.5 (not an integer))")
  T.raises(function() k:launch(CFG, 0, 0, 0, "yes") end,
    "(plain parameter 4 (bool flag): u8 (1 byte) expected, got a string of 3 bytes)")
  -- an unnamed parameter is named by its type
  T.eq(head(m:kernel("unnamed")), "cuda.kernel unnamed(int*, short)")
  -- two definitions (#if branches are not evaluated): unsure, so the PTX types
  local t = m:kernel("twice")
  T.eq(head(t), "cuda.kernel twice(u32)")
  T.raises(function() t:launch(CFG, "x") end, "(twice parameter 1 (u32): u32 (4 bytes) expected")
  m:free()
end)

T.test("without the source, the demangled entry name or the PTX types name the parameters", function()
  -- a PTX string: no source; a C++ kernel is asked for by its mangled name
  local m = cuda.load(prog.ptx)
  local mangled = prog.lowered["scale<2>"]
  T.eq(mangled, "_Z5scaleILi2EEvPffi")
  local k = m:kernel(mangled)
  T.eq(k.name, mangled, "the name as asked for")
  T.eq(head(k), "cuda.kernel _Z5scaleILi2EEvPffi(float*, float, int)")
  T.raises(function() k:launch(CFG, "hello", 1, 2) end,
    "(_Z5scaleILi2EEvPffi parameter 1 (float*): u64 (8 bytes) expected, got a string of 5 bytes)")
  local p = m:kernel("plain")
  T.eq(head(p), "cuda.kernel plain(u64, u64, u32, u8)")
  T.raises(function() p:launch(CFG, 1.5, 0, 0, true) end,
    "(plain parameter 1 (u64): u64 (8 bytes) expected, got 1.5 (not an integer))")
  m:free()
  -- a table pairing the PTX with the lowered names: the name expression works, the source is not
  -- the table's to vouch for
  local m2 = cuda.load({ ptx = prog.ptx, lowered = prog.lowered })
  local k2 = m2:kernel("scale<2>")
  T.eq(head(k2), "cuda.kernel scale<2>(float*, float, int)")
  T.eq(head(m2:kernel("plain")), "cuda.kernel plain(u64, u64, u32, u8)")
  m2:free()
end)

T.test("a program whose image was replaced does not lend its source", function()
  -- two programs with a kernel of the same name and parameter sizes: one's source would name the
  -- other's parameters wrong, and no size gives it away
  local a = cuda.compile(SRC, { name = "a.cu", arch = "sm_90" })
  local b = cuda.compile('extern "C" __global__ void plain(float *p, float *q, int c, bool d) {}',
                         { name = "b.cu", arch = "sm_90" })
  T.ok(a.cubin and b.cubin, "sm_90 programs carry a cubin")
  local mb = cuda.load(b)
  T.eq(head(mb:kernel("plain")), "cuda.kernel plain(float* p, float* q, int c, bool d)")
  mb:free()
  b.cubin, b.ptx = a.cubin, a.ptx
  local m = cuda.load(b)
  T.eq(head(m:kernel("plain")), "cuda.kernel plain(u64, u64, u32, u8)")
  m:free()
  -- its own image again: its own names again
  local ma = cuda.load(a)
  T.eq(head(ma:kernel("plain")),
    "cuda.kernel plain(const float* __restrict__ in, float* out, unsigned n, bool flag)")
  ma:free()
end)

T.test("trace rows carry the name as asked for", function()
  local path = os.tmpname()
  local m = cuda.load(prog)
  local k = m:kernel("scale<2>")
  local d = cuda.array("f32", 4)
  cuda.trace(path)
  k:launch(CFG, d, 1, 2)
  cuda.sync()
  cuda.trace(false)
  local doc = json.decode(assert(T.read(path)))
  local names = {}
  for _, e in ipairs(doc.traceEvents) do
    if e.ph == "X" and e.cat == "launch" then names[#names + 1] = e.name end
  end
  T.eq(table.concat(names, ","), "scale<2>")
  os.remove(path)
  d:free(); m:free()
end)

T.done()
