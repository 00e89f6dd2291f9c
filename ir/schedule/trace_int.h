/* trace_int.h — what the stages of the trace layer share (docs/TRACE.md):
 * resolved values and the apply context of the instruction-kind registry
 * (trace_kinds.c), the trace and traced-schedule structs (trace.c), and the
 * helpers the JSON reader (trace_json.c) and the traced wrapper use to
 * append and check instructions. Internal to ir/schedule. */
#ifndef TESSEL_IR_SCHEDULE_TRACE_INT_H
#define TESSEL_IR_SCHEDULE_TRACE_INT_H

#include "blockize.h"
#include "layout.h"
#include "sch_int.h"
#include "tensorize.h"
#include "trace.h"

/* ---- resolved values ------------------------------------------------------- */
/* An argument or RV after resolution: 'b' block, 'l' loop (maybe a mark),
 * 'v' integer value, 'n' None, 'i' int literal, 'f' float, 's' string. */
typedef struct sch_val {
  char kind;
  sch_block block;
  sch_loop loop;
  int64_t i;
  double f;
  const char *s;
} sch_val;

typedef struct sch_apply_ctx {
  sch_state *s;
  ts_arena *arena; /* outputs live here */
  int nin;
  const sch_val *in;
  int nattr;
  const sch_attr *attrs;
  const sch_decision *dec; /* NULL: sample */
  sch_decision used;       /* the decision to record (samplers) */
  int nout;
  sch_val *out;
  ts_diag *d;
} sch_apply_ctx;

/* ---- traces ---------------------------------------------------------------- */
struct sch_trace {
  ts_arena arena; /* args, attrs, outputs, decisions, strings */
  int n, cap;
  sch_inst *insts;
  int nrv, caprv;
  char *rvk; /* kind of each RV id, 0 = undefined here */
};

/* ---- the traced schedule ---------------------------------------------------- */
struct sch_traced {
  sch_state *s;
  sch_trace *trace;
  sch_trace *failed; /* the last call whose primitive failed (one instruction) */
  ts_arena arena; /* outputs handed to callers, scratch */
  int nrv, caprv;
  sch_val *rv;
};

ts_status trc_append(sch_trace *tr, sch_inst_kind kind, int nin, const sch_arg *in,
                     int nattr, const sch_attr *attrs, int nout, const int *out,
                     const sch_decision *dec);
const char *trc_sig_name(char c);
ts_status trc_check_sig(const sch_inst_kind_info *info, int nin, const sch_arg *in, const char *rvk_of,
                        int nrv, int nattr, const sch_attr *attrs, ts_status code, const char *prefix,
                        ts_diag *d);
int trc_fixed_nout(const sch_inst_kind_info *info, int nin, const sch_attr *attrs);
/* A kind's attr signature: those after a '?' are optional (a trailing
 * group an instruction may leave out). *min gets the required count;
 * returns the most; trc_attr_sig is attr j's signature character. */
int trc_attr_count(const sch_inst_kind_info *info, int *min);
char trc_attr_sig(const sch_inst_kind_info *info, int j);

#endif
