-- Child for cuda.run_isolated tests: leaves a background process holding its output pipes,
-- records that process's pid in arg[1], and exits 0 at once.
os.execute("sleep 30 & echo $! > " .. arg[1])
io.stdout:write("parent done\n")
