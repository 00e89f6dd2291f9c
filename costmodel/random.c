/* random.c — the random model (uniform [0,1) scores, the baseline every
 * learned model must beat) and the generic cm_model entry points, which
 * dispatch through each model's ops table (cm_int.h). */
#include "costmodel/cm_int.h"

typedef struct rnd_model {
  cm_model base;
  ts_rng rng;
  int nsamples;
} rnd_model;

static void rnd_free(cm_model *m) { ts_free(m); }

static ts_status rnd_update(cm_model *m, const cm_sample *s, int n, ts_diag *d) {
  (void)s;
  (void)d;
  ((rnd_model *)m)->nsamples += n;
  return TS_OK;
}

static ts_status rnd_predict(cm_model *m, const cm_features *c, int n, double *scores,
                             ts_diag *d) {
  (void)c;
  (void)d;
  rnd_model *r = (rnd_model *)m;
  for (int i = 0; i < n; i++) scores[i] = ts_rng_unit(&r->rng);
  return TS_OK;
}

static int rnd_num(const cm_model *m) { return ((const rnd_model *)m)->nsamples; }

static const cm_model_ops rnd_ops = {
    .name = "random", .free_fn = rnd_free, .update = rnd_update, .predict = rnd_predict,
    .num_samples = rnd_num};

cm_model *cm_random_new(uint64_t seed) {
  rnd_model *r = ts_calloc(1, sizeof *r);
  if (!r) return NULL;
  r->base.ops = &rnd_ops;
  ts_rng_seed(&r->rng, seed);
  return &r->base;
}

void cm_model_free(cm_model *m) {
  if (m) m->ops->free_fn(m);
}

const char *cm_model_name(const cm_model *m) { return m ? m->ops->name : "none"; }

ts_status cm_update(cm_model *m, const cm_sample *samples, int n, ts_diag *d) {
  if (!m || n < 0 || (n > 0 && !samples)) return ts_diag_set(d, TS_EINVAL, "cm_update: bad arguments");
  return m->ops->update(m, samples, n, d);
}

ts_status cm_predict(cm_model *m, const cm_features *cands, int n, double *scores, ts_diag *d) {
  if (!m || n < 0 || (n > 0 && (!cands || !scores)))
    return ts_diag_set(d, TS_EINVAL, "cm_predict: bad arguments");
  return m->ops->predict(m, cands, n, scores, d);
}

int cm_num_samples(const cm_model *m) { return m ? m->ops->num_samples(m) : 0; }
