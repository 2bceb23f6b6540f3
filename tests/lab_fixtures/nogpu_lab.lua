-- The pattern every lab follows: compile first, then stop measuring when L:gpu() is false.
-- Past that point it allocates on the device, which raises without one.
local lab = require("gpulab.lab")
local L = lab.new{ name = "nogpu_lab", title = "No-GPU path", claims = "a test fixture" }
L:section("Kernels")
local prog = cuda.compile('extern "C" __global__ void k(int *p) { p[threadIdx.x] = 1; }',
  { name = "nogpu.cu", arch = "compute_90" })
L:note("compiled " .. #prog.ptx .. " bytes of PTX")
if not L:gpu() then os.exit(L:finish()) end
L:section("Measurement")
local d = cuda.array("i32", 32)
local k = cuda.load(prog):kernel("k")
k:launch({ grid = 1, block = 32 }, d)
cuda.sync()
L:verdict("the kernel ran", "", true)
d:free()
os.exit(L:finish())
