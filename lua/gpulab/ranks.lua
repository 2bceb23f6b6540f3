-- gpulab.ranks — the multi-process form of cuda.nccl across processes and machines: who am I
-- (rank, number of ranks, rank on this machine) from the launcher's environment, and the NCCL
-- unique id handed from rank 0 to the others through a file every rank can read (a shared
-- folder across machines).
--
--   local ranks = require("gpulab.ranks")
--   local me = ranks.from_env()                      -- {rank=, nranks=, local_rank=, launcher=}
--   local id = ranks.share_id("/shared/run42.id", me, {timeout = 120})
--   local comm = cuda.nccl.init{rank = me.rank, nranks = me.nranks, id = id, device = me.local_rank}
--
-- Launchers read: Open MPI (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK), Slurm (SLURM_PROCID,
-- SLURM_NTASKS, SLURM_LOCALID), PMI (PMI_RANK, PMI_SIZE; MPICH, Intel MPI) and gpulab's own
-- GPULAB_RANK, GPULAB_NRANKS, GPULAB_LOCAL_RANK (set them by hand or from a shell loop).
local ranks = {}

local LAUNCHERS = {
  { "gpulab", "GPULAB_RANK", "GPULAB_NRANKS", "GPULAB_LOCAL_RANK" },
  { "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK" },
  { "slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID" },
  { "pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID" },
}

local function int_env(name, getenv)
  local v = getenv(name)
  if v == nil or v == "" then return nil end
  local n = math.tointeger(tonumber(v))
  if n == nil or n < 0 then error(string.format("gpulab.ranks: %s=%s is not a non-negative integer", name, v), 3) end
  return n
end

-- ranks.from_env([getenv]) --> {rank=, nranks=, local_rank=, launcher=}; raises when no launcher's
-- variables are set or they disagree with themselves (rank >= nranks). local_rank defaults to rank.
function ranks.from_env(getenv)
  getenv = getenv or os.getenv
  for _, l in ipairs(LAUNCHERS) do
    local rank, nranks = int_env(l[2], getenv), int_env(l[3], getenv)
    if rank and nranks then
      if rank >= nranks then
        error(string.format("gpulab.ranks: %s=%d is not below %s=%d", l[2], rank, l[3], nranks), 2)
      end
      return { rank = rank, nranks = nranks, local_rank = int_env(l[4], getenv) or rank, launcher = l[1] }
    end
  end
  error("gpulab.ranks: no rank in the environment (set GPULAB_RANK and GPULAB_NRANKS, or start under " ..
    "mpirun or srun)", 2)
end

local function sleep(s) os.execute(string.format("sleep %.3f", s)) end

local function now()
  if type(cuda) == "table" and cuda.now then return cuda.now() end
  return os.time()
end

-- ranks.share_id(path, me, {timeout=60, poll=0.05}) --> the hex id. Rank 0 makes it
-- (cuda.nccl.unique_id) and writes it to path.tmp, then renames it to path (others never read a
-- half-written file); every other rank waits for path until the deadline, then raises.
function ranks.share_id(path, me, opts)
  if type(path) ~= "string" or path == "" then error("gpulab.ranks.share_id: argument 1 must be a file path", 2) end
  if type(me) ~= "table" or math.type(me.rank) ~= "integer" then
    error("gpulab.ranks.share_id: argument 2 must be ranks.from_env()'s table", 2)
  end
  opts = opts or {}
  local timeout, poll = opts.timeout or 60, opts.poll or 0.05
  -- a NaN deadline is never reached and an infinite one never ends: refuse both
  if type(timeout) ~= "number" or timeout ~= timeout or timeout < 0 or timeout == math.huge then
    error(string.format("gpulab.ranks.share_id: timeout must be a finite number of seconds >= 0, got %s",
      tostring(timeout)), 2)
  end
  if type(poll) ~= "number" or poll ~= poll or poll <= 0 or poll == math.huge then
    error(string.format("gpulab.ranks.share_id: poll must be a finite number of seconds > 0, got %s",
      tostring(poll)), 2)
  end
  if me.rank == 0 then
    local id = cuda.nccl.unique_id()
    local tmp = path .. ".tmp"
    local f = assert(io.open(tmp, "w"))
    f:write(id, "\n")
    f:close()
    assert(os.rename(tmp, path))
    return id
  end
  local deadline = now() + timeout
  repeat
    local f = io.open(path, "r")
    if f then
      local id = f:read("l")
      f:close()
      if id and #id == 256 then return id end
    end
    sleep(poll)
  until now() >= deadline
  error(string.format("gpulab.ranks.share_id: rank %d waited %g s for rank 0's id in %s", me.rank, timeout, path), 2)
end

return ranks
