-- test_sass.lua — prog:resources (from the cubin and ptxas's report, no GPU) and prog:sass through
-- a stand-in disassembler (tests/sass/fake_nvdisasm.sh printing canned nvdisasm text).
local T = dofile("tests/lua/t.lua")

local gpulab = arg[-1]
local scratch = os.tmpname()
os.remove(scratch)
assert(os.execute("mkdir -p '" .. scratch .. "'"))
local FAKE = "tests/sass/fake_nvdisasm.sh"

local SRC = [[
__constant__ float coef[64];
extern "C" __global__ void __launch_bounds__(1024, 2) spill(float *out, const float *in, int n) {
    float acc[48];
#pragma unroll
    for (int j = 0; j < 48; j++) acc[j] = in[j * n + threadIdx.x];
    for (int i = 0; i < n; i++) {
#pragma unroll
        for (int j = 0; j < 48; j++) acc[j] = acc[j] * acc[(j + 7) % 48] + in[i];
    }
    float s = 0;
#pragma unroll
    for (int j = 0; j < 48; j++) s += acc[j] * (j + 1);
    out[threadIdx.x] = s;
}
extern "C" __global__ void fmachain(float *out, float a, float b) {
    __shared__ float tile[128];
    float x = out[threadIdx.x];
    for (int i = 0; i < 100; i++) x = x * a + b;
    tile[threadIdx.x] = x; __syncthreads();
    out[threadIdx.x] = tile[127 - threadIdx.x] + coef[3];
}
template <int N> __global__ void tk(float *o) { o[threadIdx.x] *= N; }
]]

-- Runs a chunk in a child gpulab with extra environment; returns output and success.
local function child(env, chunk)
  local script = scratch .. "/child.lua"
  T.write(script, chunk)
  local p = assert(io.popen(env .. " '" .. gpulab .. "' '" .. script .. "' 2>&1"))
  local out = p:read("a")
  return out, p:close()
end

T.test("resources: registers, spills, stack, shared and constant memory as ptxas reports them", function()
  local p = cuda.compile(SRC, { arch = "sm_90a", names = { "tk<2>" } })
  local s = p:resources("spill")
  T.eq(s.regs, 32)
  T.eq(s.max_regs, 32, "__launch_bounds__(1024, 2) caps registers at 32")
  T.eq(s.max_threads, 1024)
  T.ok(s.spill_stores > 0 and s.spill_loads > 0, "spills " .. tostring(s.spill_stores))
  T.ok(s.local_bytes >= s.spill_stores / 2 and s.local_bytes > 0, "stack frame " .. s.local_bytes)
  T.eq(s.from, "cubin+ptxas")
  local f = p:resources("fmachain")
  T.eq(f.smem, 512)
  T.eq(f.smem_reserved, 1024, "sm_90 reserves 1 KiB of shared memory per block")
  T.eq(f.barriers, 1)
  T.eq(f.spill_stores, 0)
  T.eq(f.local_bytes, 0)
  T.eq(f.cmem_banks[3], 256, "bank 3: the module's __constant__ float[64]")
  T.ok(f.cmem_banks[0] > f.param_bytes, "bank 0 holds the parameters")
  T.eq(f.param_bytes, 16)
  T.eq(f.instructions * 16, f.code_bytes)
  local t = p:resources("tk<2>")
  T.eq(t.entry, p.lowered["tk<2>"])
  T.ok(t.regs > 0 and t.regs < 32)
  T.eq(p:resources(p.lowered["tk<2>"]).regs, t.regs, "the mangled name works too")
end)

T.test("resources: the report stays out of prog.log unless asked for", function()
  local p = cuda.compile(SRC, { arch = "sm_90a", cache = false })
  T.ok(not p.log:find("ptxas info"), p.log)
  for _, o in ipairs(p.options) do T.ok(not o:find("ptxas"), "prog.options lists what the script asked: " .. o) end
  for _, opts in ipairs { { "-Xptxas=-v" }, { "-Xptxas", "-v" }, { "--ptxas-options=--verbose" } } do
    local q = cuda.compile(SRC, { arch = "sm_90a", cache = false, options = opts })
    T.ok(q.log:find("Used 32 registers"), table.concat(opts, " ") .. ": " .. q.log)
    T.eq(q:resources("spill").spill_stores, p:resources("spill").spill_stores)
  end
end)

T.test("resources: survive a cache hit and a script that rewrites the program table", function()
  local out, ok = child("GPULAB_CACHE=1 GPULAB_CACHE_DIR='" .. scratch .. "/cache'", [[
    local src = ]] .. string.format("%q", SRC) .. [[
    local a = cuda.compile(src, {arch = "sm_90a"})
    local b = cuda.compile(src, {arch = "sm_90a"})
    assert(not a.cache_hit and b.cache_hit, "second compile is a hit")
    local ra, rb = a:resources("spill"), b:resources("spill")
    assert(rb.spill_stores == ra.spill_stores and rb.spill_stores > 0, "spills on a hit")
    assert(rb.from == "cubin+ptxas")
    b.cubin = "garbage"; b.log = ""
    assert(b:resources("spill").regs == 32, "the compiled cubin is kept")
    print("ok")
  ]])
  T.ok(ok and out:find("ok"), out)
end)

T.test("resources: errors name the kernel and the rule", function()
  local p = cuda.compile(SRC, { arch = "sm_90a", names = { "tk<2>" } })
  T.raises(function() p:resources("nope") end, "prog:resources: kernel 'nope': the image has no code for kernel 'nope'")
  T.raises(function() p:resources("tk<3>") end, "'tk<3>' is not a registered name expression (registered: tk<2>)")
  T.raises(function() p:resources() end, "bad argument #1 to 'prog:resources' (kernel name expected")
  T.raises(function() p.resources({}, "spill") end, "cuda.program expected")
  local v = cuda.compile(SRC, { arch = "compute_90" })
  T.raises(function() v:resources("spill") end, "has no cubin (arch 'compute_90' is virtual)")
  T.raises(function() v:sass("spill") end, "has no cubin")
end)

T.test("sass: parses the disassembler's text: offsets, opcodes, source lines, inlining", function()
  local list = cuda.sass_parse(T.read("tests/sass/sample.txt"), "fmachain")
  T.eq(#list, 10)
  T.eq(list.kernel, "fmachain")
  T.eq(list[1].offset, 0)
  T.eq(list[1].text, "LDC R1, c[0x0][0x28]")
  T.eq(list[1].file, "/tmp/k.cu")
  T.eq(list[1].line, 10, "the PTX-line record is not the source line")
  T.eq(list[3].opcode, "LDG.E")
  T.eq(list[3].line, 11)
  T.eq(list[5].opcode, "BRA", "the predicate is not the opcode")
  T.eq(list[5].text, "@!P0 BRA `(.L_x_0)")
  T.eq(list[5].line, 12)
  T.eq(list[6].file, "/tmp/helper.h", "the innermost frame first")
  T.eq(list[6].line, 3)
  T.eq(list[6].inlined_at, "/tmp/k.cu:13")
  T.eq(list[7].line, 3, "an instruction without a record of its own keeps the one before")
  for i = 2, #list do T.ok(list[i].offset > list[i - 1].offset, "offsets increase") end
  local c = list:count { "LDG", "LDS", "BAR", "SHFL", "FFMA", "LDGSTS" }
  T.eq(c.LDG, 1); T.eq(c.LDS, 1); T.eq(c.BAR, 1); T.eq(c.SHFL, 1); T.eq(c.FFMA, 1); T.eq(c.LDGSTS, 0)
  local other = cuda.sass_parse(T.read("tests/sass/sample.txt"), "other")
  T.eq(#other, 2)
  T.eq(other:count { "LDG", "LDGSTS" }.LDG, 0, "LDGSTS is not an LDG")
  local text = tostring(list)
  T.ok(text:find("SASS of fmachain %(10 instructions%)"), text)
  T.ok(text:find("/%*0020%*/  LDG%.E R0, desc%[UR4%]%[R2%.64%]%s+k%.cu:11"),
    text)
  local cu = cuda.sass_parse(T.read("tests/sass/cuobjdump_sample.txt"), "fmachain")
  T.eq(#cu, 3, "cuobjdump's layout: the encoding lines are not instructions")
  T.eq(cu[2].opcode, "LDG.E.128")
  T.eq(cu[2].file, nil)
  T.raises(function() cuda.sass_parse("nothing", "fmachain") end, "the text has no function 'fmachain'")
  T.raises(function() list:count { 1 } end, "item 1 is not a string")
end)

local function sass_child(env, body)
  local log = scratch .. "/nvdisasm.log"
  os.remove(log)
  local out, ok = child("GPULAB_CACHE=0 FAKE_NVDISASM_LOG='" .. log .. "' FAKE_NVDISASM_TEXT=tests/sass/sample.txt "
    .. env,
    "local p = cuda.compile(" .. string.format("%q", SRC) .. ", {arch = 'sm_90a'})\n" .. body)
  local f = io.open(log)
  local calls = f and f:read("a") or ""
  if f then f:close() end
  return out, ok, calls
end

T.test("sass: runs the disassembler on the cubin, recompiling with line info once", function()
  local out, ok, calls = sass_child("GPULAB_NVDISASM=" .. FAKE, [[
    local s = p:sass("fmachain")
    assert(#s == 10 and s[3].line == 11, tostring(s))
    local again = p:sass("fmachain")
    assert(#again == 10)
    local bare = p:sass("fmachain", {lineinfo = false})
    print("ok", #bare)
  ]])
  T.ok(ok and out:find("ok\t10"), out)
  local lines = {}
  for l in calls:gmatch("[^\n]+") do lines[#lines + 1] = l end
  T.eq(#lines, 3, calls)
  T.ok(lines[1]:find("^args=%-c %-g .*lineinfo=yes$"), "recompiled with -lineinfo: " .. lines[1])
  T.ok(lines[2]:find("lineinfo=yes$"), lines[2])
  T.ok(lines[3]:find("lineinfo=no$"), "lineinfo=false keeps the program's own cubin: " .. lines[3])
  local out2, ok2, calls2 = sass_child("GPULAB_NVDISASM=" .. FAKE, [[
    local q = cuda.compile(]] .. string.format("%q", SRC) .. [[, {arch = 'sm_90a', lineinfo = true})
    print(#q:sass("fmachain"))
  ]])
  T.ok(ok2 and out2:find("10"), out2)
  T.ok(calls2:find("lineinfo=yes") and not calls2:find("lineinfo=no"), calls2)
end)

T.test("sass: a listing prints whatever its kernel name or edited rows hold", function()
  local out, ok = sass_child("GPULAB_NVDISASM=" .. FAKE, [[
    local s = p:sass("fmachain")
    s.kernel = string.rep("k", 3000) -- longer than the text buffer's first block
    local text = tostring(s)
    assert(text:sub(1, 20) == "SASS of " .. string.rep("k", 12), text:sub(1, 40))
    assert(select(2, text:gsub("\n", "")) == 11, text)
    s.kernel, s[1].text, s[2] = 42, {}, "not a row"
    print(tostring(s):match("^[^\n]+"))
    print(pcall(debug.getmetatable(s).__tostring, 42))
  ]])
  T.ok(ok and out:find("SASS of 42 (10 instructions)", 1, true), out)
  T.ok(out:find("bad argument #1 to 'cuda.sass __tostring' (cuda.sass listing expected, got number)", 1, true), out)
end)

T.test("sass: the disassembler's failures are clear errors", function()
  local out = sass_child("FAKE_NVDISASM_MODE=fail GPULAB_NVDISASM=" .. FAKE, [[
    local ok, e = pcall(p.sass, p, "fmachain"); print(e)
  ]])
  T.ok(out:find("prog:sass: .*fake_nvdisasm.sh failed %(exit status 2%): nvdisasm fatal : Could not open"), out)
  out = sass_child("FAKE_NVDISASM_MODE=hang GPULAB_NVDISASM=" .. FAKE, [[
    local t0 = os.time()
    local ok, e = pcall(p.sass, p, "fmachain", {timeout = 0.5}); print(e, os.time() - t0 < 10)
  ]])
  T.ok(out:find("did not finish within 0%.5") and out:find("true"), out)
  -- a disassembler that closes its output but never ends is held to the deadline too
  out = sass_child("FAKE_NVDISASM_MODE=close GPULAB_NVDISASM=" .. FAKE, [[
    local t0 = os.time()
    local ok, e = pcall(p.sass, p, "fmachain", {timeout = 0.5}); print(e, os.time() - t0 < 10)
  ]])
  T.ok(out:find("did not finish within 0%.5") and out:find("true"), out)
  out = sass_child("GPULAB_NVDISASM=/nonexistent/nvdisasm", [[
    local ok, e = pcall(p.sass, p, "fmachain"); print(e)
  ]])
  T.ok(out:find("GPULAB_NVDISASM=/nonexistent/nvdisasm is not an executable file"), out)
  out = sass_child("GPULAB_NVDISASM=" .. FAKE, [[
    local ok, e = pcall(p.sass, p, "tk"); print(e)
    ok, e = pcall(p.sass, p, "fmachain", {timeout = -1}); print(e)
    ok, e = pcall(p.sass, p, "fmachain", {colour = 1}); print(e)
  ]])
  T.ok(out:find("the disassembly has no function 'tk'"), out)
  T.ok(out:find("field 'timeout'"), out)
  T.ok(out:find("colour"), out)
end)

T.test("sass: no disassembler anywhere names what to install and where it looked", function()
  local probe = io.popen("PATH=/usr/bin:/bin command -v nvdisasm; ls /usr/local/cuda/bin/nvdisasm 2>/dev/null")
  local found = probe:read("a")
  probe:close()
  local out = sass_child("PATH=/usr/bin:/bin CUDA_HOME=" .. scratch .. " GPULAB_NVDISASM=", [[
    local ok, e = pcall(p.sass, p, "fmachain"); print(e)
  ]])
  if found ~= "" or not out:find("not found") then
    print("not checked: a real nvdisasm is installed here: " .. found)
    return
  end
  T.ok(out:find("prog:sass: the CUDA disassembler nvdisasm was not found; looked at: .*" .. scratch
    .. "/bin/nvdisasm %(CUDA_HOME%)"), out)
  T.ok(out:find("each folder of PATH") and out:find("/usr/local/cuda/bin/nvdisasm")
    and out:find("GPULAB_NVDISASM="), out)
end)

os.execute("rm -rf '" .. scratch .. "'")
T.done()
