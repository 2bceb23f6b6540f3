-- Child for cuda.run_isolated tests: says it started, then never ends. With arg[1] == "ignore"
-- it also starts a shell that ignores SIGTERM, so only the SIGKILL after the grace period ends it.
io.stdout:write("started\n")
io.stdout:flush()
if arg[1] == "ignore" then
  os.execute("trap '' TERM; while :; do sleep 0.05; done")
end
while true do end
