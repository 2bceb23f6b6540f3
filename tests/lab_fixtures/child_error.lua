-- Child for cuda.run_isolated tests: raises a Lua error (gpulab exits 1 with a traceback).
error("deliberate failure in the child")
