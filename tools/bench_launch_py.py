#!/usr/bin/env python3
"""Launch cost of CuPy and cuda.core on this machine, for tools/bench_launch.lua to set beside
raw C and gpulab in the same run. Same kernels (kernels/bench_launch.cu), same loop shapes:
  sustained: N launches back to back on one stream, then a sync (microseconds per launch)
  burst:     bursts of 256 launches after a sync, only the launching timed (the host's cost)
Then, where cuda.core has them, launches with one attribute each (N_ATTR launches per run):
a cluster of 2 (2 blocks), a cooperative launch and programmatic stream serialization (PDL),
1 block otherwise, as kernel "<kind>_<kernel>" (cluster_empty, pdl_args4, ...).
Prints lines "<lib> <kernel> <mode> <us>" and "skip <lib>[ <kind>]: <reason>"; best of 3 runs each.
Usage: bench_launch_py.py SOURCE [N [N_ATTR]]"""
import sys, time

N = int(sys.argv[2]) if len(sys.argv) > 2 else 200000
N_ATTR = int(sys.argv[3]) if len(sys.argv) > 3 else N
SRC = open(sys.argv[1]).read()
BURST = 256


def best_of_3(fn, n):
    fn(n // 10)
    return min(fn(n) for _ in range(3))


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

    return sustained, burst


def report(lib, kernel, launch, sync, n=N):
    sustained, burst = timers(launch, sync)
    print(f"{lib} {kernel} sustained {best_of_3(sustained, n):.4f}", flush=True)
    print(f"{lib} {kernel} burst {best_of_3(burst, n):.4f}", flush=True)


def reason(e):
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def run_cupy():
    import numpy as np
    import cupy as cp
    mod = cp.RawModule(code=SRC, options=("-std=c++17",))
    empty, args4 = mod.get_function("empty_kernel"), mod.get_function("args4")
    out, inp = cp.zeros(128, dtype=cp.float32), cp.zeros(128, dtype=cp.float32)
    n, s = np.uint32(1000), np.float32(2.0)
    sync = cp.cuda.get_current_stream().synchronize
    report("cupy", "empty", lambda: empty((1,), (32,), ()), sync)
    report("cupy", "args4", lambda: args4((1,), (32,), (out, inp, n, s)), sync)
    print("skip cupy cluster, pdl, cooperative: RawKernel has no cluster or PDL launch, and its cooperative "
          "launch (enable_cooperative_groups) is cuLaunchCooperativeKernel, not a launch attribute", flush=True)


def run_cuda_core():
    import numpy as np
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    arch = "sm_" + "".join(str(x) for x in dev.compute_capability)
    prog = Program(SRC, code_type="c++", options=ProgramOptions(std="c++17", arch=arch))
    code = prog.compile("cubin", name_expressions=("empty_kernel", "args4"))
    empty, args4 = code.get_kernel("empty_kernel"), code.get_kernel("args4")
    buf_out, buf_in = dev.allocate(512, stream=stream), dev.allocate(512, stream=stream)
    cfg = LaunchConfig(grid=1, block=32)
    n, s = np.uint32(1000), np.float32(2.0)
    report("cuda.core", "empty", lambda: launch(stream, cfg, empty), stream.sync)
    report("cuda.core", "args4", lambda: launch(stream, cfg, args4, buf_out, buf_in, n, s), stream.sync)

    def works(attr_cfg):
        launch(stream, attr_cfg, empty)
        launch(stream, attr_cfg, args4, buf_out, buf_in, n, s)
        stream.sync()

    for kind, cfg_of in CUDA_CORE_ATTRS:
        attr_cfg, why = None, "no form of LaunchConfig tried"
        for make in cfg_of:  # the forms the versions of cuda.core take, newest first
            try:
                candidate = make(LaunchConfig)
                works(candidate)
                attr_cfg = candidate
                break
            except Exception as e:  # a keyword or a launch this version does not know
                why = reason(e)
        if attr_cfg is None:
            print(f"skip cuda.core {kind}: {why}", flush=True)
            continue
        report("cuda.core", f"{kind}_empty", lambda c=attr_cfg: launch(stream, c, empty), stream.sync, N_ATTR)
        report("cuda.core", f"{kind}_args4", lambda c=attr_cfg: launch(stream, c, args4, buf_out, buf_in, n, s),
               stream.sync, N_ATTR)


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


for lib, fn in (("cupy", run_cupy), ("cuda.core", run_cuda_core)):
    try:
        fn()
    except Exception as e:  # a missing or different library is reported, never fatal
        print(f"skip {lib}: {reason(e)}", flush=True)
