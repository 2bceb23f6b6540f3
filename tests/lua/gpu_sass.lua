-- gpu_sass.lua — prog:sass on the real disassembler (the H200 machine's CUDA toolkit has nvdisasm):
-- offsets increase, the expected opcodes are there, and source lines map to the kernel's lines.
local T = dofile("tests/lua/t.lua")
T.require_gpu()

local SRC = [[
extern "C" __global__ void chain(const float *in, float *out, float a, float b, int n) {
    float x = in[blockIdx.x * blockDim.x + threadIdx.x];
    for (int i = 0; i < n; i++) x = fmaf(x, a, b);
    __shared__ float tile[256];
    tile[threadIdx.x] = x;
    __syncthreads();
    float y = tile[255 - threadIdx.x];
    y += __shfl_xor_sync(0xffffffffu, y, 1);
    out[blockIdx.x * blockDim.x + threadIdx.x] = y;
}
]]

T.test("sass: real nvdisasm output of a known kernel", function()
  local p = cuda.compile(SRC, { name = "chain.cu" })
  local s = p:sass("chain")
  print(s)
  T.ok(#s > 10, "instructions: " .. #s)
  for i = 2, #s do T.ok(s[i].offset > s[i - 1].offset, "offsets increase at " .. i) end
  local c = s:count { "LDG", "FFMA", "BAR", "LDS", "STS", "SHFL", "STG", "EXIT" }
  for _, op in ipairs { "LDG", "FFMA", "BAR", "LDS", "STS", "SHFL", "STG", "EXIT" } do
    T.ok(c[op] >= 1, op .. " present: " .. tostring(c[op]))
  end
  local function line_of(op)
    for _, e in ipairs(s) do
      if e.opcode == op or e.opcode:sub(1, #op + 1) == op .. "." then return e.line, e.file end
    end
  end
  local l, f = line_of("LDG")
  T.eq(l, 2, "the load of in[] is on line 2")
  T.ok(f and f:find("chain.cu$"), tostring(f))
  T.eq(line_of("FFMA"), 3)
  T.eq(line_of("BAR"), 6)
  T.eq(line_of("SHFL"), 8)
  T.eq(line_of("STG"), 9)
  local r = p:resources("chain")
  T.eq(r.smem, 1024)
  local k = cuda.load(p):kernel("chain")
  T.eq(r.regs, k.regs, "registers agree with the driver's")
  T.eq(r.local_bytes, k.local_bytes, "stack frame agrees with the driver's local size")
end)

T.done()
