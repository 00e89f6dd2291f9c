/* trace.h — traces of schedule primitives (TVM's Trace / TracedSchedule).
 *
 * A trace is the list of primitive calls that scheduled a function, each an
 * instruction {kind, inputs, attrs, outputs, decision}:
 *  - kind: a row of the instruction-kind registry (name, purity, input and
 *    attr signature, outputs, decision form, apply function);
 *  - inputs: random variables (RVs) defined by earlier instructions, or
 *    literals (None, an integer, a float, a quoted string);
 *  - attrs: plain values (ints, bools, strings, int/float lists);
 *  - outputs: the RVs the instruction defines (blocks, loops, or integer
 *    values drawn by samplers);
 *  - decision: what a sampler drew (a tile list or an index), kept apart so
 *    that a mutator can change it and replay the trace.
 * RVs are small integers. The traced schedule (sch_traced) keeps their
 * values in a symbol table and uses the same numbers in the trace it
 * records; a trace parsed from JSON numbers them in order of definition.
 *
 * The traced schedule wraps a concrete schedule (schedule.h): each sch_t_*
 * call resolves its RV arguments, calls the concrete primitive, and on
 * success only records an instruction and defines its outputs. A refused
 * call changes neither the schedule nor the trace.
 *
 * Replaying a trace (sch_trace_apply) onto a fresh traced schedule of the
 * unscheduled function reproduces a structurally equal function; stored
 * decisions are reused, repaired when they no longer fit (a tile list that
 * no longer divides the extent), and a missing decision is drawn afresh.
 * A failing instruction stops the replay with a message naming the
 * instruction and the primitive's reason; the instructions before it stay
 * applied and the schedule stays usable.
 *
 * JSON (docs/TRACE.md): [[[kind, inputs, attrs, outputs], ...],
 * [[inst_index, decision], ...]] with RVs named b0/l1/v2 by a running count. */
#ifndef TESSEL_IR_SCHEDULE_TRACE_H
#define TESSEL_IR_SCHEDULE_TRACE_H

#include "schedule.h"

/* ---- random variables and literal arguments ------------------------------- */
typedef enum { SCH_RV_BLOCK = 'b', SCH_RV_LOOP = 'l', SCH_RV_EXPR = 'v' } sch_rv_kind;

typedef enum {
  SCH_ARG_RV,    /* rv: a random variable */
  SCH_ARG_NONE,  /* None (a split factor to infer) */
  SCH_ARG_INT,   /* i */
  SCH_ARG_FLOAT, /* f */
  SCH_ARG_STR,   /* s (JSON: a string carrying embedded quotes) */
} sch_arg_kind;

typedef struct sch_arg {
  sch_arg_kind kind;
  int rv;
  int64_t i;
  double f;
  const char *s;
} sch_arg;

static inline sch_arg sch_arg_rv(int rv) { return (sch_arg){.kind = SCH_ARG_RV, .rv = rv}; }
static inline sch_arg sch_arg_none(void) { return (sch_arg){.kind = SCH_ARG_NONE, .rv = -1}; }
static inline sch_arg sch_arg_int(int64_t v) { return (sch_arg){.kind = SCH_ARG_INT, .rv = -1, .i = v}; }
static inline sch_arg sch_arg_float(double v) { return (sch_arg){.kind = SCH_ARG_FLOAT, .rv = -1, .f = v}; }
static inline sch_arg sch_arg_str(const char *s) { return (sch_arg){.kind = SCH_ARG_STR, .rv = -1, .s = s}; }

typedef enum {
  SCH_ATTR_INT,
  SCH_ATTR_BOOL,   /* i is 0 or 1 */
  SCH_ATTR_FLOAT,
  SCH_ATTR_STR,
  SCH_ATTR_INTS,   /* n values in ints */
  SCH_ATTR_FLOATS, /* n values in floats */
} sch_attr_kind;

typedef struct sch_attr {
  sch_attr_kind kind;
  int64_t i;
  double f;
  const char *s;
  int n;
  int64_t *ints;
  double *floats;
} sch_attr;

/* A sampler's decision: n values (a tile list), or one index (n == 1).
 * n == 0: none recorded. */
typedef struct sch_decision {
  int n;
  int64_t *v;
} sch_decision;

/* ---- the instruction-kind registry ----------------------------------------
 * X(enum, name, pure). The signatures live in the table in trace.c. */
#define SCH_INST_KIND_LIST(X)                              \
  X(SCH_I_GET_BLOCK, "GetBlock", true)                     \
  X(SCH_I_GET_LOOPS, "GetLoops", true)                     \
  X(SCH_I_GET_CHILD_BLOCKS, "GetChildBlocks", true)        \
  X(SCH_I_GET_PRODUCERS, "GetProducers", true)             \
  X(SCH_I_GET_CONSUMERS, "GetConsumers", true)             \
  X(SCH_I_SPLIT, "Split", false)                           \
  X(SCH_I_FUSE, "Fuse", false)                             \
  X(SCH_I_REORDER, "Reorder", false)                       \
  X(SCH_I_PARALLEL, "Parallel", false)                     \
  X(SCH_I_VECTORIZE, "Vectorize", false)                   \
  X(SCH_I_UNROLL, "Unroll", false)                         \
  X(SCH_I_BIND, "Bind", false)                             \
  X(SCH_I_ANNOTATE, "Annotate", false)                     \
  X(SCH_I_ADD_UNIT_LOOP, "AddUnitLoop", false)             \
  X(SCH_I_COMPUTE_AT, "ComputeAt", false)                  \
  X(SCH_I_REVERSE_COMPUTE_AT, "ReverseComputeAt", false)   \
  X(SCH_I_COMPUTE_INLINE, "ComputeInline", false)          \
  X(SCH_I_REVERSE_COMPUTE_INLINE, "ReverseComputeInline", false) \
  X(SCH_I_CACHE_READ, "CacheRead", false)                  \
  X(SCH_I_CACHE_WRITE, "CacheWrite", false)                \
  X(SCH_I_SET_SCOPE, "SetScope", false)                    \
  X(SCH_I_STORAGE_ALIGN, "StorageAlign", false)            \
  X(SCH_I_DECOMPOSE_REDUCTION, "DecomposeReduction", false) \
  X(SCH_I_RFACTOR, "RFactor", false)                       \
  X(SCH_I_BLOCKIZE, "Blockize", false)                     \
  X(SCH_I_TENSORIZE, "Tensorize", false)                   \
  X(SCH_I_SAMPLE_PERFECT_TILE, "SamplePerfectTile", true)  \
  X(SCH_I_SAMPLE_CATEGORICAL, "SampleCategorical", true)   \
  X(SCH_I_SAMPLE_COMPUTE_LOCATION, "SampleComputeLocation", true) \
  X(SCH_I_ENTER_POSTPROC, "EnterPostproc", false)          \
  X(SCH_I_TRANSFORM_LAYOUT, "TransformLayout", false)     \
  X(SCH_I_SHIFT_TO_UNSIGNED, "ShiftToUnsigned", false)   \
  X(SCH_I_PAD_EINSUM, "PadEinsum", false)                 \
  X(SCH_I_SET_DTYPE, "SetDType", false)

typedef enum {
#define SCH_X(e, n, p) e,
  SCH_INST_KIND_LIST(SCH_X)
#undef SCH_X
  SCH_INST_KIND_COUNT
} sch_inst_kind;

struct sch_apply_ctx;
/* One registry row. Signatures are strings, one character per position:
 *  inputs: B block RV, L loop RV (or a compute-location mark), T block or
 *          loop RV, X split factor (expr RV, None or int), V annotation
 *          value (expr RV, int, float or string); a trailing '*' repeats
 *          the previous character zero or more times, '+' once or more.
 *  attrs:  i int, b bool, f float, s string, I int list, F float list.
 *  outputs: the RV kind (0 = none) and how many: nout >= 0 fixed;
 *          SCH_NOUT_ANY decided by the primitive (GetLoops ...);
 *          SCH_NOUT_INPUTS_MINUS_1 (Split); SCH_NOUT_ATTR0 (attrs[0] of them).
 *  decision: 0 none, 's' one index, 'a' a list of ints. */
enum { SCH_NOUT_ANY = -1, SCH_NOUT_INPUTS_MINUS_1 = -2, SCH_NOUT_ATTR0 = -3 };
typedef struct sch_inst_kind_info {
  const char *name;
  bool pure;
  const char *inputs;
  const char *attrs;
  char out_kind;
  int nout;
  char decision;
  ts_status (*apply)(struct sch_apply_ctx *c);
} sch_inst_kind_info;

const sch_inst_kind_info *sch_inst_kind_get(sch_inst_kind k);
/* Looks a kind up by name; false if unknown. */
bool sch_inst_kind_lookup(const char *name, sch_inst_kind *out);

/* ---- traces ---------------------------------------------------------------- */
typedef struct sch_inst {
  sch_inst_kind kind;
  int nin;
  sch_arg *in;
  int nattr;
  sch_attr *attrs;
  int nout;
  int *out; /* RV ids */
  sch_decision decision;
} sch_inst;

/* Owns its instructions (in its own arena). */
typedef struct sch_trace sch_trace;

sch_trace *sch_trace_new(void);
void sch_trace_free(sch_trace *tr);
int sch_trace_len(const sch_trace *tr);
const sch_inst *sch_trace_inst(const sch_trace *tr, int i);
/* The kind of RV id (0 if undefined). */
sch_rv_kind sch_trace_rv_kind(const sch_trace *tr, int rv);
/* A deep copy; NULL on OOM. */
sch_trace *sch_trace_copy(const sch_trace *tr);
/* Replaces instruction i's decision (a copy is kept). TS_EINVAL unless i is a
 * sampler whose decision has that form. */
ts_status sch_trace_set_decision(sch_trace *tr, int i, const sch_decision *dec, ts_diag *d);
/* Dead-instruction elimination: a copy without the pure instructions (Get*,
 * Sample*) whose outputs no kept instruction uses; with remove_postproc,
 * everything from the first EnterPostproc on is dropped first. NULL on OOM. */
sch_trace *sch_trace_simplified(const sch_trace *tr, bool remove_postproc);
/* A copy without the instructions of one kind (only kinds whose outputs no
 * other instruction can use, e.g. SCH_I_TRANSFORM_LAYOUT: docs/LAYOUT.md);
 * NULL on OOM or for a kind with outputs. */
sch_trace *sch_trace_without_kind(const sch_trace *tr, sch_inst_kind kind);

/* JSON text of the trace (heap string, caller ts_free; NULL on OOM). */
char *sch_trace_to_json(const sch_trace *tr);
/* Parses JSON text. Errors (TS_EPARSE) name the instruction index, the kind
 * and the problem: not JSON, wrong shapes or types, unknown kinds, undefined
 * or redefined variables, RVs of the wrong kind, wrong arity, bad decisions. */
sch_trace *sch_trace_from_json(const char *text, ts_diag *d);
/* Writes the instructions in Python-like form, one per line (for humans). */
char *sch_trace_to_text(const sch_trace *tr);

/* ---- the traced schedule --------------------------------------------------- */
typedef struct sch_traced sch_traced;

/* A traced schedule over a deep copy of f; NULL on OOM (d set). */
sch_traced *sch_traced_new(const ir_func *f, uint64_t seed, ts_diag *d);
void sch_traced_free(sch_traced *t);
/* The concrete schedule underneath (owned by t). Calling its primitives
 * directly bypasses the trace. */
sch_state *sch_traced_state(sch_traced *t);
ir_func *sch_traced_func(sch_traced *t);
/* The trace recorded so far (owned by t). */
const sch_trace *sch_traced_trace(sch_traced *t);

/* RV values: the kind of rv (0 if undefined) and its value. */
sch_rv_kind sch_t_rv_kind(const sch_traced *t, int rv);
sch_block sch_t_block(const sch_traced *t, int rv);
sch_loop sch_t_loop(const sch_traced *t, int rv);
int64_t sch_t_value(const sch_traced *t, int rv);

/* The generic call every sch_t_* goes through: checks the arguments against
 * the kind's signature (TS_EINVAL), applies the primitive, and on success
 * records the instruction and defines its outputs. dec: the decision to use
 * (NULL: sample). *out (arena of t, valid until sch_traced_free) receives
 * *nout RV ids; out and nout may be NULL. */
ts_status sch_traced_call(sch_traced *t, sch_inst_kind kind, int nin, const sch_arg *in, int nattr,
                          const sch_attr *attrs, const sch_decision *dec, const int **out,
                          int *nout, ts_diag *d);

/* The trace so far plus the last call whose primitive failed (refused or
 * errored; its outputs get fresh names), as JSON: replaying it reproduces
 * the failure. Without a failed call, the trace's JSON. Heap string (caller
 * ts_free); NULL on OOM. */
char *sch_traced_failure_json(const sch_traced *t);

/* The primitives, taking and returning RV ids (see schedule.h for their
 * semantics and errors). Variable-length results are arena arrays of t. */
ts_status sch_t_get_block(sch_traced *t, const char *name, int *b, ts_diag *d);
ts_status sch_t_get_loops(sch_traced *t, int b, const int **loops, int *n, ts_diag *d);
/* target: a block or loop RV */
ts_status sch_t_get_child_blocks(sch_traced *t, int target, const int **blocks, int *n, ts_diag *d);
ts_status sch_t_get_producers(sch_traced *t, int b, const int **blocks, int *n, ts_diag *d);
ts_status sch_t_get_consumers(sch_traced *t, int b, const int **blocks, int *n, ts_diag *d);
/* factors: n args, each an expr RV, None (infer) or an int; out: n loop RVs */
ts_status sch_t_split(sch_traced *t, int loop, int n, const sch_arg *factors, int *out, ts_diag *d);
ts_status sch_t_fuse(sch_traced *t, int n, const int *loops, int *out, ts_diag *d);
ts_status sch_t_reorder(sch_traced *t, int n, const int *loops, ts_diag *d);
ts_status sch_t_parallel(sch_traced *t, int loop, ts_diag *d);
ts_status sch_t_vectorize(sch_traced *t, int loop, ts_diag *d);
ts_status sch_t_unroll(sch_traced *t, int loop, ts_diag *d);
ts_status sch_t_bind(sch_traced *t, int loop, const char *thread, ts_diag *d);
/* target: block or loop RV; value: an expr RV, int, float or string */
ts_status sch_t_annotate(sch_traced *t, int target, const char *key, sch_arg value, ts_diag *d);
ts_status sch_t_add_unit_loop(sch_traced *t, int target, int *out, ts_diag *d);
ts_status sch_t_compute_at(sch_traced *t, int b, int loop, bool preserve_unit_loops, int index,
                           ts_diag *d);
ts_status sch_t_reverse_compute_at(sch_traced *t, int b, int loop, bool preserve_unit_loops,
                                   int index, ts_diag *d);
ts_status sch_t_compute_inline(sch_traced *t, int b, ts_diag *d);
ts_status sch_t_reverse_compute_inline(sch_traced *t, int b, ts_diag *d);
ts_status sch_t_cache_read(sch_traced *t, int b, int read_index, const char *scope, int nconsumers,
                           const int *consumers, int *out, ts_diag *d);
ts_status sch_t_cache_write(sch_traced *t, int b, int write_index, const char *scope,
                            int nconsumers, const int *consumers, int *out, ts_diag *d);
ts_status sch_t_set_scope(sch_traced *t, int b, int write_index, const char *scope, ts_diag *d);
/* SetDType [write_index, dtype name] (sch_set_dtype). */
ts_status sch_t_set_dtype(sch_traced *t, int b, int write_index, ir_dtype dtype, ts_diag *d);
ts_status sch_t_storage_align(sch_traced *t, int b, int write_index, int axis, int64_t factor,
                              int64_t offset, ts_diag *d);
ts_status sch_t_decompose_reduction(sch_traced *t, int b, int loop, int *out, ts_diag *d);
/* out: the rf block RV */
ts_status sch_t_rfactor(sch_traced *t, int loop, int factor_axis, int *out, ts_diag *d);
/* out: the A_u8 and B_sum block RVs (sch_shift_to_unsigned) */
ts_status sch_t_shift_to_unsigned(sch_traced *t, int b, int *out, ts_diag *d);
/* out: the copy-out block RV (sch_pad_einsum: n multiples, one per iter var) */
ts_status sch_t_pad_einsum(sch_traced *t, int b, int n, const int64_t *mult, int *out, ts_diag *d);
/* out: the outer block RV (blockize.h) */
ts_status sch_t_blockize(sch_traced *t, int loop, int *out, ts_diag *d);
/* target: a block RV (tensorize the block) or a loop RV (blockize it, then
 * tensorize); intrin: a registered intrinsic's name (tensorize.h) */
ts_status sch_t_tensorize(sch_traced *t, int target, const char *intrin, ts_diag *d);
/* decision: n ints or NULL; out: n expr RVs */
ts_status sch_t_sample_perfect_tile(sch_traced *t, int loop, int n, int64_t max_innermost,
                                    const int64_t *decision, int *out, ts_diag *d);
ts_status sch_t_sample_categorical(sch_traced *t, int n, const int64_t *candidates,
                                   const double *probs, const int *decision, int *out, ts_diag *d);
/* out: a loop RV, possibly the root or inline mark */
ts_status sch_t_sample_compute_location(sch_traced *t, int b, const int *decision, int *out,
                                        ts_diag *d);
ts_status sch_t_enter_postproc(sch_traced *t, ts_diag *d);

/* ---- replay ---------------------------------------------------------------- */
/* Applies tr's instructions to t (normally a fresh traced schedule of the
 * unscheduled function), mapping tr's RVs to new ones in t. Stored decisions
 * are used (repaired if needed); with resample, samplers draw afresh from t's
 * RNG instead. On failure returns the primitive's status with a message
 * "instruction K (Kind): reason"; *failed_at (if not NULL) gets K, or -1 on
 * success. The instructions before K remain applied and recorded. */
ts_status sch_trace_apply(const sch_trace *tr, sch_traced *t, bool resample, int *failed_at,
                          ts_diag *d);
/* Convenience: a fresh traced schedule of f (seed for any sampling) with tr
 * applied. NULL on failure (d says which instruction and why). */
sch_traced *sch_trace_replay(const sch_trace *tr, const ir_func *f, uint64_t seed, ts_diag *d);

/* ---- random traces (random_trace.c) --------------------------------------- */
typedef struct sch_random_opts {
  int min_steps, max_steps; /* primitive steps to attempt (defaults 1, 12) */
  /* also draw blockize and tensorize (off by default so that seeded
   * callers keep their sequences; sch_selfcheck always draws them) */
  bool with_intrinsics;
} sch_random_opts;

/* Outcome of one random trace. */
typedef enum {
  SCH_RANDOM_OK,      /* every proposed step succeeded */
  SCH_RANDOM_REFUSED, /* a step was refused (TS_ESCHEDULE); t keeps the steps before it */
} sch_random_result;

/* Grows t's trace by a random sequence of plausible primitive steps drawn
 * from every family, using rng for the choices (t's own RNG drives the
 * samplers). *result says whether a step was refused; the refusal message
 * is in why (if not NULL). Returns an error status only for failures other
 * than refusals (OOM, a primitive's internal error), with d set. */
ts_status sch_random_trace(sch_traced *t, ts_rng *rng, const sch_random_opts *opts,
                           sch_random_result *result, ts_diag *why, ts_diag *d);

/* The randomized self-check behind `tessel selfcheck`: ntraces random
 * traces over f (seeded from seed), each serialized to JSON, parsed back,
 * replayed onto a fresh copy of f, required to be structurally equal to the
 * traced result (also after dead-instruction elimination), and run in the
 * reference interpreter against the unscheduled f on seeded inputs (rtol
 * 1e-4, atol 1e-5; integers exact), and replayed once more with one
 * sampler decision mutated (refused mutants are dropped; accepted ones must
 * match too). A trace with a refused step counts as
 * refused and is not checked. report (may be NULL) gets each mismatching
 * trace (refused = false) and each refused one (refused = true) with its
 * JSON and the reason. Returns an error only when the check itself
 * cannot run (OOM, the unscheduled function fails in the interpreter). */
typedef struct sch_selfcheck_stats {
  int traces, checked, refused, mismatches;
} sch_selfcheck_stats;
typedef void (*sch_report_fn)(void *ctx, int index, bool refused, const char *trace_json,
                              const char *why);
ts_status sch_selfcheck(const ir_func *f, int ntraces, uint64_t seed, const sch_random_opts *opts,
                        sch_report_fn report, void *ctx, sch_selfcheck_stats *out, ts_diag *d);

#endif
