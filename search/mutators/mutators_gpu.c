/* mutators_gpu.c — the GPU mutators (MetaSchedule's
 * src/s_tir/meta_schedule/mutator/; their probabilities per target are the
 * space table's, search/targets.c):
 *  - MutateThreadBinding: the pattern `v = SampleCategorical(...); Split(l,
 *    [None, v]); Bind(inner, "threadIdx.x")` (AutoBind, CrossThreadReduction)
 *    gets v resampled among its other candidates (probabilities
 *    renormalised);
 *  - the cooperative-fetch lanes that MutateTileSize also mutates: the
 *    SampleCategorical feeding a meta_schedule.cooperative_fetch annotation,
 *    resampled excluding its current value (mutators.c picks uniformly among
 *    tile decisions and these). */
#include <string.h>

#include "search/rules/gpu_rules.h"

static bool is_categorical(const sch_inst *s) {
  return s->kind == SCH_I_SAMPLE_CATEGORICAL && s->decision.n == 1 && s->nattr >= 2 && s->attrs[0].n >= 2;
}

/* Categoricals whose value is a split factor whose inner loop is bound to
 * threadIdx.x. */
static int thread_binding_candidates(const sch_trace *tr, int *out, int cap) {
  int n = 0;
  for (int i = 0; i < sch_trace_len(tr) && n < cap; i++) {
    const sch_inst *sp = sch_trace_inst(tr, i);
    if (sp->kind != SCH_I_SPLIT || sp->nin != 3 || sp->nout != 2 || sp->in[2].kind != SCH_ARG_RV) continue;
    int def = srch_defining_inst(tr, sp->in[2].rv);
    if (def < 0 || !is_categorical(sch_trace_inst(tr, def))) continue;
    bool bound = false;
    for (int j = i + 1; j < sch_trace_len(tr) && !bound; j++) {
      const sch_inst *b = sch_trace_inst(tr, j);
      bound = b->kind == SCH_I_BIND && b->nin >= 1 && b->in[0].kind == SCH_ARG_RV && b->in[0].rv == sp->out[1] &&
              b->nattr >= 1 && b->attrs[0].s && !strcmp(b->attrs[0].s, "threadIdx.x");
    }
    bool dup = false;
    for (int j = 0; j < n; j++) dup |= out[j] == def;
    if (bound && !dup) out[n++] = def;
  }
  return n;
}

sch_trace *srch_mutate_thread_binding(const sch_trace *tr, ts_rng *rng) {
  int cands[256];
  int n = thread_binding_candidates(tr, cands, 256);
  if (!n) return NULL;
  return srch_resample_categorical(tr, cands[ts_rng_below(rng, (uint64_t)n)], rng);
}

int srch_fetch_lane_candidates(const sch_trace *tr, int *out, int cap) {
  int n = 0;
  for (int i = 0; i < sch_trace_len(tr) && n < cap; i++) {
    const sch_inst *in = sch_trace_inst(tr, i);
    if (in->kind != SCH_I_ANNOTATE || in->nin < 2 || in->nattr < 1 || !in->attrs[0].s ||
        strcmp(in->attrs[0].s, SRCH_ANN_COOP_FETCH) || in->in[1].kind != SCH_ARG_RV)
      continue;
    int def = srch_defining_inst(tr, in->in[1].rv);
    if (def >= 0 && is_categorical(sch_trace_inst(tr, def))) out[n++] = def;
  }
  return n;
}

sch_trace *srch_mutate_fetch_lanes(const sch_trace *tr, int inst, ts_rng *rng) {
  return srch_resample_categorical(tr, inst, rng);
}
