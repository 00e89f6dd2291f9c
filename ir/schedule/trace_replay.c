/* trace_replay.c — replaying a trace onto a traced schedule (a fresh one,
 * or one already under way), with decision repair when a recorded sampling
 * decision no longer fits (docs/TRACE.md). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_int.h"

/* ---- replay ------------------------------------------------------------------ */
ts_status sch_trace_apply(const sch_trace *tr, sch_traced *t, bool resample, int *failed_at, ts_diag *d) {
  if (failed_at) *failed_at = -1;
  if (tr == t->trace) {
    /* applying a schedule's own trace to itself: work from a copy, since
     * the trace grows while it is read */
    sch_trace *c = sch_trace_copy(tr);
    if (!c) return ts_diag_set(d, TS_ENOMEM, "out of memory");
    ts_status st = sch_trace_apply(c, t, resample, failed_at, d);
    sch_trace_free(c);
    return st;
  }
  int *map = ts_malloc(sizeof *map * (size_t)(tr->nrv ? tr->nrv : 1));
  sch_arg *args = NULL;
  int cap = 0;
  if (!map) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int i = 0; i < tr->nrv; i++) map[i] = -1;
  ts_status st = TS_OK;
  int i;
  for (i = 0; i < tr->n; i++) {
    const sch_inst *x = &tr->insts[i];
    const char *name = sch_inst_kind_get(x->kind)->name;
    if (x->nin > cap) {
      cap = x->nin * 2;
      sch_arg *na = ts_realloc(args, sizeof *na * (size_t)cap);
      if (!na) {
        st = ts_diag_set(d, TS_ENOMEM, "out of memory");
        break;
      }
      args = na;
    }
    for (int j = 0; j < x->nin; j++) {
      args[j] = x->in[j];
      if (x->in[j].kind != SCH_ARG_RV) continue;
      int rv = x->in[j].rv;
      if (rv < 0 || rv >= tr->nrv || map[rv] < 0) {
        st = ts_diag_set(d, TS_EINVAL, "instruction %d (%s): input %d uses a variable no earlier instruction defines",
                         i, name, j);
        break;
      }
      args[j].rv = map[rv];
    }
    if (st) break;
    const sch_decision *dec = resample || x->decision.n == 0 ? NULL : &x->decision;
    ts_diag ld;
    ts_diag_clear(&ld);
    const int *out;
    int nout;
    st = sch_traced_call(t, x->kind, x->nin, args, x->nattr, x->attrs, dec, &out, &nout, &ld);
    if (st) {
      ts_diag_set(d, st, "instruction %d (%s): %s", i, name, ld.msg);
      break;
    }
    if (nout != x->nout) {
      st = ts_diag_set(d, TS_ESCHEDULE, "instruction %d (%s): gives %d outputs now, but the trace names %d", i,
                       name, nout, x->nout);
      break;
    }
    for (int j = 0; j < nout; j++)
      if (x->out[j] >= 0 && x->out[j] < tr->nrv) map[x->out[j]] = out[j];
  }
  if (st && failed_at) *failed_at = i;
  ts_free(map);
  ts_free(args);
  return st;
}

sch_traced *sch_trace_replay(const sch_trace *tr, const ir_func *f, uint64_t seed, ts_diag *d) {
  sch_traced *t = sch_traced_new(f, seed, d);
  if (!t) return NULL;
  if (sch_trace_apply(tr, t, false, NULL, d)) {
    sch_traced_free(t);
    return NULL;
  }
  return t;
}
