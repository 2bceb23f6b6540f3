-- test_deadlines.lua — every registered test has a ctest TIMEOUT and runs under tests/deadline.sh
-- with its own deadline at least 10 s + 10% below it (gl_deadline), so a test that runs too long is
-- interrupted and says where it was instead of being killed by ctest without a word.
-- GL_BUILD_DIR names the build folder (ctest --show-only=json-v1 lists its tests).
local T = dofile("tests/lua/t.lua")
local json = require("gpulab.json")

local build = assert(os.getenv("GL_BUILD_DIR"), "GL_BUILD_DIR not set")
local p = assert(io.popen("ctest --test-dir '" .. build .. "' --show-only=json-v1 2>/dev/null"))
local listing = p:read("a")
p:close()
local tests = json.decode(listing).tests

T.test("the listing has tests", function() T.ok(#tests > 10, #tests .. " tests listed") end)

for _, t in ipairs(tests) do
  T.test(t.name .. ": own deadline below ctest's TIMEOUT", function()
    local timeout
    for _, prop in ipairs(t.properties or {}) do
      if prop.name == "TIMEOUT" then timeout = prop.value end
    end
    T.ok(timeout, "a TIMEOUT is set")
    local cmd = t.command or {}
    local at
    for i, word in ipairs(cmd) do
      if word:match("/tests/deadline%.sh$") then at = i break end
    end
    T.ok(at and at <= 2, "runs under tests/deadline.sh: " .. table.concat(cmd, " "))
    local own = tonumber(cmd[at + 1])
    T.ok(own and own + 10 + timeout / 10 <= timeout, string.format("deadline %s s, kill 10 s later, TIMEOUT %s s",
      tostring(cmd[at + 1]), timeout))
  end)
end

T.done()
