/* workloads.h — the built-in workload library: named, parameterised kernels
 * written in the compute DSL. A spec is "NAME" or "NAME:key=value,...";
 * every key has a small default. Each workload also carries a hand-written C
 * reference loop, independent of the DSL and the interpreter, that
 * `tessel run W --check` and the tests compare against.
 *
 * The param order of each workload's function (inputs, then outputs), the
 * output-size formulas, the padding conventions and the FLOP counting rules
 * are documented at the top of workloads.c. Values are validated on parse:
 * sizes are positive integers (at most 2^30), pad non-negative, stride and
 * dilation >= 1, groups divides c and k, bias is 0/1, act is none/relu/gelu,
 * and every output size must be positive. */
#ifndef TESSEL_IR_WORKLOADS_H
#define TESSEL_IR_WORKLOADS_H

#include "../interp.h"
#include "../ir.h"

#define IR_WL_MAX_PARAMS 16

typedef struct ir_wl_param {
  const char *key;
  const char *def;  /* default value as text (ints, or words like "relu") */
  const char *help;
} ir_wl_param;

typedef struct ir_workload {
  const char *name;
  const char *desc;
  int nparams;
  ir_wl_param params[IR_WL_MAX_PARAMS];
} ir_workload;

/* A parsed spec: the workload and a value for every key (defaults filled). */
typedef struct ir_wl_inst {
  const ir_workload *wl;
  char values[IR_WL_MAX_PARAMS][32];
} ir_wl_inst;

/* The table of workloads (static storage). */
int ir_workload_count(void);
const ir_workload *ir_workload_at(int i);
const ir_workload *ir_workload_find(const char *name);

/* Parses "NAME:k=v,...". Unknown names or keys, duplicate keys and bad values
 * are TS_ENOTFOUND/TS_EINVAL with a message listing the valid ones. */
ts_status ir_wl_parse(const char *spec, ir_wl_inst *out, ts_diag *d);
int64_t ir_wl_int(const ir_wl_inst *w, const char *key);
const char *ir_wl_str(const ir_wl_inst *w, const char *key);
/* Canonical spec text "name:k=v,..." with all keys (for logs). */
void ir_wl_canonical(const ir_wl_inst *w, char *buf, size_t n);

/* The DSL source for an instance (heap string, caller ts_free). */
char *ir_wl_source(const ir_wl_inst *w);
/* Parses the instance's DSL into a PrimFunc in arena a. */
ts_status ir_wl_build(ts_arena *a, const ir_wl_inst *w, ir_func **out, ts_diag *d);
/* FLOPs (multiply-add = 2). */
double ir_wl_flops(const ir_wl_inst *w);
/* Runs the hand-written C reference: args laid out as the PrimFunc's params
 * (inputs first, then outputs); writes the outputs. */
ts_status ir_wl_reference(const ir_wl_inst *w, ir_tensor *args, ts_diag *d);

/* Convenience for specs: parse + build. */
ts_status ir_workload_from_spec(ts_arena *a, const char *spec, ir_func **out, ts_diag *d);

#endif
