-- test_compile.lua — cuda.compile / cuda.compile_file / prog:params through NVRTC (no GPU needed).
-- Runs without a driver (default arch sm_90a) and against the driver stand-in (a cc 9.0 device).
local T = dofile("tests/lua/t.lua")

local gpulab = arg[-1]
local scratch = os.tmpname()
os.remove(scratch)
assert(os.execute("mkdir -p '" .. scratch .. "/inc' '" .. scratch .. "/src'"))

local write = T.write

local read = T.read

-- Runs gpulab on a chunk in a child process with extra environment; returns its output.
local function child(env, chunk)
  local script = scratch .. "/child.lua"
  write(script, chunk)
  local p = assert(io.popen(env .. " '" .. gpulab .. "' '" .. script .. "' 2>&1"))
  local out = p:read("a")
  local ok = p:close()
  return out, ok
end

local SAXPY = [[
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
]]

T.test("compile: ptx, cubin for sm_90a, fields", function()
  local p = cuda.compile(SAXPY, { name = "saxpy.cu", arch = "sm_90a" })
  T.ok(p.ptx:find(".entry saxpy", 1, true), "ptx has the entry")
  T.ok(p.ptx:find(".target sm_90a", 1, true), "ptx targets sm_90a")
  T.eq(type(p.cubin), "string")
  T.eq(p.cubin:sub(1, 4), "\127ELF", "cubin is an ELF image")
  T.eq(type(p.log), "string")
  T.eq(p.cache_hit, false)
  T.eq(p.name, "saxpy.cu")
  T.eq(p.arch, "sm_90a")
  T.eq(type(p.lowered), "table")
  T.eq(tostring(p), "cuda.program saxpy.cu (sm_90a, 1 kernel)")
  T.eq(p.options[1], "--gpu-architecture=sm_90a")
end)

T.test("compile: virtual arch has no cubin", function()
  local p = cuda.compile(SAXPY, { arch = "compute_90" })
  T.eq(p.cubin, nil)
  T.ok(p.ptx:find(".target sm_90", 1, true), "ptx present")
  T.eq(p.name, "kernel.cu")
end)

T.test("compile: default arch is the device's or sm_90a", function()
  -- no driver: sm_90a; the driver stand-in reports a cc 9.0 device: sm_90a as well
  local p = cuda.compile(SAXPY)
  T.eq(p.arch, "sm_90a")
  T.ok(p.cubin ~= nil, "real arch gives a cubin")
  local again = cuda.compile(SAXPY, { arch = "sm_80" })
  T.eq(again.arch, "sm_80")
  T.ok(again.ptx:find(".target sm_80", 1, true), "explicit arch wins")
end)

T.test("compile: defines", function()
  local src = [[
static_assert(K == 4, "K");
static_assert(SCALE > 1.49 && SCALE < 1.51, "SCALE");
#ifndef FLAG
#error FLAG missing
#endif
#ifdef OFF
#error OFF must stay undefined
#endif
static_assert(NEG == -3, "NEG");
extern "C" __global__ void k(int *o) { *o = WORD; }
]]
  local p = cuda.compile(src, { defines = { K = 4, SCALE = 1.5, FLAG = true, OFF = false, NEG = -3, WORD = "7" } })
  T.ok(p.ptx:find("7", 1, true), "string define used")
  -- the same source fails when a define is wrong: the check above is real
  T.raises(function() cuda.compile(src, { defines = { K = 5, SCALE = 1.5, FLAG = true, NEG = -3, WORD = "7" } }) end,
    "static assertion failed")
  -- the option list is sorted, so it does not depend on table order
  local q = cuda.compile("", { defines = { Z = 1, A = 2, M = true } })
  T.eq(table.concat(q.options, " ", 2, 4), "-DA=2 -DM -DZ=1")
end)

T.test("compile: include_dirs and in-memory headers", function()
  write(scratch .. "/inc/twice.h", "#pragma once\n__device__ inline int twice(int x) { return 2 * x; }\n")
  local src = '#include "twice.h"\n#include "mem.h"\nextern "C" __global__ void k(int *o) { *o = twice(MEM); }\n'
  local p = cuda.compile(src, { include_dirs = { scratch .. "/inc" }, headers = { ["mem.h"] = "#define MEM 21\n" } })
  T.ok(p.ptx:find(".entry k", 1, true), "compiled")
  T.raises(function() cuda.compile(src, { headers = { ["mem.h"] = "#define MEM 21\n" } }) end, "twice.h")
  T.raises(function() cuda.compile(src, { include_dirs = { scratch .. "/inc" } }) end, "mem.h")
end)

T.test("compile: gpulab's kernels/include is always searched", function()
  T.eq(type(cuda.home), "string")
  local found = false
  for _, o in ipairs(cuda.compile("", {}).options) do
    if o == "-I" .. cuda.home .. "/kernels/include" then found = true end
  end
  T.ok(found, "-I<home>/kernels/include passed")
end)

T.test("compile_file: folder searched, name is the path, errors as path:line", function()
  write(scratch .. "/src/helper.h", "#define HELPER 5\n")
  write(scratch .. "/src/ok.cu", '#include "helper.h"\nextern "C" __global__ void k(int *o) { *o = HELPER; }\n')
  local p = cuda.compile_file(scratch .. "/src/ok.cu")
  T.eq(p.name, scratch .. "/src/ok.cu")
  T.ok(p.ptx:find(".entry k", 1, true), "compiled")
  T.eq(cuda.compile_file(scratch .. "/src/ok.cu", { name = "renamed.cu" }).name, "renamed.cu")
  write(scratch .. "/src/bad.cu", "extern \"C\" __global__ void k() {\n  int x = ;\n}\n")
  local err = T.raises(function() cuda.compile_file(scratch .. "/src/bad.cu") end, "compilation failed")
  T.ok(err:find(scratch .. "/src/bad.cu:2: error", 1, true), "diagnostic as file:line: " .. err)
  T.raises(function() cuda.compile_file(scratch .. "/src/missing.cu") end, "cannot open")
  T.raises(function() cuda.compile_file(scratch .. "/src") end, "cuda.compile_file")
end)

T.test("compile: failure log in file:line form", function()
  local err = T.raises(function() cuda.compile("\n\n__global__ void k() { undefined_fn(); }\n", { name = "x.cu" }) end,
    "cuda.compile: x.cu: compilation failed")
  T.ok(err:find("x.cu:3: error", 1, true), err)
  T.ok(not err:find("x.cu(3)", 1, true), "no NVRTC-style locations left")
end)

T.test("compile: name expressions and lowered names", function()
  local src = "template <int N> __global__ void fill(int *o) { *o = N; }\n"
  local p = cuda.compile(src, { names = { "fill<2>", "fill<7>" } })
  T.eq(p.lowered["fill<2>"], "_Z4fillILi2EEvPi")
  T.eq(p.lowered["fill<7>"], "_Z4fillILi7EEvPi")
  T.eq(#p:params("fill<2>"), 1)
  T.eq(#p:params("_Z4fillILi7EEvPi"), 1, "mangled names work too")
  T.raises(function() cuda.compile(src, { names = { "nothere<1>" } }) end, "nothere")
end)

T.test("compile: lineinfo", function()
  local plain = cuda.compile(SAXPY)
  local lined = cuda.compile(SAXPY, { lineinfo = true })
  T.ok(not plain.ptx:find("\n%s*%.loc%s"), "no .loc without lineinfo")
  T.ok(lined.ptx:find("\n%s*%.loc%s"), ".loc with lineinfo")
  local out = child("GPULAB_LINEINFO=1 GPULAB_CACHE=0",
    "local p = cuda.compile([[" .. SAXPY .. "]])\nprint(p.ptx:find('\\n%s*%.loc%s') and 'LOC' or 'NOLOC')\n")
  T.ok(out:find("LOC", 1, true) and not out:find("NOLOC", 1, true), "GPULAB_LINEINFO=1 adds -lineinfo: " .. out)
end)

T.test("compile: options, invalid options and arch", function()
  local p = cuda.compile("static_assert(X == 9, \"X\");", { options = { "-DX=9" }, std = "c++17" })
  T.eq(p.options[#p.options], "-DX=9")
  local e1 = T.raises(function() cuda.compile(SAXPY, { options = { "--no-such-flag" } }) end,
    "NVRTC_ERROR_INVALID_OPTION (5)")
  T.ok(e1:find("--no-such-flag", 1, true), "the option is named: " .. e1)
  local e2 = T.raises(function() cuda.compile(SAXPY, { arch = "sm_12345" }) end, "NVRTC_ERROR_INVALID_OPTION")
  T.ok(e2:find("sm_12345", 1, true), "the arch is named: " .. e2)
  T.raises(function() cuda.compile(SAXPY, { std = "c++1999" }) end, "NVRTC_ERROR_INVALID_OPTION")
  T.raises(function() cuda.compile(SAXPY, { arch = "" }) end, "bad argument #2 to 'cuda.compile'")
  T.raises(function() cuda.compile(SAXPY, { arch = "sm 90" }) end, "bad argument #2 to 'cuda.compile'")
end)

T.test("compile: NUL bytes are refused", function()
  T.raises(function() cuda.compile("__global__ void k(){}\0 junk") end,
    "bad argument #1 to 'cuda.compile' (source contains a NUL byte at offset 21)")
  T.raises(function() cuda.compile("", { headers = { ["a.h"] = "x\0y" } }) end, "NUL byte at offset 1")
  T.raises(function() cuda.compile("", { options = { "-DX\0Y" } }) end, "NUL byte")
  write(scratch .. "/src/nul.cu", "int x;\0")
  T.raises(function() cuda.compile_file(scratch .. "/src/nul.cu") end, "source contains a NUL byte at offset 6")
  T.raises(function() cuda.compile_file("a\0b") end, "bad argument #1 to 'cuda.compile_file'")
end)

T.test("compile: bad argument types", function()
  local B1 = "bad argument #1 to 'cuda.compile' (string expected, got "
  T.raises(function() cuda.compile() end, B1 .. "no value)")
  T.raises(function() cuda.compile(42) end, B1 .. "number)")
  T.raises(function() cuda.compile({}) end, B1 .. "table)")
  T.raises(function() cuda.compile_file(nil) end, "bad argument #1 to 'cuda.compile_file'")
  T.raises(function() cuda.compile("", "opts") end, "bad argument #2 to 'cuda.compile' (table expected, got string)")
  T.raises(function() cuda.compile_file("x.cu", 5) end, "bad argument #2 to 'cuda.compile_file'")
  local B2 = "bad argument #2 to 'cuda.compile' ("
  T.raises(function() cuda.compile("", { name = 1 }) end, B2 .. "field 'name': string expected, got number)")
  T.raises(function() cuda.compile("", { name = "" }) end, B2 .. "field 'name': must not be empty")
  T.raises(function() cuda.compile("", { arch = 90 }) end, B2 .. "field 'arch': string expected")
  T.raises(function() cuda.compile("", { std = true }) end, B2 .. "field 'std': string expected")
  T.raises(function() cuda.compile("", { lineinfo = 1 }) end, B2 .. "field 'lineinfo': boolean expected")
  T.raises(function() cuda.compile("", { cache = "no" }) end, B2 .. "field 'cache': boolean expected")
  T.raises(function() cuda.compile("", { defines = "K=4" }) end, B2 .. "field 'defines': table expected")
  T.raises(function() cuda.compile("", { defines = { [1] = 4 } }) end, B2 .. "field 'defines': keys must be strings")
  T.raises(function() cuda.compile("", { defines = { ["K-1"] = 4 } }) end, B2 ..
    "field 'defines': 'K-1' is not a macro name")
  T.raises(function() cuda.compile("", { defines = { K = {} } }) end, B2 .. "field 'defines': 'K' must be a boolean")
  T.raises(function() cuda.compile("", { defines = { K = 0 / 0 } }) end, B2 .. "field 'defines': 'K' must be finite")
  T.raises(function() cuda.compile("", { defines = { K = math.huge } }) end, B2 ..
    "field 'defines': 'K' must be finite")
  T.raises(function() cuda.compile("", { defines = { K = "a\nb" } }) end, "newline")
  T.raises(function() cuda.compile("", { include_dirs = "inc" }) end, B2 .. "field 'include_dirs': table expected")
  T.raises(function() cuda.compile("", { include_dirs = { 5 } }) end,
    B2 .. "field 'include_dirs': item 1: string expected")
  T.raises(function() cuda.compile("", { include_dirs = { x = "a" } }) end, "must be a list of strings")
  T.raises(function() cuda.compile("", { options = { "" } }) end, B2 .. "field 'options': item 1 is empty")
  T.raises(function() cuda.compile("", { options = { [2] = "-DX" } }) end, "must be a list of strings")
  T.raises(function() cuda.compile("", { names = { {} } }) end, B2 .. "field 'names': item 1: string expected")
  T.raises(function() cuda.compile("", { headers = { "a.h" } }) end, B2 .. "field 'headers': keys must be strings")
  T.raises(function() cuda.compile("", { headers = { ["a.h"] = 1 } }) end, B2 ..
    "field 'headers': 'a.h': string expected")
  T.raises(function() cuda.compile("", { headers = { [""] = "x" } }) end, "field 'headers': names must be non-empty")
  T.raises(function() cuda.compile("", { naem = "x.cu" }) end, "unknown field 'naem'")
  T.raises(function() cuda.compile("", { [1] = "x" }) end, "cuda.compile")
end)

T.test("params: many signatures", function()
  local src = [[
struct __align__(16) V { float4 q; };
struct S3 { char a, b, c; };
struct alignas(64) Map { unsigned long long opaque[16]; };
extern "C" __global__ void none() {}
extern "C" __global__ void scalars(char c, short s, int i, long long l, unsigned u, float f, double d, bool b) {}
extern "C" __global__ void ptrs(float *out, const int *in, unsigned long long n) {}
extern "C" __global__ void aggs(S3 s, V v, char tail) {}
extern "C" __global__ void tma(const __grid_constant__ Map m, int *flag) {}
namespace ns { __global__ void inner(short a) {} }
]]
  local p = cuda.compile(src, { names = { "ns::inner" } })
  T.eq(tostring(p), "cuda.program kernel.cu (sm_90a, 6 kernels)")
  local function sig(name)
    local parts = {}
    for i, q in ipairs(p:params(name)) do parts[i] = q.kind .. "/" .. q.size .. "/" .. q.align .. "@" .. q.offset end
    return table.concat(parts, " ")
  end
  T.eq(sig("none"), "")
  T.eq(sig("scalars"), "u8/1/1@0 u16/2/2@2 u32/4/4@4 u64/8/8@8 u32/4/4@16 f32/4/4@20 f64/8/8@24 u8/1/1@32")
  T.eq(sig("ptrs"), "u64/8/8@0 u64/8/8@8 u64/8/8@16")
  T.eq(sig("aggs"), "b8/3/1@0 b8/16/16@16 u8/1/1@32")
  T.eq(sig("tma"), "b8/128/64@0 u64/8/8@128")
  T.eq(sig("ns::inner"), "u16/2/2@0")
  T.eq(sig("_ZN2ns5innerEs"), "u16/2/2@0")
end)

T.test("params: errors", function()
  local p = cuda.compile(SAXPY .. 'extern "C" __global__ void other() {}\n', { name = "two.cu" })
  local err = T.raises(function() p:params("saxp") end, "prog:params: kernel 'saxp' not found in two.cu")
  T.ok(err:find("saxpy", 1, true) and err:find("other", 1, true), "entries listed: " .. err)
  T.raises(function() p:params() end, "bad argument #1 to 'prog:params' (kernel name expected, got no value)")
  T.raises(function() p:params(1) end, "kernel name expected, got number")
  T.raises(function() p.params({}, "saxpy") end, "bad argument #1 to 'prog:params' (cuda.program expected, got table)")
  T.raises(function() p.params("x", "saxpy") end, "cuda.program expected, got string")
  T.eq(getmetatable(p), "gpulab object", "the metatable is protected")
  p.ptx = nil
  T.raises(function() p:params("saxpy") end, "the program has no PTX")
  p.ptx = ".entry saxpy(.param .u32"
  T.raises(function() p:params("saxpy") end, "unexpected end")
end)

T.test("compile: GPULAB_DEPFILE lists the files read", function()
  write(scratch .. "/src/dep.h", "#define DEP 1\n")
  write(scratch .. "/src/dep.cu", '#include "dep.h"\n#include <nvrtc_builtin_unknown.h>\n')
  write(scratch .. "/src/dep_ok.cu", '#include "dep.h"\nextern "C" __global__ void k(int *o) { *o = DEP; }\n')
  local depfile = scratch .. "/deps.txt"
  os.remove(depfile)
  child("GPULAB_DEPFILE='" .. depfile .. "' GPULAB_CACHE=0",
    "cuda.compile_file('" .. scratch .. "/src/dep_ok.cu')\npcall(cuda.compile_file, '" .. scratch .. "/src/dep.cu')\n")
  local deps = read(depfile) or ""
  T.ok(deps:find("/src/dep_ok.cu\n", 1, true), "source listed: " .. deps)
  T.ok(deps:find("/src/dep.h\n", 1, true), "header listed: " .. deps)
  T.ok(deps:find("/src/dep.cu\n", 1, true), "a failing source is still listed: " .. deps)
  for line in deps:gmatch("[^\n]+") do T.eq(line:sub(1, 1), "/", "absolute path") end
end)

os.execute("rm -rf '" .. scratch .. "'")
T.done()
