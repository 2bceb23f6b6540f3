-- Run under --sanitize by the tests: shows what it was given (arguments, -e state, environment).
print("child args: " .. table.concat(arg, " "))
print("x=" .. tostring(rawget(_G, "x"))) -- set by gpulab -e before the script
print("GPULAB_LINEINFO=" .. tostring(os.getenv("GPULAB_LINEINFO")))
print("GPULAB_SANITIZER=" .. tostring(os.getenv("GPULAB_SANITIZER")))
print("GPULAB_CACHE_DIR=" .. tostring(os.getenv("GPULAB_CACHE_DIR")))
os.exit(math.tointeger(tonumber(os.getenv("SANITIZE_CHILD_EXIT") or "0")))
