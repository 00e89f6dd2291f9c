/* schedule.h — schedule primitives over a PrimFunc (TensorIR style), the
 * untraced concrete API (trace.h records calls). A state owns a private copy
 * of the function; a primitive checks legality first and refuses with
 * TS_ESCHEDULE and a reason, changing nothing. A block handle is its unique
 * name, a loop handle its loop variable. docs/IR.md ("Schedules", "Notes by
 * file"). */
#ifndef TESSEL_IR_SCHEDULE_H
#define TESSEL_IR_SCHEDULE_H

#include "../ir.h"

typedef struct sch_block {
  const char *name; /* owned by the state's arena */
} sch_block;

typedef enum { SCH_LOC_LOOP = 0, SCH_LOC_ROOT, SCH_LOC_INLINE } sch_loc_mark;
typedef struct sch_loop {
  ir_var *var;       /* NULL for the marks */
  sch_loc_mark mark; /* SCH_LOC_LOOP for a real loop */
} sch_loop;

typedef struct sch_state sch_state;

/* Creates a schedule over a deep copy of f. seed drives the samplers. NULL
 * on OOM (d set). */
sch_state *sch_create(const ir_func *f, uint64_t seed, ts_diag *d);
void sch_free(sch_state *s);
/* The current function (owned by the state; valid until the next primitive
 * call only for the body pointer — the ir_func struct itself is stable). */
ir_func *sch_func(sch_state *s);
ts_arena *sch_arena(sch_state *s);
/* When true, every successful primitive runs sch_verify afterwards and turns a
 * broken invariant into TS_EINTERNAL (tests switch this on). */
void sch_set_debug_verify(sch_state *s, bool on);

/* State checker (TVM's verify.cc): unique block names and loop vars, every
 * binding uses only enclosing loop vars, iter values stay in their domains
 * under the loop ranges, every buffer used is a param or allocated by an
 * enclosing block, reduction blocks have init and only S iter vars in write
 * indices, thread-bound/vectorized/parallel loops are legal kinds, each
 * block's reads/writes cover its accesses. */
ts_status sch_verify(sch_state *s, ts_diag *d);

/* ---- navigation ----------------------------------------------------------- */
ts_status sch_get_block(sch_state *s, const char *name, sch_block *out, ts_diag *d);
/* Loops from outermost to innermost between the block and its scope block.
 * *out is arena-allocated. */
ts_status sch_get_loops(sch_state *s, sch_block b, sch_loop **out, int *n, ts_diag *d);
/* Child blocks (not crossing another block) of a block or under a loop, in
 * program order. */
ts_status sch_get_child_blocks(sch_state *s, sch_block scope, sch_block **out, int *n, ts_diag *d);
ts_status sch_get_child_blocks_of_loop(sch_state *s, sch_loop l, sch_block **out, int *n,
                                       ts_diag *d);
/* Blocks in the same scope with a RAW or WAW edge into (producers) or out of
 * (consumers) b. */
ts_status sch_get_producers(sch_state *s, sch_block b, sch_block **out, int *n, ts_diag *d);
ts_status sch_get_consumers(sch_state *s, sch_block b, sch_block **out, int *n, ts_diag *d);

/* ---- loop transformations (ir/schedule/loop.c) ----------------------------- */
/* Splits l into n loops with the given factors (outermost first). At most one
 * factor may be -1 (inferred as ceil(extent / product of the others)).
 * If the product exceeds the extent, a predicate guards the block(s) below.
 * out receives the n new loops. */
ts_status sch_split(sch_state *s, sch_loop l, int n, const int64_t *factors, sch_loop *out,
                    ts_diag *d);
/* Fuses a chain of perfectly nested loops (outermost first) into one. */
ts_status sch_fuse(sch_state *s, int n, const sch_loop *loops, sch_loop *out, ts_diag *d);
/* Reorders the given loops (all on one path in one scope) into the listed
 * order, in the slots they occupy. */
ts_status sch_reorder(sch_state *s, int n, const sch_loop *loops, ts_diag *d);
ts_status sch_parallel(sch_state *s, sch_loop l, ts_diag *d);
ts_status sch_vectorize(sch_state *s, sch_loop l, ts_diag *d);
ts_status sch_unroll(sch_state *s, sch_loop l, ts_diag *d);
/* thread: blockIdx.{x,y,z}, threadIdx.{x,y,z}, vthread */
ts_status sch_bind(sch_state *s, sch_loop l, const char *thread, ts_diag *d);
ts_status sch_annotate_loop(sch_state *s, sch_loop l, ir_annot ann, ts_diag *d);
ts_status sch_annotate_block(sch_state *s, sch_block b, ir_annot ann, ts_diag *d);
/* Adds a unit loop (extent 1) directly above the block (or inside the loop,
 * around its body). */
ts_status sch_add_unit_loop_block(sch_state *s, sch_block b, sch_loop *out, ts_diag *d);
ts_status sch_add_unit_loop_loop(sch_state *s, sch_loop l, sch_loop *out, ts_diag *d);

/* ---- placement (ir/schedule/compute_at.c, compute_inline.c) -------------- */
/* index: -1 = latest legal slot, -2 = earliest, k >= 0 = that slot. */
ts_status sch_compute_at(sch_state *s, sch_block b, sch_loop l, bool preserve_unit_loops,
                         int index, ts_diag *d);
ts_status sch_reverse_compute_at(sch_state *s, sch_block b, sch_loop l, bool preserve_unit_loops,
                                 int index, ts_diag *d);
ts_status sch_compute_inline(sch_state *s, sch_block b, ts_diag *d);
ts_status sch_reverse_compute_inline(sch_state *s, sch_block b, ts_diag *d);

/* ---- memory (ir/schedule/cache.c) ----------------------------------------- */
/* Caches the read_index-th read buffer of b into a new buffer in scope; the
 * given consumers (n = 0: all readers) read the cache. out = the copy block. */
ts_status sch_cache_read(sch_state *s, sch_block b, int read_index, const char *scope,
                         int nconsumers, const sch_block *consumers, sch_block *out, ts_diag *d);
/* b (the only writer of its write_index-th buffer) writes a cache in scope;
 * a copy-back block writes the original. out = the copy-back block. */
ts_status sch_cache_write(sch_state *s, sch_block b, int write_index, const char *scope,
                          int nconsumers, const sch_block *consumers, sch_block *out, ts_diag *d);
ts_status sch_set_scope(sch_state *s, sch_block b, int write_index, const char *scope, ts_diag *d);
ts_status sch_storage_align(sch_state *s, sch_block b, int write_index, int axis, int64_t factor,
                            int64_t offset, ts_diag *d);
/* The write_index-th buffer b writes (allocated by a block, not a param)
 * widened to dtype: an 8-bit integer to a 16- or 32-bit one (every value
 * kept; docs/TENSORIZE.md "Activations widened once"). Every store to it
 * stores its value cast to dtype; every load reads the wide element cast
 * back, except under a cast to a type at least as wide, which reads it
 * directly (the int8 kernels' i32(A16[..])). TS_ESCHEDULE for another
 * dtype change. */
ts_status sch_set_dtype(sch_state *s, sch_block b, int write_index, ir_dtype dtype, ts_diag *d);

/* ---- reductions (ir/schedule/reduction.c) --------------------------------- */
/* Splits the reduction block's init into its own block placed just before
 * loop l. out = the init block. */
ts_status sch_decompose_reduction(sch_state *s, sch_block b, sch_loop l, sch_block *out,
                                  ts_diag *d);
/* (ir/schedule/rfactor.c) Factors the reduction over loop l out of the one
 * reduction block below it: a new rf block (out, named <block>_rf) computes
 * partial results into a new buffer <out>_rf with an extra axis of l's
 * extent at factor_axis (in [-(ndim+1), ndim]) and a spatial iter var for
 * l; the original block (same name) becomes the write-back, reducing the
 * partials over l into the original buffer. Combiners: + * min max. The
 * rf block runs under fresh copies of the block's loops, inserted before
 * its outermost loop; l and the block's spatial loops now hold the
 * write-back. See rfactor.c for the conditions. */
ts_status sch_rfactor(sch_state *s, sch_loop l, int factor_axis, sch_block *out, ts_diag *d);
/* (ir/schedule/shift.c) The i8 x i8 -> i32 reduction block b (C = 0; C +=
 * i32(A) * i32(B), a child of the root block, B indexed by every reduction
 * iter var, A the operand not indexed by the last spatial iter var) made
 * u8 x i8: a new block out[0] writes A_u8 = u8(i32(A) + 128) (a new
 * root-allocated buffer), a new reduction block out[1] writes B_sum[s] = Σ
 * i32(B) over b's reduction domain (s: B's spatial indices), both before b's
 * nest; b then reads A_u8 and starts from -128 * B_sum[s]. Same result bit
 * for bit (wrapping i32); the compensation leaves the reduction (computed
 * once per output column). TS_ESCHEDULE naming what does not fit. */
ts_status sch_shift_to_unsigned(sch_state *s, sch_block b, sch_block *out, ts_diag *d);

/* PadEinsum (pad.c, docs/TENSORIZE.md "Padding"): pads the iteration domain
 * of root-level reduction block b (C = init; C = C + f(..) * g(..), one loop
 * per iter var, every buffer read and C written at plain iter vars) up to
 * mult[i] per iter var (n = its iter var count): every buffer it reads that
 * grows gets a zero-filled copy X_pad before it, C is computed into C_pad
 * over the padded domain and a C_unpad block after it copies the original
 * extent back to C (out, may be NULL). The padded reduction steps add zero
 * (the update must multiply by a load indexed by every padded reduction
 * iter var). TS_ESCHEDULE naming what does not fit; nothing to pad is
 * refused too. */
ts_status sch_pad_einsum(sch_state *s, sch_block b, int n, const int64_t *mult, sch_block *out, ts_diag *d);

/* ---- sampling (ir/schedule/sampling.c) ------------------------------------
 * Each takes an optional decision (NULL: sample with the state's RNG) and
 * returns the decision actually used (repaired if the stored one no longer
 * fits), so a trace can record it. */
/* n factors of l's extent whose product is the extent, the innermost at most
 * max_innermost (-1: no limit). Non-constant extent: [-1, 1, ..., 1]. */
ts_status sch_sample_perfect_tile(sch_state *s, sch_loop l, int n, int64_t max_innermost,
                                  const int64_t *decision, int64_t *out, ts_diag *d);
/* Picks candidates[i] with probability probs[i]; *index is the decision. */
ts_status sch_sample_categorical(sch_state *s, int n, const int64_t *candidates,
                                 const double *probs, const int *decision, int64_t *value,
                                 int *index, ts_diag *d);
/* Picks a compute location for b among the legal ones: SCH_LOC_INLINE (-2),
 * SCH_LOC_ROOT (-1), or a loop (index into the candidate list). */
ts_status sch_sample_compute_location(sch_state *s, sch_block b, const int *decision,
                                      sch_loop *out, int *index, ts_diag *d);

#endif
