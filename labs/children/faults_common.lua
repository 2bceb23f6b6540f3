-- faults_common.lua — shared by the child scripts of labs/illegal_access.lua: compiles
-- kernels/faults.cu once and reports each step on stdout as "STEP name: ok|error ..." so the
-- parent can tell which call reported what.
local M = {}

M.NAMES = { "neighbour_sum<false>", "neighbour_sum<true>" }

function M.module()
  local prog = cuda.compile_file(cuda.home .. "/kernels/faults.cu", { arch = "sm_90a", std = "c++17", names = M.NAMES })
  return cuda.load(prog)
end

-- Runs fn under pcall and prints one STEP line; returns ok and the error text.
function M.step(name, fn)
  local t0 = cuda.now()
  local ok, err = pcall(fn)
  local us = (cuda.now() - t0) * 1e6
  -- one line per step: the parent matches on it
  local text = ok and "ok" or ("error " .. tostring(err):gsub("\n", " | "))
  print(string.format("STEP %s: %s (%.0f us)", name, text, us))
  io.stdout:flush()
  return ok, err
end

-- Spends `ms` on the host without any CUDA call.
function M.host_work(ms)
  local t_end = cuda.now() + ms / 1000
  while cuda.now() < t_end do end
end

return M
