/* codegen.h — targets and lowering: the LLVM-free half of codegen/, which the
 * search and cost model also use (validity checks, lowered IR for features).
 *
 * Lowering turns a scheduled PrimFunc (blocks, multi-dimensional buffers)
 * into the *lowered form* that backends consume and the reference
 * interpreter still runs (so every lowering step is checkable):
 *  - no block realizes: iter vars are replaced by their bindings; a block
 *    predicate becomes an IR_IF; a reduction's init runs under an IR_IF that
 *    tests every R iter var at the start of its domain (or, after
 *    decompose_reduction, is its own loop nest);
 *  - every buffer is flat (ndim 1, shape [number of elements incl. padding
 *    from storage_align/strides]); loads and stores carry exactly one index;
 *    params keep their order, are flattened the same way, and
 *    cg_lowered.orig keeps the n-d originals for artifact metadata;
 *  - buffers allocated by blocks become IR_ALLOCATE statements, with their
 *    storage scope kept ("global": heap or stack by size, "local": stack),
 *    placed and shrunk as TVM's PlanAndUpdateBufferAllocationLocation +
 *    CompactBufferAllocation do: the allocation goes just inside the
 *    innermost loop enclosing every access (inside a parallel loop's body, so
 *    per task), never inside a vectorized loop nor, on GPUs, below threadIdx
 *    (shared) or any thread binding (other non-local scopes); each dimension
 *    shrinks to the hull of its accessed indices with the loops inside that
 *    point relaxed (outer loop vars symbolic), indices become idx - min.
 *    A buffer with a non-constant extent, explicit strides or an elem_offset
 *    keeps its declared shape at its block; a dimension whose hull covers
 *    the declared extent keeps it (no shift); storage_align pads the
 *    compacted strides;
 *  - a vectorized loop with constant extent L whose body can be expressed in
 *    lanes becomes straight-line vector code: the loop var is replaced by
 *    ramp(0, 1, L) and expressions are widened (ramp/broadcast; contiguous
 *    indices become ramp(base, 1, L) so backends emit vector loads/stores;
 *    other indices become gathers); a vectorized loop that cannot be
 *    expressed this way stays an IR_FOR of kind vectorized, which backends
 *    must treat as a serial loop plus a vectorization hint (correct fallback);
 *  - parallel, unrolled and thread-bound loops stay IR_FOR of their kind,
 *    with annotations kept (e.g. "pragma_auto_unroll_max_step");
 *  - index expressions are simplified (ir_simplify) under loop ranges.
 *
 * Validity (cg_check): what a target cannot run is rejected with a reason
 * (thread-bound loops on CPU, vector lanes over 64, nested parallel loops,
 * shared/local scopes on CPU are fine, warp scopes are not).
 *
 * Details of the lowered form as implemented (codegen/lower.c, lower_vec.c):
 *  - flat indices are i64, sum of index*stride (+ elem_offset); strides are
 *    row-major, or the buffer's own, or for a block-allocated buffer with
 *    storage_align the padded ones (TVM's rule, innermost first:
 *    s += (factor + offset - s % factor) % factor); params keep compact
 *    layout (storage_align on a param is ignored). Size: stride[0]*shape[0]
 *    for row-major/padded layouts; with explicit strides the larger of
 *    1 + sum((shape_i - 1)*stride_i) and max(stride_i*shape_i);
 *  - the lane ramp of a vectorized loop is ramp(min, 1, L) (min is 0 for
 *    loops made by split). A loop is widened only when lanes cannot see each
 *    other's writes: every store index moves by a non-zero constant per lane
 *    (no predicate), every access to a stored buffer uses the same index as
 *    its store, and the body holds only stores, seqs, and ifs/lets whose
 *    condition/value is lane-invariant (they stay scalar; a lane-dependent
 *    if keeps the loop). Lane-dependent selects and && / || (padding guards)
 *    are widened and rely on backends evaluating their guarded side under
 *    the lane mask (as the LLVM backend and the interpreter do); under such
 *    a guard no load or integer division is left scalar (a lane-invariant
 *    load gets a broadcast index there, not broadcast(load)).
 *    Otherwise (and for non-constant extents or L > 64) the loop stays; a
 *    vectorized loop of extent 1 becomes its body at v = min. Stores of
 *    widened code have no predicate (none is generated today);
 *  - serial loops of extent 1 without annotations are folded away (their
 *    var replaced by the min); ifs, selects and block predicates whose
 *    condition simplifies to a constant are resolved;
 *  - unchanged nodes (vars, constants, untouched subtrees) are shared with
 *    the input function, so it must outlive the lowered one (orig already
 *    points at it).
 * Targets: vector_bits stays 0 for a bare host target ("llvm" with no
 * triple/cpu/attrs) until the backend resolves the host; cg_target_is_host is
 * false for cuda. cg_check also refuses parallel loops on cuda and more than
 * 1024 threadIdx threads per block. */
#ifndef TESSEL_CODEGEN_H
#define TESSEL_CODEGEN_H

#include "ir/ir.h"

typedef enum { CG_TARGET_LLVM, CG_TARGET_CUDA } cg_target_kind;

typedef struct cg_target {
  cg_target_kind kind;
  char triple[128]; /* empty: host */
  char cpu[64];     /* empty: host CPU (llvm) */
  char attrs[512];  /* -mattr=..., comma separated */
  char arch[32];    /* cuda: sm_90 */
  int vector_bits;  /* widest SIMD register in bits (0: unknown -> 128) */
  int num_cores;    /* 0: unknown */
  char text[700];   /* canonical target string, for logs */
} cg_target;

/* Parses "llvm", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72",
 * "llvm -mattr=+avx2,+fma", "cuda -arch=sm_90". Unknown kinds or keys are
 * TS_EINVAL naming them. Host details are filled in by the backend. */
ts_status cg_target_parse(const char *s, cg_target *t, ts_diag *d);
/* True if the target's triple is the host's (or empty). */
bool cg_target_is_host(const cg_target *t);

typedef struct cg_lowered {
  ir_func *func;       /* lowered form, flat buffers */
  const ir_func *orig; /* the scheduled function (n-d params, for metadata) */
} cg_lowered;

/* Lowers f into arena a. Errors: TS_EUNSUPPORTED with a reason naming the
 * block/loop. */
ts_status cg_lower(ts_arena *a, const ir_func *f, const cg_target *t, cg_lowered *out, ts_diag *d);
/* Checks that a scheduled function can be built for t (used by search's
 * postprocessors before spending a build on it). */
ts_status cg_check(const ir_func *f, const cg_target *t, ts_diag *d);

#endif
