// gpulab/cluster.cuh — Hopper thread-block clusters, distributed shared memory, TMA multicast and
// programmatic dependent launch (PDL), for kernels compiled by NVRTC (sm_90+).
//
// Inline PTX only, like gpulab/tma.cuh (included here for gl_u32/gl_u64, gl_smem_addr,
// gl_globaltimer_ns, gl_tensormap_t and the deadline-bounded gl_mbar_wait). Nothing here traps:
// a wait that can be bounded takes a %globaltimer deadline, records what it waited for in a
// status flag (the GL_WAIT_* layout of tma.cuh) and returns false.
//
// Launch side (gpulab): k:launch{grid=, block=, cluster=n|{x,y,z}} (grid counted in blocks, a
// multiple of the cluster), pdl=true for programmatic stream serialization, cooperative=true.
//
// Rules these helpers rely on:
//  - A cluster's CTAs run at the same time (the hardware schedules them together), so a cluster
//    barrier only hangs when some CTA of the cluster never arrives: a bug in the kernel.
//  - Distributed shared memory lives only as long as its CTA: a CTA whose shared memory others
//    read or write must not exit before they are done. End such kernels with gl_cluster_sync().
//  - Shared memory another CTA writes through a shared::cluster address, or an mbarrier another
//    CTA's TMA completes, must be initialised and published (fence + cluster barrier) first.
#ifndef GPULAB_CLUSTER_CUH
#define GPULAB_CLUSTER_CUH

#include <gpulab/tma.cuh>

// ---- programmatic dependent launch --------------------------------------------------------------
//
// In a kernel launched with pdl=true, griddepcontrol.wait blocks until every grid it depends on
// (the previous kernel in the stream) has completed and its memory operations are visible. Code
// before it overlaps the tail of the previous kernel: it must not read that kernel's output.
// Launched without pdl=true the instruction returns at once, so one kernel serves both forms.
__device__ __forceinline__ void gl_pdl_wait() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
}

// Lets the next kernel in the stream (if it was launched with pdl=true) start once every CTA of
// this grid executed this or exited. Only a scheduling hint: the dependent's gl_pdl_wait() still
// waits for this grid to complete, so writes after this call are seen there too.
__device__ __forceinline__ void gl_pdl_launch_dependents() {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// ---- cluster identity ---------------------------------------------------------------------------

// This CTA's rank in its cluster, 0 .. gl_cluster_nctarank() - 1 (x fastest).
__device__ __forceinline__ gl_u32 gl_cluster_ctarank() {
    gl_u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// CTAs in this cluster (1 for a launch without clusters).
__device__ __forceinline__ gl_u32 gl_cluster_nctarank() {
    gl_u32 n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    return n;
}

// The cluster's index in the grid of clusters, per dimension (%clusterid).
__device__ __forceinline__ uint3 gl_cluster_id() {
    uint3 c;
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(c.x));
    asm volatile("mov.u32 %0, %%clusterid.y;" : "=r"(c.y));
    asm volatile("mov.u32 %0, %%clusterid.z;" : "=r"(c.z));
    return c;
}

// The number of clusters in the grid, per dimension (%nclusterid).
__device__ __forceinline__ uint3 gl_cluster_count() {
    uint3 c;
    asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(c.x));
    asm volatile("mov.u32 %0, %%nclusterid.y;" : "=r"(c.y));
    asm volatile("mov.u32 %0, %%nclusterid.z;" : "=r"(c.z));
    return c;
}

// The cluster's linear index (x fastest), for one record per cluster.
__device__ __forceinline__ gl_u32 gl_cluster_linear_id() {
    const uint3 c = gl_cluster_id(), n = gl_cluster_count();
    return c.x + n.x * (c.y + n.y * c.z);
}

// The CTA's position inside its cluster, per dimension (%cluster_ctaid).
__device__ __forceinline__ uint3 gl_cluster_ctaid() {
    uint3 c;
    asm volatile("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(c.x));
    asm volatile("mov.u32 %0, %%cluster_ctaid.y;" : "=r"(c.y));
    asm volatile("mov.u32 %0, %%cluster_ctaid.z;" : "=r"(c.z));
    return c;
}

// True when the launch gave clusters (a cluster= key or __cluster_dims__), false for a plain one.
__device__ __forceinline__ bool gl_cluster_is_explicit() {
    gl_u32 p;
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mov.pred p, %%is_explicit_cluster;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(p));
    return p != 0;
}

// The SM this thread runs on (%smid), for placement records.
__device__ __forceinline__ gl_u32 gl_smid() {
    gl_u32 s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

// ---- cluster barrier ----------------------------------------------------------------------------
//
// Every thread of every CTA in the cluster arrives once per phase. arrive has release semantics
// (this thread's earlier memory accesses, shared::cluster ones included, are ordered before the
// phase completes) and wait acquire semantics, so arrive ... wait publishes shared-memory writes
// to the other CTAs. Non-.aligned forms: threads of a warp may call them from diverged code.
__device__ __forceinline__ void gl_cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}

// arrive without ordering: for a barrier that only says "I am here" (no data to publish).
__device__ __forceinline__ void gl_cluster_arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
}

__device__ __forceinline__ void gl_cluster_wait() {
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}

// The whole cluster meets: every thread arrives and waits (also a __syncthreads for this CTA).
__device__ __forceinline__ void gl_cluster_sync() {
    gl_cluster_arrive();
    gl_cluster_wait();
}

// ---- distributed shared memory ------------------------------------------------------------------
//
// A shared::cluster address is a 32-bit address in the cluster's shared-memory window: mapa turns
// this CTA's shared variable into the address of the same variable in CTA `cta_rank`. The
// ld/st/atom forms below take such addresses (a CTA's own rank maps to its own memory).
__device__ __forceinline__ gl_u32 gl_dsmem_map(const void *ptr, gl_u32 cta_rank) {
    gl_u32 remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(gl_smem_addr(ptr)), "r"(cta_rank));
    return remote;
}

// The same for an address that is already a shared::cta offset (gl_smem_addr(p) + bytes).
__device__ __forceinline__ gl_u32 gl_dsmem_map_addr(gl_u32 smem_addr, gl_u32 cta_rank) {
    gl_u32 remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_addr), "r"(cta_rank));
    return remote;
}

// Weak loads and stores: ordered for other CTAs only through a cluster barrier (or the
// release/acquire forms below).
__device__ __forceinline__ gl_u32 gl_dsmem_ld_u32(gl_u32 cluster_addr) {
    gl_u32 v;
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(cluster_addr) : "memory");
    return v;
}

__device__ __forceinline__ void gl_dsmem_st_u32(gl_u32 cluster_addr, gl_u32 v) {
    asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(cluster_addr), "r"(v) : "memory");
}

// 16 bytes at once (the address 16-byte aligned): the widest DSM access, for bandwidth.
__device__ __forceinline__ uint4 gl_dsmem_ld_v4(gl_u32 cluster_addr) {
    uint4 v;
    asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(cluster_addr)
                 : "memory");
    return v;
}

// A local shared-memory load through its shared::cta address, for the same loop shape as the
// DSM form (a plain C++ load lets the compiler move or merge it).
__device__ __forceinline__ gl_u32 gl_smem_ld_u32(gl_u32 smem_addr) {
    gl_u32 v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(smem_addr) : "memory");
    return v;
}

__device__ __forceinline__ uint4 gl_smem_ld_v4(gl_u32 smem_addr) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(smem_addr)
                 : "memory");
    return v;
}

// Release store / acquire load at cluster scope: a flag that publishes the data written before it.
__device__ __forceinline__ void gl_dsmem_st_release_u32(gl_u32 cluster_addr, gl_u32 v) {
    asm volatile("st.release.cluster.shared::cluster.u32 [%0], %1;" ::"r"(cluster_addr), "r"(v) : "memory");
}

__device__ __forceinline__ gl_u32 gl_dsmem_ld_acquire_u32(gl_u32 cluster_addr) {
    gl_u32 v;
    asm volatile("ld.acquire.cluster.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(cluster_addr) : "memory");
    return v;
}

// Atomic add on a shared::cluster address (relaxed, cluster scope); returns the old value.
__device__ __forceinline__ gl_u32 gl_dsmem_atomic_add_u32(gl_u32 cluster_addr, gl_u32 v) {
    gl_u32 old;
    asm volatile("atom.relaxed.cluster.shared::cluster.add.u32 %0, [%1], %2;"
                 : "=r"(old)
                 : "r"(cluster_addr), "r"(v)
                 : "memory");
    return old;
}

// Waits until the u32 at a shared::cluster address equals `want` (acquire), until the
// %globaltimer passes deadline_ns (0: no deadline). On time-out records `code` in status as
// gl_mbar_wait does (status[0] code, [1] block, [2] thread, [3] ns waited) and returns false.
__device__ __forceinline__ bool gl_dsmem_wait_u32(gl_u32 cluster_addr, gl_u32 want, gl_u64 deadline_ns, int *status,
                                                  int code) {
    if (gl_dsmem_ld_acquire_u32(cluster_addr) == want) return true;
    const gl_u64 start = gl_globaltimer_ns();
    for (;;) {
        if (gl_dsmem_ld_acquire_u32(cluster_addr) == want) return true;
        const gl_u64 now = gl_globaltimer_ns();
        if (deadline_ns != 0 && now > deadline_ns) {
            gl_record_timeout(status, code, now - start);
            return false;
        }
        __nanosleep(64);
    }
}

// One arrival on the mbarrier at a shared::cluster address (another CTA's barrier, from
// gl_dsmem_map), release at cluster scope: this thread's earlier writes, remote ones included,
// are seen by whoever waits on that barrier's phase at cluster scope in the owning CTA
// (gl_mbar_wait_cluster). gl_mbar_wait acquires at CTA scope only (the default of
// mbarrier.try_wait), which does not synchronise with a release by a thread of another CTA:
// the phase is seen complete, but the arriving CTA's data need not be.
__device__ __forceinline__ void gl_mbar_arrive_remote(gl_u32 cluster_bar) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(cluster_bar) : "memory");
}

// True once the phase with parity `parity` of this CTA's mbarrier completed, with acquire
// semantics at cluster scope (PTX ISA 8.0, sm_90): the writes that other CTAs of the cluster
// released by their arrivals on this phase (gl_mbar_arrive_remote) are visible afterwards.
__device__ __forceinline__ bool gl_mbar_try_wait_cluster(gl_u64 *bar, gl_u32 parity) {
    gl_u32 done;
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(gl_smem_addr(bar)), "r"(parity)
        : "memory");
    return done != 0;
}

// gl_mbar_wait at cluster scope: waits for the phase of `parity` of this CTA's mbarrier until the
// %globaltimer passes `deadline_ns` (0: for ever). Use it where other CTAs arrive on the barrier
// (gl_mbar_arrive_remote) to publish data the waiter then reads. On time-out it records `code` in
// status as gl_mbar_wait does (status[0] code, [1] block, [2] thread, [3] ns waited) and returns false.
__device__ __forceinline__ bool gl_mbar_wait_cluster(gl_u64 *bar, gl_u32 parity, gl_u64 deadline_ns,
                                                     int *status, int code) {
    return gl_mbar_wait_until<gl_mbar_try_wait_cluster>(bar, parity, deadline_ns, status, code);
}

// ---- TMA multicast ------------------------------------------------------------------------------
//
// One copy of the box at (x, y) lands in every CTA of the cluster whose bit is set in cta_mask
// (bit r = cluster rank r), at the same shared-memory offset as dst in each of them, and completes
// its transaction bytes on the mbarrier at bar's offset in each destination CTA. Accounting:
//  - every receiving CTA's own barrier gets complete_tx of the full box (map.box_bytes), so every
//    receiving CTA arms its own barrier: gl_mbar_arrive_expect_tx(bar, box_bytes) once per phase,
//    whichever CTA issues the copy (the issuing CTA, if its bit is set, arms its own too);
//  - the issuer's barrier gets nothing for CTAs it is not among;
//  - several CTAs may each multicast a slice (a box of their own) to all: then each barrier
//    expects the sum of the slices it receives.
// Before the first multicast every destination CTA must have initialised its barrier and
// published it (gl_mbar_init; gl_fence_mbar_init; then gl_cluster_sync(), so the issuer cannot
// run ahead of a barrier that is not there yet). Before a CTA reuses dst for the next copy, every
// receiver must have finished reading it (a cluster barrier, or an "empty" barrier per CTA).
// A complete_tx that reaches a barrier before its expect_tx is allowed (the transaction count
// goes below zero), but the phase cannot complete before the local arrival.
// Needs a cluster launch: outside one, .multicast::cluster is an illegal instruction.
__device__ __forceinline__ void gl_tma_load_2d_multicast(void *dst, const gl_tensormap_t *map, int x, int y,
                                                         gl_u64 *bar, unsigned short cta_mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(gl_smem_addr(dst)),
                 "l"(map), "r"(x), "r"(y), "r"(gl_smem_addr(bar)), "h"(cta_mask)
                 : "memory");
}

// The mask of the first n ranks (n <= 16).
__device__ __forceinline__ unsigned short gl_cluster_mask_first(gl_u32 n) {
    return (unsigned short)(n >= 16 ? 0xffffu : ((1u << n) - 1u));
}

#endif
