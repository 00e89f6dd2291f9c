/* tensorize.h — tensorize: replace a loop nest or a block by a tensor
 * intrinsic's implementation (TVM's Tensorize; registry in intrin.h), after
 * matching the intrinsic's description against the subtree up to renaming
 * and per-buffer offsets. A mismatch is TS_ESCHEDULE naming the first
 * difference. docs/TENSORIZE.md, docs/IR.md ("Notes by file"). */
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
 * the extent the intrinsic covers (b->niter entries): 0 for leading spatial
 * iter vars beyond the description's (a batch, outside every call). */
ts_status sch_tensorize_match_block(sch_state *s, sch_block b, const sch_intrin *in, int64_t *desc_ext,
                                    ts_diag *d);

#endif
