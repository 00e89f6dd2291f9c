/* xgb.c — MetaSchedule's XGBoost pack-sum model through XGBoost 1.7's C API.
 *
 * All feature rows of all samples are stacked; a candidate's score is the sum
 * of its rows' margins. Training is from scratch on all data with a custom
 * objective: per row r of candidate c, g_r = y_c (P_c - y_c), h_r = y_c,
 * with y_c = min cost of c's group / cost. Early stopping on the training
 * p-rmse (50 rounds of patience; all trees are kept), capped at max_rounds.
 * The booster is created and trained in the caller's thread (XGBoost 1.7:
 * a booster trained in another thread than the one that created it fails).
 * tree_method is "hist" with max_bin 64 ("auto" would pick exact; with
 * the default 256 bins, 10k rows x 164 features took ~150 ms a round on 2
 * busy cores, with 64 bins ~30 ms), and rounds are capped at 150 (default;
 * cm_xgb_set_max_rounds), so training 10k rows takes a few seconds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xgboost/c_api.h>

#include "costmodel/cm_int.h"

typedef struct xgb_model {
  cm_model base;
  int nthread;
  uint64_t seed;
  ts_rng rng;
  int min_samples, max_rounds, last_rounds, max_depth;
  /* data */
  int nsamp, capsamp;
  uint64_t *group;
  double *cost;
  int *row_start, *row_count;
  int nrows, caprows;
  float *rows;
  int last_train_size;
  BoosterHandle bst;
  /* a pre-trained model (cm_xgb_load_pretrained): its serialised booster,
   * the start of every training, and predicting from the first call */
  char *base_buf;
  bst_ulong base_len;
  int base_records;
  bool rank; /* pairwise objective (cm_xgb_set_objective) */
} xgb_model;

static const char *xgb_err(void) {
  const char *e = XGBGetLastError();
  return e ? e : "?";
}

static void xgb_free(cm_model *m) {
  xgb_model *x = (xgb_model *)m;
  if (x->bst) XGBoosterFree(x->bst);
  ts_free(x->group);
  ts_free(x->cost);
  ts_free(x->row_start);
  ts_free(x->row_count);
  ts_free(x->rows);
  ts_free(x->base_buf);
  ts_free(x);
}

static int xgb_num(const cm_model *m) { return ((const xgb_model *)m)->nsamp; }

static ts_status set_params(BoosterHandle b, int nthread, uint64_t seed, int depth, ts_diag *d) {
  char nt[32], sd[32], dp[32];
  snprintf(nt, sizeof nt, "%d", nthread);
  snprintf(sd, sizeof sd, "%llu", (unsigned long long)seed);
  snprintf(dp, sizeof dp, "%d", depth);
  const char *kv[][2] = {{"max_depth", dp},   {"gamma", "0.001"},  {"min_child_weight", "0"},
                         {"eta", "0.2"},        {"seed", sd},        {"nthread", nt},
                         {"tree_method", "hist"}, {"max_bin", "64"}, {"verbosity", "0"}};
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
    if (XGBoosterSetParam(b, kv[i][0], kv[i][1]))
      return ts_diag_set(d, TS_EINTERNAL, "xgboost: set %s: %s", kv[i][0], xgb_err());
  return TS_OK;
}

/* Sample indices ordered by group (ties by index): ord[0..ns). */
static const uint64_t *sort_groups;
static int cmp_group(const void *pa, const void *pb) {
  int a = *(const int *)pa, b = *(const int *)pb;
  if (sort_groups[a] != sort_groups[b]) return sort_groups[a] < sort_groups[b] ? -1 : 1;
  return a - b;
}
static void group_order(const xgb_model *x, int *ord) {
  for (int i = 0; i < x->nsamp; i++) ord[i] = i;
  sort_groups = x->group;
  qsort(ord, (size_t)x->nsamp, sizeof *ord, cmp_group);
}
/* The end of the run of ord starting at lo that holds one group. */
static int group_end(const xgb_model *x, const int *ord, int lo) {
  int hi = lo + 1;
  while (hi < x->nsamp && x->group[ord[hi]] == x->group[ord[lo]]) hi++;
  return hi;
}

/* Labels per sample: min cost of the group / cost. */
static void labels(const xgb_model *x, const int *ord, double *y) {
  for (int lo = 0, hi; lo < x->nsamp; lo = hi) {
    hi = group_end(x, ord, lo);
    double mn = INFINITY;
    for (int i = lo; i < hi; i++)
      if (x->cost[ord[i]] < mn) mn = x->cost[ord[i]];
    for (int i = lo; i < hi; i++) y[ord[i]] = x->cost[ord[i]] > 0 ? mn / x->cost[ord[i]] : 0;
  }
}

/* Per-candidate gradients of the pack-sum regression (MetaSchedule's):
 * g = y (P - y), h = y; returns the p-rmse over rows. */
static double grad_packsum(const xgb_model *x, const double *y, const double *P, double *gc, double *hc) {
  double se = 0;
  for (int s = 0; s < x->nsamp; s++) {
    gc[s] = y[s] * (P[s] - y[s]);
    hc[s] = y[s];
    se += (P[s] - y[s]) * (P[s] - y[s]) * x->row_count[s];
  }
  return sqrt(se / (x->nrows ? x->nrows : 1));
}

/* Per-candidate gradients of a pairwise logistic loss within each group
 * (XGBoost's rank:pairwise on pack-sum scores): for every pair with
 * cost_i < cost_j, loss log(1 + exp(-(P_i - P_j))). Returns the mean loss. */
static double grad_rank(const xgb_model *x, const int *ord, const double *P, double *gc, double *hc) {
  double loss = 0;
  long npairs = 0;
  for (int s = 0; s < x->nsamp; s++) gc[s] = hc[s] = 0;
  for (int lo = 0, hi; lo < x->nsamp; lo = hi) {
    hi = group_end(x, ord, lo);
    for (int a = lo; a < hi; a++)
      for (int b = a + 1; b < hi; b++) {
        int i = ord[a], j = ord[b];
        if (x->cost[i] == x->cost[j]) continue;
        if (x->cost[i] > x->cost[j]) { int t = i; i = j; j = t; }
        double z = P[i] - P[j], p = 1 / (1 + exp(-z)); /* p: P(i ranked above j) */
        loss += z > 30 ? 0 : (z < -30 ? -z : log1p(exp(-z)));
        npairs++;
        gc[i] += p - 1;
        gc[j] += 1 - p;
        hc[i] += p * (1 - p);
        hc[j] += p * (1 - p);
      }
  }
  for (int s = 0; s < x->nsamp; s++) hc[s] = hc[s] > 1e-6 ? hc[s] : 1e-6;
  return npairs ? loss / (double)npairs : 0;
}

/* A booster for training on dm: the pre-trained one's copy, else new. */
static ts_status new_booster(const xgb_model *x, DMatrixHandle dm, BoosterHandle *b, ts_diag *d) {
  if (XGBoosterCreate(&dm, 1, b) ||
      (x->base_buf && XGBoosterLoadModelFromBuffer(*b, x->base_buf, x->base_len)))
    return ts_diag_set(d, TS_EINTERNAL, "xgboost: %s", xgb_err());
  return set_params(*b, x->nthread, x->seed, x->max_depth, d);
}

static ts_status train(xgb_model *x, ts_diag *d) {
  int nr = x->nrows, ns = x->nsamp;
  ts_status st = TS_OK;
  double *y = ts_malloc((size_t)ns * sizeof *y), *P = ts_malloc((size_t)ns * sizeof *P);
  double *gc = ts_malloc((size_t)ns * sizeof *gc), *hc = ts_malloc((size_t)ns * sizeof *hc);
  float *yr = ts_malloc((size_t)nr * sizeof *yr);
  float *g = ts_malloc((size_t)nr * sizeof *g), *h = ts_malloc((size_t)nr * sizeof *h);
  int *sid = ts_malloc((size_t)nr * sizeof *sid), *ord = ts_malloc((size_t)ns * sizeof *ord);
  DMatrixHandle dm = NULL;
  BoosterHandle b = NULL;
  if (!y || !P || !gc || !hc || !yr || !g || !h || !sid || !ord) {
    st = ts_diag_set(d, TS_ENOMEM, "cm_update: out of memory");
    goto out;
  }
  group_order(x, ord);
  labels(x, ord, y);
  for (int s = 0; s < ns; s++)
    for (int r = 0; r < x->row_count[s]; r++) {
      sid[x->row_start[s] + r] = s;
      yr[x->row_start[s] + r] = (float)y[s];
    }
  if (XGDMatrixCreateFromMat(x->rows, (bst_ulong)nr, CM_NUM_FEATURES, NAN, &dm) ||
      XGDMatrixSetFloatInfo(dm, "label", yr, (bst_ulong)nr) ||
      XGDMatrixSetFloatInfo(dm, "weight", yr, (bst_ulong)nr)) {
    st = ts_diag_set(d, TS_EINTERNAL, "xgboost: %s", xgb_err());
    goto out;
  }
  if ((st = new_booster(x, dm, &b, d))) goto out;
  /* The margins predicted before round it+1 are those after round it, so one
   * prediction per round serves both the gradients and the loss. */
  double best = INFINITY;
  int best_it = 0, it;
  for (it = 0;; it++) {
    bst_ulong n;
    const float *pred;
    if (XGBoosterPredict(b, dm, 1, 0, 1, &n, &pred)) {
      st = ts_diag_set(d, TS_EINTERNAL, "xgboost predict: %s", xgb_err());
      goto out;
    }
    for (int s = 0; s < ns; s++) P[s] = 0;
    for (int r = 0; r < nr; r++) P[sid[r]] += pred[r];
    double loss = x->rank ? grad_rank(x, ord, P, gc, hc) : grad_packsum(x, y, P, gc, hc);
    if (it > 0) {
      if (loss < best) {
        best = loss;
        best_it = it;
      } else if (it - best_it >= 50) {
        break;
      }
    }
    if (it >= x->max_rounds) break;
    for (int r = 0; r < nr; r++) {
      g[r] = (float)gc[sid[r]];
      h[r] = (float)hc[sid[r]];
    }
    if (XGBoosterBoostOneIter(b, dm, g, h, (bst_ulong)nr)) {
      st = ts_diag_set(d, TS_EINTERNAL, "xgboost boost: %s", xgb_err());
      goto out;
    }
  }
  x->last_rounds = it;
  if (x->bst) XGBoosterFree(x->bst);
  x->bst = b;
  b = NULL;
  x->last_train_size = ns;
out:
  if (b) XGBoosterFree(b);
  if (dm) XGDMatrixFree(dm);
  ts_free(y);
  ts_free(P);
  ts_free(gc);
  ts_free(hc);
  ts_free(yr);
  ts_free(g);
  ts_free(h);
  ts_free(sid);
  ts_free(ord);
  return st;
}

static ts_status xgb_update(cm_model *m, const cm_sample *s, int n, ts_diag *d) {
  xgb_model *x = (xgb_model *)m;
  for (int i = 0; i < n; i++) {
    const cm_features *f = s[i].feat;
    if (!f || f->nrows <= 0 || !(s[i].cost > 0) || !isfinite(s[i].cost)) continue;
    if (x->nsamp >= x->capsamp) {
      int nc = x->capsamp ? x->capsamp * 2 : 64;
      uint64_t *g = ts_realloc(x->group, (size_t)nc * sizeof *g);
      if (g) x->group = g;
      double *c = ts_realloc(x->cost, (size_t)nc * sizeof *c);
      if (c) x->cost = c;
      int *rs = ts_realloc(x->row_start, (size_t)nc * sizeof *rs);
      if (rs) x->row_start = rs;
      int *rc = ts_realloc(x->row_count, (size_t)nc * sizeof *rc);
      if (rc) x->row_count = rc;
      if (!g || !c || !rs || !rc) return ts_diag_set(d, TS_ENOMEM, "cm_update: out of memory");
      x->capsamp = nc;
    }
    if (x->nrows + f->nrows > x->caprows) {
      int nc = x->caprows ? x->caprows : 256;
      while (nc < x->nrows + f->nrows) nc *= 2;
      float *r = ts_realloc(x->rows, (size_t)nc * CM_NUM_FEATURES * sizeof *r);
      if (!r) return ts_diag_set(d, TS_ENOMEM, "cm_update: out of memory");
      x->rows = r;
      x->caprows = nc;
    }
    float *dst = x->rows + (size_t)x->nrows * CM_NUM_FEATURES;
    memcpy(dst, f->rows, (size_t)f->nrows * CM_NUM_FEATURES * sizeof(float));
    for (size_t k = 0; k < (size_t)f->nrows * CM_NUM_FEATURES; k++)
      if (!isfinite(dst[k])) dst[k] = 0;
    x->group[x->nsamp] = s[i].group;
    x->cost[x->nsamp] = s[i].cost;
    x->row_start[x->nsamp] = x->nrows;
    x->row_count[x->nsamp] = f->nrows;
    x->nsamp++;
    x->nrows += f->nrows;
  }
  if (x->nsamp < x->min_samples || x->nsamp == 0) return TS_OK;
  if (x->bst && x->nsamp - x->last_train_size < x->last_train_size / 5) return TS_OK;
  return train(x, d);
}

static ts_status xgb_predict(cm_model *m, const cm_features *c, int n, double *scores,
                             ts_diag *d) {
  xgb_model *x = (xgb_model *)m;
  if (!x->bst || (!x->base_buf && x->nsamp < x->min_samples)) {
    for (int i = 0; i < n; i++) scores[i] = ts_rng_unit(&x->rng);
    return TS_OK;
  }
  int nr = 0;
  for (int i = 0; i < n; i++) nr += c[i].nrows > 0 ? c[i].nrows : 0;
  for (int i = 0; i < n; i++) scores[i] = 0;
  if (nr == 0) return TS_OK;
  float *X = ts_malloc((size_t)nr * CM_NUM_FEATURES * sizeof *X);
  if (!X) return ts_diag_set(d, TS_ENOMEM, "cm_predict: out of memory");
  size_t off = 0;
  for (int i = 0; i < n; i++)
    if (c[i].nrows > 0) {
      memcpy(X + off, c[i].rows, (size_t)c[i].nrows * CM_NUM_FEATURES * sizeof *X);
      off += (size_t)c[i].nrows * CM_NUM_FEATURES;
    }
  for (size_t k = 0; k < off; k++)
    if (!isfinite(X[k])) X[k] = 0;
  DMatrixHandle dm = NULL;
  ts_status st = TS_OK;
  bst_ulong len;
  const float *pred;
  if (XGDMatrixCreateFromMat(X, (bst_ulong)nr, CM_NUM_FEATURES, NAN, &dm) ||
      XGBoosterPredict(x->bst, dm, 1, 0, 0, &len, &pred)) {
    st = ts_diag_set(d, TS_EINTERNAL, "xgboost predict: %s", xgb_err());
  } else {
    int r = 0;
    for (int i = 0; i < n; i++)
      for (int k = 0; k < (c[i].nrows > 0 ? c[i].nrows : 0); k++) scores[i] += pred[r++];
  }
  if (dm) XGDMatrixFree(dm);
  ts_free(X);
  return st;
}

static const cm_model_ops xgb_ops = {
    .name = "xgb", .free_fn = xgb_free, .update = xgb_update, .predict = xgb_predict,
    .num_samples = xgb_num};

cm_model *cm_xgb_new(int nthread, uint64_t seed, ts_diag *d) {
  xgb_model *x = ts_calloc(1, sizeof *x);
  if (!x) {
    ts_diag_set(d, TS_ENOMEM, "cm_xgb_new: out of memory");
    return NULL;
  }
  x->base.ops = &xgb_ops;
  /* 0 means one thread, not XGBoost's all cores: an OpenMP pool started in
   * the tuner makes every forked measuring child that enters OpenMP again
   * (oneDNN, OpenBLAS built with it) hang in libgomp, so a library call
   * measured after the model trained timed out */
  x->nthread = nthread > 0 ? nthread : 1;
  x->seed = seed;
  ts_rng_seed(&x->rng, seed);
  /* MetaSchedule waits for 100 samples; with 64-candidate batches that
   * leaves the model unused until trial 129. 50 trains it after the first
   * batch (with room for build errors, which are no samples): batch 2 then
   * had a 5-8x faster median than batch 1, the random model's 0.6-1.7x
   * slower (docs/COSTMODEL.md, bench/RESULTS.md). */
  x->min_samples = 50;
  x->max_rounds = 150;
  x->max_depth = 10;
  /* experiment knobs: the setters below (tessel tune --xgb-min-samples,
   * --xgb-max-rounds; bench/cost_model_curve.sh variants) */
  return &x->base;
}

void cm_xgb_set_min_samples(cm_model *m, int n) {
  if (m && m->ops == &xgb_ops) ((xgb_model *)m)->min_samples = n;
}
void cm_xgb_set_max_rounds(cm_model *m, int n) {
  if (m && m->ops == &xgb_ops && n > 0) ((xgb_model *)m)->max_rounds = n;
}
void cm_xgb_set_max_depth(cm_model *m, int n) {
  if (m && m->ops == &xgb_ops && n > 0) ((xgb_model *)m)->max_depth = n;
}
int cm_xgb_last_rounds(const cm_model *m) {
  return m && m->ops == &xgb_ops ? ((const xgb_model *)m)->last_rounds : 0;
}

/* ---- save / load ---------------------------------------------------------- */
#define MAGIC "TSCMXGB1"

static bool wr(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; }
static bool rd(FILE *f, void *p, size_t n) { return n == 0 || fread(p, 1, n, f) == n; }

ts_status cm_save(const cm_model *m, const char *path, ts_diag *d) {
  if (!m || m->ops != &xgb_ops)
    return ts_diag_set(d, TS_EUNSUPPORTED, "cm_save: only the xgb model can be saved");
  const xgb_model *x = (const xgb_model *)m;
  bst_ulong blen = 0;
  const char *bbuf = NULL;
  if (x->bst && XGBoosterSaveModelToBuffer(x->bst, "{\"format\":\"ubj\"}", &blen, &bbuf))
    return ts_diag_set(d, TS_EINTERNAL, "xgboost save: %s", xgb_err());
  FILE *f = fopen(path, "wb");
  if (!f) return ts_diag_set(d, TS_EIO, "cm_save: cannot open %s", path);
  int32_t hdr[6] = {x->nthread, x->min_samples, x->max_rounds, x->nsamp, x->nrows,
                    x->last_train_size};
  uint64_t u[3] = {x->seed, x->rng.s, (uint64_t)blen};
  bool ok = wr(f, MAGIC, 8) && wr(f, hdr, sizeof hdr) && wr(f, u, sizeof u) &&
            wr(f, x->group, (size_t)x->nsamp * sizeof *x->group) &&
            wr(f, x->cost, (size_t)x->nsamp * sizeof *x->cost) &&
            wr(f, x->row_count, (size_t)x->nsamp * sizeof *x->row_count) &&
            wr(f, x->rows, (size_t)x->nrows * CM_NUM_FEATURES * sizeof(float)) &&
            wr(f, bbuf, (size_t)blen);
  if (fclose(f) != 0) ok = false;
  return ok ? TS_OK : ts_diag_set(d, TS_EIO, "cm_save: write error on %s", path);
}

cm_model *cm_load(const char *path, ts_diag *d) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    ts_diag_set(d, TS_EIO, "cm_load: cannot open %s", path);
    return NULL;
  }
  char magic[8];
  int32_t hdr[6];
  uint64_t u[3];
  xgb_model *x = NULL;
  char *bbuf = NULL;
  if (!rd(f, magic, 8) || memcmp(magic, MAGIC, 8) || !rd(f, hdr, sizeof hdr) ||
      !rd(f, u, sizeof u) || hdr[3] < 0 || hdr[4] < 0) {
    ts_diag_set(d, TS_EPARSE, "cm_load: %s is not a saved xgb model", path);
    goto fail;
  }
  x = (xgb_model *)cm_xgb_new(hdr[0], u[0], d);
  if (!x) goto fail;
  x->min_samples = hdr[1];
  x->max_rounds = hdr[2];
  x->rng.s = u[1];
  int ns = hdr[3], nr = hdr[4];
  x->capsamp = ns > 0 ? ns : 1;
  x->caprows = nr > 0 ? nr : 1;
  x->group = ts_malloc((size_t)x->capsamp * sizeof *x->group);
  x->cost = ts_malloc((size_t)x->capsamp * sizeof *x->cost);
  x->row_start = ts_malloc((size_t)x->capsamp * sizeof *x->row_start);
  x->row_count = ts_malloc((size_t)x->capsamp * sizeof *x->row_count);
  x->rows = ts_malloc((size_t)x->caprows * CM_NUM_FEATURES * sizeof(float));
  bbuf = u[2] ? ts_malloc((size_t)u[2]) : NULL;
  if (!x->group || !x->cost || !x->row_start || !x->row_count || !x->rows || (u[2] && !bbuf)) {
    ts_diag_set(d, TS_ENOMEM, "cm_load: out of memory");
    goto fail;
  }
  if (!rd(f, x->group, (size_t)ns * sizeof *x->group) ||
      !rd(f, x->cost, (size_t)ns * sizeof *x->cost) ||
      !rd(f, x->row_count, (size_t)ns * sizeof *x->row_count) ||
      !rd(f, x->rows, (size_t)nr * CM_NUM_FEATURES * sizeof(float)) || !rd(f, bbuf, (size_t)u[2])) {
    ts_diag_set(d, TS_EPARSE, "cm_load: %s is truncated", path);
    goto fail;
  }
  int r = 0;
  for (int i = 0; i < ns; i++) {
    x->row_start[i] = r;
    r += x->row_count[i];
  }
  x->nsamp = ns;
  x->nrows = nr;
  x->last_train_size = hdr[5];
  if (u[2]) {
    if (XGBoosterCreate(NULL, 0, &x->bst) ||
        XGBoosterLoadModelFromBuffer(x->bst, bbuf, (bst_ulong)u[2])) {
      ts_diag_set(d, TS_EPARSE, "cm_load: xgboost: %s", xgb_err());
      goto fail;
    }
    char nt[32];
    snprintf(nt, sizeof nt, "%d", x->nthread);
    XGBoosterSetParam(x->bst, "nthread", nt);
  }
  ts_free(bbuf);
  fclose(f);
  return &x->base;
fail:
  ts_free(bbuf);
  if (x) xgb_free(&x->base);
  fclose(f);
  return NULL;
}

/* ---- pre-trained models: XGBoost's own JSON format ------------------------ */

void cm_xgb_set_objective(cm_model *m, bool rank) {
  if (m && m->ops == &xgb_ops) ((xgb_model *)m)->rank = rank;
}

void cm_target_family(const cg_target *t, char *buf, size_t n) {
  const char *arch = t->triple;
  size_t alen = strcspn(arch, "-");
  if (!arch[0]) {
#if defined(__x86_64__)
    arch = "x86_64";
#elif defined(__aarch64__)
    arch = "aarch64";
#else
    arch = "unknown";
#endif
    alen = strlen(arch);
  }
  snprintf(buf, n, "%s %.*s v%d", cg_target_ops_of(t)->name, (int)alen, arch, t->vector_bits);
}

static ts_status set_attr(BoosterHandle b, const char *k, const char *v, ts_diag *d) {
  if (XGBoosterSetAttr(b, k, v)) return ts_diag_set(d, TS_EINTERNAL, "xgboost: set attribute %s: %s", k, xgb_err());
  return TS_OK;
}

ts_status cm_xgb_export(const cm_model *m, const char *path, const char *family, int nworkloads, ts_diag *d) {
  if (!m || m->ops != &xgb_ops || !((const xgb_model *)m)->bst)
    return ts_diag_set(d, TS_EINVAL, "cm_xgb_export: no trained xgb model to save");
  const xgb_model *x = (const xgb_model *)m;
  char v[64], nw[32], nrec[32];
  snprintf(v, sizeof v, "%d", CM_FEATURE_SCHEMA);
  snprintf(nw, sizeof nw, "%d", nworkloads);
  snprintf(nrec, sizeof nrec, "%d", x->nsamp + x->base_records);
  ts_status st;
  if ((st = set_attr(x->bst, "tessel_feature_schema", v, d)) ||
      (st = set_attr(x->bst, "tessel_target_family", family ? family : "", d)) ||
      (st = set_attr(x->bst, "tessel_objective", x->rank ? "rank" : "packsum", d)) ||
      (st = set_attr(x->bst, "tessel_trained_records", nrec, d)) ||
      (st = set_attr(x->bst, "tessel_trained_workloads", nw, d)))
    return st;
  bst_ulong len = 0;
  const char *buf = NULL;
  if (XGBoosterSaveModelToBuffer(x->bst, "{\"format\":\"json\"}", &len, &buf))
    return ts_diag_set(d, TS_EINTERNAL, "xgboost save: %s", xgb_err());
  FILE *f = fopen(path, "wb");
  if (!f) return ts_diag_set(d, TS_EIO, "cannot write %s", path);
  bool ok = fwrite(buf, 1, (size_t)len, f) == (size_t)len;
  if (fclose(f) != 0) ok = false;
  return ok ? TS_OK : ts_diag_set(d, TS_EIO, "write error on %s", path);
}

/* Attribute k of b into out (empty when absent). */
static void get_attr(BoosterHandle b, const char *k, char *out, size_t n) {
  const char *v = NULL;
  int ok = 0;
  out[0] = '\0';
  if (!XGBoosterGetAttr(b, k, &v, &ok) && ok && v) snprintf(out, n, "%s", v);
}

cm_model *cm_xgb_load_pretrained(const char *path, int nthread, uint64_t seed, cm_pretrained_info *info,
                                 ts_diag *d) {
  char *buf = NULL;
  size_t len = 0;
  if (ts_read_file_as(path, TS_FILE_TEXT, &buf, &len, d) != TS_OK) return NULL;
  xgb_model *x = (xgb_model *)cm_xgb_new(nthread, seed, d);
  if (!x) {
    ts_free(buf);
    return NULL;
  }
  x->base_buf = buf;
  x->base_len = (bst_ulong)len;
  char schema[32], obj[32], nrec[32];
  cm_pretrained_info tmp, *pi = info ? info : &tmp;
  memset(pi, 0, sizeof *pi);
  if (XGBoosterCreate(NULL, 0, &x->bst) || XGBoosterLoadModelFromBuffer(x->bst, buf, (bst_ulong)len)) {
    const char *e = xgb_err();
    ts_diag_set(d, TS_EPARSE, "%s is not an XGBoost model: %.*s", path, (int)strcspn(e, "\n"), e);
    goto fail;
  }
  get_attr(x->bst, "tessel_feature_schema", schema, sizeof schema);
  get_attr(x->bst, "tessel_target_family", pi->family, sizeof pi->family);
  get_attr(x->bst, "tessel_objective", obj, sizeof obj);
  get_attr(x->bst, "tessel_trained_records", nrec, sizeof nrec);
  int64_t sv = 0, nr = 0;
  const char *why;
  if (!schema[0] || !ts_parse_i64(schema, 0, INT32_MAX, &sv, &why) || sv != CM_FEATURE_SCHEMA) {
    ts_diag_set(d, TS_EINVAL,
                "%s: feature schema %s, but this tessel extracts schema %d: retrain it "
                "(tessel costmodel train LOG... -o MODEL)",
                path, schema[0] ? schema : "missing", CM_FEATURE_SCHEMA);
    goto fail;
  }
  if (nrec[0] && ts_parse_i64(nrec, 0, INT32_MAX, &nr, &why)) x->base_records = (int)nr;
  pi->trained_records = x->base_records;
  x->rank = !strcmp(obj, "rank");
  snprintf(pi->objective, sizeof pi->objective, "%s", x->rank ? "rank" : "packsum");
  char nt[32];
  snprintf(nt, sizeof nt, "%d", x->nthread);
  XGBoosterSetParam(x->bst, "nthread", nt);
  return &x->base;
fail:
  xgb_free(&x->base);
  return NULL;
}
