/* cm_int.h — costmodel internals shared by xgb.c, random.c and eval.c: the
 * model object (an ops table per kind) and slog. */
#ifndef TESSEL_COSTMODEL_CM_INT_H
#define TESSEL_COSTMODEL_CM_INT_H

#include "costmodel/costmodel.h"

typedef struct cm_model_ops {
  const char *name;
  void (*free_fn)(cm_model *m);
  ts_status (*update)(cm_model *m, const cm_sample *s, int n, ts_diag *d);
  ts_status (*predict)(cm_model *m, const cm_features *c, int n, double *scores, ts_diag *d);
  int (*num_samples)(const cm_model *m);
} cm_model_ops;

/* Every model starts with this header. */
struct cm_model {
  const cm_model_ops *ops;
};

#endif
