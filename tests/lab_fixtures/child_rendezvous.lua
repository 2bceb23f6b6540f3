-- Child of tests/lua/test_run_isolated_many.lua: writes its own file, then waits (up to 20 s)
-- for its partner's; it can only succeed when both children run at the same time.
local mine, theirs = arg[1], arg[2]
assert(io.open(mine, "w")):close()
for _ = 1, 2000 do
  local f = io.open(theirs)
  if f then
    f:close()
    print("met " .. theirs)
    os.exit(0)
  end
  os.execute("sleep 0.01")
end
print("partner never came")
os.exit(3)
