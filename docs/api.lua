-- docs/api.lua — THE description of gpulab's Lua API. docs/API.md and the editor stub
-- lua/gpulab/meta/cuda.lua are generated from it (`gpulab tools/gen_api.lua`), the REPL's
-- help(x) reads it, and the test `api_coverage` fails when a function gpulab registers is
-- missing here or an entry here names something that does not exist.
--
-- FORMAT. Pure data: `return { title=, intro=, sections = { section, ... } }`.
--   section = { title = "…", level = 2 | 3,        -- "## title" / "### title" in API.md
--               text = [[markdown before the entries]], after = [[markdown after them]],
--               columns = {"call", "returns / does"},   -- optional heading of the entry table
--               entries = { entry, ... },             -- a section may be free text only
--               help = false }                        -- left out of help() (API.md keeps it)
--   entry = { "NAME", kind = …, summary = "one line (the table cell)", … }
--     NAME and kind:
--       "cuda.compile"       function (default kind; "harness.new" for the harness module)
--       "cuda.array:fill"    method (kind inferred from ':'); the class must be described too
--       "cuda.home"          kind = "field", type = "string"
--       "cuda.array"         kind = "class": a userdata/table type; fields = {{name, type, text}, …}
--     sig      = "cuda.compile(src [, opts])"        -- functions and methods: how it is called
--     params   = { {"src", "string", "text"}, {"opts", "table?", "text"} }   -- "?" = optional
--     options  = { {"name", "string", "default or nil", "meaning"}, … }   -- keys of the opts table
--     options_of = "cuda.compile"                     -- takes the same options as that entry
--     returns  = { {"cuda.program", "text"}, … }
--     errors   = { "bad argument #1 to 'cuda.sync' (field 'timeout': must be 0..1e9 seconds, got …)", … }
--                  -- texts gpulab raises, `…` (or `...`, `<what>`) where they vary; tools/api_errors.lua
--                  -- (test api_errors) checks each against the code's format strings and the tests
--     text     = [[longer markdown]],  example = [[Lua code]]
--     build    = "GPULAB_LAUNCH_TIMING"  -- exists only in builds configured with -DGPULAB_LAUNCH_TIMING=ON
--   Types are LuaLS types: string integer number boolean table function any nil, described
--   class names (cuda.array, Lab), unions a|b, arrays T[], table<K, V>, literals "cold"|"hot".
-- ADDING A FUNCTION: add its entry to the section it belongs to (copy a neighbour), run
-- `gpulab tools/gen_api.lua`, commit docs/api.lua with the two regenerated files.
return {
title = "gpulab API reference",
intro = [==[
Everything is reached through `cuda` (a global in scripts and the REPL, also `require("cuda")`) and the
pure-Lua lab harness `require("gpulab.lab")` (called `harness` below; `lab` is a lab it made). A bad
argument raises a string naming the function and the argument as Lua's own library does (`bad argument #2
to 'cuda.array' (...)`, `bad argument #4 to 'k:launch' (scale<2> parameter 3 (float s): f32 (4 bytes)
expected, got cuda.array)`); a CUDA or NVRTC failure raises a `cuda.error` object whose text has the CUDA
error name and number (`CUDA_ERROR_OUT_OF_MEMORY (2)`). See [Errors](#errors) at the end.

In the REPL, `help(x)` prints the entry of a function (`help(cuda.compile)`), an object
(`help(arr)`: its type and methods) or a name (`help("compile")`, `help("cuda.array:view")`).]==],
sections = {

-- ---------------------------------------------------------------------------------------------
{ title = "Driver, devices, context", level = 2,
  entries = {
    { "cuda.available", sig = "cuda.available()",
      returns = { {"boolean", "true when a GPU can be used"}, {"string?", "why not"} },
      summary = "`true`, or `false, reason` (no driver, no device, poisoned context)" },
    { "cuda.version", sig = "cuda.version()",
      returns = { {"table", "{gpulab=, commit=, lua=, nvrtc=, driver=}"} },
      summary = "`{gpulab=, commit=, lua=, nvrtc=, driver=}` (`commit`: the git commit the build was configured at, \"unknown\" outside git; `driver` is nil without a driver); `gpulab --version` prints the first two, `gpulab -v` all of them (or why there is no driver)" },
    { "cuda.count", sig = "cuda.count()", returns = { {"integer", "devices"} },
      summary = "number of devices" },
    { "cuda.device", sig = "cuda.device(i)",
      params = { {"i", "integer?", "0-based device ordinal (default: the current device)"} },
      returns = { {"cuda.device", "the device's description"} },
      summary = "makes device `i` current; fields `name`, `ordinal`, `arch` (`\"sm_90\"`), `cc` (a table `{9, 0}`: major, minor), `sm_count`, `mem_bytes`, `l2_bytes`, `smem_per_block` (48 KB without opt-in), `smem_per_block_optin`, `smem_per_sm`, `max_threads_per_block`, `max_threads_per_sm`, `regs_per_sm`, `max_blocks_per_sm`, `warp_size`; `dev:attribute(\"MAX_THREADS_PER_BLOCK\")` for any `CU_DEVICE_ATTRIBUTE_*` (prefix optional)" },
    { "cuda.device", kind = "class",
      summary = "what cuda.device(i) returns: a table of the device's limits",
      fields = {
        {"name", "string", "the device's name"},
        {"ordinal", "integer", "0-based ordinal"},
        {"arch", "string", "`\"sm_90\"`"},
        {"cc", "integer[]", "`{major, minor}`"},
        {"sm_count", "integer", "multiprocessors"},
        {"mem_bytes", "integer", "device memory"},
        {"l2_bytes", "integer", "L2 cache size"},
        {"smem_per_block", "integer", "shared memory per block without opt-in (48 KB)"},
        {"smem_per_block_optin", "integer", "shared memory per block with opt-in"},
        {"smem_per_sm", "integer", "shared memory per multiprocessor"},
        {"max_threads_per_block", "integer", "threads per block"},
        {"max_threads_per_sm", "integer", "resident threads per multiprocessor"},
        {"regs_per_sm", "integer", "registers per multiprocessor"},
        {"max_blocks_per_sm", "integer", "resident blocks per multiprocessor"},
        {"warp_size", "integer", "threads per warp"},
        {"uuid", "string?", "\"GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx\" as nvidia-smi prints it (cuDeviceGetUuid; nil where the driver lacks it)"},
      } },
    { "cuda.device:attribute", sig = "dev:attribute(name)",
      params = { {"name", "string", "a `CU_DEVICE_ATTRIBUTE_*` name, prefix optional"} },
      returns = { {"integer", "the attribute's value"} },
      summary = "any `CU_DEVICE_ATTRIBUTE_*` of the device (`dev:attribute(\"MAX_THREADS_PER_BLOCK\")`)" },
    { "cuda.device_attributes", sig = "cuda.device_attributes()", returns = { {"string[]", "names"} },
      summary = "the attribute names `dev:attribute` knows" },
    { "cuda.sync", sig = "cuda.sync{timeout=s}",
      params = { {"opts", "table?", "`{timeout=seconds}`"} },
      options = { {"timeout", "number", "none", "seconds to wait (0..1e9)"} },
      errors = { "bad argument #1 to 'cuda.sync' (field 'timeout': must be 0..1e9 seconds, got …)",
                 "cuda.sync: timed out after … s waiting for the GPU; … (the work is still running; a kernel that never ends needs a restart)" },
      summary = "waits for the whole context; past the deadline it raises naming the pending launches" },
    { "cuda.mem_info", sig = "cuda.mem_info()",
      returns = { {"integer", "free bytes"}, {"integer", "total bytes"} },
      summary = "free, total device bytes (`cuMemGetInfo`)" },
    { "cuda.poisoned", sig = "cuda.poisoned()", returns = { {"string?", "the reason"} },
      summary = "nil, or the reason every GPU call now fails" },
    { "cuda.stats", sig = "cuda.stats()", returns = { {"table", "counts by kind"} },
      summary = "live objects held by gpulab: `arrays, hosts, modules, streams, events, graphs, tensormaps, prepared, device_bytes, pinned_bytes, deferred` (releases waiting for queued work)" },
    { "cuda.now", sig = "cuda.now()", returns = { {"number", "seconds"} },
      summary = "host wall clock in seconds (monotonic)" },
    { "cuda.launch_timing", sig = "cuda.launch_timing()", build = "GPULAB_LAUNCH_TIMING",
      returns = { {"table", "`{driver_ticks=, driver_calls=, call_ticks=, call_calls=, ticks=}`"} },
      summary = "builds configured with `-DGPULAB_LAUNCH_TIMING=ON` only: time-stamp ticks spent in the driver's launch calls and in `k:launch` and `prepared()` since the last call, which resets them",
      text = [==[
For splitting a launch's host time (`tools/launch_split.lua`, docs/RESULTS.md §34). `driver_ticks` counts the
ticks inside `cuLaunchKernel` / `cuLaunchKernelEx` over `driver_calls` calls (every launch path, prepared
loops included); `call_ticks` those of whole `k:launch` and `prepared()` calls that returned, over
`call_calls` calls, the driver's ticks inside them included. `ticks` is the counter now, so a script can
measure its rate against `cuda.now()`. The counter is the CPU's time-stamp counter on x86-64 and
nanoseconds elsewhere. The reads cost a launch a few tens of ns, which is why other builds leave them out.]==] },
  },
  after = [==[
libcuda is opened at run time (`GPULAB_LIBCUDA` overrides `libcuda.so.1`), NVRTC too (`GPULAB_LIBNVRTC`),
both on first use; the primary context is created on the first GPU call.

Neither needs the CUDA folder on the loader path (no `LD_LIBRARY_PATH`, no ldconfig entry). NVRTC is
looked for in the toolkit folder the build found, then by the loader's search, then in
`/usr/local/cuda/lib64`; its builtins library (`libnvrtc-builtins.so.13.0`, which libnvrtc opens by
name at the first compile) is loaded first from the folder libnvrtc came from. If a file is missing,
the error names it, every place looked at, and says to set `GPULAB_LIBNVRTC=/path/to/libnvrtc.so.13`.
A libcuda given by path (`GPULAB_LIBCUDA=/usr/local/cuda/compat/libcuda.so.1`) gets the JIT compiler
libraries beside it (`libnvidia-ptxjitcompiler.so.1`, `libnvidia-nvvm.so.4`) loaded from that folder.

After a sticky error (700 illegal address, 715 illegal instruction, 719 launch failed, …) the context
cannot be recovered in-process: every later GPU call raises `context poisoned by …; restart the process`,
naming the launches that were in flight. Finalizers then leave the driver's handles alone.]==] },

-- ---------------------------------------------------------------------------------------------
{ title = "Compiling", level = 2,
  text = [==[`cuda.compile(src, opts)` and `cuda.compile_file(path, opts)` run NVRTC; they work without a GPU.]==],
  entries = {
    { "cuda.compile", sig = "cuda.compile(src [, opts])",
      params = { {"src", "string", "CUDA C++ source"}, {"opts", "table?", "options, below"} },
      returns = { {"cuda.program", "the compiled program"} },
      summary = "compiles `src` with NVRTC into a program (PTX, and a cubin for a real arch)",
      options = {
        {"name", "string", "`kernel.cu`", "file name NVRTC reports (default `kernel.cu`, or the path)"},
        {"arch", "string", "`sm_90a`", "`sm_90a` (default on Hopper and without a device), `sm_XY`, or a virtual `compute_XY` (no cubin)"},
        {"std", "string", nil, "`c++17` …"},
        {"defines", "table<string, string|number|boolean>", nil, "`{K=4, FLAG=true}` → `-DK=4 -DFLAG`"},
        {"include_dirs", "string[]", nil, "searched after the source's folder; `<home>/kernels/include` is always added (`<home>` is `cuda.home`, below)"},
        {"toolkit_headers", "boolean", "`true`", "`true` (default): the CUDA toolkit's `include` folder and, with CUDA 13, `include/cccl` are searched last, so `<cuda_fp16.h>`, `<cooperative_groups.h>` and `<cuda/std/...>` need no include directory; `false` leaves them out"},
        {"headers", "table<string, string>", nil, "in-memory headers `{[\"a.h\"]=text}`"},
        {"options", "string[]", nil, "extra NVRTC options, in order"},
        {"lineinfo", "boolean", nil, "`-lineinfo` (also set by `gpulab --sanitize`)"},
        {"names", "string[]", nil, "name expressions (`\"scale<2>\"`) to lower; see `prog.lowered`. Lookups by `prog:params`, `mod:kernel` and `mod:global` accept spacing variants (`\"scale<2, float>\"` finds `\"scale<2,float>\"`: white space only counts between two identifier characters); an expression that was not registered raises listing the registered ones"},
        {"cache", "boolean", "`true`", "`false` to bypass the compile cache"},
      },
      errors = { "cuda.compile: bad.cu: compilation failed: bad.cu:1: error: expected an expression …",
                 "bad argument #2 to 'cuda.compile' (field 'options': item 1 contains a NUL byte)" },
      text = [[A failed compile raises a `cuda.error` with NVRTC's log, its lines rewritten to `file:line:`. An
option string, define name or value, the arch, the file name or a name expression with an embedded NUL byte
is refused, never truncated.]],
      example = [==[local prog = cuda.compile([[extern "C" __global__ void k(float *x) { x[0] = 1; }]],
                           {defines = {N = 4}})
local mod = cuda.load(prog)]==] },
    { "cuda.compile_file", sig = "cuda.compile_file(path [, opts])",
      params = { {"path", "string", "a .cu file; its folder is searched first for includes"},
                 {"opts", "table?", "as cuda.compile's"} },
      options_of = "cuda.compile",
      returns = { {"cuda.program", "the compiled program"} },
      errors = { "cuda.compile_file: cannot open '<path>': <reason>",
                 "cuda.compile_file: '<path>': source contains a NUL byte at offset …" },
      summary = "`cuda.compile` of a file's text (`name` defaults to the path); `--watch` re-runs when it or a header it read changes" },
    { "cuda.cache_key", sig = "cuda.cache_key(src, opts[, nvrtc_version])",
      params = { {"src", "string", "CUDA C++ source"}, {"opts", "table?", "as cuda.compile's"},
                 {"nvrtc_version", "string?", "the NVRTC identity to key with (default: the library's)"} },
      options_of = "cuda.compile",
      returns = { {"string", "the SHA-256 key in hex"},
                  {"boolean", "false when the compile would bypass the cache (a header included by macro)"} },
      summary = "the compile cache key a `cuda.compile(src, opts)` would use (see Compile cache, below)" },
    { "cuda.program", kind = "class",
      summary = "what cuda.compile returns: a table of the compile's results",
      fields = {
        {"ptx", "string", "the PTX text"},
        {"cubin", "string?", "the cubin (nil for a virtual arch)"},
        {"log", "string", "NVRTC's log"},
        {"lowered", "table<string, string>", "name expression → lowered (mangled) name"},
        {"cache_hit", "boolean", "whether it came from the compile cache"},
        {"name", "string", "the file name NVRTC reported"},
        {"arch", "string", "the arch compiled for"},
        {"options", "string[]", "the NVRTC options used, `-I` ones included"},
      } },
    { "cuda.program:params", sig = "prog:params(kernel)",
      params = { {"kernel", "string", "an extern \"C\" name, a name expression or a mangled name"} },
      returns = { {"table[]", "`{ {kind=, size=, align=, offset=}, … }`"} },
      summary = "the kernel's parameter list read from the PTX" },
    { "cuda.program:resources", sig = "prog:resources(kernel)",
      params = { {"kernel", "string", "an extern \"C\" name, a name expression or a mangled name"} },
      returns = { {"table", "`{regs=, spill_stores=, spill_loads=, local_bytes=, stack_bytes=, smem=, smem_reserved=, cmem=, cmem_banks=, barriers=, max_regs=, max_threads=, param_bytes=, code_bytes=, instructions=, entry=, from=}`"} },
      summary = "what ptxas made of the kernel, from the compile itself (no GPU)",
      text = [[Read from the cubin's ELF (`.nv.info` attributes: register count, stack frame, launch
bounds, barriers, parameter size; the sizes of `.nv.shared.<kernel>`, `.nv.constantN` and `.text.<kernel>`)
and from ptxas's verbose report, which every compile asks for (`--ptxas-options=-v`, hashed into the cache
key, kept in the cached log and so present on a cache hit, but left out of `prog.log` and `prog.options`
unless the script asked for it itself). `local_bytes` is the per-thread stack frame (local arrays and
spills), as ptxas's "bytes stack frame"; `spill_stores`/`spill_loads` are ptxas's bytes; `smem` the static
shared memory the kernel declares, `smem_reserved` the 1 KiB per block the system adds on sm_90 and later;
`cmem` the bytes of the constant banks the kernel sees, per bank in `cmem_banks` (`[0]`: parameters and
driver constants, `[3]`: the module's `__constant__` variables, shared by its kernels); `instructions` =
`code_bytes / 16`. A program compiled for a virtual arch (`compute_90`) has no cubin and raises.]],
      example = [[local p = cuda.compile(src)
local r = p:resources("saxpy")
print(r.regs, r.spill_stores, r.local_bytes, r.smem)]] },
    { "cuda.program:sass", sig = "prog:sass(kernel [, opts])",
      params = { {"kernel", "string", "an extern \"C\" name, a name expression or a mangled name"},
                 {"opts", "table?", "`{lineinfo=true, timeout=60}`"} },
      options = { {"lineinfo", "boolean", "true", "map instructions to source lines: a program compiled without `lineinfo=true` is compiled again with `-lineinfo` (once, not through the cache; line info does not change the code ptxas makes); false disassembles the program's own cubin"},
                  {"timeout", "number", "60", "seconds the disassembler may run before it is killed"} },
      returns = { {"cuda.sass", "list of `{offset=, text=, opcode=, file=, line=, inlined_at=}`"} },
      summary = "the kernel's SASS with source lines, from the toolkit's nvdisasm",
      text = [[Runs `nvdisasm -c -g` on the cubin as a child process with a deadline and parses its text.
`offset` is the byte offset in the kernel's code, `text` the instruction (`@!P0 BRA ...`), `opcode` its first
word after the predicate (`LDG.E.128`), `file`/`line` the innermost source location (an inlined helper's
line, with the call site in `inlined_at` as `"file:line"`). nvdisasm is found like NVRTC: `GPULAB_NVDISASM`,
the `bin` folder of the toolkit gpulab was built with, of `GPULAB_LIBNVRTC`'s toolkit, `$CUDA_HOME/bin`,
`$CUDA_PATH/bin`, `PATH`, `/usr/local/cuda/bin`; when none has it one error lists every place looked at and
what to install.]],
      errors = { "prog:sass: the CUDA disassembler nvdisasm was not found; looked at: …",
                 "prog:sass: …/nvdisasm did not finish within 60 s (killed)" },
      example = [[local s = cuda.compile(src, {lineinfo = true}):sass("saxpy")
print(s)                               -- one line per instruction with file:line
print(s:count{"LDG", "FFMA"}.LDG)]] },
    { "cuda.sass", kind = "class", summary = "a kernel's SASS: a list of instruction tables, `kernel` = the entry name",
      fields = { {"kernel", "string", "the mangled entry name"} } },
    { "cuda.sass:count", sig = "sass:count(classes)",
      params = { {"classes", "string[]", "opcode classes such as `{\"LDG\", \"SHFL\", \"BAR\", \"LDS\"}`"} },
      returns = { {"table<string, integer>", "`{LDG=n, …}`"} },
      summary = "instructions per opcode class: `LDG` counts `LDG` and `LDG.E.128`, not `LDGSTS`" },
    { "cuda.sass_parse", sig = "cuda.sass_parse(text, kernel)",
      params = { {"text", "string", "nvdisasm (or `cuobjdump -sass`) output"}, {"kernel", "string", "the mangled entry name"} },
      returns = { {"cuda.sass", "the list prog:sass makes"} },
      summary = "parses a disassembly's text into the list `prog:sass` returns" },
  },
  after = [==[
The result `prog` has `ptx`, `cubin` (nil for a virtual arch), `log`, `lowered`, `cache_hit`, `name`,
`arch`, `options`, and `prog:params(kernel)` → `{ {kind=, size=, align=, offset=}, … }` read from the PTX
(`kernel` is an extern "C" name, a name expression or a mangled name). A failed compile raises with
NVRTC's log rewritten to `file:line: …`. Option strings, define names and values, the arch, the
file name and name expressions with an embedded NUL byte are refused, never truncated.

Parameter kinds are PTX's: `u8 u16 u32 u64` (NVCC declares C's signed and unsigned integers and
`bool` this way: `bool` is `u8`), `s8 … s64` (hand-written PTX), `b8 b16 b32 b64 b128` (untyped
bits), `f16 f16x2 bf16 bf16x2 f32 f64`, `pred`. Arrays and by-value structs are the element kind
with `size` a multiple of it (`b8` with `size=24` for a 24-byte struct; a tensor map is `b8`,
`size=128`, `align=64`). `offset` is the byte offset in the parameter buffer.

**Where the toolkit is.** The toolkit whose headers are added is the one NVRTC comes from: the
folder beside the library `GPULAB_LIBNVRTC` names, else beside the NVRTC the build found, then
`$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda` (the first `include` folder holding `cuda_fp16.h`).
`prog.options` shows the `-I` options that resulted.

**Compile cache.** On by default in `$GPULAB_CACHE_DIR`, else `$XDG_CACHE_HOME/gpulab`, else
`~/.cache/gpulab`; `GPULAB_CACHE=0` or `{cache=false}` turns it off. The key is a SHA-256 over a schema
version, gpulab's version, the NVRTC library (its real file name, which carries the full version, size and
time), the exact arch, the ordered options, the source and its name (`__FILE__` and line info carry
it), the name expressions and the contents of every header the source includes or an option
pre-includes (`-include`, `--pre-include`), followed recursively through in-memory headers, the
source's folder and the include directories (`include_dirs`, and `-I`/`--include-path` options in
every spelling NVRTC takes). Include directives are found as the preprocessor reads them: after
line splices and comments, and with the `%:` digraph. A header the script's own source or headers
include by macro (`#include HEADER`) cannot be followed, so such a compile is never served from or
stored in the cache (`cuda.cache_key`'s second result says so). Toolkit headers are keyed by identity rather than contents — path, size,
modification time (ns) and inode of every one the source reaches — so editing or replacing one
changes the key without hashing megabytes of headers. Each installed header's include lines are
remembered for the process with its identity, so later keys stat it instead of reading it again.
A source including `<cuda_fp16.h>`, `<cooperative_groups.h>` and `<cuda/std/cstdint>` (265
headers) took 13–48 ms to key the first time and 2.0 ms at best afterwards (times vary widely
on the shared 2-core machine these were measured on). Entries are written atomically with a checksum; damaged entries are misses; a
directory or entry that is a symlink, someone else's, or group/other-writable is not used (one warning).
`cuda.cache_key(src, opts[, nvrtc_version])` shows the key.]==] },

-- ---------------------------------------------------------------------------------------------
{ title = "Modules, kernels, launches", level = 2,
  entries = {
    { "cuda.load", sig = "cuda.load(prog | image | path)",
      params = { {"source", "cuda.program|string|table", "a program, a cubin/PTX/fatbin string, a file path, or `{cubin=, ptx=}`"} },
      returns = { {"cuda.module", "the loaded module"} },
      summary = "a module from a program, a cubin/PTX/fatbin string, or a file" },
    { "cuda.module", kind = "class", summary = "a loaded module (`<close>` and `mod:free()` unload it)" },
    { "cuda.module:kernel", sig = "mod:kernel(name)",
      params = { {"name", "string", "extern \"C\" name or name expression"} },
      returns = { {"cuda.kernel", "the kernel"} },
      summary = "kernel by extern \"C\" name or name expression; fields `name, regs, smem, local_bytes, const_bytes, max_threads, params`. `tostring(k)`, argument errors, traces and profiles name it as asked for (`scale<2>`) and each parameter by its declaration (`scale<2> parameter 1 (float* x)`): types from the demangled entry name, names (and an extern \"C\" kernel's types) from the program's source when the module holds the program's own image; where either is unsure (no source, two definitions, a size that contradicts the PTX) by its PTX type (`scale parameter 1 (u64)`)" },
    { "cuda.module:global", sig = "mod:global(name, dtype, n | {dims})",
      params = { {"name", "string", "variable name or name expression"}, {"dtype", "string", "element type"},
                 {"shape", "integer|integer[]", "element count or dimensions"} },
      returns = { {"cuda.array", "a device view of the variable"} },
      summary = "a `__constant__` or `__device__` variable (by name or name expression, `\"table<4>\"`, via `cuModuleGetGlobal`) as a device view: a `cuda.array` with `ptr, nbytes, dtype, shape, numel`, usable with `v:copy_from(h)`, `h:copy_from(v)`, `v:fill(x)` and as a pointer argument. Its bytes may be fewer than the variable's, never more (`f32[65] needs 260 bytes, but 'coeff' holds 256 bytes`). A view is not an allocation (`cuda.stats().arrays` does not count it) and keeps its module loaded: after `mod:free()` the module takes no new kernels, but it is unloaded only when its last view is freed and the work that used the views is done" },
    { "cuda.module:free", sig = "mod:free()", summary = "unloads the module once its views and queued work are gone; it takes no new kernels" },
    { "cuda.kernel", kind = "class", summary = "a kernel of a loaded module",
      fields = {
        {"name", "string", "the name as asked for (`\"scale<2>\"`, an extern \"C\" name, a mangled name); `prog.lowered` maps a name expression to its entry name"},
        {"regs", "integer", "registers per thread"},
        {"smem", "integer", "static shared memory bytes"},
        {"local_bytes", "integer", "local memory per thread"},
        {"const_bytes", "integer", "constant memory bytes"},
        {"max_threads", "integer", "most threads per block it can launch with"},
        {"max_dynamic_smem", "integer", "dynamic shared memory allowed (as last set)"},
        {"params", "table[]", "`{ {kind=, size=, align=, offset=}, … }`"},
        {"cluster_dims", "integer[]?", "`{x, y, z}` every launch runs in (the driver's REQUIRED_CLUSTER_* attributes): compiled in by `__cluster_dims__` (axes it leaves out read 1), or as set with `k:set_attribute(\"required_cluster_width\", …)` through any kernel object for the function; nil when none"},
        {"module", "cuda.module", "the module it belongs to"},
      } },
    { "cuda.kernel:occupancy", sig = "k:occupancy(block, dyn_smem)",
      params = { {"block", "integer", "threads per block"}, {"dyn_smem", "integer?", "dynamic shared memory bytes"} },
      returns = { {"integer", "blocks per SM"}, {"string", "the limiting resource"}, {"table", "every limit"} },
      summary = "blocks per SM, the limiting resource (`threads`, `registers`, `shared memory`, `blocks`), and a table of every limit" },
    { "cuda.kernel:set_max_dynamic_smem", sig = "k:set_max_dynamic_smem(bytes)",
      params = { {"bytes", "integer", "dynamic shared memory per block"} },
      summary = "opt in above 48 KB (checked against the device)" },
    { "cuda.kernel:attribute", sig = "k:attribute(name)",
      params = { {"name", "string", "a CUfunction_attribute by short lower-case name: the enum name without `CU_FUNC_ATTRIBUTE_`, e.g. `\"num_regs\"`, `\"max_dynamic_shared_size_bytes\"`, `\"non_portable_cluster_size_allowed\"`"} },
      returns = { {"integer", "the driver's value (cuFuncGetAttribute)"} },
      summary = "one attribute of every CUfunction_attribute by name (a cluster attribute reads 0 on a device or driver without clusters); an unknown name is refused with the near matches" },
    { "cuda.kernel:set_attribute", sig = "k:set_attribute(name, value)",
      params = { {"name", "string", "a writable attribute's short name"},
                 {"value", "integer|boolean|string", "an integer; `true`/`false` for `non_portable_cluster_size_allowed`; `\"default\"`, `\"spread\"` or `\"load_balancing\"` for `cluster_scheduling_policy_preference`"} },
      returns = { {"cuda.kernel", "k"} },
      summary = "cuFuncSetAttribute, checked first: read-only attributes are refused by name; `max_dynamic_shared_size_bytes` 0..(device opt-in − static smem) (as `k:set_max_dynamic_smem`, and `k.max_dynamic_smem` follows), `preferred_shared_memory_carveout` -1..100, `non_portable_cluster_size_allowed` 0/1, `cluster_scheduling_policy_preference` 0..2, `required_cluster_width/height/depth` 0..16 (refused when `k.cluster_dims` is compiled in; a shape set at run time is used by every launch without `cluster=`, which checks the grid against it and needs all three axes positive (or all 0: none), as the driver does; a launch with `cluster=` must agree with the axes the shape sets). Attributes belong to the function: every other kernel object made for it (`mod:kernel` again) re-reads its dynamic shared memory limit, non-portable flag and run-time cluster shape, and asks its occupancy queries again, before its next check" },
    { "cuda.kernel:attributes", sig = "k:attributes()",
      returns = { {"table", "`{name = value, …}` for every attribute"} },
      summary = "every attribute's value by short name (handy in the REPL; also the list of names `k:attribute` takes)" },
    { "cuda.kernel:max_active_clusters", sig = "k:max_active_clusters{block=, smem=, cluster=}",
      options = { {"block", "integer|integer[]", nil, "threads per block, n or {x,y,z}"},
                  {"smem", "integer", "0", "dynamic shared memory bytes per block"},
                  {"cluster", "integer|integer[]", "k.cluster_dims", "cluster shape, n or {x,y,z}: each axis 1..16, at most 8 blocks unless non_portable_cluster_size_allowed is set, at most 16; required when the kernel has no shape of its own (`k.cluster_dims`), and equal to it when it has one"} },
      returns = { {"integer", "clusters of that shape that can be co-resident on the device"} },
      summary = "cuOccupancyMaxActiveClusters for one cluster's worth of blocks; the fields are checked as `k:launch` checks them; needs a CUDA 12.0 driver and a device of compute capability 9.0" },
    { "cuda.kernel:max_cluster_size", sig = "k:max_cluster_size{block=, smem=}",
      options = { {"block", "integer|integer[]", nil, "threads per block, n or {x,y,z}"},
                  {"smem", "integer", "0", "dynamic shared memory bytes per block"} },
      returns = { {"integer", "the largest cluster size (blocks) that can be resident"} },
      summary = "cuOccupancyMaxPotentialClusterSize (16 on Hopper with non_portable_cluster_size_allowed set, else at most 8); needs a CUDA 12.0 driver and a device of compute capability 9.0" },
    { "cuda.kernel:launch", sig = "k:launch(cfg, ...)",
      params = { {"cfg", "table", "`{grid=n|{x,y,z}, block=n|{x,y,z}, smem=0, stream=s, cluster=n|{x,y,z}, cooperative=false, pdl=false, priority=n, l2_window={...}}`"},
                 {"...", "any", "the kernel's arguments"} },
      summary = "checked launch; `cfg = {grid=n|{x,y,z}, block=n|{x,y,z}, smem=0, stream=s}` plus the launch attributes `cluster`, `cooperative`, `pdl`, `priority`, `l2_window` (below)" },
    { "cuda.kernel:prepare", sig = "k:prepare(cfg, ...)",
      params = { {"cfg", "table", "as k:launch"}, {"...", "any", "the kernel's arguments"} },
      returns = { {"cuda.prepared", "the prepared launch"} },
      summary = "a prepared launch `prepared`: `prepared()` launches, `prepared:set(i, v)` repacks argument `i`. The configuration is checked once, here: a kernel attribute set later (a lower `max_dynamic_shared_size_bytes`, a `required_cluster_*` shape the grid does not fit) is not checked again, and the driver refuses such a replay with its own error" },
    { "cuda.prepared", kind = "class",
      summary = "a launch packed once: calling it or `prepared:launch(n)` launches it again; `prepared(s)` with a `cuda.stream` launches on `s` (as cuda.measure's `fn(s)` and `s:capture`'s `fn(s)` call it), and any other argument is ignored" },
    { "cuda.prepared:launch", sig = "prepared:launch(n)",
      params = { {"n", "integer?", "how many times, 1..2^24 (default 1)"} },
      summary = "launches it `n` times: the checks run once, then one C loop calls cuLaunchKernel (cuLaunchKernelEx when the launch has attributes) `n` times on the prepared stream (each launch observed under cuda.trace and cuda.profile); a failing launch stops the loop and raises" },
    { "cuda.prepared:set", sig = "prepared:set(i, v)",
      params = { {"i", "integer", "1-based argument index"}, {"v", "any", "the new value"} },
      summary = "repacks argument `i` (checked as k:launch checks it)" },
    { "cuda.prepared:free", sig = "prepared:free()", summary = "releases what it holds (also `<close>`)" },
  },
  after = [==[
Arguments are checked against the kernel's parameter list before the driver is called: a Lua number is
converted to the exact parameter type (integer types refuse fractions and out-of-range values; f16/bf16
round to nearest even), `true`/`false` go to any 1-byte parameter (C++ `bool` is `u8` in PTX, so 0..255
are accepted there too; tables, strings of another size and the like raise), a `cuda.array` or an
integer goes to a 64-bit pointer, a `cuda.tensormap` goes by value (a `const __grid_constant__`
128-byte parameter), and a Lua string of exactly the parameter's size goes by value as a struct.
Objects a launch uses stay alive until the launch is known complete.

**Launch attributes.** Any of these keys sends the launch through `cuLaunchKernelEx` with the matching
`CUlaunchAttribute`; a configuration without them keeps `cuLaunchKernel` and its cost. Each is checked
before the driver, and a refusal names the rule and the numbers (an argument error, not a `cuda.error`):

| key | what the driver gets | checked before the driver |
|---|---|---|
| `cluster = n \| {x,y,z}` | thread block clusters of that shape; `grid` is still counted in blocks | the device supports clusters (compute capability 9.0); each axis 1..16; `grid` a multiple of the cluster on every axis; at most 8 blocks unless `k:set_attribute("non_portable_cluster_size_allowed", 1)` (through any kernel object for the function), never more than 16; the same shape as the kernel's own (`k.cluster_dims`: compiled in by `__cluster_dims__`, or set with `required_cluster_*`), which a launch without `cluster=` runs in (its grid a multiple of it); at least one such cluster can be resident (`cuOccupancyMaxActiveClusters`) |
| `cooperative = true` | a cooperative launch (`grid.sync()` works) | the grid fits at once: at most occupancy × SMs blocks (or co-resident clusters × cluster size); the message gives both numbers; a grid is never shrunk |
| `pdl = true` | programmatic stream serialization: the kernel may start before the previous kernel in the stream ends (it waits with `griddepcontrol.wait`, `gl_pdl_wait()`) | compute capability 9.0 |
| `priority = n` | the launch's priority | within the device's range (`cuCtxGetStreamPriorityRange`: lower is more urgent) |
| `l2_window = {array=d \| ptr=, bytes=, hit_ratio=1, hit="persisting", miss="streaming"}` | an L2 access-policy window for this launch | the array is alive and on this device; `bytes` within the array (default: all of it) and the device's largest window; `hit_ratio` in 0..1; `hit` one of `"persisting"`, `"streaming"`, `"normal"`, `miss` one of the last two |

A kernel compiled with `__cluster_dims__` launches in clusters of that shape without the key (its grid
must be a multiple of it). The occupancy answers behind the cluster and cooperative checks are cached
per kernel and shape, so a repeated launch asks the driver only for the launch. A driver older than
CUDA 12.0 (no `cuLaunchKernelEx`) refuses these keys with one message naming the entry point.
`k:prepare` takes the same keys (the prepared launch keeps the `l2_window` array alive), and a graph
captured with `s:capture` keeps the attributes of the launches it captured.

**A configuration launched again.** A kernel remembers the last two tables whose full checks passed
(so a lab that alternates two shapes of one kernel keeps the fast path for both). A launch with one
of them reads only the values of the keys it had (no walk for misspelt keys, none of
the checks again) and uses the remembered configuration when every value is the same; any other
value, a freed stream, a kernel attribute set (`k:set_attribute`, `k:set_max_dynamic_smem`) or a
change of device sends it through the full check. This takes `k:launch` with `pdl=true` and 4
arguments from about 2,600 to 2,100 instructions over the C loop of the same kind (callgrind, against
the driver stand-in; docs/RESULTS.md has the H200's times). To see keys added later, a table whose check passed and that is checked
again by the same kernel gets a metatable whose only field is `__newindex` (when it has no metatable of its
own; `getmetatable(cfg)` shows it, and `setmetatable` replaces it as usual): a new key, or one set
again after `nil`, makes every kernel check its next configuration in full. What the mark cannot
see: a key added with `rawset`, while the script had taken the mark off, or while it had changed the
mark's `__newindex` (the mark is a plain table a script can reach through `getmetatable`). Values that are tables
(`grid = {x,y,z}`, `l2_window`) are read on every launch. The kernel does not keep the table, its
stream or its values alive.

A tensor map given to a parameter declared without `__grid_constant__` is refused where the PTX
shows it: such a kernel reads all 128 bytes with `ld.param` into a copy and never takes the
parameter's own address (a grid-constant one is used through `mov`/`cvta.param`), so the TMA unit
would be handed the copy's address. It cannot be detected when the module was loaded from a cubin
or fatbin without its PTX, or when the kernel never takes the map's address at all (then it uses no
TMA with it); the signature alone is the same for both declarations (`.param .align 64 .b8 m[128]`).

When a program pairs a cubin with a PTX text (`cuda.load{cubin=, ptx=}`), `mod:kernel` checks the
PTX's parameter count and sizes against the loaded binary's (`cuFuncGetParamInfo`) and refuses a
mismatch; kernel names and PTX text with an embedded NUL byte are refused.]==] },

-- ---------------------------------------------------------------------------------------------
{ title = "Memory", level = 2,
  text = [==[
`cuda.array(dtype, n | {dims})` (device) and `cuda.host(dtype, n | {dims}, {pinned=true})` (host);
dtypes `f16 bf16 f32 f64 i8 i16 i32 i64 u8 u16 u32 u64 bool`. Both: `dtype, shape, ndim, numel, nbytes`,
`copy_from(src[, stream | opts])`, `view(first[, n | {dims}])`, `free()`, `<close>`. Device arrays: `ptr`,
`fill(v[, stream])`. Host arrays:
`h[i]` (1-based, range- and type-checked), `#h`, `fill(v)`, `iota([start[, step]])`,
`random{seed=, lo=, hi=}`, `totable()`, `pinned`. Zero-element arrays are refused; sizes are
overflow-checked.

`h:random{seed=0, lo=0, hi=1 (floats) | 100 (integers)}` is deterministic: the state is four successive
splitmix64 outputs starting from `seed`, each step is xoshiro256** and `u = (next >> 11) · 2^-53` lies in
[0, 1); floats get `lo + (hi − lo)·u` rounded once to the dtype, integers `lo + floor((hi − lo)·u)`, one
draw per element in index order. Seed 1 gives f64 0.70292183315885048, 0.52043661993885693, …

`cuda.compare(a, b, {atol=0, rtol=0})` (done in C; device arrays are copied to the host) →
`{ok=, max_abs=, max_rel=, mismatches=, first_bad=}`; an element mismatches when
`|a − b| > atol + rtol·|b|`; NaN equals only NaN. `first_bad` is the 1-based index of the first
mismatching element (as `h[first_bad]` reads it), absent when none mismatches.]==],
  entries = {
    { "cuda.array", sig = "cuda.array(dtype, n | {dims})",
      params = { {"dtype", "string", "`f16 bf16 f32 f64 i8 i16 i32 i64 u8 u16 u32 u64 bool`"},
                 {"shape", "integer|integer[]", "element count or dimensions"} },
      returns = { {"cuda.array", "uninitialised device memory"} },
      errors = { "bad argument #2 to 'cuda.array' (size must be positive, got 0; zero-element arrays are not supported)",
                 "bad argument #2 to 'cuda.array' (the element count overflows 64 bits)" },
      summary = "a device array (`cuMemAlloc`)" },
    { "cuda.host", sig = "cuda.host(dtype, n | {dims}, {pinned=true})",
      params = { {"dtype", "string", "as cuda.array"}, {"shape", "integer|integer[]", "element count or dimensions"},
                 {"opts", "table?", "`{pinned=true}`"} },
      options = { {"pinned", "boolean", "`false`", "page-locked memory (`cuMemAllocHost`), for async copies"} },
      returns = { {"cuda.host", "zeroed host memory"} },
      summary = "a host array, pinned on request" },
    { "cuda.compare", sig = "cuda.compare(a, b, {atol=0, rtol=0})",
      params = { {"a", "cuda.array|cuda.host", "measured"}, {"b", "cuda.array|cuda.host", "reference"},
                 {"opts", "table?", "tolerances"} },
      options = { {"atol", "number", "0", "absolute tolerance"}, {"rtol", "number", "0", "relative tolerance (of |b|)"} },
      returns = { {"table", "`{ok=, max_abs=, max_rel=, mismatches=, first_bad=}`"} },
      errors = { "bad argument #3 to 'cuda.compare' (field 'atol': must not be negative, got -1)",
                 "bad argument #2 to 'cuda.compare' (element counts differ (… and …))" },
      summary = "element-wise comparison in C (device arrays are copied to the host first)" },
    { "cuda.array", kind = "class", summary = "device memory (or a view of it); `<close>` frees it",
      fields = {
        {"ptr", "integer", "the device address (a view's is its parent's plus the offset)"},
        {"dtype", "string", "element type"}, {"shape", "integer[]", "dimensions"},
        {"ndim", "integer", "number of dimensions"}, {"numel", "integer", "elements"},
        {"nbytes", "integer", "bytes"},
      } },
    { "cuda.array:fill", sig = "d:fill(v[, stream])",
      params = { {"v", "number|boolean", "the value"}, {"stream", "cuda.stream?", "asynchronous on this stream"} },
      returns = { {"cuda.array", "d"} },
      summary = "sets every element (a driver memset)" },
    { "cuda.array:copy_from", sig = "x:copy_from(src[, stream | opts])",
      params = { {"src", "cuda.array|cuda.host", "the source"}, {"opts", "cuda.stream|table?", "a stream, or options"} },
      options = {
        {"stream", "cuda.stream", nil, "asynchronous on this stream (pinned host memory)"},
        {"dst_offset", "integer", "0", "elements skipped in the destination"},
        {"src_offset", "integer", "0", "elements skipped in the source"},
        {"count", "integer", nil, "elements to copy (per row with `rows`)"},
        {"reinterpret", "boolean", "`false`", "copy the bytes of another dtype as they are"},
        {"convert", "boolean", "`false`", "convert value by value between host arrays"},
        {"rows", "integer", nil, "a 2-D copy of this many rows"},
        {"dst_pitch", "integer", nil, "destination row pitch in elements"},
        {"src_pitch", "integer", nil, "source row pitch in elements"},
      },
      returns = { {"cuda.array", "x"} },
      errors = { "bad argument #2 to 'd:copy_from' (dtype mismatch (destination f32, source i32); pass {reinterpret=true} to copy the bytes as they are, …)" },
      summary = "copies from another device or host array (see Copies, below)" },
    { "cuda.array:view", sig = "x:view(first[, n | {dims}])",
      params = { {"first", "integer", "1-based first element"}, {"shape", "(integer|integer[])?", "count or dimensions (default: to the end)"} },
      returns = { {"cuda.array", "a view sharing x's memory"} },
      summary = "elements `first ..` of `x` as an array of its own shape (see Copies, views, below)" },
    { "cuda.array:free", sig = "x:free()", summary = "releases the memory once queued work using it is done (also `<close>`)" },
    { "cuda.host", kind = "class", summary = "host memory with a dtype: `h[i]` (1-based, range- and type-checked), `#h`",
      fields = {
        {"dtype", "string", "element type"}, {"shape", "integer[]", "dimensions"},
        {"ndim", "integer", "number of dimensions"}, {"numel", "integer", "elements"},
        {"nbytes", "integer", "bytes"}, {"pinned", "boolean", "page-locked"},
      } },
    { "cuda.host:fill", sig = "h:fill(v)", params = { {"v", "number|boolean", "the value"} },
      returns = { {"cuda.host", "h"} }, summary = "sets every element" },
    { "cuda.host:iota", sig = "h:iota([start[, step]])",
      params = { {"start", "number?", "first value (0)"}, {"step", "number?", "increment (1)"} },
      returns = { {"cuda.host", "h"} }, summary = "`h[i] = start + (i-1)·step`" },
    { "cuda.host:random", sig = "h:random{seed=, lo=, hi=}",
      params = { {"opts", "table?", "seed and range"} },
      options = { {"seed", "integer", "0", "the generator's seed"}, {"lo", "number", "0", "lowest value"},
                  {"hi", "number", "1 (floats) | 100 (integers)", "bound (exclusive)"},
                  {"p", "number", "0.5", "bool arrays: probability of `true`"} },
      returns = { {"cuda.host", "h"} }, summary = "deterministic pseudo-random values (xoshiro256**, above)" },
    { "cuda.host:totable", sig = "h:totable()", returns = { {"table", "the elements as a Lua list"} },
      summary = "the elements as a Lua table" },
    { "cuda.host:copy_from", sig = "x:copy_from(src[, stream | opts])",
      params = { {"src", "cuda.array|cuda.host", "the source"}, {"opts", "cuda.stream|table?", "a stream, or options"} },
      options_of = "cuda.array:copy_from",
      returns = { {"cuda.host", "x"} }, summary = "as `cuda.array:copy_from`" },
    { "cuda.host:view", sig = "x:view(first[, n | {dims}])",
      params = { {"first", "integer", "1-based first element"}, {"shape", "(integer|integer[])?", "count or dimensions"} },
      returns = { {"cuda.host", "a view sharing x's memory"} }, summary = "as `cuda.array:view`" },
    { "cuda.host:free", sig = "x:free()", summary = "releases the memory (also `<close>`)" },
  } },

{ title = "Copies, views and the bool dtype", level = 3,
  text = [==[
`x:copy_from(src, {stream=, dst_offset=0, src_offset=0, count=, reinterpret=false, convert=false,
rows=, dst_pitch=, src_pitch=})`
(a bare stream as the second argument still works). Offsets count the elements skipped in each array
(offset 0 is element 1); without `count` everything after the offsets is copied and both sides must
agree. The dtypes must be equal, otherwise the copy is refused naming both
(`dtype mismatch (destination f32, source i32)`): `reinterpret=true` copies the bytes as they are (sizes
then compare in bytes, `count` counts destination elements), `convert=true` converts value by value
between host arrays (as `h[i] = v` would: integer destinations refuse fractions, NaN and values out of
range, checked before anything is written; bool takes non-zero as `true`). Device copies with offsets
are single driver copies at the offset addresses; overlapping host copies behave like `memmove`.
A 2-D copy adds `rows=R` (and needs `count`, the elements of each row): row `r` (0-based) goes from
`src_offset + r·src_pitch` to `dst_offset + r·dst_pitch`; pitches are in elements and default to the
innermost dimension of a 2-D (or higher) array, else to `count`, so
`tile:copy_from(m, {rows=64, count=64, src_offset=r0*cols + c0})` cuts a 64×64 tile out of matrix `m`.
The last row is checked to fit both arrays before anything is copied; device copies make one driver
copy per row; `convert=true` works row by row too (every row checked first).

`x:view(first, n | {dims})` is elements `first .. first+numel−1` of `x` (1-based) as an array of its own
shape (`h:view(1, {rows, cols})` reshapes; `h:view(first)` runs to the end). It shares the parent's memory and keeps the parent alive;
the memory is freed only when the parent and every view of it were freed or collected and the work
queued on each is complete, so `x:free()` with live views is safe. A device view is a `cuda.array`
like any other: a launch pointer argument (`ptr` is the parent's plus the offset), a copy source or
destination, a `cuda.tensormap` target. `tostring` says `view`. `cuda.stats()` counts each view as a
live array (`arrays`, `hosts`); `device_bytes` and `pinned_bytes` count allocations, not views.

`bool` is one byte; `h[i]` takes and returns `true`/`false` (numbers are refused), any non-zero byte
reads as `true`, `fill(true)` works on both kinds, `h:random{seed=, p=0.5}` sets each element true with
probability `p`, `cuda.compare` compares them as 0/1, `h:sum()` counts the true ones.]==] },

{ title = "Bulk host operations (in C)", level = 3,
  text = [==[
For host references that must not loop in Lua (each `h[i]` costs ~90 ns there). All are synchronous
and work on views; methods that change `h` return it. `h:fill(v)`, `h:iota()`, `h:random{}` and
`h2:copy_from(h1, {convert=true})` (above) belong here too.]==],
  columns = {"call", "does"},
  entries = {
    { "cuda.host:transpose", sig = "h:transpose([dst])",
      params = { {"dst", "cuda.host?", "the destination (default: a new array)"} }, returns = { {"cuda.host", "dst"} },
      summary = "2-D `h` `{rows, cols}` → `dst` (default a new host array `{cols, rows}`), `dst[c][r] = h[r][c]`; tiled; same dtype; `dst` may not overlap `h`" },
    { "cuda.host:add", sig = "h:add(x)", params = { {"x", "number|cuda.host", "the operand"} }, returns = { {"cuda.host", "h"} },
      summary = "element-wise `h = h + x`; `x` a number or a host array of the same element count (any dtype)" },
    { "cuda.host:sub", sig = "h:sub(x)", params = { {"x", "number|cuda.host", "the operand"} }, returns = { {"cuda.host", "h"} },
      summary = "element-wise `h = h - x`; `x` as for `add`" },
    { "cuda.host:mul", sig = "h:mul(x)", params = { {"x", "number|cuda.host", "the operand"} }, returns = { {"cuda.host", "h"} },
      summary = "element-wise `h = h · x`; `x` as for `add`" },
    { "cuda.host:div", sig = "h:div(x)", params = { {"x", "number|cuda.host", "the operand"} }, returns = { {"cuda.host", "h"} },
      summary = "element-wise `h = h / x`; `x` as for `add`" },
    { "cuda.host:scale", sig = "h:scale(a)", params = { {"a", "number", "the factor"} }, returns = { {"cuda.host", "h"} },
      summary = "`h = a·h`" },
    { "cuda.host:axpy", sig = "h:axpy(a, x)", params = { {"a", "number", "the factor"}, {"x", "cuda.host", "the other array"} },
      returns = { {"cuda.host", "h"} }, summary = "`h = a·x + h`" },
    { "cuda.host:apply", sig = "h:apply(name)", params = { {"name", "string", "the function's name"} }, returns = { {"cuda.host", "h"} },
      summary = "`h[i] = f(h[i])` for float arrays, f one of `abs neg sqrt exp log sin cos tanh relu sigmoid floor ceil rint square recip` (C's libm in double, rounded once; `relu` keeps NaN)" },
    { "cuda.host:sum", sig = "h:sum()", returns = { {"number", "the sum"} },
      summary = "float dtypes: pairwise summation in double; integers: exact (128-bit), an integer when it fits 64 bits, else a float; bool: the count of `true`" },
    { "cuda.host:dot", sig = "h:dot(x)", params = { {"x", "cuda.host", "the other array"} }, returns = { {"number", "the dot product"} },
      summary = "the dot product, summed as `h:sum()` sums" },
    { "cuda.host:min", sig = "h:min()", returns = { {"number", "value"}, {"integer", "1-based index"} },
      summary = "value and 1-based index of the first smallest element; a NaN wins (it is reported, not skipped)" },
    { "cuda.host:max", sig = "h:max()", returns = { {"number", "value"}, {"integer", "1-based index"} },
      summary = "value and 1-based index of the first largest element; a NaN wins (it is reported, not skipped)" },
    { "cuda.host:matmul", sig = "c:matmul(a, b, {alpha=1, beta=0})",
      params = { {"a", "cuda.host", "`{M,K}`"}, {"b", "cuda.host", "`{K,N}`"}, {"opts", "table?", "scalars"} },
      options = { {"alpha", "number", "1", "factor of a·b"}, {"beta", "number", "0", "factor of c"} },
      returns = { {"cuda.host", "c"} },
      summary = "`c = alpha·a·b + beta·c` for row-major 2-D `a {M,K}`, `b {K,N}`, `c {M,N}`; accumulated in double over double copies of `a` and `b` (so `c` may alias them); integer operands are exact while partial sums stay below 2^53, an integer `c` gets the result rounded to nearest and wrapped to its dtype (0 for NaN and infinities); naive O(MKN), for references at small sizes" },
  },
  after = [==[
Arithmetic into a float array is computed in double and rounded once to its dtype (so `add`, `sub`, `mul`,
`div` of two f32 arrays give the correctly rounded f32 result). Integer arrays take integer operands only (a float
array or a fractional number is refused: convert first) and wrap around on overflow like the GPU's
integer units; `div` truncates toward zero, takes the divisor as the destination's dtype holds it
(`-1` divides a u32 array by 4294967295) and refuses a zero divisor (`256` for u8 too) before
anything is written.
An operand that is a shifted view of the destination is read as it was before the call. Bool arrays
take no arithmetic. `gpulab tools/bench_host_ref.lua [N]` times an N² f32 transpose reference both ways
and checks they agree; at N = 8192 on the 2-core Xeon build machine (2026-12-01, CPU time): the Lua
element loop 10.1 s, `h:transpose()` 0.23 s (allocating the result included; 0.14 s into an existing
array), `cuda.compare` of the two 0.21 s, `h:sum()` 0.08 s. The machine is shared, so these vary by
about 25% from run to run.

Scripts cannot pull an array out from under these calls: option and shape tables are read raw (their
metamethods never run), and an array is checked again after any Lua allocation (which can run a
finalizer that frees it), so such a call raises `... was freed` instead of touching freed memory.]==] },

-- ---------------------------------------------------------------------------------------------
{ title = "Streams, events, graphs, timing", level = 2,
  entries = {
    { "cuda.stream", sig = "cuda.stream{nonblocking=, priority=}",
      params = { {"opts", "table?", "flags"} },
      options = { {"nonblocking", "boolean", "`false`", "does not synchronize with the legacy default stream"},
                  {"priority", "integer", "0", "stream priority (lower is higher priority)"} },
      returns = { {"cuda.stream", "a new stream"} },
      summary = "`s:sync{timeout=}`, `s:query()`, `s:wait(event)`, `s:capture(fn)`, `s:free()`" },
    { "cuda.stream", kind = "class", summary = "a CUDA stream; `<close>` frees it" },
    { "cuda.stream:sync", sig = "s:sync{timeout=}", params = { {"opts", "table?", "`{timeout=seconds}`"} },
      options = { {"timeout", "number", "none", "seconds; past it, raises naming the pending launches"} },
      summary = "waits for the stream's work" },
    { "cuda.stream:query", sig = "s:query()", returns = { {"boolean", "true when its work is done"} },
      summary = "whether the stream's work is done (never blocks)" },
    { "cuda.stream:wait", sig = "s:wait(event)", params = { {"event", "cuda.event", "a recorded event"} },
      summary = "later work on `s` waits for `event`" },
    { "cuda.stream:capture", sig = "s:capture(fn)", params = { {"fn", "function", "called as fn(s); enqueues work on s"} },
      returns = { {"cuda.graph", "the executable graph"} },
      summary = "captures what `fn(s)` enqueues on `s` into an executable graph `g`: `g:launch([s])`, `g.nodes`, `g:free()`; the graph keeps the objects its launches use. While `fn` runs, the driver refuses syncs and queries (`cuda.sync`, any `s:sync`/`s:query`, `e:sync`/`e:query`) and allocations (`cuda.array`, pinned `cuda.host`) with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900), and the capture then fails; work on the default stream is refused (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, 906) when `s` is a blocking stream, and runs at once, outside the graph, when `s` is non-blocking. Frees inside `fn` wait for the capture's end. A prepared launch called as `prepared(s)` goes to `s`" },
    { "cuda.stream:free", sig = "s:free()", summary = "destroys the stream once its work is done (also `<close>`)" },
    { "cuda.stream:set_l2_window", sig = "s:set_l2_window{array=d | ptr=, bytes=, hit_ratio=1, hit=\"persisting\", miss=\"streaming\"}",
      params = { {"window", "table|nil", "the window (the `l2_window` launch key's table); nil removes it"} },
      errors = { "bad argument #1 to 's:set_l2_window' (bytes = 4097 is outside the array's 1..4096 bytes)",
                 "s:set_l2_window: needs the driver entry point cuStreamSetAttribute (a CUDA 11.0 driver or newer); this driver is …",
                 "s:set_l2_window: not available while a stream capture is under way" },
      summary = "sets the stream's L2 access-policy window (cuStreamSetAttribute, ACCESS_POLICY_WINDOW) for the kernels launched on it afterwards; the same checks and messages as the `l2_window` launch key, before the driver: array= alive and on the current device (the stream too), bytes within the array (a view's bounds) and the device's largest window, hit_ratio in [0, 1], hit/miss names (a miss cannot persist). `nil` removes it (a window of 0 bytes). The stream keeps the window's array alive until the window is removed or replaced or the stream object is collected; a:free() of that array still frees it (a window is a cache hint: work that reads the memory marks the array it was given), and `s:l2_window()` then says `freed=true`. Windows go on stream objects: launches on the default stream take the `l2_window` launch key" },
    { "cuda.stream:l2_window", sig = "s:l2_window()",
      returns = { {"table|nil", "`{ptr=, bytes=, hit_ratio=, hit=, miss=, array=, freed=}` as the driver holds it (hit_ratio is a float); array= and freed= for a window set with array=; nil when none"} },
      summary = "the stream's L2 access-policy window (cuStreamGetAttribute)" },
    { "cuda.l2_persisting", sig = "cuda.l2_persisting([bytes])", params = { {"bytes", "integer?", "the set-aside to ask for; none: read it"} },
      returns = { {"integer", "the persisting L2 set-aside the driver granted (cuCtxGetLimit after cuCtxSetLimit, PERSISTING_L2_CACHE_SIZE)"} },
      errors = { "bad argument #1 to 'cuda.l2_persisting' (bytes = 39321601 exceeds device 0's largest persisting L2 set-aside, 39321600 bytes (MAX_PERSISTING_L2_CACHE_SIZE))",
                 "cuda.l2_persisting: needs the driver entry point cuCtxSetLimit (a CUDA 11.0 driver or newer); this driver is …" },
      summary = "sets aside part of L2 for lines that a window's `hit=\"persisting\"` accesses make persisting (H200: at most 37.5 MiB of 60); a non-negative integer, at most the device's MAX_PERSISTING_L2_CACHE_SIZE, checked before the driver; the driver may round the grant (the stand-in grants whole 64 KiB units)" },
    { "cuda.l2_reset", sig = "cuda.l2_reset()",
      errors = { "cuda.l2_reset: needs the driver entry point cuCtxResetPersistingL2Cache (a CUDA 11.0 driver or newer); this driver is …" },
      summary = "turns every persisting L2 line back into a normal one (cuCtxResetPersistingL2Cache; not stream ordered: it acts when called). cuda.measure's cold regime does this before every sample" },
    { "cuda.event", sig = "cuda.event{timing=true}", params = { {"opts", "table?", "flags"} },
      options = { {"timing", "boolean", "`true`", "records times (for e:elapsed)"} },
      returns = { {"cuda.event", "a new event"} },
      summary = "`e:record([s])`, `e:sync{timeout=}`, `e:query()`, `e:elapsed(e0)` → ms" },
    { "cuda.event", kind = "class", summary = "a CUDA event; `<close>` frees it" },
    { "cuda.event:record", sig = "e:record([s])", params = { {"s", "cuda.stream?", "the stream (default stream)"} },
      summary = "records the event on a stream" },
    { "cuda.event:sync", sig = "e:sync{timeout=}", params = { {"opts", "table?", "`{timeout=seconds}`"} },
      options = { {"timeout", "number", "none", "seconds"} }, summary = "waits for the event" },
    { "cuda.event:query", sig = "e:query()", returns = { {"boolean", "true once reached"} },
      summary = "whether the event was reached (never blocks)" },
    { "cuda.event:elapsed", sig = "e:elapsed(e0)", params = { {"e0", "cuda.event", "the earlier event"} },
      returns = { {"number", "milliseconds"} }, summary = "milliseconds from `e0` to `e`, both recorded with timing and complete" },
    { "cuda.event:free", sig = "e:free()", summary = "destroys the event (also `<close>`)" },
    { "cuda.graph", kind = "class", summary = "an executable graph made by `s:capture(fn)`",
      fields = { {"nodes", "integer", "nodes in the graph"}, {"objects", "integer", "objects the graph keeps alive"} } },
    { "cuda.graph:launch", sig = "g:launch([s])", params = { {"s", "cuda.stream?", "the stream (default stream)"} },
      summary = "replays the graph" },
    { "cuda.graph:free", sig = "g:free()", summary = "destroys the graph once its launches are done (also `<close>`)" },
    { "cuda.bench", sig = "cuda.bench(fn, {warmup=3, reps=20, stream=s, timeout=s})",
      params = { {"fn", "function", "called without arguments; enqueues the work"}, {"opts", "table?", "counts"} },
      options = { {"warmup", "integer", "3", "untimed calls first"}, {"reps", "integer", "20", "timed calls"},
                  {"stream", "cuda.stream", nil, "the stream the events are recorded on"},
                  {"timeout", "number", "none", "seconds for each rep's wait"} },
      returns = { {"table", "`{median=, min=, max=, mean=, samples=}` in ms"} },
      summary = "`{median=, min=, max=, mean=, samples=}` in ms, each rep timed with a pair of events (the plain form of `cuda.measure`, below); `timeout` (seconds, default none) bounds each rep's wait for its end event and raises naming the pending launches" },
  } },

-- ---------------------------------------------------------------------------------------------
{ title = "SM partitions: `cuda.partition`", level = 3,
  text = [==[
`cuda.partition{sms=n}` runs kernels on part of the current device's SMs, through the driver's green
contexts (CUDA 12.4 drivers and newer, looked up at run time). `p:stream()` gives an ordinary
`cuda.stream`: launches, copies, events, `cuda.measure`, `cuda.bench` and `cuda.profile` take it as
they take any stream. Modules and arrays of the device work on it unchanged: a green context uses the
device's primary context, where gpulab loads modules and allocates.

The driver splits SMs in fixed steps, which `cuDeviceGetDevResource` reports (compute capability 9.0:
at least 8 SMs, in multiples of 8; where an older driver leaves those fields empty, gpulab uses the
steps cuda.h documents). A request between two steps is rounded up: `cuda.partition{sms=12}` on an
H200 gives 16 SMs, `p.rounded` is true and `tostring(p)` says so. `sms` equal to the device's SM count
takes the whole device without a split.

Lifetime: each stream keeps its partition alive. `p:free()` (also `<close>` and collection) never
raises and can be called twice; streams made before it keep working, and the green context is
destroyed after the last of them is freed and its work is done (the driver needs the streams gone
first). `cuda.stats().partitions` counts partitions not yet freed.

On the H200, blocks on a 16-SM partition's stream run on at most 16 distinct SMs (`%smid`;
tests/lua/gpu_partition.lua). The driver documents two cases where a partition may use more SMs than
it was given: MPS with `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`, and a loaded module that uses dynamic
parallelism on compute capability 9.x (2 more shared SMs).]==],
  entries = {
    { "cuda.partition", sig = "cuda.partition{sms=n}",
      params = { {"opts", "table", "`{sms=n}`"} },
      options = { {"sms", "integer", nil, "SMs to set aside: between the driver's minimum and the device's SM count"} },
      returns = { {"cuda.partition", "the partition"} },
      errors = { "cuda.partition: needs cuGreenCtxCreate (a CUDA 12.4 driver or newer); this driver (12020) lacks it",
                 "bad argument #1 to 'cuda.partition' (field 'sms': 133 is above this device's 132 SMs)",
                 "bad argument #1 to 'cuda.partition' (field 'sms': 4 is below the driver's minimum partition of 8 SMs (granularity: multiples of 8))",
                 "bad argument #1 to 'cuda.partition' (field 'sms': 130 SMs cannot be split off this device's 132 (the driver splits at least 8 SMs, in multiples of 8): ask for at most 128, or 132 for the whole device)",
                 "bad argument #1 to 'cuda.partition' (partitions do not nest: cuda.partition splits the current device (pass {sms=n}))" },
      summary = "a partition of the current device's SMs (cuDeviceGetDevResource, cuDevSmResourceSplitByCount, cuDevResourceGenerateDesc, cuGreenCtxCreate); `sms` is a positive integer, checked against the device and the driver's split rules before the split" },
    { "cuda.partition", kind = "class", summary = "an SM partition (a green context); `<close>` frees it",
      fields = { {"sm_count", "integer", "SMs the driver granted"}, {"requested", "integer", "the `sms` asked for"},
                 {"rounded", "boolean", "true when the driver granted more than asked (rounded up to its steps)"},
                 {"granularity", "integer", "the driver's split step (SMs)"}, {"minimum", "integer", "the smallest partition (SMs)"},
                 {"device", "integer", "the device ordinal"}, {"streams", "integer", "its streams not yet freed"},
                 {"freed", "boolean", "true after `p:free()`"} } },
    { "cuda.partition:stream", sig = "p:stream{priority=}",
      params = { {"opts", "table?", "`{priority=}`"} },
      options = { {"priority", "integer", "the lowest", "stream priority, in the device's range (lower is higher priority)"} },
      returns = { {"cuda.stream", "a non-blocking stream whose kernels run on the partition's SMs (cuGreenCtxStreamCreate)"} },
      errors = { "part:stream: the cuda.partition was freed",
                 "calling 'part:stream' on bad self (the cuda.partition belongs to device 0, but device 1 is current (a context cannot use another's cuda.partition, peer access or not; …))" },
      summary = "a stream in the partition; the partition's device must be current" },
    { "cuda.partition:free", sig = "p:free()",
      summary = "gives the partition up (also `<close>`); its live streams keep working and the green context goes with the last of them" },
  } },

-- ---------------------------------------------------------------------------------------------
{ title = "Tensor maps (Hopper TMA)", level = 2,
  text = [==[
`cuda.tensormap{array=d | address=int, dtype=, dims={…}, strides={…}, box={…}, element_strides={…},
interleave="none"|"16B"|"32B", swizzle="none"|"32B"|"64B"|"128B", l2_promotion="none"|"64B"|"128B"|"256B",
oob_fill="none"|"nan"}` (innermost first; strides in bytes, one fewer than dims, default packed).
Every rule of `cuTensorMapEncodeTiled` is checked before the driver is called and the error names the
rule and the value (`box[2] = 257: each box dimension must be 1..256`). `cuda.tensormap_check(spec)` →
`true` or `false, message` without a driver. A map has `box_bytes` (the `expect_tx` count of one box),
`describe()`, `replace_address(array)`, and keeps its array alive. Kernels take it as
`const __grid_constant__ gl_tensormap_t` with the helpers in `kernels/include/gpulab/tma.cuh` (mbarrier
init and publish, `arrive.expect_tx`, a `try_wait.parity` with a `%globaltimer` deadline that records what
it waited for and returns instead of trapping, 2-D TMA loads and stores, descriptor prefetch).]==],
  entries = {
    { "cuda.tensormap", sig = "cuda.tensormap(spec)",
      params = { {"spec", "table", "the map's layout"} }, options_param = "spec",
      options = {
        {"array", "cuda.array", nil, "the array it points into (or `address`)"},
        {"address", "integer", nil, "a device address the script vouches for"},
        {"dtype", "string", nil, "element type"},
        {"dims", "integer[]", nil, "dimensions, innermost first"},
        {"strides", "integer[]", "packed", "byte strides, one fewer than dims"},
        {"box", "integer[]", nil, "the box one TMA operation moves (each 1..256)"},
        {"element_strides", "integer[]", nil, "element strides"},
        {"interleave", "\"none\"|\"16B\"|\"32B\"", "`\"none\"`", "interleave"},
        {"swizzle", "\"none\"|\"32B\"|\"64B\"|\"128B\"", "`\"none\"`", "swizzle"},
        {"l2_promotion", "\"none\"|\"64B\"|\"128B\"|\"256B\"", "`\"none\"`", "L2 promotion"},
        {"oob_fill", "\"none\"|\"nan\"", "`\"none\"`", "out-of-bounds fill"},
      },
      returns = { {"cuda.tensormap", "the encoded map"} },
      errors = { "bad argument #1 to 'cuda.tensormap' (box[2] = 257: each box dimension must be 1..256)" },
      summary = "encodes a tiled tensor map (`cuTensorMapEncodeTiled`), every rule checked first" },
    { "cuda.tensormap_check", sig = "cuda.tensormap_check(spec)",
      params = { {"spec", "table", "as cuda.tensormap"} }, options_of = "cuda.tensormap", options_param = "spec",
      returns = { {"boolean", "valid"}, {"string?", "the message"} },
      summary = "`true` or `false, message` without a driver" },
    { "cuda.tensormap", kind = "class", summary = "an encoded tensor map; it keeps its array alive",
      fields = {
        {"box_bytes", "integer", "the `expect_tx` count of one box"},
        {"dtype", "string", "element type"}, {"rank", "integer", "dimensions"},
        {"dims", "integer[]", "dimensions"}, {"strides", "integer[]", "byte strides"},
        {"box", "integer[]", "box"}, {"element_strides", "integer[]", "element strides"},
        {"interleave", "string", "interleave"}, {"swizzle", "string", "swizzle"},
        {"smem_align", "integer", "the alignment a box's shared-memory destination needs: 128 bytes, or the " ..
          "swizzle pattern's repeat (256, 512, 1024 bytes for 32B, 64B, 128B); pass it to " ..
          "`gl_tma_dst_aligned` in the kernel (on the H200 a 128B-swizzled box 128 bytes off lands in another " ..
          "layout, 16 bytes off faults with CUDA_ERROR_MISALIGNED_ADDRESS)"},
        {"l2_promotion", "string", "L2 promotion"}, {"oob_fill", "string", "out-of-bounds fill"},
        {"address", "integer", "the global address encoded"},
        {"array", "cuda.array?", "the array it points into"},
      } },
    { "cuda.tensormap:describe", sig = "tm:describe()", returns = { {"string", "the layout in words"} },
      summary = "the map's layout as text" },
    { "cuda.tensormap:replace_address", sig = "tm:replace_address(array)",
      params = { {"array", "cuda.array", "the new base"} },
      summary = "same layout, new base (`cuTensorMapReplaceAddress`)" },
    { "cuda.tensormap:free", sig = "tm:free()", summary = "drops the map and its array (also `<close>`)" },
  } },

-- ---------------------------------------------------------------------------------------------
{ title = "Kernel helpers for clusters, distributed shared memory, TMA multicast and PDL", level = 3,
  text = [==[
`kernels/include/gpulab/cluster.cuh` (`#include <gpulab/cluster.cuh>`; it includes `tma.cuh`) holds the
device side of the Hopper launch keys (`cluster=`, `pdl=`, `cooperative=` of `k:launch`), in inline PTX for
sm_90 and later. Like `tma.cuh` nothing in it traps: a wait that can be bounded takes a `%globaltimer`
deadline, records what it waited for in a status flag (`status[0]` code, `[1]` block, `[2]` thread, `[3]` ns
waited) and returns `false`.

| helper | PTX | does |
|---|---|---|
| `gl_pdl_wait()` | `griddepcontrol.wait` | in a `pdl=true` launch: waits until the previous kernel in the stream completed and its writes are visible; read its output only after this (a no-op without `pdl=true`) |
| `gl_pdl_launch_dependents()` | `griddepcontrol.launch_dependents` | lets the next `pdl=true` kernel start once every CTA of this grid called it or exited |
| `gl_cluster_ctarank()`, `gl_cluster_nctarank()` | `%cluster_ctarank`, `%cluster_nctarank` | this CTA's rank in its cluster, the cluster's size |
| `gl_cluster_id()`, `gl_cluster_count()`, `gl_cluster_linear_id()`, `gl_cluster_ctaid()` | `%clusterid`, `%nclusterid`, `%cluster_ctaid` | which cluster, how many, and the CTA's position in it |
| `gl_cluster_is_explicit()`, `gl_smid()` | `%is_explicit_cluster`, `%smid` | whether the launch had clusters; the SM |
| `gl_cluster_arrive()`, `gl_cluster_arrive_relaxed()`, `gl_cluster_wait()`, `gl_cluster_sync()` | `barrier.cluster.arrive.release` / `.relaxed`, `barrier.cluster.wait.acquire` | the cluster barrier; arrive + wait publishes shared-memory writes to the other CTAs |
| `gl_dsmem_map(ptr, rank)`, `gl_dsmem_map_addr(addr, rank)` | `mapa.shared::cluster.u32` | the shared::cluster address of the same variable in CTA `rank` |
| `gl_dsmem_ld_u32`, `gl_dsmem_st_u32`, `gl_dsmem_ld_v4` | `ld`/`st.shared::cluster` | weak loads and stores in another CTA's shared memory |
| `gl_dsmem_st_release_u32`, `gl_dsmem_ld_acquire_u32`, `gl_dsmem_atomic_add_u32` | `st.release.cluster`, `ld.acquire.cluster`, `atom.relaxed.cluster` | flags and counters across the cluster |
| `gl_dsmem_wait_u32(addr, want, deadline_ns, status, code)` | acquire loads | waits for a value, bounded by the deadline |
| `gl_smem_ld_u32`, `gl_smem_ld_v4` | `ld.shared` | local loads in the same loop shape (for comparisons) |
| `gl_mbar_arrive_remote(cluster_addr)` | `mbarrier.arrive.release.cluster.shared::cluster` | one arrival on another CTA's mbarrier; its owner reads what the arriving thread wrote only after `gl_mbar_wait_cluster` |
| `gl_mbar_wait_cluster(bar, parity, deadline_ns, status, code)`, `gl_mbar_try_wait_cluster(bar, parity)` | `mbarrier.try_wait.parity.acquire.cluster.shared::cta` | waits for a phase of this CTA's mbarrier with acquire at cluster scope, bounded by the deadline as `gl_mbar_wait`: the wait for data that other CTAs publish by arriving on the barrier (`gl_mbar_wait` acquires at CTA scope, which does not synchronise with another CTA's release) |
| `gl_tma_load_2d_multicast(dst, &map, x, y, bar, cta_mask)` | `cp.async.bulk.tensor.2d…multicast::cluster` | one box into every CTA whose bit is set in `cta_mask` (`gl_cluster_mask_first(n)`) |

Multicast accounting: the box lands at `dst`'s offset in each destination CTA and completes its bytes
(`map.box_bytes`) on the mbarrier at `bar`'s offset **in each destination CTA**, so every receiving CTA arms
its own barrier (`gl_mbar_arrive_expect_tx(bar, box_bytes)`) once per phase, whichever CTA issues the copy.
Every destination's barrier must be initialised and published (`gl_mbar_init`, `gl_fence_mbar_init`, then
`gl_cluster_sync()`) before any CTA multicasts into it, and a buffer is reloaded only after every receiver
finished reading it. A CTA whose shared memory others read must not exit before they are done: end such
kernels with `gl_cluster_sync()`. `labs/hopper_clusters.lua` measures what each feature buys.]==] },

-- ---------------------------------------------------------------------------------------------
{ title = "Child processes and tools", level = 2,
  entries = {
    { "cuda.run_isolated", sig = "cuda.run_isolated(script, {args={…}, timeout=s, env={K=V | K=false}})",
      params = { {"script", "string", "the Lua script to run"}, {"opts", "table?", "arguments and limits"} },
      options = { {"args", "string[]", nil, "the script's arguments (at most 100,000)"},
                  {"timeout", "number", nil, "seconds; at the deadline the process group is killed"},
                  {"env", "table<string, string|boolean>", nil, "variables to set (`K=V`) or remove (`K=false`)"} },
      returns = { {"table", "`{status=, code=, signal=, stdout=, stderr=, seconds=}`"} },
      summary = "runs `gpulab script args…` in its own process group (gpulab's host adds it: lua5.4 has none)" },
  },
  after = [==[
`cuda.run_isolated(script, {args={…}, timeout=s, env={K=V | K=false}})` runs `gpulab script args…` in its
own process group and returns `{status="ok"|"error"|"timeout"|"crashed", code=, signal=, stdout=, stderr=,
seconds=}`; at the deadline the group is killed. Use it for anything that may poison a context or hang.
At most 100,000 `args`; an argument with a zero byte, more entries, or arguments and environment beyond what
the system's `execve` takes raise an error before any child runs.

`gpulab --sanitize=memcheck|racecheck|synccheck|initcheck script.lua` re-runs itself under
compute-sanitizer (`--error-exitcode 99`, kernels compiled with line info) and exits non-zero on any
report. `gpulab --watch script.lua` re-runs the script in a fresh process whenever it, a Lua module it
required, or a kernel source or header it compiled changes.]==] },

-- ---------------------------------------------------------------------------------------------
{ title = "The lab harness: `require(\"gpulab.lab\")`", level = 2,
  text = [==[
```lua
local harness = require("gpulab.lab")
local lab = harness.new{ name = "x", title = "…", claims = "seed §3",
                   params = { {name = "rows", default = 8192, help = "…"} } }
-- command line: --quick, --json FILE, --svg PREFIX, --rows=N / --rows N, --help
lab:section("Measurement"); lab:note("…")
lab:table({ "box", "GB/s" }, rows)          -- aligned; also in the JSON results
lab:verdict(claim, measured_text, holds)    -- HOLDS / REFUTED / UNCLEAR (holds == nil)
lab:record(key, value)
local ok, why = lab:gpu()                   -- false without a device: compile only, exit 0
lab:require_gpu("compiled only")            -- without a device: note, finish (claims never judged), exit 0
lab:progress(i, n, label)                   -- on stderr when it is a terminal
lab:svg_lines{…}; lab:svg_bars{…}; lab:svg_timeline{…}
lab:fail(msg)                               -- records a failure (stderr now, JSON later): lab:finish() exits 1
os.exit(lab:finish())                       -- JSON, verdict summary, exit status
```]==],
  entries = {
    { "harness.new", sig = "harness.new(spec)", params = { {"spec", "table", "`{name=, title=, claims=, params=, budget_s=, quick_budget_s=, args=}`"} },
      returns = { {"Lab", "the lab"} },
      summary = "a lab: parses the command line (`--quick`, `--json FILE`, `--svg PREFIX`, `--html FILE`, `--NAME=V`, `--help`), tries every output by writing and prints its heading" },
    { "Lab", kind = "class", summary = "a lab made by `harness.new` (written `lab` in the examples)",
      fields = { {"name", "string", "the lab's name"},
                 {"params", "table<string, any>", "each declared parameter's value"},
                 {"quick", "boolean", "`true` under `--quick`"},
                 {"dir", "string", "the folder of the lab file (where `lab:compile` looks first)"} } },
    { "Lab:section", sig = "lab:section(title)", params = { {"title", "string", "the heading"} }, summary = "starts a section of the printed report" },
    { "Lab:note", sig = "lab:note(text)", params = { {"text", "string", "the note"} }, summary = "a line of text in the current section" },
    { "Lab:current_section", sig = "lab:current_section()", returns = { {"string?", "the title"} }, summary = "the title of the current section" },
    { "Lab:table", sig = "lab:table(header, rows[, opts])",
      params = { {"header", "string[]", "column titles"}, {"rows", "table[]", "the rows"}, {"opts", "table?", "layout"} },
      summary = "prints an aligned table; also in the JSON results" },
    { "Lab:verdict", sig = "lab:verdict(claim, measured_text, holds[, evidence])",
      params = { {"claim", "string", "a claim id or text"}, {"measured_text", "string", "what was measured"},
                 {"holds", "boolean?", "true, false, or nil for unclear"}, {"evidence", "table?", "lab:compare's detail"} },
      summary = "HOLDS / REFUTED / UNCLEAR (holds == nil)" },
    { "Lab:record", sig = "lab:record(key, value)", params = { {"key", "string", "the name"}, {"value", "any", "a JSON-able value; a measure result's `ci95` (a list with `.lo`/`.hi`) is written as `[lo, hi]`, other tables mixing list and name keys as objects keyed \"1\"..\"n\" and by name"} },
      summary = "a value in the JSON results" },
    { "Lab:gpu", sig = "lab:gpu()", returns = { {"boolean", "a device is usable"}, {"string?", "why not"} },
      summary = "false without a device: compile only, exit 0" },
    { "Lab:require_gpu", sig = "lab:require_gpu([text])", params = { {"text", "string?", "a note for the run without a device"} },
      returns = { {"boolean", "true: a device is usable"} },
      summary = "without a device, ends the lab: notes `text`, `lab:finish()` (claims never judged: \"no GPU\"; outputs written) and exits 0" },
    { "Lab:progress", sig = "lab:progress(i, n, label)",
      params = { {"i", "integer", "done"}, {"n", "integer", "total"}, {"label", "string?", "what"} },
      summary = "on stderr when it is a terminal" },
    { "Lab:svg_lines", sig = "lab:svg_lines{…}", params = { {"spec", "table", "series of points `{x, y, lo=, hi=}`"} },
      summary = "a line chart (points with `lo`/`hi` draw error bars, a series with `band = true` a shaded band)" },
    { "Lab:svg_bars", sig = "lab:svg_bars{…}", params = { {"spec", "table", "bars `{label=, value=, lo=, hi=}`"} },
      summary = "a bar chart (bars with `lo`/`hi` draw error bars)" },
    { "Lab:svg_timeline", sig = "lab:svg_timeline{…}", params = { {"spec", "table", "lanes of spans"} },
      summary = "a timeline picture" },
    { "Lab:kernel_path", sig = "lab:kernel_path(path)", params = { {"path", "string", "a kernel file"} },
      returns = { {"string", "the file lab:compile reads"} }, summary = "an absolute path as is; a relative one beside the lab file (`lab.dir`), else under cuda.home; raises naming the places looked at" },
    { "Lab:provenance", sig = "lab:provenance()", returns = { {"table", "the results' `provenance`"} },
      summary = "build, versions, device, date, host, command line, parameters, compiled kernels (docs/RESULTS_SCHEMA.md)" },
    { "Lab:svg_ratio", sig = "lab:svg_ratio{…}", params = { {"spec", "table", "`{file=, title=, threshold=1, margin=0.01, items={ {label=, value=, lo=, hi=} }}`"} },
      returns = { {"string?", "the path written"}, {"string", "the SVG text"} }, summary = "ratios and their intervals on an axis around the threshold ± margin" },
    { "Lab:picture_path", sig = "lab:picture_path(file)", params = { {"file", "string", "the picture's file name"} },
      returns = { {"string?", "the path, or nil without --svg"} }, summary = "where a picture goes under `--svg PREFIX`" },
    { "Lab:fail", sig = "lab:fail(msg)", params = { {"msg", "string", "what failed"} },
      summary = "records a failure (stderr now, JSON later): lab:finish() exits 1" },
    { "Lab:results", sig = "lab:results()", returns = { {"table", "the JSON results"} }, summary = "the results as the JSON file holds them" },
    { "Lab:finish", sig = "lab:finish()", returns = { {"integer", "the exit status"} },
      summary = "JSON, verdict summary, exit status (`os.exit(lab:finish())`)" },
  } },

{ title = "Claims, measurements and verdicts from intervals", level = 3,
  text = [==[
```lua
local lab = harness.new{ name = "x", claims = "seed §3", budget_s = 240, quick_budget_s = 45,
  params = { {name = "cols", default = 16384, quick = 4096, multiple_of = 256, help = "…"} } }
-- quick= applies under --quick unless the option is given; multiple_of= refuses other values;
-- the printed "params:" line shows the values really used
lab:claim{ id = "overlap", source = "Luo et al. 2024, Table 3", text = "the sentence it tests" }
  -- source: any citation (a paper's table, a URL, a document and section); or seed = "§3"; or own = true
local r = harness.measure(fn, {regime = "cold", min_samples = 10, min_time = 0.2, max_noise = 0.005, timeout = 5})
  -- every cuda.measure option handed on (warmup, batch, max_samples, blocking, ... too), label= copied into
  -- the result, any other option refused; engine = "cuda.measure" in the result; lab:record(key, r) keeps it
local d, ratio, ci, detail = lab:compare(a, b, {margin = 0.01, against = 1, rounds = 3, remeasure = fn})
lab:verdict("overlap", measured_text, holds, detail)   -- prints both intervals and the ratio interval
```

- `lab:compare` decides on a's time against b's: `ratio = a.mean / b.mean`, its interval
  `{a.ci95[1] / b.ci95[2], a.ci95[2] / b.ci95[1]}` (the extreme ratios the two 95% intervals allow:
  conservative, never narrower than a delta-method interval). "faster" when the whole interval is
  below `against·(1 − margin)`, "slower" above `against·(1 + margin)`, "same" inside the band.
  Undecided, it measures again — calling `a`/`b` when they are functions returning results, or
  `remeasure(round)` → a2, b2 — pools the samples and decides again, while `rounds` and the lab's
  budget (`budget_s` / `quick_budget_s`, counted from `harness.new`) last; then "unclear" with
  `detail.reason`: "effect smaller than the noise" (the interval is wider than the band), "effect
  at the margin", and "budget spent" or "N re-measure rounds spent".
- A declared claim never judged is reported at `lab:finish()` as UNCLEAR "never judged" (with why,
  e.g. no GPU), in the printed summary and in the JSON (`never_judged = true`, `judged = false`);
  `lab:judge_missing(why)` does it earlier. JSON verdicts carry `id`, `source`, `seed`, `own`, `judged` and
  `evidence = {intervals = {…}, ratio, ratio_ci, against, margin, decision, reason}`;
  `declared_claims` lists the claims. The JSON's layout, `schema` version and `provenance` (build,
  versions, device, date, host, command line, parameters, each kernel's options and resources) are
  described in docs/RESULTS_SCHEMA.md. `lab:verdict` with a word that is no declared id (a typo such as
  "overlpa") raises naming the declared ids and the nearest one; a whole sentence is an undeclared claim.
- `harness.holds(decisions, {holds=, refuted=, valid=})` turns decisions into the verdict: false when
  one decision refutes the claim, true when every one holds it, nil (unclear) otherwise — the mapping a
  lab writes once per claim beside its declaration, instead of if-chains after each compare.
- `harness.summarize(times_ms [, extra])` builds a result (mean, median, min, max, stdev, noise =
  stdev/mean, ci95 = mean ± t·stdev/√n); `harness.pool(a, b)`; `harness.ratio(a, b)`; `harness.format_result(r)`.
- Helpers: `lab:compile(path, opts)` (compiles and notes arch, time, cache hit; a relative path is
  looked up beside the lab file first — `lab.dir`, the lab's folder — then under the gpulab home; an
  absolute path is taken as is; a missing file raises naming every place looked at),
  `lab:child(script, {args=, env=, timeout=})` (cuda.run_isolated without a sanitizer's injection),
  `harness.spawn(command, {timeout=}).wait()` → `{out=, exit=, timed_out=, seconds=}` (several at once;
  exit 124/137 = the deadline), `harness.find_tool(name)`, `harness.shell_quote(s)`, `harness.gpulab_exe()`.
- Outputs (`--json FILE`, `--svg PREFIX`, `--html FILE`) are tried by writing before the lab does any
  work (a missing folder, a path without write permission, a full device such as `/dev/full`): the lab
  stops at once with exit 1 and a message naming the option and the path. Later, one output failing
  (a picture whose folder disappeared, a disk filling up) is a failure of the run (exit 1) that never
  keeps the others from being written, and a file that could not be written whole is put back as it
  was (an earlier run's results are never left half-overwritten). The trial writes nothing into a pipe
  or a terminal, and never reads one. The lab's own standard output and error (`/dev/stdout`, `-`,
  `/dev/fd/1`, ...) are refused: its report is printed there. JSON, HTML and SVG text is valid UTF-8
  (a byte that starts no character is written as U+FFFD). Two pictures of one run with the same
  `file=` raise. `provenance.cwd` is the folder the lab ran in (`$PWD` only when it names that folder).
- `--html FILE` writes one self-contained HTML page per run (`gpulab.html`: no script, no link, no
  external file; the pictures are inline SVG): the title, every claim with its verdict, source,
  measurement and evidence (the intervals as a table, the time ratio with its interval in words and
  as a picture scaled around the threshold ± margin), the tables, the lab's pictures (written with
  `--svg` or not), notes, failures and the provenance. `html.report(results [, svg_texts])` makes
  the page from `lab:results()` (or the JSON read back).
- Pictures: integer data (sizes, counts, stages) gets integer ticks; `threshold = v` (with
  `threshold_label`) on `lab:svg_lines`/`lab:svg_bars` draws a dashed line and scales the y axis
  around the data and the threshold instead of from zero (`y_from_zero = false` does the same without
  a line); `lab:svg_ratio{file=, threshold=1, margin=0.01, items={ {label=, value=, lo=, hi=} }}` draws
  ratios with their intervals against the band, green below, red above, grey touching it; category
  labels too wide for their bar are turned, legend entries cut to their room (full text as a
  tooltip); a timeline span's colour is its `kind` (else its label), named in a legend under the axis
  (one colour and no legend when there would be more kinds than colours).
- Pictures: a point `{x, y, lo=, hi=}` of `lab:svg_lines` draws an error bar (a series with
  `band = true` a shaded band); a bar `{label=, value=, lo=, hi=}` of `lab:svg_bars` an error bar.]==],
  entries = {
    { "Lab:claim", sig = "lab:claim{id=, text=, source=|seed=|own=}",
      params = { {"spec", "table", "`{id=, text=}` and exactly one of `source = \"any citation\"`, `seed = \"§N\"`, `own = true`"} },
      summary = "declares a claim the lab will judge; its source is printed under its verdict and kept in the JSON" },
    { "Lab:judge_missing", sig = "lab:judge_missing(why)", params = { {"why", "string", "the reason"} },
      summary = "judges every declared claim not yet judged UNCLEAR \"never judged\"" },
    { "Lab:compare", sig = "lab:compare(a, b, {margin=0.01, against=1, rounds=3, remeasure=fn})",
      params = { {"a", "table|function", "a result, or a function returning one"}, {"b", "table|function", "the same for b"},
                 {"opts", "table?", "the decision's band and re-measuring"} },
      options = { {"margin", "number", "0.01", "half-width of the \"same\" band"}, {"against", "number", "1", "the ratio compared with"},
                  {"rounds", "integer", "3", "re-measure rounds at most"}, {"remeasure", "function", nil, "`remeasure(round)` → a2, b2"} },
      returns = { {"string", "\"faster\"|\"slower\"|\"same\"|\"unclear\""}, {"number", "ratio"}, {"number[]", "ratio interval"}, {"table", "detail"} },
      summary = "decides on a's time against b's from their 95% intervals" },
    { "harness.measure", sig = "harness.measure(fn, opts)", params = { {"fn", "function", "enqueues the work"}, {"opts", "table?", "cuda.measure's options"} },
      returns = { {"table", "cuda.measure's result, `engine = \"cuda.measure\"`"} },
      summary = "cuda.measure with every one of its options handed on (`label=` is copied into the result; an unknown option raises)" },
    { "harness.summarize", sig = "harness.summarize(times_ms [, extra])",
      params = { {"times_ms", "number[]", "the samples"}, {"extra", "table?", "fields copied into the result"} },
      returns = { {"table", "mean, median, min, max, stdev, noise, ci95"} }, summary = "builds a result from a list of times" },
    { "harness.pool", sig = "harness.pool(a, b)", params = { {"a", "table", "a result"}, {"b", "table", "another"} },
      returns = { {"table", "the pooled result"} }, summary = "one result from the samples of two" },
    { "harness.ratio", sig = "harness.ratio(a, b)", params = { {"a", "table", "a result"}, {"b", "table", "another"} },
      returns = { {"number", "ratio"}, {"number[]", "its interval"} }, summary = "`a.mean / b.mean` and its conservative interval" },
    { "harness.decide", sig = "harness.decide(ci, margin, against)",
      params = { {"ci", "number[]", "a ratio interval"}, {"margin", "number", "band half-width"}, {"against", "number", "the ratio compared with"} },
      returns = { {"string", "\"faster\"|\"slower\"|\"same\"|\"unclear\""} }, summary = "the decision lab:compare makes from one interval" },
    { "harness.holds", sig = "harness.holds(decisions, {holds=, refuted=, valid=})",
      params = { {"decisions", "string|string[]", "a decision of lab:compare, or a list of them (one per size or pair)"},
                 {"rule", "table", "`{holds = {\"faster\"}, refuted = {\"slower\", \"same\"}, valid = true}`"} },
      returns = { {"boolean?", "true (holds), false (refuted) or nil (unclear): lab:verdict's third argument"} },
      errors = { "bad argument #1 to 'harness.holds' (the decision is 'fast'; faster, slower, same or unclear expected)",
                 "bad argument #2 to 'harness.holds' (field 'refuted': 'faster' is in holds too)" },
      summary = "the verdict of a claim from decisions: refuted when one is in `refuted`, holds when every one is in `holds`, else unclear (an \"unclear\" decision, a word in neither list, no decision, or `valid = false`: evidence that cannot be judged, such as a wrong output)",
      example = [[local d, _, _, detail = lab:compare(two_stages, one_stage, {against = 1 / 1.6, margin = 0})
lab:verdict("overlap", "2 stages vs 1", harness.holds(d, {holds = {"faster"}, refuted = {"slower"}, valid = exact}), detail)]] },
    { "harness.format_result", sig = "harness.format_result(r[, unit[, scale]])",
      params = { {"r", "table", "a result"}, {"unit", "string?", "unit name"}, {"scale", "number?", "factor"} },
      returns = { {"string", "text"} }, summary = "a result as `mean unit [lo, hi] n=N noise P% regime` (`1.234 ms [1.230, 1.238] n=40 noise 0.3% hot`)" },
    { "harness.format_number", sig = "harness.format_number(v)", params = { {"v", "number", "a value"} },
      returns = { {"string", "text"} }, summary = "a number as the lab's tables print it" },
    { "Lab:compile", sig = "lab:compile(path, opts)",
      params = { {"path", "string", "a .cu file: absolute, or relative to `lab.dir`, else to cuda.home"}, {"opts", "table?", "cuda.compile's options"} },
      returns = { {"cuda.program", "the program"} }, summary = "compiles and notes arch, time, cache hit" },
    { "Lab:child", sig = "lab:child(script, {args=, env=, timeout=})",
      params = { {"script", "string", "the script"}, {"opts", "table?", "as cuda.run_isolated"} },
      returns = { {"table", "cuda.run_isolated's result"} }, summary = "cuda.run_isolated without a sanitizer's injection" },
    { "harness.spawn", sig = "harness.spawn(command, {timeout=})",
      params = { {"command", "string", "a shell command"}, {"opts", "table?", "`{timeout=seconds}`"} },
      returns = { {"table", "a handle whose `wait()` returns `{out=, exit=, timed_out=, seconds=}`"} },
      summary = "starts a command (several at once); exit 124/137 = the deadline" },
    { "harness.find_tool", sig = "harness.find_tool(name)", params = { {"name", "string", "e.g. \"ncu\""} },
      returns = { {"string?", "its path"} }, summary = "finds a program on PATH or in the CUDA folders" },
    { "harness.shell_quote", sig = "harness.shell_quote(s)", params = { {"s", "string", "any text"} },
      returns = { {"string", "quoted"} }, summary = "`s` quoted for sh" },
    { "harness.gpulab_exe", sig = "harness.gpulab_exe()", returns = { {"string", "path"} }, summary = "the running gpulab executable" },
  },
  after = [==[
`tools/verdicts.sh [GPULAB] [OUTDIR]` runs every lab 3 times with `--quick` and once in full
(`QUICK_LIMIT`, `FULL_LIMIT` seconds per run; `LABS=` to pick) and prints one row per claim with
each run's verdict and a "stable" column; exit 0 only when every claim is stable and every run exited 0.
`lab.params` holds each declared parameter's value (its `default`, or what the command line gave:
`--rows=N`, `--rows N`, `--flag` / `--no-flag` for booleans), converted to the default's type;
`lab.quick` is `true` under `--quick` (labs shrink their sweeps). Both are plain fields to read.]==] },

-- ---------------------------------------------------------------------------------------------
{ title = "Where gpulab finds its files: `cuda.home`, `GPULAB_HOME`", level = 2,
  entries = {
    { "cuda.home", kind = "field", type = "string", summary = "the folder gpulab's own files come from" },
  },
  after = [==[
`cuda.home` is the folder gpulab's own files come from (`lua/`, `kernels/include/`): `$GPULAB_HOME`
when it names a folder, else `<prefix>/share/gpulab` beside an installed `<prefix>/bin/gpulab` (or, for
`cuda.so` loaded by Lua 5.4's own interpreter, beside `<prefix>/lib/lua/5.4/cuda.so`), else the source
folder the build was configured from. `cuda.compile` adds `cuda.home .. "/kernels/include"` to every
compile (so `#include <gpulab/tma.cuh>` works), reading `cuda.home` at call time.]==] },

-- ---------------------------------------------------------------------------------------------
{ title = "The driver stand-in (tests only)", level = 2, help = false,
  text = [==[
`tests/fakecuda/` builds `libfakecuda.so`, a small libcuda replacement selected with
`GPULAB_LIBCUDA=…/libfakecuda.so`. It runs no kernel: it records launches with their packed argument
bytes (`GPULAB_FAKE_LOG=file`), injects failures (`GPULAB_FAKE_FAIL=cuMemAlloc:2[:nth],…`; sticky codes
poison it like a real context), holds work in flight (`GPULAB_FAKE_HANG=1`, `GPULAB_FAKE_BUSY_FILE=path`)
and reports `GPULAB_FAKE_DEVICES` devices. CI uses it for argument packing, error messages, the poisoned
state, deadlines and lifetimes; it never backs a GPU claim.
It answers every function attribute (`.reqnctapercluster` and `.explicitcluster` in the PTX give the
compiled-in cluster shape), takes `cuLaunchKernelEx` with cluster, cooperative, PDL, priority and L2-window
attributes (logged as ` attrs=cluster:2x1x1;pdl:1` before ` args=`), replays a captured graph's launches as
`graph_node` lines, and models cluster occupancy with 132 SMs in 7 GPCs of 18 and one of 6 (for plumbing
tests only). `GPULAB_FAKE_CC=8.0` makes it a device without clusters or PDL.]==] },

-- ---------------------------------------------------------------------------------------------
{ title = "Hardware counters: `cuda.profile`", level = 2,
  entries = {
    { "cuda.profile", sig = "cuda.profile(fn, {metrics=, max_launches=256, timeout=60, outer_range=})",
      params = { {"fn", "function", "runs the launches to profile"}, {"opts", "table", "metrics and limits"} },
      options = { {"metrics", "string[]", nil, "Nsight Compute metric names"},
                  {"max_launches", "integer", "256", "launches profiled at most"},
                  {"timeout", "number", "60", "seconds for the sync before the counters are read"},
                  {"outer_range", "boolean", "`true` unless `GPULAB_CUPTI_PUSH_RANGE=0`", "run fn inside one pushed range"} },
      returns = { {"table", "one row per launch, and `passes, launches, dropped, chip, truncated`"} },
      errors = { "cuda.profile: unknown metric 'dram__byte.sum' for this GPU (did you mean: dram__bytes.sum, ...?)",
                 "cuda.profile: cuptiRangeProfilerSetConfig: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35): …" },
      summary = "hardware counters of each kernel launch `fn` makes (CUPTI range profiler)" },
    { "cuda.profile_available", sig = "cuda.profile_available()",
      returns = { {"boolean", "CUPTI can be used"}, {"string", "libcupti's path, or why not"} },
      summary = "`true, path of libcupti` or `false, why` (opens CUPTI; needs no GPU)" },
  },
  text = [==[
```lua
local rows = cuda.profile(fn, {metrics = {"smsp__warps_active.avg.per_cycle_active",
                                          "smsp__warps_eligible.avg.per_cycle_active",
                                          "smsp__issue_active.avg.per_cycle_active", "dram__bytes.sum"},
                               max_launches = 256, timeout = 60, outer_range = true})
--> { {kernel="copy_f32", range="copy_f32", grid={x,y,z}, block={x,y,z}, passes=1,
--      metrics={["dram__bytes.sum"]=5.4e8, ...}}, ...,
--    passes=1, launches=2, dropped=0, chip="GH100", truncated=nil }
cuda.profile_available()   --> true, path of libcupti | false, why
```

`cuda.profile` runs `fn` (a function or callable) and returns one row per kernel launch it made, in
launch order, with each metric's value under its Nsight Compute name. It uses CUPTI's range profiler
(CUDA 12.6+, `cupti_range_profiler.h` / `cupti_profiler_host.h`) in the process: auto range (each launch
is its own range) with kernel replay, so a metric set that needs several passes is replayed per launch
by CUPTI before the next one runs (`passes` says how many; results stay exact for deterministic
kernels, and launches are serialized while profiling). The context is synchronized (deadline `timeout`,
seconds) before the counters are read.

- `kernel`, `grid`, `block` are gpulab's record of the launch (`k:launch`, prepared launches); `range`
  is CUPTI's name for it. When CUPTI's ranges cannot be matched one to one with gpulab's launches
  (graph launches inside `fn`, more launches than `max_launches`), rows carry only `kernel = range` and
  `dropped` / `truncated` say what was lost. There are never more than `max_launches` rows; `dropped`
  counts what got none: the launches without a row, or the ranges CUPTI says it dropped (which can
  include the outer range) where those are more.
- Unknown metric names raise before anything runs, with the nearest names the chip knows (edit
  distance over CUPTI's base metrics and their submetrics):
  `cuda.profile: unknown metric 'dram__byte.sum' for this GPU (did you mean: dram__bytes.sum, ...?)`.
- CUPTI failures raise the CUPTI call, CUPTI's error name and number and its message, e.g.
  `cuda.profile: cuptiRangeProfilerSetConfig: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35): …` where counters
  are restricted to admin users.
- Refused: a nested `cuda.profile`, and `cuda.profile` during a stream capture.
- Every exit — normal, an error raised inside `fn`, a CUPTI or CUDA error — ends the session (stop,
  disable, host object and profiler deinitialized, images freed), so it works repeatedly in the REPL.
  CUPTI itself stays loaded and attached to the driver for the life of the process: `cuptiFinalize`
  would detach it, but then no later profile can start (`CUPTI_ERROR_NOT_INITIALIZED`, seen on the
  H200), so gpulab does not call it. Whether that leaves launches slower is not settled: an empty
  kernel's `k:launch` measured 3.91 µs before the first profile and 6.34 µs after in one H200 run,
  3.74 and 3.78 µs in another (`tools/profile_check.sh` prints both). Time launch overhead in a
  process that does not profile.
- libcupti is opened at run time: `GPULAB_CUPTI=/path/libcupti.so.13`, else `$CUDA_HOME` /
  `$CUDA_PATH` (`extras/CUPTI/lib64`, `lib64`), beside NVRTC, `/usr/local/cuda/extras/CUPTI/lib64`,
  `/usr/local/cuda/lib64`, then the loader path; its
  `libnvperf_host.so` is loaded from the same folder first. Absent, the first call raises one error
  naming the library and what to install; gpulab itself never links it.
- Values come from counters on clocks as they run (no clock locking, like `ncu --clock-control none`).
- To profile an L2 persisting window, put it on the stream (`s:set_l2_window`), not in the launch's
  `l2_window` key. On the H200 (driver 580.159, docs/RESULTS.md §25) a hot 16 MiB read under
  `cuda.profile` took 16.0 MiB from DRAM after a 512 MiB scan when the window was the launch key, and
  1.5 MiB when the same window was on the stream. Without the profiler the launch key's window does
  work: in `labs/memory_system.lua` (persist_time, §26) it cuts the hot reads' time to 0.75 of the same
  reads without it.
- fn runs inside one pushed range (`gpulab.profile`), as CUPTI's own range profiling sample does in
  auto-range mode; the result's `outer_range` says whether CUPTI accepted it, and a range of that name
  is never a row. `outer_range = false` (default: `GPULAB_CUPTI_PUSH_RANGE=0` in the environment)
  leaves it out.]==] },

-- ---------------------------------------------------------------------------------------------
{ title = "Per-line stall sampling: `cuda.pcsample`", level = 2,
  entries = {
    { "cuda.pcsample", sig = "cuda.pcsample(fn, {programs=, kernels=, period=, max_records=100000, mode=\"serialized\", baseline=false, timeout=60})",
      params = { {"fn", "function", "runs the launches to sample"}, {"opts", "table?", "programs, filters and limits"} },
      options = { {"programs", "cuda.program|cuda.program[]", nil, "where the sampled kernels came from: SASS, lines and source"},
                  {"kernels", "(string|cuda.kernel)[]", "every kernel", "report only these; the others' samples go to `other_samples`"},
                  {"period", "integer", "CUPTI's", "a sample every 2^period cycles, 5..31"},
                  {"max_records", "integer", "100000", "PC records kept at most (`truncated` past it)"},
                  {"mode", "string", "\"serialized\"", "`\"serialized\"` (kernels one at a time) or `\"continuous\"`"},
                  {"baseline", "boolean", "false", "run fn once more unsampled: `baseline` and `overhead`"},
                  {"timeout", "number", "60", "seconds for the sync after fn"} },
      returns = { {"cuda.pcsample_result", "one row per sampled kernel, and the totals"} },
      errors = { "cuda.pcsample: already sampling (cuda.pcsample cannot be nested)",
                 "cuda.pcsample: cuda.profile is running (CUPTI's PC sampling and counters do not mix)",
                 "cuda.pcsample: cannot sample during a stream capture (sample the graph's launch instead)",
                 "cuda.pcsample: cuptiPCSamplingGetData: CUPTI_ERROR_INVALID_OPERATION (7)…" },
      summary = "where each kernel launched by `fn` stalls, per SASS instruction and source line (CUPTI PC sampling)" },
    { "cuda.pcsample_available", sig = "cuda.pcsample_available()",
      returns = { {"boolean", "CUPTI's PC sampling can be used"}, {"string", "libcupti's path, or why not"} },
      summary = "`true, path of libcupti` or `false, why` (opens CUPTI; needs no GPU)" },
    { "cuda.pcsample_result", kind = "class",
      summary = "cuda.pcsample's rows `{kernel=, entry=, launches=, samples=, stalls=, lines=, pcs=, program=, lines_missing=, cubin_crc=, function_index=}` and totals (`kernel` as the script asked for it, `entry` the symbol CUPTI reports)",
      fields = { {"reasons", "string[]", "every stall reason name the device reports"},
                 {"total_samples", "integer", "CUPTI's count, non-user kernels included"},
                 {"dropped_samples", "integer", "samples the hardware dropped"},
                 {"non_user_samples", "integer", "samples in kernels CUPTI gives no records for"},
                 {"hardware_buffer_full", "boolean", "CUPTI's hardware buffer overflowed"},
                 {"records", "integer", "PC records kept"},
                 {"launches", "integer", "gpulab launches seen in fn"},
                 {"other_samples", "integer", "samples of kernels `kernels=` left out"},
                 {"elapsed", "number", "seconds of fn and its sync, sampled"},
                 {"baseline", "number?", "the same unsampled (`baseline=true`)"},
                 {"overhead", "number?", "elapsed / baseline"},
                 {"truncated", "boolean?", "records past max_records were left out"} } },
    { "cuda.pcsample_result:annotate", sig = "r:annotate([kernel])",
      params = { {"kernel", "(string|cuda.kernel|integer)?", "a row's kernel, or its number; optional with one row"} },
      returns = { {"string", "the source with each line's share of samples and top stall reasons"} },
      errors = { "r:annotate: no samples of kernel 'x' (sampled: a, b)" },
      summary = "the kernel's source, each line prefixed with its share of samples and its top stall reasons" },
  },
  text = [==[
```lua
local prog = cuda.compile(src, {name = "k.cu", lineinfo = true})
local k = cuda.load(prog):kernel("chase")
local r = cuda.pcsample(function() k:launch(cfg, next, out, n) end, {programs = prog, baseline = true})
--> { {kernel="chase", launches=1, samples=5210,
--      stalls={["smsp__pcsamp_warps_issue_stalled_long_scoreboard"]=4630, ...},
--      lines={ {file="k.cu", line=10, samples=4702, stalls={...}}, ... },      -- most samples first
--      pcs={ {offset=0x90, text="LDG.E.STRONG.GPU R4, desc[UR4][R2.64]", opcode=, file=, line=,
--             samples=, stalls={...}}, ... },                                   -- by offset
--      program=prog}, ...,
--    reasons={...}, total_samples=, dropped_samples=, records=, elapsed=, baseline=, overhead= }
print(r:annotate("chase"))
--  share  top stalls                                     | line  source (k.cu)
--  90.2%  long_scoreboard 98%, selected 1%               |   10          p = __ldcg(&next[p]);
```

`cuda.pcsample` runs `fn` (a function or callable) with CUPTI's PC sampling (`cupti_pcsampling.h`,
CUDA 11.3+) on the current context: the SMs sample warps' program counters every 2^`period` cycles and
say why each sampled warp did not issue, under CUPTI's names
(`smsp__pcsamp_warps_issue_stalled_long_scoreboard`, `..._wait`, `..._selected` = issued, ...;
`r.reasons` lists the device's). gpulab adds what it knows: which kernels `fn` launched (`launches`;
kernels sampled without a gpulab launch, a graph's for instance, get rows with `launches = 0`), the
program holding each kernel (`programs=`), the SASS instruction at each sampled offset and its source
line (`prog:sass`, so the toolkit's `nvdisasm`), aggregated per line and per reason.

- Without `programs=` or without a disassembler, PCs are still reported by offset; the row's
  `lines_missing` says why and `r:annotate` lists the PCs instead of the source. Compile with
  `lineinfo = true` so that the cubin that ran is the one disassembled (prog:sass otherwise
  compiles again with `-lineinfo`, which normally produces the same code).
- `mode = "serialized"` (CUPTI's kernel-serialized collection, the default) runs kernels one at a
  time, like Nsight Compute; `"continuous"` lets them overlap.
- The overhead is measured, not assumed: `elapsed` is fn with its sync under sampling; with
  `baseline = true` fn runs once more unsampled and `overhead = elapsed / baseline` (fn must be safe
  to run twice).
- Refused: a nested `cuda.pcsample`, one while `cuda.profile` runs (and `cuda.profile` inside
  `cuda.pcsample`), and one during a stream capture. It works inside `cuda.trace`.
- Every exit — normal, an error raised in `fn` (inside a coroutine too), a yield across it, a CUPTI
  failure — stops and disables PC sampling and frees the buffers before the error goes on, so it
  works repeatedly in the REPL. libcupti is the one `cuda.profile` opens (`GPULAB_CUPTI`, ...).]==] },

-- ---------------------------------------------------------------------------------------------
{ title = "Timeline: `cuda.trace` and `--trace`", level = 2,
  entries = {
    { "cuda.trace", sig = "cuda.trace([path | false])",
      params = { {"path", "(string|boolean)?", "a file starts recording; `false` stops and writes; none asks"} },
      returns = { {"string|table?", "the path while recording, the summary `{path=, spans=, device_spans=, dropped=}` after stopping"} },
      errors = { "cuda.trace: already tracing to … (cuda.trace(false) ends it)", "cuda.trace: cannot write …" },
      summary = "records a Chrome-trace timeline of every launch, copy, memset, sync and graph launch" },
  },
  text = [==[
```lua
cuda.trace("run.json")          -- start recording (raises if already recording or the file cannot be written)
cuda.trace()                    --> "run.json" while recording, else nil
local s = cuda.trace(false)     --> {path=, spans=, device_spans=, dropped=}   -- stop and write
```

`gpulab --trace FILE script.lua` (or `--trace=FILE`) does `cuda.trace(FILE)` before the script runs
and writes the file when the process ends (normal end, error or `os.exit`). The file is Chrome-trace
JSON (`{"traceEvents":[...]}`), which ui.perfetto.dev and chrome://tracing load:

- process "host" (pid 1): one complete event (`"ph":"X"`) per launch (`cat` "launch"), copy and memset
  ("copy"), graph launch ("graph") and sync ("sync"), spanning the host call; `args` hold `stream`,
  `grid`/`block` for launches and `bytes` for copies.
- process "GPU n" (pid 2): the device span of each launch ("kernel"), copy, memset and graph launch, one
  track (`tid`) per stream, named in `thread_name` metadata. Device times come from a pair of events
  recorded around each submission, placed on the host clock through a base event; they are exact
  relative to one another and shifted by the base event's queue delay in absolute terms. Work captured
  into a graph has a host span only (an event record there would become a graph node); spans whose
  work had not completed 2 s after the trace ended are written without a device span.
- `gpulab.spans`, `gpulab.device_spans`, `gpulab.dropped` at the top level count what was written;
  after 1,000,000 spans further ones are dropped, after 200,000 device-timed spans the rest are host only.

`gpulab tools/trace_svg.lua run.json [run.svg]` draws a trace with the harness's `gpulab.svg` timeline:
one lane for the host calls and one per stream for the device spans.

Cost: while nobody traces or profiles, each submission pays one load and compare; while tracing, each
GPU submission also records two events (the host cost per launch is printed by
`tools/profile_check.sh`).]==] },

-- ---------------------------------------------------------------------------------------------
{ title = "The CUPTI stand-in (tests only)", level = 2, help = false,
  text = [==[
`tests/fakecupti/` builds `libfakecupti.so`, selected with `GPULAB_CUPTI=…/libfakecupti.so` on top of
the driver stand-in. It implements the range profiler and profiler host calls with their sequencing
rules, makes one range per launch the driver stand-in accepts, evaluates metric *m* of a launch to
`1000 × (m's index in its list + 1) + the launch's thread count`, needs ⌈n/4⌉ passes for n metrics,
logs replay passes and every object created or destroyed (`GPULAB_FAKE_LOG`) and fails any call on
request (`GPULAB_FAKE_CUPTI_FAIL=cuptiName:code`). `tests/c/cupti_abi_check.cpp` checks that the CUPTI
structs gpulab declares (`bindings/cupti_abi.h`) match the toolkit's headers field by field.]==] },

-- ---------------------------------------------------------------------------------------------
{ title = "Measurement: `cuda.measure`", level = 2,
  entries = {
    { "cuda.measure", sig = "cuda.measure(fn, {regime=, min_samples=10, min_time=0.5, max_noise=0.005, timeout=15, …})",
      params = { {"fn", "function|cuda.prepared|table", "any callable; called as fn(s)"}, {"opts", "table?", "the measurement's rules"} },
      options = { {"regime", "\"cold\"|\"hot\"|\"graph\"", "`\"cold\"`", "what one sample is (table below)"},
                  {"min_samples", "integer", "10", "accepted samples at least"},
                  {"min_time", "number", "0.5", "seconds of sampling at least"},
                  {"max_noise", "number", "0.005", "relative half-width of the mean's 95% interval to stop at"},
                  {"timeout", "number", "15", "seconds for the whole call"},
                  {"stream", "cuda.stream", nil, "the measurement stream"},
                  {"throttle", "number", "0.75", "reject samples below this fraction of the reference clock (0: off)"},
                  {"blocking", "boolean", "`false`", "hold the stream until the sample is enqueued"},
                  {"warmup", "integer", "2", "untimed calls first"},
                  {"batch", "integer", nil, "calls per sample (hot, graph)"},
                  {"l2_reset", "boolean", "`true`", "cold: reset persisting L2 lines before every sample (false: skip, to show what a window left behind does)"},
                  {"max_samples", "integer", "10000", "samples at most"} },
      returns = { {"table", "`{mean=, median=, min=, max=, stdev=, noise=, ci95=, samples=, …}` in ms per call"} },
      errors = { "cuda.measure: fn enqueued no GPU work", "cuda.measure: no sample accepted within ...",
                 "bad argument #2 to 'cuda.measure' (field 'max_noise': must be a finite number > 0, got 0)" },
      summary = "times `fn` on the GPU until the mean is known to `max_noise` (or another stopping rule)" },
    { "cuda.stats_of", sig = "cuda.stats_of(times)", params = { {"times", "number[]", "times in ms"} },
      returns = { {"table", "`{mean, median, min, max, stdev, noise, stdrel, t95, ci95, samples}`"} },
      summary = "cuda.measure's statistics of any list of times" },
  },
  text = [==[
```lua
local r = cuda.measure(fn, {regime="cold"|"hot"|"graph", min_samples=10, min_time=0.5, max_noise=0.005,
                            timeout=15, stream=s, throttle=0.75, blocking=false, warmup=2, batch=, max_samples=10000})
  --> {mean=, median=, min=, max=, stdev=, noise=, ci95={lo, hi}, samples=, rejected=, sm_clock_mhz=, regime=,
  --   times={...}, stop=, ...}   -- times in ms, per call
local st = cuda.stats_of({1.02, 0.98, ...})   --> the same statistics fields for any list of times
```

`fn` is any callable (a function, a prepared launch `k:prepare{...}`, a table or userdata with `__call`).
It is called as `fn(s)` with the measurement stream (`nil` for the default stream) and must enqueue its
work there: the sample is what lies between two events on that stream. A function that enqueues nothing
raises `cuda.measure: fn enqueued no GPU work`.

| regime | one sample |
|---|---|
| `cold` (default) | persisting L2 lines reset (`cuCtxResetPersistingL2Cache`, unless `l2_reset=false`), L2 flushed (a `cuMemsetD32Async` of a buffer 2× `dev.l2_bytes`, enqueued *before* the start event), then one call |
| `hot` | `batch` calls back to back between the events, reported per call; `batch` is chosen from a warmup pass so that a sample lasts ≥ 1 ms (1..1000 calls) unless given |
| `graph` | `fn(s)` captured once on the stream (one is made when `stream` is not given), then `batch` replays per sample |

- `blocking=true`: before the start event a one-thread kernel spins on a pinned host word; the host enqueues
  the whole sample, then writes the word, so the sample starts with everything queued and launch overhead
  stays out of it. The spin gives up after 1 s of `%globaltimer` (it never hangs the GPU); such a sample is
  rejected and counted in `block_timeouts`. Batches are capped at 256 calls in this mode.
- The SM clock of every sample: after the end event a one-thread kernel counts `%clock64` over 50 µs of
  `%globaltimer` (outside the timed region) → MHz. The reference is NVML's maximum SM clock when
  `libnvidia-ml.so.1` loads (`GPULAB_NVML=0` turns NVML off, `GPULAB_LIBNVML=path` picks the library),
  else the device's `CLOCK_RATE` attribute. A sample whose clock is below `throttle` × reference is
  rejected and counted in `rejected` (`throttle=0` turns this off).
- **Noise** is the relative half-width of the 95% interval of the mean: `t(0.975, n-1) · stdev / √n / mean`
  (Student's t; `stdev` is the sample standard deviation). `max_noise=0.005` means "the mean is known to
  ±0.5%". `stdrel = stdev/mean` (the spread of single samples) is reported beside it.
- **Stopping** (`stop` says which): after at least `min_samples` accepted samples and `min_time` seconds of
  sampling, `"converged"` when noise ≤ `max_noise`; `"plateau"` when the noise stopped improving because the
  samples drift (doubling the samples gained < 5% of noise, where independent samples gain 29%, and the
  two halves' means lie apart by more than twice their intervals: one outlier does not stop it);
  `"max_samples"`; `"timeout"` once `timeout` seconds have passed since the call (warmup included; a sample
  in flight then gets 1 s of grace before the wait raises a timeout error naming the pending launches).
  No accepted sample within the timeout raises `cuda.measure: no sample accepted within ...`.
- Result fields beside the contract's: `ci95` also has `.lo`, `.hi`; `stdrel`, `t95`, `stop`, `batch`,
  `warmup`, `taken` (samples taken, accepted or not), `block_timeouts`, `blocking`, `clocks` (SM MHz of
  each accepted sample), `clock_ref_mhz`, `clock_ref` (`"nvml max"`, `"device attribute"` or `"none"`),
  `nvml_sm_clock_mhz` (median NVML reading; absent without NVML), `throttle`, `max_noise`, `elapsed_s`.
  `sm_clock_mhz` is the median clock of the accepted samples.
- Cold results say what was done before every sample: `l2_reset` (true when persisting lines were reset;
  false with `l2_reset_reason`: `"l2_reset=false: ..."` or `"the driver lacks cuCtxResetPersistingL2Cache"`),
  `l2_resets` (how many), and `flush = {bytes=, l2_bytes=, l2_multiple=, count=, access="write", how=}`:
  the flush writes a new value over `bytes` (2× the L2 size the device reports; 64 MiB when it reports
  none), so the previous sample's lines are displaced by dirty lines of the flush; `count` flushes, one per
  pass. Without the reset, lines a persisting window (`s:set_l2_window`) left in the set-aside
  (`cuda.l2_persisting`) survive the flush and a "cold" sample reads them from L2. Hot and graph results
  have none of these fields, and `l2_reset` is refused there.
- Errors: options are checked by name (`bad argument #2 to 'cuda.measure' (field 'max_noise': must be a
  finite number > 0, got 0)`; NaN, infinities, negative or zero values where they make no sense, unknown
  options, `batch` with `cold`, `min_time` > `timeout`); a stream freed before or during the call, a
  stream of another device's context (`option 'stream': the cuda.stream belongs to another device's
  context`), a call during a capture, and `fn` changing the current device raise. An error raised by
  `fn` propagates unchanged; the capture (graph regime) is closed, and the events, the flush buffer and the pinned words are released.
- `cuda.stats_of(times)`: `{mean, median, min, max, stdev, noise, stdrel, t95, ci95, samples}` of a list
  of finite times ≥ 0 (read raw: metatables are ignored); one sample gives `noise = inf` and
  `ci95 = {-inf, inf}`.
- `cuda.bench(fn, {warmup=3, reps=20, stream=s, timeout=})` is its plain form: exactly `reps` samples of one
  call each (fn called without arguments), no flush, no clock kernel, nothing rejected, `timeout` bounds each
  wait. Its result is `cuda.measure`'s with `samples` the list of times and `reps`, `warmup` beside it.
- The driver stand-in scripts event times and clocks for tests: `GPULAB_FAKE_ELAPSED_FILE`,
  `GPULAB_FAKE_CLOCK_FILE` (numbers, cycled), `GPULAB_FAKE_BLOCK_GIVEUP=1` (tests/fakecuda/fake_measure.c).
**Testing a lab without a GPU.** The build makes the stand-in as `build/libfakecuda.so`; run any
script against it with `GPULAB_LIBCUDA=$PWD/build/libfakecuda.so ./build/gpulab mylab.lua` (add
`GPULAB_FAKE_LOG=/tmp/launches.log` to see every launch with its argument bytes). It reports one
device named `gpulab stand-in` with fixed limits. What it shows: that the lab's kernels
compile, load and take the arguments the lab passes (count, types, sizes, alignment, tensor maps
by value), that launch configurations fit the limits, that copies move the right bytes (its
"device memory" is host memory, so `copy_from` round trips and `mod:global` variables, read from
the PTX or the cubin's symbol table, hold real bytes), error paths (`GPULAB_FAKE_FAIL`), deadlines
(`GPULAB_FAKE_HANG`, `GPULAB_FAKE_BUSY_FILE`), an older driver's missing entry points
(`GPULAB_FAKE_NO_ENTRY=cuFuncGetParamInfo`) and that `cuda.stats()` returns to zero. What it cannot
show: any kernel result (no kernel runs, so outputs keep whatever was there before the launch),
any time (events and `cuda.measure` numbers mean nothing), real occupancy (a model of the limits),
the parameters of a binary image without PTX (`cuFuncGetParamInfo` says not supported), or a real
tensor-map encoding. A lab's verdicts under the stand-in are never evidence.]==] },

-- ---------------------------------------------------------------------------------------------
{ title = "Robustness (threat model: docs/THREAT_MODEL.md)", level = 2,
  text = [==[
- `cuda.stats().deferred`: releases waiting for queued work; after `cuda.sync()` it is 0 (releases made
  during a capture wait for the capture's end, then for their work, in a list of their own).
- A freed stream's later releases wait on a final event recorded when it was freed; if the driver cannot
  create that event while the stream is busy, they wait for the next full `cuda.sync()`.
- `cuda.sync{timeout=}` uses one watchdog thread for the whole process. `GPULAB_NO_WATCHDOG=1` makes gpulab
  behave as if that thread could not be started (for tests): the wait then polls every stream. While a
  timed-out sync leaves the watchdog waiting on one device, a timed `cuda.sync` of another device
  returns at its deadline only when every stream is idle (it cannot sync that context meanwhile), and
  otherwise times out too. A free of memory last used on another device's default stream waits for a
  full sync (an event on the current device's default stream would not cover that work).
- Objects carry their device: `k:launch`, `k:prepare`, `g:launch` and any call taking `stream=` raise
  "bad argument #2 to 'k:launch' (the cuda.array belongs to device 0, but device 1 is current ...)" for
  another device's object.
- A tensor map over a freed array: "the cuda.array under the tensor map was freed" from launches, prepared
  launches and replays.
- `debug.setuservalue` returns fail for gpulab objects; forged metatables make methods raise.
- Stand-in: `GPULAB_FAKE_FAIL` reaches every entry point, `cuGetErrorName`/`cuGetErrorString` included.]==] },

-- ---------------------------------------------------------------------------------------------
{ title = "Several GPUs (docs/MULTI_GPU.md)", level = 2,
  text = [==[
```lua
local dev, prev = cuda.device(1)          -- device 1 current for what follows; prev: the ordinal before
cuda.device()                             -- the current device's table
cuda.peer(0, 1)                           --> {can=, enabled=, same=}   (cuDeviceCanAccessPeer; what gpulab enabled)
cuda.peer(0, 1, true [, {both=true}])     -- enables 0 -> 1 (and 1 -> 0): cuCtxEnablePeerAccess
d1:copy_from(d0 [, stream])               -- arrays of two devices: cuMemcpyPeer(Async); no peer access needed
local comm = cuda.nccl.init{devices={0, 1, 2, 3}, timeout=60}                 -- one process, every GPU
local id = cuda.nccl.unique_id()                                              -- 256 hex characters
local comm = cuda.nccl.init{rank=r, nranks=n, id=id, device=r, timeout=60}    -- one process per GPU
comm:all_reduce(send, recv, {op="sum"|"prod"|"max"|"min"|"avg", stream=s | streams={...}, timeout=})
comm:broadcast(send, recv, {root=0, ...}); comm:all_gather(send, recv, {...}); comm:reduce_scatter(send, recv, {op=, ...})
comm:sync{timeout=}; comm:free()          -- fields: nranks, rank, ranks, devices, aborted, freed
cuda.nccl.available() --> true | false, why;  cuda.nccl.version() --> "2.28.9";  cuda.nccl.stats() --> {communicators=}
cuda.run_isolated({ {script, opts}, ... }) --> { result, ... }   -- every child at once, each with its own deadline
lab:sweep(configs, function(config, i) ... return result end, {name=}) --> results, info   -- gpulab --gpus=all|0,2
```

- `cuda.sync{timeout=}` and `s:sync` wait for the current device's context (or that stream); with
  several devices, wait on each (`cuda.device(i); cuda.sync{...}`) or on a communicator (`comm:sync`).
- Device rules: work goes to the current device. A `cuda.array` of another device is refused by launch
  arguments, `d:fill`, and host copies ("bad argument #2 to 'k:launch' (the cuda.array belongs to device 1,
  but device 0 is current and has no peer access to it (cuda.peer(0, 1, true) enables it, or cuda.device(1)
  first))"; as the object of a method, "calling 'd:fill' on bad self (the cuda.array belongs to device 1,
  ...)") unless the current device has peer access to it. Streams, modules, kernels, graphs and tensor maps of another
  device are always refused (a context cannot use another's, peer access or not).
- Copies between devices: `dst:copy_from(src)` with `dst` and `src` on different devices uses
  `cuMemcpyPeer`, or `cuMemcpyPeerAsync` on the given stream (a stream of the current device); one of
  the two must be on the current device ("bad argument #1 to 'd:copy_from' (a copy from device 0 to
  device 2 is ordered on a stream of the current device 1, which is neither: ...)"). Without peer access the driver stages the copy through host
  memory; it works either way, faster with peer access (labs/multi_gpu.lua measures both).
- `cuda.peer` errors: a device that does not exist ("bad argument #2 to 'cuda.peer' (device 3 does not
  exist; 3 devices present)"), a non-boolean third argument, `both` without `true` ("bad argument #4 to
  'cuda.peer' (field 'both': needs argument #3 = true)"), and enabling a pair the driver says cannot
  access each other ("bad argument #3 to 'cuda.peer' (device 0 cannot access device 2 directly
  (cuDeviceCanAccessPeer says no); copies between them still work, staged by the driver)"). Enabling
  what is already enabled is fine. `cuda.peer(a, a)` is `same`.
- NCCL: libnccl.so.2 is opened at run time (`GPULAB_LIBNCCL` overrides). `NCCL_NVLS_ENABLE=0` is set
  before NCCL's first use unless the environment has it: NVLink multicast stays off.
- Collective arguments: with `devices={...}` of k devices, `send`/`recv` are lists of k arrays (one
  per device, in order) and `streams` a list of k streams; with the one-rank form, single arrays and
  `stream`. `recv` may be nil for `all_reduce` and `broadcast` (in place). Counts: `all_reduce` and
  `broadcast` equal numel; `all_gather` recv = nranks × send; `reduce_scatter` send = nranks × recv.
  dtypes: i8, u8, i32, u32, i64, u64, f16, bf16, f32, f64 (i16, u16, bool have no NCCL type).
  Argument errors are in lauxlib's format (see Errors) and name the argument or option field, the
  list entry's rank and both devices: "bad argument #1 to 'comm:all_reduce' (send of rank 0: the
  cuda.array belongs to device 1, but that rank's communicator is on device 0)", "bad argument #3 to
  'comm:all_reduce' (field 'streams': stream of rank 1: the cuda.stream belongs to device 0, but that
  rank's communicator is on device 1)", "bad argument #2 to 'comm:all_gather' (rank 0: recv must hold
  nranks (2) x send (2 elements) = 4 elements, got 2)", "bad argument #1 to 'cuda.nccl.init' (field
  'devices': entry 2: device 5 does not exist (3 devices present))". A freed or aborted communicator:
  "comm:all_reduce: the communicator was freed" (as a closed file). NCCL's own failures: "comm:broadcast: ncclBroadcast: ncclInvalidUsage (5): <ncclGetErrorString>;
  <ncclGetLastError>". Collectives are refused inside `s:capture`.
- Deadlines: the one-rank-per-process init is non-blocking and polled until `timeout` (default 60 s);
  `{timeout=}` on a collective waits for it; `comm:sync{timeout=}` (default: the init's) waits for the
  last collectives. A deadline that passes, or an asynchronous NCCL error, aborts the communicator
  (`ncclCommAbort`) and raises; an aborted communicator refuses further use. Without `timeout` a
  collective is only enqueued (what `cuda.measure` times). `comm:free()`, `__close` and `__gc` share one
  release: idle communicators are destroyed, busy ones aborted; never raising, idempotent.
- `cuda.run_isolated` list form: up to 256 entries `{script, opts}` (opts as for one child); errors
  in an entry are "cuda.run_isolated: entry 2: ..." and nothing runs; results come back in order.
- `lab:sweep` and `--gpus`: without `--gpus` (or `GPULAB_GPUS`) the configurations run in this process;
  with it and more than one GPU, one child per GPU runs the same script with the same arguments, sees only
  its GPU (`CUDA_VISIBLE_DEVICES`: it is the child's device 0), runs its share of the sweep
  (configuration i on GPU (i-1) mod n) and ends; the parent merges the
  results in order and records `sweep:NAME` = {gpus, device per configuration, per_gpu} in the JSON.
  In children a result must not be nil and must be plain data (numbers, strings, booleans and tables
  of them, any keys of those types: NaN, ±inf and integer subtypes arrive as they were); a function,
  userdata or cycle fails the run naming the configuration. The configurations must come out the
  same in every run (the parent compares each child's with its own: a shuffled order is refused).
  Children write no `--json`, `--svg` or `--html` output: the parent writes all of it.
  Earlier sweeps are handed to the children.
- `require("gpulab.ranks")`: `ranks.from_env()` → `{rank, nranks, local_rank, launcher}` from Open MPI,
  Slurm, PMI or `GPULAB_RANK`/`GPULAB_NRANKS`/`GPULAB_LOCAL_RANK`; `ranks.share_id(path, me, {timeout=})`
  writes (rank 0) or waits for (the others) the NCCL id in a shared file.
- The REPL prompt is `gpulab[N]> ` (N the current device) once the driver is open and reports more
  than one device.
- Stand-ins (tests only): `GPULAB_FAKE_DEVICES=n` with `GPULAB_FAKE_PEER=all|none|0-1,1-0` (which ordered
  pairs can access each other); tests/fakenccl (`GPULAB_LIBNCCL=build/libfakenccl.so`): single-process
  groups combine the ranks' buffers, one-rank-per-process communicators only log;
  `GPULAB_FAKENCCL_LOG`, `GPULAB_FAKENCCL_FAIL=name:code,...`, `GPULAB_FAKENCCL_ABSENT_PEERS=1`,
  `GPULAB_FAKENCCL_ASYNC_ERROR=code`.
]==],
  entries = {
    { "cuda.peer", sig = "cuda.peer(a, b [, enable [, {both=true}]])",
      params = { {"a", "integer", "device ordinal whose context would reach b's memory"},
                 {"b", "integer", "device ordinal"},
                 {"enable", "boolean?", "true: cuCtxEnablePeerAccess in a's context for b"},
                 {"opts", "table?", "`{both=true}`: also b -> a"} },
      returns = { {"table", "`{can=, enabled=, same=}`"} },
      errors = { "bad argument #2 to 'cuda.peer' (device 3 does not exist; 3 devices present)",
                 "bad argument #3 to 'cuda.peer' (true to enable peer access expected, got number)",
                 "bad argument #4 to 'cuda.peer' (field 'both': needs argument #3 = true)",
                 "bad argument #3 to 'cuda.peer' (device 0 cannot access device 2 directly " ..
                 "(cuDeviceCanAccessPeer says no); copies between them still work, staged by the driver)" },
      summary = "reports (and with `true` enables) peer access from device a to device b" },
    { "cuda.nccl", kind = "field", type = "table",
      summary = "NCCL, opened at run time: `init{devices=}` / `init{rank=, nranks=, id=, device=}`, " ..
                "`unique_id()`, `available()`, `version()`, `stats()`" },
    { "cuda.nccl.comm", kind = "class", summary = "an NCCL communicator (one process with several GPUs, or one rank)",
      fields = {
        {"nranks", "integer", "ranks in the communicator"}, {"rank", "integer?", "this process's rank (one-rank form)"},
        {"ranks", "integer", "ranks held by this process"}, {"devices", "integer[]", "the device of each held rank"},
        {"aborted", "boolean", "a deadline or an asynchronous error aborted it"}, {"freed", "boolean", "freed"},
      } },
    { "cuda.nccl.comm:all_reduce", sig = "comm:all_reduce(send [, recv] [, {op=, stream=, streams=, timeout=}])",
      summary = "ncclAllReduce (op sum, prod, max, min, avg); recv nil: in place" },
    { "cuda.nccl.comm:broadcast", sig = "comm:broadcast(send [, recv] [, {root=0, stream=, streams=, timeout=}])",
      summary = "ncclBroadcast from rank `root`" },
    { "cuda.nccl.comm:all_gather", sig = "comm:all_gather(send, recv [, {stream=, streams=, timeout=}])",
      summary = "ncclAllGather: recv holds nranks x send" },
    { "cuda.nccl.comm:reduce_scatter", sig = "comm:reduce_scatter(send, recv [, {op=, stream=, streams=, timeout=}])",
      summary = "ncclReduceScatter: send holds nranks x recv" },
    { "cuda.nccl.comm:sync", sig = "comm:sync{timeout=}",
      summary = "waits for the last collectives; past the deadline aborts the communicator and raises" },
    { "cuda.nccl.comm:free", sig = "comm:free()",
      summary = "destroys an idle communicator, aborts a busy one; idempotent, never raises (also `<close>`)" },
    { "Lab:sweep", sig = "lab:sweep(configs, fn [, {name=}])",
      params = { {"configs", "table", "the configurations, in order"},
                 {"fn", "function", "fn(config, i) --> a JSON-able result"},
                 {"opts", "table?", "`{name=}`: the record's name"} },
      returns = { {"table", "the results, in order"}, {"table", "`{gpus=, device=, per_gpu=}`"} },
      summary = "runs independent configurations, one child per GPU under `gpulab --gpus=`, and merges them in order" },
  },
},

-- ---------------------------------------------------------------------------------------------
{ title = "Errors", level = 2,
  text = [==[
Two kinds, as in Lua's own libraries: a bad argument raises a **string**; a CUDA or NVRTC failure
raises a **`cuda.error` object** whose text is that same kind of message.

```lua
-- bad arguments: lauxlib's format, the caller's "file:line:" first
cuda.array("half", 4)         --> "x.lua:3: bad argument #1 to 'cuda.array' (unknown dtype 'half'; known: ...)"
h:copy_from(42)               --> "bad argument #1 to 'h:copy_from' (cuda.array or cuda.host expected, got number)"
h.copy_from(h, 42)            --> "bad argument #2 to 'h:copy_from' (...)"    -- self counted: not a method call
d:copy_from(s, {count = "x"}) --> "bad argument #2 to 'd:copy_from' (field 'count': integer expected, got string)"
d:copy_from(s, {cnt = 1})     --> "bad argument #2 to 'd:copy_from' (unknown field 'cnt' (known: stream, count, ...))"
k:launch(cfg, 1.5)            --> "bad argument #2 to 'k:launch' (scale<2> parameter 1 (float* x): u64 (8 bytes) expected, got 1.5 (not an integer))"
impostor:fill(1)              --> "calling 'h:fill' on bad self (cuda.host expected, got table)"
d:fill(1)   -- d freed        --> "d:fill: cuda.array was freed"         -- a freed self reads as liolib's closed file

-- CUDA and NVRTC failures
local ok, e = pcall(cuda.sync)
cuda.is_error(e)     --> true            getmetatable(e) --> "cuda.error"
e.code               --> 700             -- CUresult; nvrtcResult for NVRTC; 909 for a deadline
e.name               --> "CUDA_ERROR_ILLEGAL_ADDRESS"   -- "NVRTC_ERROR_COMPILATION", "CUDA_ERROR_TIMEOUT"
e.fn                 --> "cuda.sync"     -- the gpulab function, named as in this document
e.call               --> "context sync"  -- the driver step ("cuMemAlloc", "nvrtcCompileProgram"), when there is one
e.poisoned           --> true            -- the context is lost: every later GPU call raises (restart the process)
e.launches           --> { {kernel="k", grid={4,1,1}, block={64,1,1}, stream="default"|"stream"}, ..., n=2 }
                         -- the launches since the last good sync (the last 8; n counts all), as the message lists them
e.message            --> the full text; tostring(e) == e.message
e.timeout            --> 2               -- deadlines only: the seconds waited
e.log                --> "..."           -- NVRTC only: the compiler's log (file:line: error ...)
```

- The text of a `cuda.error` is exactly the string gpulab raised before these objects existed, so
  `tostring(e)`, `string.format("%s", e)`, `"x" .. e`, `e .. "x"` and the string methods (`e:find`,
  `e:match`, ...: applied to the message) work as they did; scripts that matched the message still do.
  `type(e)` is `"table"`; the fields are plain fields of that table.
- Position: a `cuda.error` carries the caller's `file:line:` in its message where the string did
  (the poisoned-context error raised by every later GPU call, NVRTC failures); driver failures of a
  call had none and have none. `error(e, level)` passes the object on unchanged (Lua adds a position
  to strings only); `error(tostring(e), level)` gives a string with one.
- Reporting: `gpulab script.lua`, `gpulab -e`, the REPL and a `cuda.run_isolated` child print a
  `cuda.error` as they print a string error, traceback included (other error objects with
  `__tostring` as lua(1) does). The REPL's `:restart` hint appears for a poisoned context as before.
- Option and configuration tables are read raw, as `lua_rawget` reads them: a field an `__index`
  metamethod would supply is not seen, and no metamethod of an argument runs inside a gpulab call
  (one could free an object the call holds). An object a finalizer or a callback frees during a call
  gives "fn: ... was freed during the call".
- Which is which: argument checks (type, range, option fields, freed objects, another device's
  objects) raise strings; anything a CUresult or nvrtcResult reports, a missing kernel or variable
  (`CUDA_ERROR_NOT_FOUND`), a wait past its deadline and the poisoned context raise `cuda.error`s.
  A missing driver (`cuda.available()` false) raises a `cuda.error` too: `code` 100, `name`
  `"CUDA_ERROR_NO_DEVICE"` (cuInit's code when libcuda is there but cuInit fails), with the text
  `"fn: no CUDA driver: ..."` it always had.
]==],
  entries = {
    { "cuda.is_error", sig = "cuda.is_error(v)", params = { {"v", "any", "an error value from pcall"} },
      returns = { {"boolean", "true for a cuda.error object"} },
      summary = "true when `v` is a `cuda.error` (a CUDA or NVRTC failure), false for strings and anything else" },
  } },
},
}
