-- The pattern every lab follows: compile first, then stop measuring when lab:gpu() is false.
-- Past that point it allocates on the device, which raises without one.
local harness = require("gpulab.lab")
local lab = harness.new{ name = "nogpu_lab", title = "No-GPU path", claims = "a test fixture" }
lab:section("Kernels")
local prog = cuda.compile('extern "C" __global__ void k(int *p) { p[threadIdx.x] = 1; }',
  { name = "nogpu.cu", arch = "compute_90" })
lab:note("compiled " .. #prog.ptx .. " bytes of PTX")
if not lab:gpu() then os.exit(lab:finish()) end
lab:section("Measurement")
local d = cuda.array("i32", 32)
local k = cuda.load(prog):kernel("k")
k:launch({ grid = 1, block = 32 }, d)
cuda.sync()
lab:verdict("the kernel ran", "", true)
d:free()
os.exit(lab:finish())
