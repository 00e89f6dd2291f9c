/* graph_interp.h — runs a whole graph on the reference interpreter: the
 * ground truth that legalisation, fusion and the graph executor are checked
 * against. Every live node must be a TG_OP_CALL (run tg_pass_legalize first);
 * nodes run in order, each call's PrimFunc on ir_interp_run, intermediates
 * allocated per node and freed when their last reader has run. */
#ifndef TESSEL_IR_GRAPH_INTERP_H
#define TESSEL_IR_GRAPH_INTERP_H

#include "../interp.h"
#include "graph.h"

/* inputs: g->ninputs tensors in g->inputs order (the caller keeps them);
 * outputs: g->noutputs tensors allocated here (the caller frees each with
 * ir_tensor_free; none are left allocated on error). Graph symbols are bound
 * from the inputs' shapes; a disagreement is TS_ESHAPE naming the input.
 * Other errors are the interpreter's, prefixed with the node's name. */
ts_status tg_graph_run(const tg_graph *g, const ir_tensor *inputs, ir_tensor *outputs, ts_diag *d);

#endif
