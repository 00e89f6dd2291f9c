/* build.h — from a subject to an artifact: apply a trace (or the default
 * schedule), lower, and build through the LLVM backend. Shared by `tessel
 * build`, `tessel bench` and (later) the builder pool of the tuner. */
#ifndef TESSEL_TUNER_BUILD_H
#define TESSEL_TUNER_BUILD_H

#include <stdio.h>

#include "codegen/codegen.h"
#include "ir/schedule/trace.h"

/* The default schedule, so that every workload builds reasonably without a
 * trace. First, elementwise blocks without a select are inlined into their
 * consumers (AutoInline). Then a reduction MultiLevelTiling would tile
 * (unguarded body) gets a register-tiled micro-kernel: outer spatial loops
 * (the first non-unit one parallel), reduction loops, then rows (a spatial
 * loop the vector operand does not use, unrolled, <= 8) x cols (the
 * innermost spatial loop, 1-2 vectors, vectorized), the accumulator tile in
 * a "local" cache_write whose copy-back sits at the last outer loop with the
 * elementwise epilogue inlined into it, the init decomposed; factors divide
 * the extents, and without one the block falls through to the plain
 * schedule. Every other block (and all, with no inlining, with
 * tun_default_opts.no_tiling: --no-default-tiling): the
 * innermost spatial loop is moved inside the reduction loops, split by the
 * vector width and vectorized, the outermost spatial loop is parallelized,
 * and then a reduction's init is decomposed out in front of the first
 * reduction loop. Each step is best effort: a refused step is skipped (the
 * schedule stays legal). */
ts_status tun_default_schedule(sch_traced *t, const cg_target *tg, ts_diag *d);
/* The default schedule's options (zero: the defaults). */
typedef struct tun_default_opts {
  bool no_tiling; /* the plain per-block schedule only (before/after comparisons) */
  bool pack_weights; /* int8 kernels may re-lay their layout-free weights (VNNI packing):
                        set by a model build, which packs them; otherwise a kernel keeps
                        its inputs' layout and uses the interleaving VNNI entries */
  const char *const *keep; /* blocks writing the buffers of these names are never inlined: a
                              library call reads them through pointers the inlining does not see */
  int nkeep;
} tun_default_opts;
/* tun_default_schedule with options (NULL: the defaults). */
ts_status tun_default_schedule_opts(sch_traced *t, const cg_target *tg, const tun_default_opts *o, ts_diag *d);

/* The default schedule for cuda targets (build_gpu.c; tun_default_schedule
 * dispatches to it), in the spirit of TVM's dlight fallback: elementwise
 * producers inlined where legal; per remaining block, the leading spatial
 * loops fused, split by 256 (or fewer threads) and bound to blockIdx.x /
 * threadIdx.x, reduction loops kept serial inside each thread, the init
 * decomposed. Best effort per step; the result passes cg_gpu_check for
 * every built-in workload (tests/search/test_gpu_rules.c). */
ts_status tun_default_schedule_gpu(sch_traced *t, const cg_target *tg, ts_diag *d);

/* Schedules f: the trace in trace_path (JSON) if given, else the default
 * schedule. *out is a traced schedule the caller frees. */
ts_status tun_schedule(const ir_func *f, const char *trace_path, const cg_target *tg,
                       sch_traced **out, ts_diag *d);
/* tun_schedule with the default schedule's options (NULL: the defaults). */
ts_status tun_schedule_opts(const ir_func *f, const char *trace_path, const cg_target *tg,
                            const tun_default_opts *o, sch_traced **out, ts_diag *d);

/* ---- devices ----------------------------------------------------------------
 * What the tuner does differently per target kind, one row per kind
 * (build.c; codegen's cg_target_ops and search's space table are the layers
 * below): how a target string is completed, the default schedule, how an
 * artifact is built and measured, and the GPU register check the search may
 * run. tun_device_of picks the row once from the target's kind. */
struct tsrt_measure_opts;
struct tsrt_measure_result;
struct json_t;
typedef struct tun_device {
  const char *name;         /* "cpu", "cuda" */
  const char *artifact_ext; /* file extension of a built artifact: "so", "cubin" */
  bool kernel_report;       /* tessel build describes each kernel (launch, registers) */
  bool thread_pool;         /* its kernels run on the runtime's thread pool: records carry the count */
  /* fills in what the string left to the machine (NULL: nothing) */
  ts_status (*resolve)(cg_target *t, ts_diag *d);
  ts_status (*default_schedule)(sch_traced *t, const cg_target *tg, const tun_default_opts *o, ts_diag *d);
  /* builds path; text/json (either may be NULL) get the kernel report */
  ts_status (*build)(const ir_func *scheduled, const cg_target *tg, const char *path, FILE *text,
                     struct json_t *json, ts_diag *d);
  /* times the artifact at path in a forked child, outputs included when asked */
  void (*measure)(const char *path, const struct tsrt_measure_opts *mo, struct tsrt_measure_result *res);
  /* VerifyGPUCode's register check (srch_postproc_opts.gpu_regcheck; NULL: none) */
  ts_status (*regcheck)(const ir_func *scheduled, const cg_target *t, ts_diag *d);
} tun_device;
/* The row of t's kind. */
const tun_device *tun_device_of(const cg_target *t);
/* The thread count kernels for t run with when asked for `requested`
 * (--threads; 0: the default, TESSEL_NUM_THREADS or all cores of this
 * machine): requested itself, the default resolved here, or 0 (unknown)
 * for a device without a thread pool or when remote (a board picks its own
 * default). */
int tun_device_threads(const cg_target *t, int requested, bool remote);
/* t's device's resolve (TS_OK when it has none). */
ts_status tun_resolve_target(cg_target *t, ts_diag *d);

/* Lowers and builds a shared library at path for tg. */
ts_status tun_build_shared(const ir_func *scheduled, const cg_target *tg, const char *path,
                           ts_diag *d);

/* tun_build_shared in a forked child with a time limit: a candidate whose
 * compilation runs away (LLVM on a huge unrolled body) costs timeout_s, not
 * the tuning run. The parent's state is untouched. TS_ETIMEOUT on timeout,
 * the child's error otherwise. */
ts_status tun_build_shared_isolated(const ir_func *scheduled, const cg_target *tg, const char *path,
                                    double timeout_s, ts_diag *d);

/* ---- cuda (tuner/build_cuda.c) ----------------------------------------------
 * tun_build_cuda writes, for a scheduled function and a cuda target, a cubin
 * (any path), PTX (path ending .ptx) or the CUDA C (.cu, no NVRTC needed).
 * Errors: cg_cuda_emit's and cg_nvrtc_compile's (TS_EUNSUPPORTED "built
 * without CUDA"), TS_EIO; a cubin whose kernel needs more registers than
 * the target's register file per block holds for its threads is refused
 * (cg_gpu_check_registers, TS_EUNSUPPORTED naming kernel, registers and
 * threads). tun_build_cuda_report does the same and describes each kernel
 * (launch, registers and spills from the cubin): as lines on text and/or as
 * a "kernels" array set on the jansson object json (either may be NULL).
 * tun_measure_cuda_file times such a cubin on the
 * local GPU in a forked child (TS_ELOAD "no GPU: ..." without one). */
struct tsrt_measure_opts;
struct tsrt_measure_result;
struct json_t;
ts_status tun_build_cuda(const ir_func *scheduled, const cg_target *tg, const char *path, ts_diag *d);
ts_status tun_build_cuda_report(const ir_func *scheduled, const cg_target *tg, const char *path, FILE *text,
                                struct json_t *json, ts_diag *d);
void tun_measure_cuda_file(const char *path, const struct tsrt_measure_opts *mo,
                           struct tsrt_measure_result *res);
/* VerifyGPUCode's register check, installed in the search's
 * srch_postproc_opts.gpu_regcheck by tessel tune --gpu-regcheck: emits and
 * compiles the scheduled function to a cubin and checks every kernel's
 * registers x threads and spills against t's limits
 * (cg_gpu_check_registers). TS_OK without NVRTC (skipped). */
ts_status tun_cuda_regcheck(const ir_func *scheduled, const cg_target *t, ts_diag *d);

#endif
