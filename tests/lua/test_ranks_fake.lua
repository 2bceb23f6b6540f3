-- gpulab.ranks: rank, size and local rank from each launcher's variables, and the unique id
-- handed from rank 0 to the others through a file, with processes started at once the way
-- mpirun or srun start them (cuda.run_isolated's list form, the driver and NCCL stand-ins; the
-- stand-in's multi-process ranks do not combine data, so this checks the plumbing only).
local T = dofile("tests/lua/t.lua")
local ranks = require("gpulab.ranks")

local function env_of(t) return function(k) return t[k] end end

T.test("each launcher's variables", function()
  local me = ranks.from_env(env_of { SLURM_PROCID = "3", SLURM_NTASKS = "8", SLURM_LOCALID = "1" })
  T.eq(me.rank, 3); T.eq(me.nranks, 8); T.eq(me.local_rank, 1); T.eq(me.launcher, "slurm")
  me = ranks.from_env(env_of {
    OMPI_COMM_WORLD_RANK = "5", OMPI_COMM_WORLD_SIZE = "16", OMPI_COMM_WORLD_LOCAL_RANK = "5" })
  T.eq(me.launcher, "openmpi"); T.eq(me.rank, 5); T.eq(me.nranks, 16)
  me = ranks.from_env(env_of { GPULAB_RANK = "0", GPULAB_NRANKS = "2" })
  T.eq(me.local_rank, 0, "local rank defaults to the rank")
  me = ranks.from_env(env_of { PMI_RANK = "1", PMI_SIZE = "2" })
  T.eq(me.launcher, "pmi")
  T.raises(function() ranks.from_env(env_of {}) end, "gpulab.ranks: no rank in the environment")
  T.raises(function() ranks.from_env(env_of { SLURM_PROCID = "4", SLURM_NTASKS = "4" }) end,
    "SLURM_PROCID=4 is not below SLURM_NTASKS=4")
  T.raises(function() ranks.from_env(env_of { SLURM_PROCID = "x", SLURM_NTASKS = "4" }) end,
    "SLURM_PROCID=x is not a non-negative integer")
end)

T.test("share_id refuses a timeout or poll interval that never ends", function()
  local me = { rank = 1, nranks = 2 }
  for _, t in ipairs({ 0 / 0, math.huge, -1, "10" }) do
    T.raises(function() ranks.share_id("/nonexistent/id", me, { timeout = t }) end,
      "gpulab.ranks.share_id: timeout must be a finite number of seconds >= 0, got " .. tostring(t))
  end
  for _, p in ipairs({ 0 / 0, 0, -1, math.huge }) do
    T.raises(function() ranks.share_id("/nonexistent/id", me, { timeout = 1, poll = p }) end,
      "gpulab.ranks.share_id: poll must be a finite number of seconds > 0")
  end
end)

T.test("a rank waiting for an id nobody writes gives up at its deadline", function()
  local path = os.tmpname()
  os.remove(path)
  T.raises(function() ranks.share_id(path, { rank = 1, nranks = 2 }, { timeout = 0.3 }) end,
    "gpulab.ranks.share_id: rank 1 waited 0.3 s for rank 0's id in " .. path)
end)

for _, launcher in ipairs { "slurm", "openmpi" } do
  T.test("three ranks started at once under " .. launcher .. " share rank 0's id through a file", function()
    local path = os.tmpname()
    os.remove(path)
    local entries = {}
    for r = 0, 2 do
      local env = launcher == "slurm" and { SLURM_PROCID = r, SLURM_NTASKS = 3, SLURM_LOCALID = r }
        or { OMPI_COMM_WORLD_RANK = r, OMPI_COMM_WORLD_SIZE = 3, OMPI_COMM_WORLD_LOCAL_RANK = r }
      entries[#entries + 1] = { "tests/lab_fixtures/rank_child.lua", { args = { path }, env = env, timeout = 60 } }
    end
    local res = cuda.run_isolated(entries)
    local ids = {}
    for r = 0, 2 do
      T.eq(res[r + 1].status, "ok", res[r + 1].stderr)
      local id = res[r + 1].stdout:match(launcher .. " rank " .. r .. " of 3 on device " .. r .. " id (%x+)")
      T.ok(id, res[r + 1].stdout)
      ids[#ids + 1] = id
    end
    T.eq(ids[2], ids[1]); T.eq(ids[3], ids[1])
    os.remove(path)
  end)
end

T.done()
