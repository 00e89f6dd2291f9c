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
  int min_samples, max_rounds, last_rounds;
  /* data */
  int nsamp, capsamp;
  uint64_t *group;
  double *cost;
  int *row_start, *row_count;
  int nrows, caprows;
  float *rows;
  int last_train_size;
  BoosterHandle bst;
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
  ts_free(x);
}

static int xgb_num(const cm_model *m) { return ((const xgb_model *)m)->nsamp; }

static ts_status set_params(BoosterHandle b, int nthread, uint64_t seed, ts_diag *d) {
  char nt[32], sd[32];
  snprintf(nt, sizeof nt, "%d", nthread);
  snprintf(sd, sizeof sd, "%llu", (unsigned long long)seed);
  const char *kv[][2] = {{"max_depth", "10"},   {"gamma", "0.001"},  {"min_child_weight", "0"},
                         {"eta", "0.2"},        {"seed", sd},        {"nthread", nt},
                         {"tree_method", "hist"}, {"max_bin", "64"}, {"verbosity", "0"}};
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
    if (XGBoosterSetParam(b, kv[i][0], kv[i][1]))
      return ts_diag_set(d, TS_EINTERNAL, "xgboost: set %s: %s", kv[i][0], xgb_err());
  return TS_OK;
}

/* Labels per sample: min cost of the group / cost. */
static void labels(const xgb_model *x, double *y) {
  for (int i = 0; i < x->nsamp; i++) {
    double mn = x->cost[i];
    for (int j = 0; j < x->nsamp; j++)
      if (x->group[j] == x->group[i] && x->cost[j] < mn) mn = x->cost[j];
    y[i] = x->cost[i] > 0 ? mn / x->cost[i] : 0;
  }
}

static ts_status train(xgb_model *x, ts_diag *d) {
  int nr = x->nrows, ns = x->nsamp;
  ts_status st = TS_OK;
  double *y = ts_malloc((size_t)ns * sizeof *y);
  double *P = ts_malloc((size_t)ns * sizeof *P);
  float *yr = ts_malloc((size_t)nr * sizeof *yr);
  float *g = ts_malloc((size_t)nr * sizeof *g), *h = ts_malloc((size_t)nr * sizeof *h);
  int *sid = ts_malloc((size_t)nr * sizeof *sid);
  DMatrixHandle dm = NULL;
  BoosterHandle b = NULL;
  if (!y || !P || !yr || !g || !h || !sid) {
    st = ts_diag_set(d, TS_ENOMEM, "cm_update: out of memory");
    goto out;
  }
  labels(x, y);
  for (int s = 0; s < ns; s++)
    for (int r = 0; r < x->row_count[s]; r++) {
      sid[x->row_start[s] + r] = s;
      yr[x->row_start[s] + r] = (float)y[s];
    }
  if (XGDMatrixCreateFromMat(x->rows, (bst_ulong)nr, CM_NUM_FEATURES, NAN, &dm) ||
      XGDMatrixSetFloatInfo(dm, "label", yr, (bst_ulong)nr) ||
      XGDMatrixSetFloatInfo(dm, "weight", yr, (bst_ulong)nr) || XGBoosterCreate(&dm, 1, &b)) {
    st = ts_diag_set(d, TS_EINTERNAL, "xgboost: %s", xgb_err());
    goto out;
  }
  if ((st = set_params(b, x->nthread, x->seed, d))) goto out;
  /* The margins predicted before round it+1 are those after round it, so one
   * prediction per round serves both the gradients and the p-rmse. */
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
    if (it > 0) {
      double se = 0;
      for (int r = 0; r < nr; r++) {
        double e = P[sid[r]] - y[sid[r]];
        se += e * e;
      }
      double prmse = sqrt(se / (nr ? nr : 1));
      if (prmse < best) {
        best = prmse;
        best_it = it;
      } else if (it - best_it >= 50) {
        break;
      }
    }
    if (it >= x->max_rounds) break;
    for (int r = 0; r < nr; r++) {
      double yc = y[sid[r]];
      g[r] = (float)(yc * (P[sid[r]] - yc));
      h[r] = (float)yc;
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
  ts_free(yr);
  ts_free(g);
  ts_free(h);
  ts_free(sid);
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
  if (!x->bst || x->nsamp < x->min_samples) {
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
  x->nthread = nthread > 0 ? nthread : 0;
  x->seed = seed;
  ts_rng_seed(&x->rng, seed);
  /* MetaSchedule waits for 100 samples; with 64-candidate batches that
   * leaves the model unused until trial 129. 50 trains it after the first
   * batch (with room for build errors, which are no samples): batch 2 then
   * had a 5-8x faster median than batch 1, the random model's 0.6-1.7x
   * slower (docs/COSTMODEL.md, bench/RESULTS.md). */
  x->min_samples = 50;
  x->max_rounds = 150;
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
