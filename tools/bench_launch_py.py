#!/usr/bin/env python3
"""Launch cost of CuPy and cuda.core on this machine, for tools/bench_launch.lua to set beside
raw C and gpulab in the same run. Same kernels (kernels/bench_launch.cu), same loop shapes:
  sustained: N launches back to back on one stream, then a sync (microseconds per launch)
  burst:     bursts of 256 launches after a sync, only the launching timed (the host's cost)
Then, where cuda.core has them, launches with one attribute each (N_ATTR launches per run):
a cluster of 2 (2 blocks), a cooperative launch and programmatic stream serialization (PDL),
1 block otherwise, as kernel "<kind>_<kernel>" (cluster_empty, pdl_args4, ...).

Usage: bench_launch_py.py SOURCE [N [N_ATTR]]
  Prints lines "<lib> <kernel> <mode> <us>" (best of 3 runs each) and "skip <lib>[ <kind>]: <reason>".
Usage: bench_launch_py.py --serve SOURCE [CPU]
  Takes turns for bench_launch.lua's interleaved comparison (its launching thread pinned to CPU,
  once the libraries' own threads have started): prints the skip lines, then
  "ready <lib>:<kernel> ..." (every cell it can launch), then answers each line it reads,
  "<lib> <kernel> <mode> <n>", with one timing of n launches: "us <microseconds per launch>"
  (or "error <reason>"), until "quit" or the end of its input."""
import os, sys, time

BURST = 256


def timers(launch, sync):
    def sustained(n):
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            launch()
        sync()
        return (time.perf_counter() - t0) / n * 1e6

    def burst(n):
        total, done = 0.0, 0
        while done < n:
            sync()
            t0 = time.perf_counter()
            for _ in range(BURST):
                launch()
            total += time.perf_counter() - t0
            done += BURST
        sync()
        return total / done * 1e6

    return {"sustained": sustained, "burst": burst}


def reason(e):
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def cupy_cells(src, skip):
    """{kernel: (launch, sync)} for CuPy's RawKernel (no attribute launches)."""
    import numpy as np
    import cupy as cp
    mod = cp.RawModule(code=src, options=("-std=c++17",))
    empty, args4 = mod.get_function("empty_kernel"), mod.get_function("args4")
    out, inp = cp.zeros(128, dtype=cp.float32), cp.zeros(128, dtype=cp.float32)
    n, s = np.uint32(1000), np.float32(2.0)
    sync = cp.cuda.get_current_stream().synchronize
    skip("cupy cluster, pdl, cooperative", "RawKernel has no cluster or PDL launch, and its cooperative "
         "launch (enable_cooperative_groups) is cuLaunchCooperativeKernel, not a launch attribute")
    return {"empty": (lambda: empty((1,), (32,), ()), sync),
            "args4": (lambda: args4((1,), (32,), (out, inp, n, s)), sync)}


# The attribute launches, each as the LaunchConfig forms of the cuda.core versions that have it.
# A cluster of 2 is 2 blocks: newer versions count grid in clusters (grid=1), older ones in
# blocks (grid=2); grid=1 fails on the older ones (not a multiple of the cluster), so the first
# form that launches is the 2-block one.
CUDA_CORE_ATTRS = (
    ("cluster", (lambda LC: LC(grid=1, cluster=2, block=32),
                 lambda LC: LC(grid=2, cluster=2, block=32))),
    ("pdl", (lambda LC: LC(grid=1, block=32, programmatic_stream_serialization=True),)),
    ("cooperative", (lambda LC: LC(grid=1, block=32, is_cooperative=True),
                     lambda LC: LC(grid=1, block=32, cooperative_launch=True))),
)


def cuda_core_cells(src, skip):
    """{kernel: (launch, sync)} for cuda.core's launch, with the attribute kernels it has."""
    import numpy as np
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    arch = "sm_" + "".join(str(x) for x in dev.compute_capability)
    prog = Program(src, code_type="c++", options=ProgramOptions(std="c++17", arch=arch))
    code = prog.compile("cubin", name_expressions=("empty_kernel", "args4"))
    empty, args4 = code.get_kernel("empty_kernel"), code.get_kernel("args4")
    buf_out, buf_in = dev.allocate(512, stream=stream), dev.allocate(512, stream=stream)
    n, s = np.uint32(1000), np.float32(2.0)

    def pair(c):
        return {"empty": (lambda: launch(stream, c, empty), stream.sync),
                "args4": (lambda: launch(stream, c, args4, buf_out, buf_in, n, s), stream.sync)}

    cells = pair(LaunchConfig(grid=1, block=32))
    for kind, cfg_of in CUDA_CORE_ATTRS:
        why = "no form of LaunchConfig tried"
        for make in cfg_of:  # the forms the versions of cuda.core take, newest first
            try:
                attr_cfg = make(LaunchConfig)
                tried = pair(attr_cfg)
                for launch_one, sync in tried.values():
                    launch_one()
                    sync()
            except Exception as e:  # a keyword or a launch this version does not know
                why = reason(e)
                continue
            cells.update({f"{kind}_{kernel}": cell for kernel, cell in tried.items()})
            break
        else:
            skip(f"cuda.core {kind}", why)
    return cells


def all_cells(src, skip):
    """{(lib, kernel): (launch, sync)} for every library this python3 has."""
    cells = {}
    for lib, make in (("cupy", cupy_cells), ("cuda.core", cuda_core_cells)):
        try:
            cells.update({(lib, kernel): cell for kernel, cell in make(src, skip).items()})
        except Exception as e:  # a missing or different library is reported, never fatal
            skip(lib, reason(e))
    return cells


def print_skip(what, why):
    print(f"skip {what}: {why}", flush=True)


def batch(src, n_plain, n_attr):
    for (lib, kernel), (launch, sync) in all_cells(src, print_skip).items():
        n = n_plain if kernel in ("empty", "args4") else n_attr
        for mode, timed in timers(launch, sync).items():
            timed(n // 10)
            print(f"{lib} {kernel} {mode} {min(timed(n) for _ in range(3)):.4f}", flush=True)


def serve(src, cpu):
    cells = {key: timers(*cell) for key, cell in all_cells(src, print_skip).items()}
    if cpu is not None:  # this thread only: the driver's threads, started by now, keep every CPU
        try:
            os.sched_setaffinity(0, {cpu})
        except OSError as e:
            print_skip(f"pinning to CPU {cpu}", reason(e))
    print("ready " + " ".join(f"{lib}:{kernel}" for lib, kernel in cells), flush=True)
    for line in iter(sys.stdin.readline, ""):
        words = line.split()
        if words == ["quit"]:
            break
        try:
            lib, kernel, mode, n = words
            print(f"us {cells[(lib, kernel)][mode](int(n)):.4f}", flush=True)
        except Exception as e:  # a bad command or a failed launch: answered, the next one goes on
            print(f"error {reason(e)}", flush=True)


if sys.argv[1:2] == ["--serve"]:
    serve(open(sys.argv[2]).read(), int(sys.argv[3]) if len(sys.argv) > 3 else None)
else:
    N = int(sys.argv[2]) if len(sys.argv) > 2 else 200000
    batch(open(sys.argv[1]).read(), N, int(sys.argv[3]) if len(sys.argv) > 3 else N)
