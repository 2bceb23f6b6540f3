-- Child for cuda.run_isolated tests: prints its arguments and an environment variable, then
-- exits with the status given as the first argument.
io.stdout:write("args:", table.concat(arg, "|"), "\n")
io.stderr:write("env:", tostring(os.getenv("GPULAB_ISOLATE_TEST")), "\n")
io.stdout:write("unset:", tostring(os.getenv("GPULAB_ISOLATE_UNSET")), "\n")
os.exit(math.tointeger(tonumber(arg[1])) or 0)
