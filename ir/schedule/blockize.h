/* blockize.h — blockize: a loop nest becomes one outer block over an inner
 * block (TVM's Blockize, ir/schedule/blockize.c). Shared with tensorize.c. */
#ifndef TESSEL_IR_SCHEDULE_BLOCKIZE_H
#define TESSEL_IR_SCHEDULE_BLOCKIZE_H

#include "schedule.h"

/* Turns the subtree under loop l (a perfect nest of loops over exactly one
 * block realize) into a new block "<block>_o" at l's place whose body is
 * those loops over the original block. Each binding of the block is divided
 * into an outer part (loops above l) and an inner part (loops from l down):
 *   binding = outer * E + inner,  inner ranging densely over [0, E)
 * (the inner loops' coefficients must be 1, e0, e0*e1, ... in some order,
 * and the outer part and the iter var's domain divisible by E). The outer
 * block has one iter var per binding with an outer part (domain extent/E,
 * same S/R type) bound to outer/E; the inner block is bound to
 * vo*E + inner. A reduction's init moves to the outer block (as loops over
 * the inner spatial extents) when the outer block has a reduce iter var.
 * The outer block's reads/writes are detected from its body.
 * Refused (TS_ESCHEDULE, naming the loop and the reason): more or fewer
 * than one block under l, anything but loops between l and the block, a
 * loop with a non-constant range or a non-zero min, a non-affine binding, a
 * binding that does not divide, a predicate that uses loops under l.
 * out (may be NULL) receives the outer block. */
ts_status sch_blockize(sch_state *s, sch_loop l, sch_block *out, ts_diag *d);

#endif
