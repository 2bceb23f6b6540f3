-- tools/include_check.lua on a small made-up tree: each rule it enforces reports its violation
-- (a binding including a host header, a host file including an internal binding header, C under
-- lua/, an impure dtype.h, userdata made without identity.h, an unused and a missing include, an
-- unused system header).
local T = dofile("tests/lua/t.lua")

local BIN = assert(os.getenv("GPULAB_BIN"), "run with GPULAB_BIN set")
local root = os.tmpname()
os.remove(root)
assert(os.execute("mkdir -p " .. root .. "/bindings " .. root .. "/host " .. root .. "/lua"))

local files = {
  ["bindings/identity.h"] = "#define lua_newuserdatauv gl_newuserdatauv\nvoid *gl_newuserdatauv(int n);\n",
  ["bindings/gpulab.h"] = "int luaopen_cuda(void *L);\n",
  ["bindings/cache.h"] = "int gl_cache_thing(void);\n",
  ["bindings/ptx.h"] = "int gl_ptx_thing(void);\n",
  ["bindings/dtype.h"] = "#include <lua.h>\nint gl_dtype_size(int t);\n",
  ["bindings/used.h"] = "int gl_used(void);\n",
  ["bindings/unused.h"] = "int gl_unused(void);\n",
  ["bindings/a.c"] = '#include "host.h"\n#include "unused.h"\n#include <math.h>\n'
                     .. "int f(void) { return gl_used() + gl_host_thing(); }\n"
                     .. "void *g(void) { return lua_newuserdatauv(1); }\n",
  ["host/host.h"] = "int gl_host_thing(void);\n",
  ["host/b.c"] = '#include "host.h"\n#include "used.h"\nint h(void) { return gl_used() + gl_host_thing(); }\n',
  ["lua/bad.c"] = "int x;\n",
}
for path, text in pairs(files) do T.write(root .. "/" .. path, text) end

local p = io.popen(string.format("%s tools/include_check.lua %s 2>&1", BIN, root))
local out = p:read("a")
local ok = p:close()

T.test("include_check reports every rule's violation", function()
  T.ok(not ok, "it fails")
  for _, want in ipairs({
    "layers: bindings/a.c includes host header host/host.h",
    "layers: host/b.c includes bindings/used.h; the host sees the bindings only through gpulab.h",
    "layers: lua/bad.c in lua/ is not a Lua file",
    "pure: bindings/dtype.h reaches lua.h via bindings/dtype.h",
    "identity: bindings/a.c calls lua_newuserdatauv; use identity.h's tag-checking gl_ call instead",
    "unused: bindings/a.c includes \"unused.h\" but uses nothing it declares",
    "missing: bindings/a.c uses gl_used from used.h without including it",
    "unused: bindings/a.c includes <math.h> but uses nothing it declares",
  }) do
    T.ok(out:find(want, 1, true), "reports: " .. want .. "\n" .. out)
  end
end)

T.test("the real tree passes", function()
  local q = io.popen(string.format("%s tools/include_check.lua . 2>&1", BIN))
  local real = q:read("a")
  T.ok(q:close(), real)
end)

os.execute("rm -rf " .. root)
T.done()
