/* tasks.h — task extraction: after the pass pipeline (passes.h), the distinct
 * PrimFuncs the graph calls are the tuning tasks of the model.
 *
 * Two calls are the same task when their PrimFuncs, bound to concrete sizes,
 * are structurally equal (ir/struct.h): the task key is ir_workload_key of
 * the bound function — exactly the key `tessel tune` logs for tuning that
 * function, so records written by `tessel tune-model` replay in
 * `tessel build MODEL`. Weight = how many live calls the task covers.
 *
 * Symbolic sizes: a PrimFunc with size vars (named after graph symbols such
 * as "batch") cannot be measured as is, so a task's func is the PrimFunc
 * with every size var bound (ir_func_bind_syms): to the value given for its
 * name in tg_extract_tasks_at, else to TG_TASK_DEFAULT_SYM (1). A build that
 * meets the same symbols at the same values finds the same keys
 * (tg_task_bind gives the bound function for any PrimFunc). */
#ifndef TESSEL_IR_GRAPH_TASKS_H
#define TESSEL_IR_GRAPH_TASKS_H

#include "graph.h"

#define TG_TASK_DEFAULT_SYM 1

typedef struct tg_task {
  const char *name;       /* the (first) callee's name, e.g. "fused_conv2d_add_relu_3" */
  uint64_t key;           /* ir_struct_hash_func(func); ir_workload_key prints it as 16 hex digits */
  int weight;             /* live calls of this task in the graph */
  double flops;           /* of one call at the bound sizes (multiply-add = 2) */
  ir_func *func;          /* bound function, in g->mod's arena */
  const char *definition; /* func-script text of func (ir_print_func): what the tuning log stores */
  int64_t layout_free;    /* bit i: every call feeds input i from a graph constant (a weight); func
                             then carries IR_FUNC_ANN_LAYOUT_FREE with this mask (docs/LAYOUT.md) */
} tg_task;

/* Extracts the tasks of g (after tg_run_pipeline), in order of first call.
 * *out is a heap array (tg_tasks_free); strings and funcs live in g->mod's
 * arena. TS_EINVAL if a live node is not a TG_OP_CALL (the pipeline has not
 * run), naming it. */
ts_status tg_extract_tasks(tg_graph *g, tg_task **out, int *n, ts_diag *d);
/* The same with explicit symbol values (nsyms names/values; symbols not
 * named get TG_TASK_DEFAULT_SYM). */
ts_status tg_extract_tasks_at(tg_graph *g, int nsyms, const char *const *names, const int64_t *values,
                              tg_task **out, int *n, ts_diag *d);
void tg_tasks_free(tg_task *t, int n);

/* f with every size var bound as tasks bind them (named values first, else
 * TG_TASK_DEFAULT_SYM); f itself when it has none. Allocated in a. */
ir_func *tg_task_bind(ts_arena *a, const ir_func *f, int nsyms, const char *const *names,
                      const int64_t *values, ts_diag *d);

/* f padded up to the sizes (named values first, else TG_TASK_DEFAULT_SYM),
 * for a shape bucket (docs/MODEL.md "Shape buckets"): every loop and block
 * iteration domain whose extent is a nondecreasing expression of the size
 * vars runs to its value at those sizes, and every block instance is
 * predicated off outside the call's own extents. Buffer shapes, index
 * arithmetic and the size vars stay, so the function takes the sizes at
 * run time and computes exactly what f does at any sizes up to the given
 * ones (a reduction over a padded axis skips the padded instances: softmax
 * and layer norm stay exact). Its loops match f bound at those sizes, so a
 * schedule tuned there replays on it. f itself when it has no size vars.
 * NULL with TS_EUNSUPPORTED naming f when an extent is not such an
 * expression or a padded loop binds no block iteration; TS_ENOMEM. */
ir_func *tg_task_bind_upto(ts_arena *a, const ir_func *f, int nsyms, const char *const *names,
                           const int64_t *values, ts_diag *d);
/* FLOPs of one run of a PrimFunc with constant extents: every float
 * arithmetic op and intrinsic in a store (init included) counts 1 per
 * execution (so a multiply-add counts 2), and so does an integer +, - or *
 * of a stored value (the int8 multiply-adds); index arithmetic does not
 * count.
 * -1 when a loop extent is not constant. */
double tg_func_flops(const ir_func *f);

#endif
