-- test_cache.lua — the compile cache across processes: hits, key sensitivity, races, damaged
-- entries and untrusted directories. Each case runs gpulab children with their own cache dir.
local T = dofile("tests/lua/t.lua")

local gpulab = arg[-1]
if gpulab:find("/", 1, true) and gpulab:sub(1, 1) ~= "/" then gpulab = os.getenv("PWD") .. "/" .. gpulab end
local scratch = os.tmpname()
os.remove(scratch)
assert(os.execute("mkdir -p '" .. scratch .. "'"))

local write = T.write

local read = T.read

local function sh(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  p:close()
  return out
end

local function mode_of(path) return sh("stat -c %a '" .. path .. "'"):match("%d+") end
local function count_lines(text, needle)
  local n = 0
  for line in text:gmatch("[^\n]+") do if line:find(needle, 1, true) then n = n + 1 end end
  return n
end

-- The child compiles SRC (with the options in OPTS, a Lua expression) and prints one line:
--   RESULT hit=<bool> entry=<ok|bad> ptx=<bytes> cubin=<bytes|nil> lowered=<name>
local SRC = [[
#include "knob.h"
template <int N> __global__ void scale(float *x) { x[threadIdx.x] *= N * KNOB; }
extern "C" __global__ void plain(int *o) { *o = KNOB; }
]]
local CHILD = [[
local opts = %s
opts.names = { "scale<3>" }
opts.include_dirs = { os.getenv("TEST_INC") }
local p = cuda.compile(%q, opts)
local ok = p.ptx:find(".entry plain", 1, true) and p.lowered["scale<3>"] == "_Z5scaleILi3EEvPf"
  and (opts.arch == "compute_90" or p.cubin:sub(1, 4) == "\127ELF") and #p:params("scale<3>") == 1
print(string.format("RESULT hit=%%s entry=%%s ptx=%%d cubin=%%s", tostring(p.cache_hit), ok and "ok" or "bad",
  #p.ptx, p.cubin and #p.cubin or "nil"))
]]

local case_no = 0
-- A fresh case: its own cache dir and include dir with knob.h.
local function new_case()
  case_no = case_no + 1
  local c = { dir = scratch .. "/case" .. case_no }
  c.cache = c.dir .. "/cache"
  c.inc = c.dir .. "/inc"
  assert(os.execute("mkdir -p '" .. c.inc .. "'"))
  write(c.inc .. "/knob.h", "#define KNOB 2\n")
  return c
end

local function script_for(c, opts)
  local path = c.dir .. "/child" .. tostring(opts):gsub("%W", "") .. ".lua"
  write(path, string.format(CHILD, opts or "{}", SRC))
  return path
end

-- Runs one child; returns the RESULT fields and the whole output.
local function run(c, opts, env)
  local out = sh(string.format("GPULAB_CACHE_DIR='%s' TEST_INC='%s' %s '%s' '%s'", c.cache, c.inc, env or "",
    gpulab, script_for(c, opts)))
  local hit, entry = out:match("RESULT hit=(%a+) entry=(%a+)")
  T.eq(entry, "ok", "child compiled a correct program: " .. out)
  return hit == "true", out
end

local function entries(dir)
  local list = {}
  for name in sh("ls -A '" .. dir .. "' 2>/dev/null"):gmatch("[^\n]+") do list[#list + 1] = name end
  return list
end

-- The entry file a compile of SRC with `opts` uses, found through cuda.cache_key.
local function entry_path(c, opts)
  local script = c.dir .. "/key.lua"
  write(script, string.format("local o = %s; o.names = {'scale<3>'}; o.include_dirs = {os.getenv('TEST_INC')}; " ..
    "print('KEY=' .. cuda.cache_key(%q, o))", opts or "{}", SRC))
  local out = sh(string.format("TEST_INC='%s' '%s' '%s'", c.inc, gpulab, script))
  local key = out:match("KEY=(%x+)")
  assert(key, out)
  return c.cache .. "/" .. key .. ".entry"
end

T.test("hit across processes; entry where cache_key says", function()
  local c = new_case()
  T.eq(run(c), false, "first run compiles")
  T.eq(run(c), true, "second run hits")
  T.eq(mode_of(c.cache), "700", "cache dir mode")
  local path = entry_path(c)
  T.ok(read(path), "entry at " .. path)
  T.eq(mode_of(path), "600", "entry mode")
  T.eq(#entries(c.cache), 1, "one entry, no temporaries left")
end)

T.test("key sensitivity: header byte, arch suffix, option order, defines, NVRTC version", function()
  local c = new_case()
  T.eq(run(c), false)
  write(c.inc .. "/knob.h", "#define KNOB 3\n") -- one byte
  T.eq(run(c), false, "a changed header byte misses")
  write(c.inc .. "/knob.h", "#define KNOB 2\n")
  T.eq(run(c), true, "the old header hits again")
  T.eq(run(c, '{arch="sm_90"}'), false, "sm_90 is not sm_90a")
  T.eq(run(c, '{arch="sm_90"}'), true)
  T.eq(run(c, '{arch="compute_90"}'), false, "virtual arch has its own entry")
  T.eq(run(c, '{arch="compute_90"}'), true, "virtual arch entry (no cubin) hits")
  T.eq(run(c, '{options={"-DA=1","-DB=2"}}'), false)
  T.eq(run(c, '{options={"-DB=2","-DA=1"}}'), false, "option order is part of the key")
  T.eq(run(c, '{options={"-DA=1","-DB=2"}}'), true)
  T.eq(run(c, '{defines={Q=1}}'), false)
  T.eq(run(c, '{defines={Q=2}}'), false, "a define's value")
  T.eq(run(c, '{lineinfo=true}'), false, "lineinfo")
  T.eq(run(c, '{}', "GPULAB_LINEINFO=1"), true, "GPULAB_LINEINFO=1 is the same compile as lineinfo=true")
  -- the NVRTC version is an input of the key
  local v = cuda.version().nvrtc
  local src = "__global__ void k() {}"
  -- by default the key names the NVRTC library file itself (path with full version, size, mtime),
  -- so a cache hit never has to load NVRTC; it is stable within a process and differs from a bare version
  T.eq(cuda.cache_key(src, { arch = "sm_90a" }), cuda.cache_key(src, { arch = "sm_90a" }))
  T.ok(cuda.cache_key(src, { arch = "sm_90a" }) ~= cuda.cache_key(src, { arch = "sm_90a" }, "0.0"))
  T.ok(cuda.cache_key(src, { arch = "sm_90a" }, "99.9") ~= cuda.cache_key(src, { arch = "sm_90a" }, v),
    "another NVRTC version gives another key")
  T.ok(cuda.cache_key(src, { arch = "sm_90a", names = { "k" } }) ~= cuda.cache_key(src, { arch = "sm_90a" }),
    "name expressions are keyed")
  T.ok(cuda.cache_key(src, { headers = { ["a.h"] = "1" } }) == cuda.cache_key(src, { headers = { ["a.h"] = "2" } }),
    "an in-memory header nobody includes does not matter")
  local inc = '#include "a.h"\n' .. src
  T.ok(cuda.cache_key(inc, { headers = { ["a.h"] = "1" } }) ~= cuda.cache_key(inc, { headers = { ["a.h"] = "2" } }),
    "an included in-memory header does")
  T.eq(#cuda.cache_key(src), 64)
  T.raises(function() cuda.cache_key(src, nil, 13) end, "bad argument #3 to 'cuda.cache_key'")
end)

T.test("headers beside the program's name and in the working directory are keyed", function()
  local c = new_case()
  write(c.inc .. "/near.h", "#define NEAR 1\n")
  local src = '#include "near.h"\nstatic_assert(NEAR > 0, "near");\n'
  local named = { name = c.inc .. "/virtual.cu" }
  local k1 = cuda.cache_key(src, named)
  T.ok(cuda.compile(src, { name = c.inc .. "/virtual.cu", cache = false }), "NVRTC finds near.h beside the name")
  write(c.inc .. "/near.h", "#define NEAR 2\n")
  T.ok(cuda.cache_key(src, named) ~= k1, "a header beside the name is keyed")
  local out = sh(string.format("cd '%s' && '%s' -e \"print('KEY=' .. cuda.cache_key('#include \\\"near.h\\\"'))\"" ..
    " && echo '#define NEAR 3' > near.h && '%s' -e \"print('KEY=' .. cuda.cache_key('#include \\\"near.h\\\"'))\"",
    c.inc, gpulab, gpulab))
  local a, b = out:match("KEY=(%x+)%s+KEY=(%x+)")
  T.ok(a and b and a ~= b, "a header in the working directory is keyed: " .. out)
end)

T.test("the name, pre-included headers, every -I spelling and split directives are keyed", function()
  local c = new_case()
  local src = "__global__ void k() {}"
  T.ok(cuda.cache_key(src, { name = "a.cu" }) ~= cuda.cache_key(src, { name = "b.cu" }),
    "the name (__FILE__ and line info carry it)")
  write(c.inc .. "/pre.h", "#define PRE 1\n")
  local function key_with(options) return (cuda.cache_key(src, { options = options })) end
  local pre_forms = { { "--pre-include=" .. c.inc .. "/pre.h" }, { "--pre-include", c.inc .. "/pre.h" },
                      { "-include", c.inc .. "/pre.h" }, { "-include=" .. c.inc .. "/pre.h" } }
  local dir_forms = { { "-I" .. c.inc }, { "-I", c.inc }, { "-I=" .. c.inc }, { "--include-path=" .. c.inc },
                      { "--include-path", c.inc } }
  local before = {}
  for i, o in ipairs(pre_forms) do before[i] = key_with(o) end
  local inc_src = '#include "pre.h"\n' .. src
  local dir_before = {}
  for i, o in ipairs(dir_forms) do dir_before[i] = cuda.cache_key(inc_src, { options = o }) end
  write(c.inc .. "/pre.h", "#define PRE 2\n")
  for i, o in ipairs(pre_forms) do T.ok(key_with(o) ~= before[i], "pre-included by " .. table.concat(o, " ")) end
  for i, o in ipairs(dir_forms) do
    T.ok(cuda.cache_key(inc_src, { options = o }) ~= dir_before[i], "a header found through " .. table.concat(o, " "))
  end
  -- a directive split across lines is followed; a header named by a macro cannot be, and such a
  -- compile does not use the cache at all
  local split = '#include \\\n"pre.h"\n' .. src
  local k1, covered = cuda.cache_key(split, { include_dirs = { c.inc } })
  T.eq(covered, true)
  write(c.inc .. "/pre.h", "#define PRE 3\n")
  T.ok(cuda.cache_key(split, { include_dirs = { c.inc } }) ~= k1, "a directive continued on the next line")
  local by_macro = '#define H "pre.h"\n#include H\n' .. src
  T.eq(select(2, cuda.cache_key(by_macro, { include_dirs = { c.inc } })), false)
  local opts = { include_dirs = { c.inc } }
  T.eq(cuda.compile(by_macro, opts).cache_hit, false)
  T.eq(cuda.compile(by_macro, opts).cache_hit, false, "an include by macro is never served from the cache")
  cuda.compile(split, opts)
  T.eq(cuda.compile(split, opts).cache_hit, true, "while the same compile without one is")
end)

T.test("in-process hits, cache=false and GPULAB_CACHE=0", function()
  local c = new_case()
  local out = sh(string.format("GPULAB_CACHE_DIR='%s' '%s' -e \"local a = cuda.compile('__global__ void k(){}'); " ..
    "local b = cuda.compile('__global__ void k(){}'); " ..
    "local n = cuda.compile('__global__ void k(){}', {cache=false}); " ..
    "print('HITS', a.cache_hit, b.cache_hit, n.cache_hit, a.ptx == b.ptx, a.cubin == b.cubin)\"", c.cache, gpulab))
  T.ok(out:find("HITS\tfalse\ttrue\tfalse\ttrue\ttrue", 1, true), out)
  T.eq(#entries(c.cache), 1, "cache=false writes nothing")
  local off = c.dir .. "/off"
  out = sh(string.format("GPULAB_CACHE=0 GPULAB_CACHE_DIR='%s' '%s' -e \"for i = 1, 2 do " ..
    "io.write(tostring(cuda.compile('__global__ void k(){}').cache_hit), ' ') end\"", off, gpulab))
  T.eq(out, "false false ", "GPULAB_CACHE=0: " .. out)
  T.eq(read(off), nil, "GPULAB_CACHE=0 creates no directory")
end)

T.test("8 processes racing on one new key all get a correct program", function()
  local c = new_case()
  local script = script_for(c)
  local cmd = string.format("cd '%s' && for i in 1 2 3 4 5 6 7 8; do " ..
    "GPULAB_CACHE_DIR='%s' TEST_INC='%s' '%s' '%s' > out.$i 2>&1 & done; wait; cat out.*",
    c.dir, c.cache, c.inc, gpulab, script)
  local out = sh(cmd)
  T.eq(count_lines(out, "entry=ok"), 8, "eight correct programs: " .. out)
  T.eq(count_lines(out, "RESULT"), 8, out)
  T.eq(#entries(c.cache), 1, "one entry and no temporaries: " .. table.concat(entries(c.cache), " "))
  T.eq(run(c), true, "the raced entry is whole and hits")
end)

T.test("truncated and bit-flipped entries are misses and get rewritten", function()
  local c = new_case()
  run(c)
  local path = entry_path(c)
  local good = read(path)
  T.ok(good and #good > 1000, "entry written")
  for _, damage in ipairs({
    good:sub(1, #good // 2),                                     -- truncated
    good:sub(1, #good - 1),                                      -- one byte short
    "",                                                          -- empty
    good:sub(1, 200) .. string.char(good:byte(201) ~ 0x10) .. good:sub(202), -- one bit flipped
    good:sub(1, -2) .. string.char(good:byte(-1) ~ 1),           -- checksum bit flipped
    good .. "x",                                                 -- trailing garbage
  }) do
    write(path, damage)
    T.eq(run(c), false, "damaged entry is a miss")
    T.eq(read(path), good, "entry rewritten whole")
    T.eq(run(c), true, "and hits again")
  end
  -- an unreadable entry (mode 000) is a miss and gets replaced, unless we are root
  os.execute("chmod 000 '" .. path .. "'")
  T.eq(run(c), sh("id -u"):match("^0") ~= nil, "unreadable entry")
  T.eq(run(c), true)
end)

T.test("a planted symlink entry is not used (one warning, uncached)", function()
  local c = new_case()
  run(c)
  local path = entry_path(c)
  local target = c.dir .. "/elsewhere.entry"
  os.rename(path, target)
  local before = read(target)
  assert(os.execute("ln -s '" .. target .. "' '" .. path .. "'"))
  local script = c.dir .. "/twice.lua"
  write(script, string.format("for i = 1, 2 do local p = cuda.compile(%q, {names={'scale<3>'}, " ..
    "include_dirs={os.getenv('TEST_INC')}}); print('HIT', p.cache_hit, #p.ptx > 0) end", SRC))
  local out = sh(string.format("GPULAB_CACHE_DIR='%s' TEST_INC='%s' '%s' '%s'", c.cache, c.inc, gpulab, script))
  T.eq(count_lines(out, "HIT\tfalse\ttrue"), 2, "compiled uncached twice: " .. out)
  T.eq(count_lines(out, "warning"), 1, "one warning: " .. out)
  T.ok(out:find("symlink", 1, true), "the warning says why: " .. out)
  T.eq(sh("test -L '" .. path .. "' && echo LINK"), "LINK\n", "the symlink was left alone")
  T.eq(read(target), before, "the symlink's target was not written")
end)

T.test("a group-writable entry is not used", function()
  local c = new_case()
  run(c)
  local path = entry_path(c)
  os.execute("chmod 666 '" .. path .. "'")
  local hit, out = run(c)
  T.eq(hit, false)
  T.ok(out:find("writable by group or others", 1, true), out)
end)

T.test("a directory or entry owned by another user is not used", function()
  if not sh("id -u"):match("^0\n") then
    print("(ownership cases need root to chown; covered by the mode and symlink cases here)")
    return
  end
  local c = new_case()
  run(c)
  local path = entry_path(c)
  assert(os.execute("chown 65534 '" .. path .. "'"))
  local hit, out = run(c)
  T.eq(hit, false, "foreign entry unused")
  T.ok(out:find("is owned by uid 65534", 1, true), out)
  assert(os.execute("chown 0 '" .. path .. "' && chown 65534 '" .. c.cache .. "'"))
  hit, out = run(c)
  T.eq(hit, false, "foreign directory unused")
  T.ok(out:find("directory " .. c.cache .. " is owned by uid 65534", 1, true), out)
end)

T.test("untrusted cache directories: 0777, symlink, not a directory", function()
  local c = new_case()
  assert(os.execute("mkdir -p '" .. c.cache .. "' && chmod 777 '" .. c.cache .. "'"))
  local hit, out = run(c)
  T.eq(hit, false)
  T.eq(count_lines(out, "warning"), 1, out)
  T.ok(out:find("mode 0777", 1, true), out)
  T.eq(run(c), false, "still uncached")
  T.eq(#entries(c.cache), 0, "nothing written into a 0777 directory")

  local d = new_case()
  local real = d.dir .. "/real"
  assert(os.execute("mkdir -m 700 '" .. real .. "' && ln -s '" .. real .. "' '" .. d.cache .. "'"))
  hit, out = run(d)
  T.eq(hit, false)
  T.ok(out:find("is a symlink", 1, true), out)
  T.eq(#entries(real), 0, "nothing written through a symlinked directory")

  local e = new_case()
  write(e.cache, "a file")
  hit, out = run(e)
  T.eq(hit, false)
  T.ok(out:find("warning", 1, true), out)
end)

T.test("directory choice: GPULAB_CACHE_DIR, XDG_CACHE_HOME, HOME; created 0700", function()
  local c = new_case()
  local deep = c.dir .. "/a/b/c"
  local function probe(env)
    return sh(string.format("env -u GPULAB_CACHE_DIR -u XDG_CACHE_HOME %s '%s' -e " ..
      "\"print('HIT', cuda.compile('__global__ void k(){}').cache_hit)\"", env, gpulab))
  end
  T.ok(probe("GPULAB_CACHE_DIR='" .. deep .. "'"):find("HIT\tfalse", 1, true))
  T.eq(#entries(deep), 1, "entry in GPULAB_CACHE_DIR")
  T.eq(mode_of(deep), "700", "created 0700")
  T.ok(probe("GPULAB_CACHE_DIR='" .. deep .. "'"):find("HIT\ttrue", 1, true))
  probe("XDG_CACHE_HOME='" .. c.dir .. "/xdg'")
  T.eq(#entries(c.dir .. "/xdg/gpulab"), 1, "entry under $XDG_CACHE_HOME/gpulab")
  probe("HOME='" .. c.dir .. "/home'")
  T.eq(#entries(c.dir .. "/home/.cache/gpulab"), 1, "entry under ~/.cache/gpulab")
end)

os.execute("rm -rf '" .. scratch .. "'")
T.done()
