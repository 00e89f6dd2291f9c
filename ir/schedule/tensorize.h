/* tensorize.h — tensorize: replace a loop nest or a block by a tensor
 * intrinsic's implementation (TVM's Tensorize; registry in intrin.h).
 *
 * Matching (the description function of the intrinsic against the
 * schedule's subtree):
 *  - the same number of loops with the same constant extents, in order;
 *  - one block with the same number of iter vars of the same S/R types, and
 *    bindings whose inner parts equal the description's;
 *  - the same body up to renaming of buffers and iter vars and the order of
 *    the operands of + and *: stores and loads pair buffers of the same
 *    dtype, rank (and scope, when the description names one other than
 *    global), and every index differs from the description's by an offset
 *    that depends only on the tile's position (the same offset for every
 *    access of a buffer);
 *  - the block has no init left (the reduction continues across calls: a
 *    tile whose whole reduction is inside the intrinsic is refused).
 * The implementation is then spliced in as the body of the outer block, its
 * parameters bound to the matched buffers at their offsets (loads/stores
 * offset per dimension, access_ptr by the flattened offset). The outer
 * block is annotated "tessel.tensorized" = the intrinsic's name.
 * A mismatch is TS_ESCHEDULE naming the first difference; an unknown
 * intrinsic TS_ENOTFOUND listing the registered ones. */
#ifndef TESSEL_IR_SCHEDULE_TENSORIZE_H
#define TESSEL_IR_SCHEDULE_TENSORIZE_H

#include "intrin.h"
#include "schedule.h"

/* b's body is a perfect loop nest over one inner block (what blockize
 * makes); it becomes the intrinsic's implementation. */
ts_status sch_tensorize_block(sch_state *s, sch_block b, const char *intrin, ts_diag *d);
/* blockize(l) then tensorize the new block; refused as a whole (the
 * schedule is unchanged) when either step is. out (may be NULL) gets the
 * outer block. */
ts_status sch_tensorize_loop(sch_state *s, sch_loop l, const char *intrin, sch_block *out, ts_diag *d);

/* Whether block b computes what the intrinsic describes, ignoring extents
 * (the same iter var types in order, the same body up to renaming, indices
 * equal up to a constant offset): what a search rule asks before tiling b
 * to the intrinsic's shape. TS_OK if so, TS_ESCHEDULE with the first
 * difference otherwise. desc_ext (may be NULL) receives, per iter var of b,
 * the extent the intrinsic covers (b->niter entries). */
ts_status sch_tensorize_match_block(sch_state *s, sch_block b, const sch_intrin *in, int64_t *desc_ext,
                                    ts_diag *d);

#endif
