/* search/mutators/mutators.c — the CPU mutators of the evolutionary search
 * (MetaSchedule's src/s_tir/meta_schedule/mutator/): tile size, compute
 * location, unroll and parallel. Each returns a copy of a candidate's trace
 * with exactly one decision changed, or NULL when it has nothing to change.
 * docs/SEARCH.md ("Mutators"). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "search/search_int.h"

#define MAX_CANDS 512

/* ---- tile size --------------------------------------------------------------- */
static bool tile_candidate(const sch_inst *in) {
  if (in->kind != SCH_I_SAMPLE_PERFECT_TILE || in->decision.n < 2) return false;
  int64_t prod = 1;
  for (int i = 0; i < in->decision.n; i++) {
    if (in->decision.v[i] < 1) return false; /* symbolic extent: [-1, 1, ...] */
    prod *= in->decision.v[i];
  }
  return prod >= 2;
}

static int divisors_above_one(int64_t x, int64_t *out, int cap) {
  int n = 0;
  for (int64_t k = 2; k <= x && n < cap; k++)
    if (x % k == 0) out[n++] = k;
  return n;
}

/* A copy of tr whose instruction k takes decision (n values v); NULL on
 * failure. */
static sch_trace *with_decision(const sch_trace *tr, int k, int n, int64_t *v) {
  sch_trace *out = sch_trace_copy(tr);
  if (!out) return NULL;
  sch_decision dec = {n, v};
  if (sch_trace_set_decision(out, k, &dec, NULL)) {
    sch_trace_free(out);
    return NULL;
  }
  return out;
}

static sch_trace *mutate_tile_size(const sch_trace *tr, ts_rng *rng) {
  int cands[MAX_CANDS], nc = 0;
  for (int i = 0; i < sch_trace_len(tr) && nc < MAX_CANDS; i++)
    if (tile_candidate(sch_trace_inst(tr, i))) cands[nc++] = i;
  /* on GPUs the cooperative-fetch lanes are tile decisions too */
  int lanes[MAX_CANDS];
  int nlanes = srch_fetch_lane_candidates(tr, lanes, MAX_CANDS);
  if (!nc && !nlanes) return NULL;
  uint64_t pick = ts_rng_below(rng, (uint64_t)(nc + nlanes));
  if (pick >= (uint64_t)nc) return srch_mutate_fetch_lanes(tr, lanes[pick - (uint64_t)nc], rng);
  int k = cands[pick];
  const sch_inst *in = sch_trace_inst(tr, k);
  int n = in->decision.n;
  int64_t max_inner = in->nattr >= 2 ? in->attrs[1].i : -1;
  int64_t v[64];
  if (n > 64) return NULL;
  for (int tries = 0; tries < 32; tries++) {
    memcpy(v, in->decision.v, sizeof(int64_t) * (size_t)n);
    int xs[64], nx = 0;
    for (int i = 0; i < n; i++)
      if (v[i] > 1) xs[nx++] = i;
    if (!nx) return NULL;
    int x = xs[ts_rng_below(rng, (uint64_t)nx)];
    int y = (int)ts_rng_below(rng, (uint64_t)(n - 1));
    if (y >= x) y++;
    int64_t divs[256];
    int nd = divisors_above_one(v[x], divs, 256);
    if (y == n - 1 && max_inner > 0) {
      int m = 0;
      for (int i = 0; i < nd; i++)
        if (divs[i] * v[y] <= max_inner) divs[m++] = divs[i];
      nd = m;
    }
    if (!nd) {
      if (n == 2) return NULL;
      continue;
    }
    int64_t dv = divs[ts_rng_below(rng, (uint64_t)nd)];
    v[x] /= dv;
    v[y] *= dv;
    return with_decision(tr, k, n, v);
  }
  return NULL;
}

/* ---- compute location -------------------------------------------------------- */
static sch_trace *mutate_compute_location(const sch_trace *tr, ts_rng *rng) {
  int cands[MAX_CANDS], nc = 0;
  for (int i = 0; i < sch_trace_len(tr) && nc < MAX_CANDS; i++) {
    const sch_inst *in = sch_trace_inst(tr, i);
    if (in->kind == SCH_I_SAMPLE_COMPUTE_LOCATION && in->decision.n == 1) cands[nc++] = i;
  }
  if (!nc) return NULL;
  int k = cands[ts_rng_below(rng, (uint64_t)nc)];
  int64_t cur = sch_trace_inst(tr, k)->decision.v[0];
  /* Alternatives: inline, root, or one of the first consumer's loops (at
   * most the nest depth; an index past the legal ones falls back). */
  int64_t alts[16];
  int na = 0;
  for (int64_t a = -2; a < 12; a++)
    if (a != cur) alts[na++] = a;
  int64_t nv = alts[ts_rng_below(rng, (uint64_t)na)];
  return with_decision(tr, k, 1, &nv);
}

/* ---- unroll -------------------------------------------------------------------- */
int srch_defining_inst(const sch_trace *tr, int rv) {
  for (int i = 0; i < sch_trace_len(tr); i++) {
    const sch_inst *in = sch_trace_inst(tr, i);
    for (int o = 0; o < in->nout; o++)
      if (in->out[o] == rv) return i;
  }
  return -1;
}

/* A copy of tr whose SampleCategorical instruction k draws another of its
 * candidates (by their probabilities, the current one excluded); NULL when
 * there is none to draw. Shared with the GPU mutators. */
sch_trace *srch_resample_categorical(const sch_trace *tr, int k, ts_rng *rng) {
  const sch_inst *s = sch_trace_inst(tr, k);
  int cur = (int)s->decision.v[0], n = s->attrs[0].n;
  double total = 0;
  for (int i = 0; i < n; i++)
    if (i != cur) total += s->attrs[1].n > i ? s->attrs[1].floats[i] : 1.0;
  if (total <= 0) return NULL;
  double r = ts_rng_unit(rng) * total;
  int64_t pick = -1;
  for (int i = 0; i < n; i++) {
    if (i == cur) continue;
    pick = i;
    r -= s->attrs[1].n > i ? s->attrs[1].floats[i] : 1.0;
    if (r < 0) break;
  }
  if (pick < 0) return NULL;
  return with_decision(tr, k, 1, &pick);
}

static sch_trace *mutate_unroll(const sch_trace *tr, ts_rng *rng) {
  int cands[MAX_CANDS], nc = 0;
  for (int i = 0; i < sch_trace_len(tr) && nc < MAX_CANDS; i++) {
    const sch_inst *in = sch_trace_inst(tr, i);
    if (in->kind != SCH_I_ANNOTATE || in->nin < 2 || in->nattr < 1 || !in->attrs[0].s) continue;
    if (!strstr(in->attrs[0].s, "unroll") || in->in[1].kind != SCH_ARG_RV) continue;
    int def = srch_defining_inst(tr, in->in[1].rv);
    if (def < 0) continue;
    const sch_inst *s = sch_trace_inst(tr, def);
    if (s->kind != SCH_I_SAMPLE_CATEGORICAL || s->decision.n != 1 || s->nattr < 2 ||
        s->attrs[0].n < 2)
      continue;
    bool dup = false;
    for (int j = 0; j < nc; j++) dup |= cands[j] == def;
    if (!dup) cands[nc++] = def;
  }
  if (!nc) return NULL;
  return srch_resample_categorical(tr, cands[ts_rng_below(rng, (uint64_t)nc)], rng);
}

/* ---- parallel ------------------------------------------------------------------ */
/* Prefix products of the constant extents of each outer loop chain of f
 * (per root child), up to the first reaching cap. */
typedef struct nests {
  int n;
  int64_t prod[16][16];
  int len[16];
} nests;

static void collect_chain(const ir_stmt *s, int64_t cap, nests *ns) {
  if (ns->n >= 16) return;
  int c = ns->n++;
  ns->len[c] = 0;
  int64_t p = 1;
  while (s && s->kind == IR_FOR && ns->len[c] < 16) {
    int64_t e;
    if (!ir_as_int(s->u.loop.extent, &e)) break;
    p *= e;
    ns->prod[c][ns->len[c]++] = p;
    if (p >= cap) break;
    s = s->u.loop.body;
  }
}

static void collect_nests(const ir_func *f, int64_t cap, nests *ns) {
  ns->n = 0;
  const ir_stmt *body = f->body;
  if (body && body->kind == IR_BLOCK_REALIZE) body = body->u.realize.block->body;
  if (!body) return;
  if (body->kind == IR_SEQ)
    for (int i = 0; i < body->u.seq.n; i++) collect_chain(body->u.seq.stmts[i], cap, ns);
  else
    collect_chain(body, cap, ns);
}

/* The plan of a limit: per nest, how many leading loops are fused. */
static uint64_t plan_of(const nests *ns, int64_t limit) {
  uint64_t h = 1469598103934665603ull;
  for (int c = 0; c < ns->n; c++) {
    int k = 0;
    while (k < ns->len[c] && ns->prod[c][k] <= limit) k++;
    if (k < ns->len[c]) k++; /* the loop whose product first exceeds the limit */
    h = (h ^ (uint64_t)k) * 1099511628211ull;
  }
  return h;
}

static sch_trace *mutate_parallel(const sch_trace *tr, const ir_func *f, ts_rng *rng) {
  int cands[MAX_CANDS], nc = 0;
  for (int i = 0; i < sch_trace_len(tr) && nc < MAX_CANDS; i++) {
    const sch_inst *in = sch_trace_inst(tr, i);
    if (in->kind == SCH_I_ANNOTATE && in->nin >= 2 && in->nattr >= 1 && in->attrs[0].s &&
        strstr(in->attrs[0].s, "parallel") && in->in[1].kind == SCH_ARG_INT)
      cands[nc++] = i;
  }
  if (!nc || !f) return NULL;
  int k = cands[ts_rng_below(rng, (uint64_t)nc)];
  int64_t cur = sch_trace_inst(tr, k)->in[1].i;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int64_t cap = (cores > 0 ? cores : 1) * 16;
  if (cur > cap) cap = cur;
  nests ns;
  collect_nests(f, cap, &ns);
  /* plan 0: serial (limit 1), a choice only a small kernel's space has */
  uint64_t cur_plan = cur <= 1 ? 0 : plan_of(&ns, cur);
  int64_t limits[256];
  uint64_t plans[256];
  int nl = 0;
  if (cur > 1 && cap > 16 && srch_func_volume(f) < SRCH_SMALL_VOLUME) {
    limits[nl] = 1;
    plans[nl++] = 0;
  }
  for (int c = 0; c < ns.n; c++)
    for (int j = 0; j < ns.len[c] && nl < 256; j++) {
      int64_t lim = ns.prod[c][j];
      if (lim > cap) continue;
      uint64_t p = plan_of(&ns, lim);
      bool dup = p == cur_plan;
      for (int q = 0; q < nl && !dup; q++) dup = plans[q] == p;
      if (dup) continue;
      limits[nl] = lim;
      plans[nl++] = p;
    }
  if (!nl) return NULL;
  int64_t nv = limits[ts_rng_below(rng, (uint64_t)nl)];
  /* Rewrite the literal through JSON: inputs of instruction k, position 1. */
  char *js = sch_trace_to_json(tr);
  if (!js) return NULL;
  json_error_t je;
  json_t *root = json_loads(js, 0, &je);
  ts_free(js);
  if (!root) return NULL;
  json_t *insts = json_array_get(root, 0), *inst = json_array_get(insts, (size_t)k);
  json_t *inputs = json_array_get(inst, 1);
  sch_trace *out = NULL;
  if (inputs && json_is_integer(json_array_get(inputs, 1)) &&
      json_array_set_new(inputs, 1, json_integer(nv)) == 0) {
    char *txt = json_dumps(root, JSON_COMPACT);
    if (txt) out = sch_trace_from_json(txt, NULL);
    free(txt);
  }
  json_decref(root);
  return out;
}

sch_trace *srch_mutate(srch_mutator m, const sch_trace *tr, const ir_func *f, ts_rng *rng) {
  if (!tr || !rng) return NULL;
  switch (m) {
  case SRCH_MUT_TILE_SIZE: return mutate_tile_size(tr, rng);
  case SRCH_MUT_COMPUTE_LOCATION: return mutate_compute_location(tr, rng);
  case SRCH_MUT_UNROLL: return mutate_unroll(tr, rng);
  case SRCH_MUT_PARALLEL: return mutate_parallel(tr, f, rng);
  case SRCH_MUT_THREAD_BINDING: return srch_mutate_thread_binding(tr, rng);
  default: return NULL;
  }
}
