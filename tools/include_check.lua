-- include_check.lua [ROOT] — checks the layering and the includes of bindings/ and host/.
-- Run with lua5.4 or gpulab (tests/layers.cmake does). Exit 0 when every rule holds; otherwise
-- one line per violation on stderr and exit 1.
--
--   layers     bindings/ never includes a host/ header; host/ sees the bindings only through
--              gpulab.h (and identity.h, for the userdata it makes, and errors.h); lua/ holds no C.
--   pure       dtype.h, cache.h and ptx.h reach neither Lua nor CUDA headers, directly or through
--              the headers they include.
--   identity   no file but identity.c calls Lua's own userdata calls (lua_newuserdatauv,
--              luaL_checkudata, ...): bindings and host use identity.h's tag-checking gl_ ones.
--   raw        no binding but identity.c reads a table through metamethods (lua_getfield,
--              lua_gettable, lua_geti): options.h's gl_rawgetfield reads raw, so a script's
--              __index never runs inside a binding that holds an object it could free.
--   unused     every "quoted" include declares something the file uses.
--   missing    every gpulab name a file uses is declared in the file or a header it includes
--              directly (no file relies on what another header happens to include).
--   unused <>  a common C or library header (string.h, stdio.h, lua.h, cuda.h, ...) is included
--              only where one of the names it declares is used (the names are listed below).
--
-- Names are read from headers by a few patterns (prototypes, macros, typedefs, struct tags,
-- enum constants, externs), which is enough for gpulab's one-declaration-per-line style; a name
-- declared by two headers is itself a violation.
local root = arg[1] or "."

local problems = {}
local function problem(fmt, ...) problems[#problems + 1] = string.format(fmt, ...) end

local function list(pattern)
  local files = {}
  local p = assert(io.popen("cd '" .. root .. "' && ls " .. pattern .. " 2>/dev/null"))
  for line in p:lines() do files[#files + 1] = line end
  p:close()
  table.sort(files)
  return files
end

local function read(path)
  local f = assert(io.open(root .. "/" .. path, "rb"))
  local text = f:read("a")
  f:close()
  return text
end

local function basename(path) return (path:match("[^/]+$")) end
local function layer(path) return (path:match("^[^/]+")) end

-- Comments and string/char literals removed; line structure kept.
local function code_only(text)
  text = text:gsub("/%*.-%*/", function(c) return (c:gsub("[^\n]", " ")) end)
  text = text:gsub("//[^\n]*", "")
  text = text:gsub('"[^"\n]*"', '""')
  text = text:gsub("'[^'\n]*'", "''")
  return text
end

local function includes(text)
  local quoted, system = {}, {}
  for line in text:gmatch("[^\n]+") do
    local q = line:match('^%s*#%s*include%s*"([^"]+)"')
    if q then quoted[#quoted + 1] = q end
    local s = line:match("^%s*#%s*include%s*<([^>]+)>")
    if s then system[#system + 1] = s end
  end
  return quoted, system
end

local keywords = {}
for k in ("void char short int long float double signed unsigned bool const static inline extern "
          .. "struct enum union typedef return sizeof"):gmatch("%S+") do keywords[k] = true end

-- The names a header declares.
local function declared_names(code)
  local names, in_enum = {}, false
  local function add(n) if n and not n:match("^GPULAB_.*_H$") and not keywords[n] then names[n] = true end end
  for line in code:gmatch("[^\n]*") do
    if in_enum then
      for n in line:gmatch("GL_[%w_]+") do add(n) end
      if line:match("}") then in_enum = false end
    elseif line:match("^%s*typedef%s+enum") then
      for n in (line:match("{(.*)") or ""):gmatch("GL_[%w_]+") do add(n) end
      in_enum = not line:match("}")
    end
    add(line:match("^%s*#%s*define%s+([%a_][%w_]*)"))
    if not line:match("^[%s#]") then
      add(line:match("^[%w_][%w_%s%*%(%)]-[%s%*]([%a_][%w_]*)%s*%(") ) -- prototype / inline
      add(line:match("%(%s*%*%s*([%a_][%w_]*)%s*%)%s*%("))            -- function pointer typedef
      add(line:match("^extern%s.-([%a_][%w_]*)%s*;"))
      if not line:find("(", 1, true) then add(line:match("^typedef%s.-([%a_][%w_]*)%s*;")) end
      add(line:match("^}%s*([%a_][%w_]*)%s*;"))
      add(line:match("^typedef%s+struct%s+([%a_][%w_]*)"))
      add(line:match("^struct%s+([%a_][%w_]*)%s*{"))
    end
  end
  names.GL_DRIVER_FIELD = nil -- a helper macro #undef'd right after its use
  return names
end

local function identifiers(code)
  local ids = {}
  for id in code:gmatch("[%a_][%w_]*") do ids[id] = true end
  return ids
end

-- Gather every file of both layers.
local files, by_base = {}, {}
for _, dir in ipairs({"bindings", "host"}) do
  for _, path in ipairs(list(dir .. "/*.c " .. dir .. "/*.h")) do
    local text = read(path)
    local code = code_only(text)
    local quoted, system = includes(text)
    local f = {path = path, base = basename(path), code = code, quoted = quoted, system = system,
               ids = identifiers(code)}
    if path:match("%.h$") then f.declares = declared_names(code) end
    files[#files + 1] = f
    if by_base[f.base] then problem("%s and %s share a name", by_base[f.base].path, path) end
    by_base[f.base] = f
  end
end

-- Which header declares each name.
local owner = {}
for _, f in ipairs(files) do
  for n in pairs(f.declares or {}) do
    if owner[n] and owner[n] ~= f then
      problem("missing/duplicate: %s is declared by both %s and %s", n, owner[n].path, f.path)
    end
    owner[n] = f
  end
end

-- layers -------------------------------------------------------------------------------------
-- Two other headers a host may use: identity.h, because a userdata the host makes must carry the
-- same tag, or a forged metatable could pass another object off as it (host/isolate.c); and
-- errors.h, because the host's own argument errors take the one format and its message
-- handler prints a cuda.error as the string it replaces (host/isolate.c, host/state.c).
local host_may_include = {["gpulab.h"] = true, ["identity.h"] = true, ["errors.h"] = true}
for _, f in ipairs(files) do
  for _, inc in ipairs(f.quoted) do
    local target = by_base[basename(inc)]
    if not target then
      problem("layers: %s includes \"%s\", which is in neither bindings/ nor host/", f.path, inc)
    elseif layer(f.path) == "bindings" and layer(target.path) == "host" then
      problem("layers: %s includes host header %s (bindings/ must not know the host)", f.path, target.path)
    elseif layer(f.path) == "host" and layer(target.path) == "bindings" and not host_may_include[target.base] then
      problem("layers: %s includes %s; the host sees the bindings only through gpulab.h (and identity.h, errors.h)",
              f.path, target.path)
    end
  end
end
for _, path in ipairs(list("$(find lua -type f)")) do
  if not path:match("%.lua$") then problem("layers: %s in lua/ is not a Lua file", path) end
end

-- pure ---------------------------------------------------------------------------------------
local outside = {["lua.h"] = "Lua", ["lauxlib.h"] = "Lua", ["lualib.h"] = "Lua",
                 ["cuda.h"] = "CUDA", ["nvrtc.h"] = "CUDA", ["cudaTypedefs.h"] = "CUDA"}
local function reaches(f, seen, found)
  if seen[f] then return found end
  seen[f] = true
  for _, s in ipairs(f.system) do if outside[s] then found[#found + 1] = s .. " via " .. f.path end end
  for _, q in ipairs(f.quoted) do
    local t = by_base[basename(q)]
    if t then reaches(t, seen, found) end
  end
  return found
end
for _, name in ipairs({"dtype.h", "cache.h", "ptx.h"}) do
  local f = by_base[name]
  if not f then problem("pure: bindings/%s is missing", name)
  else
    for _, hit in ipairs(reaches(f, {}, {})) do problem("pure: %s reaches %s", f.path, hit) end
  end
end

-- identity, unused, missing ------------------------------------------------------------------
local guarded = {"lua_newuserdatauv", "luaL_checkudata", "luaL_testudata", "luaL_setmetatable",
                 "lua_setmetatable", "luaL_getmetatable", "lua_newuserdata"}
local metamethod_reads = {"lua_getfield", "lua_gettable", "lua_geti"}
for _, f in ipairs(files) do
  local direct = {}
  for _, q in ipairs(f.quoted) do
    local t = by_base[basename(q)]
    if t then direct[t] = q end
  end
  if f.base ~= "identity.c" then
    for _, call in ipairs(guarded) do
      if f.ids[call] then
        problem("identity: %s calls %s; use identity.h's tag-checking gl_ call instead", f.path, call)
      end
    end
    if f.path:match("^bindings/") then
      for _, call in ipairs(metamethod_reads) do
        if f.ids[call] then
          problem("raw: %s calls %s; read tables raw (options.h's gl_rawgetfield, lua_rawget)", f.path, call)
        end
      end
    end
  end
  for t, q in pairs(direct) do
    local used = false
    for n in pairs(t.declares or {}) do if f.ids[n] then used = true break end end
    if not used then problem("unused: %s includes \"%s\" but uses nothing it declares", f.path, q) end
  end
  local missing = {}
  for n in pairs(f.ids) do
    local o = owner[n]
    if o and o ~= f and not direct[o] then
      missing[o.base] = missing[o.base] or {}
      table.insert(missing[o.base], n)
    end
  end
  for h, names in pairs(missing) do
    table.sort(names)
    problem("missing: %s uses %s from %s without including it", f.path, table.concat(names, ", "), h)
  end
end

-- unused <system> includes ------------------------------------------------------------------
-- For each header: plain names it declares, and Lua patterns for families (lua_*, CU*).
local SYSTEM = {
  ["string.h"] = {"strlen strcmp strncmp strchr strrchr strstr strdup strndup memcpy memmove memset memcmp "
                  .. "memchr strerror strcpy strncpy strcat strspn strcspn strtok strsignal strnlen"},
  ["stdio.h"] = {"printf fprintf snprintf sprintf vsnprintf vfprintf fopen fclose fread fwrite fputs fgets fputc "
                 .. "putchar puts FILE stderr stdout stdin fflush perror ferror feof fileno getline fdopen popen "
                 .. "pclose fseek ftell rewind remove rename tmpfile setvbuf sscanf dprintf"},
  ["stdlib.h"] = {"malloc calloc realloc free getenv setenv unsetenv exit abort strtol strtoul strtoll strtoull "
                  .. "strtod atoi qsort realpath mkstemp EXIT_SUCCESS EXIT_FAILURE atexit llabs abs _Exit bsearch"},
  ["stdbool.h"] = {"bool true false"},
  ["stddef.h"] = {"size_t NULL offsetof ptrdiff_t max_align_t"},
  ["stdint.h"] = {"SIZE_MAX UINTPTR_MAX INTPTR_MAX intptr_t uintptr_t", "^u?int%d+_t$", "^U?INT%d+_M[AI][XN]$"},
  ["limits.h"] = {"INT_MAX INT_MIN UINT_MAX LONG_MAX LONG_MIN ULONG_MAX LLONG_MAX LLONG_MIN ULLONG_MAX PATH_MAX "
                  .. "CHAR_BIT UCHAR_MAX SHRT_MAX USHRT_MAX SSIZE_MAX"},
  ["math.h"] = {"isnan isinf isfinite sqrt fabs floor ceil pow exp log sin cos tanh ldexp frexp fmod nextafter "
                .. "nextafterf ldexpf rint HUGE_VAL INFINITY NAN round trunc log2 lround llround fmin fmax copysign "
                .. "signbit nearbyint expm1 log1p cbrt floorf ceilf sqrtf fabsf"},
  ["errno.h"] = {"errno", "^E[A-Z0-9]+$"},
  ["time.h"] = {"clock_gettime timespec CLOCK_MONOTONIC CLOCK_REALTIME time_t time nanosleep clock localtime "
                .. "strftime gmtime difftime"},
  ["unistd.h"] = {"read write close pipe fork execv execvp execve dup dup2 getpid isatty access unlink usleep "
                  .. "sleep _exit getcwd chdir setpgid getpgrp readlink sysconf STDIN_FILENO STDOUT_FILENO "
                  .. "STDERR_FILENO lseek pid_t ssize_t geteuid getuid tcgetpgrp rmdir fsync ftruncate pipe2 "
                  .. "environ execvpe getppid kill alarm"},
  ["lua.h"] = {"", "^lua_", "^LUA_"},
  ["lauxlib.h"] = {"", "^luaL_", "^LUAL_"},
  ["lualib.h"] = {"luaL_openlibs", "^luaopen_"},
  ["cuda.h"] = {"", "^CU", "^cu[A-Z]"},
}
for _, f in ipairs(files) do
  for _, h in ipairs(f.system) do
    local spec = SYSTEM[h]
    if spec then
      local used = false
      for name in spec[1]:gmatch("%S+") do if f.ids[name] then used = true break end end
      for i = 2, #spec do
        if used then break end
        for id in pairs(f.ids) do if id:match(spec[i]) then used = true break end end
      end
      if not used then problem("unused: %s includes <%s> but uses nothing it declares", f.path, h) end
    end
  end
end

table.sort(problems)
for _, p in ipairs(problems) do io.stderr:write(p, "\n") end
if #problems > 0 then
  io.stderr:write(string.format("include_check: %d problem(s)\n", #problems))
  os.exit(1)
end
print(string.format("include_check: %d files, layers hold, includes match use", #files))
