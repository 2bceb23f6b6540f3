-- A rank started the way a launcher starts one (test_ranks_fake.lua sets Slurm's or Open MPI's
-- variables): reads who it is, takes the id through the shared file, joins, all-reduces, prints.
local ranks = require("gpulab.ranks")
local me = ranks.from_env()
local id = ranks.share_id(arg[1], me, { timeout = 30 })
local comm = cuda.nccl.init { rank = me.rank, nranks = me.nranks, id = id, device = me.local_rank, timeout = 30 }
local d = cuda.array("f32", 16)
d:fill(me.rank + 1)
comm:all_reduce(d, nil, { timeout = 30 })
print(string.format("%s rank %d of %d on device %d id %s", me.launcher, comm.rank, comm.nranks, cuda.device().ordinal,
  id:sub(1, 16)))
comm:free()
