-- A child of cuda.run_isolated that ends at once but leaves a background process holding its
-- output pipes (run by tests/lua/test_isolate.lua).
os.execute("sleep 3 &")
print("child done")
os.exit(0)
