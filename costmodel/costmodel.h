/* costmodel.h — the cost model: per-store feature extraction from a
 * scheduled, lowered function (the 164 features of MetaSchedule's
 * PerStoreFeature and tessel's 18 size-free ratios, documented one by one in
 * docs/FEATURES.md), and models
 * that score candidates: XGBoost with the pack-sum objective (trained online,
 * saved and loaded), and a random model for comparison.
 *
 * A candidate is a set of feature rows (one per stored buffer). A model
 * predicts one score per candidate: higher = faster. Training data are
 * grouped by workload key; the label of a measured candidate is
 * min_cost_in_group / cost (1 for the best; about 0 for failures, which are
 * given cost 1e10). Uses ir and codegen's lowering only (no LLVM). */
#ifndef TESSEL_COSTMODEL_H
#define TESSEL_COSTMODEL_H

#include <stdio.h>

#include "codegen/codegen.h"
#include "ir/ir.h"

#define CM_NUM_FEATURES 182

/* Feature rows of one candidate: nrows x CM_NUM_FEATURES floats, row-major,
 * heap (cm_features_fini frees). */
typedef struct cm_features {
  int nrows;
  float *rows;
} cm_features;

void cm_features_fini(cm_features *f);

/* Extracts the per-store features of a scheduled function for target t (the
 * function is lowered internally with cg_lower). Errors: TS_EUNSUPPORTED if
 * it cannot be lowered. Never produces NaN/inf (clamped). */
ts_status cm_extract(const ir_func *scheduled, const cg_target *t, cm_features *out, ts_diag *d);
/* The name of feature i (e.g. "float_add", "B0.bytes"), static storage. */
const char *cm_feature_name(int i);

/* One measured candidate for training. */
typedef struct cm_sample {
  uint64_t group;         /* workload key (structural hash) */
  const cm_features *feat;
  double cost;            /* median run seconds; 1e10 for a run failure */
} cm_sample;

typedef struct cm_model cm_model;

/* XGBoost pack-sum model (max_depth 10, eta 0.2, gamma 0.001,
 * min_child_weight 0, early stopping on training p-rmse after 50 rounds).
 * Until it has seen min_samples (default 50; MetaSchedule's is 100, see
 * docs/COSTMODEL.md) samples it predicts uniform random scores. nthread 0: one
 * thread (an OpenMP pool in the tuner hangs forked children that use OpenMP). */
cm_model *cm_xgb_new(int nthread, uint64_t seed, ts_diag *d);
/* Uniform random scores (the baseline). */
cm_model *cm_random_new(uint64_t seed);
void cm_model_free(cm_model *m);
const char *cm_model_name(const cm_model *m); /* "xgb" or "random" */
void cm_xgb_set_min_samples(cm_model *m, int n);

/* Adds samples to the model's data and retrains when the data grew by 20 %
 * since the last training (the first call always trains once enough data
 * exist). Samples' features are copied. */
ts_status cm_update(cm_model *m, const cm_sample *samples, int n, ts_diag *d);
/* Scores n candidates (scores[i], higher is better, >= 0). Thread-safe
 * against nothing: call from one thread. Thousands of candidates a second. */
ts_status cm_predict(cm_model *m, const cm_features *cands, int n, double *scores, ts_diag *d);
/* Number of samples the model holds. */
int cm_num_samples(const cm_model *m);

/* Persists the trained booster and its data (path), and loads it back;
 * predictions after a round trip are bit-identical. */
ts_status cm_save(const cm_model *m, const char *path, ts_diag *d);
cm_model *cm_load(const char *path, ts_diag *d);

/* Evaluation of a model's ranking on held-out candidates of one group:
 * pairwise accuracy (fraction of pairs ordered like their true costs) and
 * recall@k (fraction of the true top-k found in the predicted top-k). */
double cm_pairwise_accuracy(const double *scores, const double *costs, int n);
/* As cm_pairwise_accuracy over the pairs whose costs differ by more than
 * margin (relative: the slower at least (1 + margin) x the faster; 0.02
 * leaves out pairs within 2 %, about the timing noise of CPU-time
 * measurements); 0.5 if no pair qualifies. margin 0 is cm_pairwise_accuracy. */
double cm_pairwise_accuracy_margin(const double *scores, const double *costs, int n, double margin);
double cm_recall_at_k(const double *scores, const double *costs, int n, int k);

/* ---- additions ------------------------------------------------------------ */
/* One-line meaning of feature i (docs/FEATURES.md), static storage. */
const char *cm_feature_desc(int i);
/* As cm_extract on an already lowered function (cg_lower's output). */
ts_status cm_extract_lowered(const ir_func *lowered, const cg_target *t, cm_features *out,
                             ts_diag *d);
/* Cap on boosting rounds per training (default 150; early stopping usually
 * ends sooner). */
void cm_xgb_set_max_rounds(cm_model *m, int n);
/* Tree depth of the trees trained from now on (default 10, MetaSchedule's;
 * `costmodel train --max-depth` makes a smaller pre-trained model). */
void cm_xgb_set_max_depth(cm_model *m, int n);
/* Rounds run by the last training (0 if none). */
int cm_xgb_last_rounds(const cm_model *m);


/* ---- pre-trained models (xgb.c) -------------------------------------------- */
/* The version of the feature vector cm_extract produces: a pre-trained model
 * records it and one of another version is refused. Bump it with any change
 * to the features' meaning, order or count. */
#define CM_FEATURE_SCHEMA 2

/* The family a pre-trained model is tied to: target kind, ISA and widest
 * vector ("llvm x86_64 v512"), for a resolved target. */
void cm_target_family(const cg_target *t, char *buf, size_t n);
/* Pairwise objective (a logistic loss on score differences within each
 * workload) instead of the pack-sum regression. */
void cm_xgb_set_objective(cm_model *m, bool rank);

/* Writes the trained booster in XGBoost's own JSON model format with the
 * attributes tessel_feature_schema, tessel_target_family, tessel_objective,
 * tessel_trained_records and tessel_trained_workloads. */
ts_status cm_xgb_export(const cm_model *m, const char *path, const char *family, int nworkloads, ts_diag *d);

typedef struct cm_pretrained_info {
  char family[96];       /* the target family it was trained for ("" unknown) */
  char objective[16];    /* "packsum" or "rank" */
  int trained_records;
} cm_pretrained_info;

/* Loads an exported model as an xgb model that ranks with it from the first
 * call and, as samples arrive, keeps training online: each training starts
 * from the pre-trained booster and adds trees for the new data. A model
 * without this tessel's CM_FEATURE_SCHEMA is refused (TS_EINVAL, naming
 * both versions); a file that is not an XGBoost model is TS_EPARSE. */
cm_model *cm_xgb_load_pretrained(const char *path, int nthread, uint64_t seed, cm_pretrained_info *info,
                                 ts_diag *d);

/* The committed pre-trained model's path (costmodel/pretrained/default.json). */
const char *cm_pretrained_default_path(void);
/* The model a tuning run starts from, for spec (--cost-model): NULL, "" or
 * "none": none; "default": the committed pre-trained model (a family
 * mismatch is warned about on warn, another schema is an error); else the
 * model file spec (errors are errors). *out NULL: none, the
 * caller makes a fresh model. */
ts_status cm_pretrained_open(const char *spec, const cg_target *t, uint64_t seed, FILE *warn, cm_model **out,
                             ts_diag *d);

/* ---- training corpus (corpus.c) ------------------------------------------- */
/* Spec i of the dataset corpus: the first cm_corpus_fixed_count() are layers
 * of ResNet-50, MobileNetV2 and BERT-base, the rest seeded random instances
 * of the same families (the same seed and i give the same spec). Never one
 * of the cm_corpus_heldout() workloads. */
void cm_corpus_spec(uint64_t seed, int i, char *buf, size_t n);
int cm_corpus_fixed_count(void);
/* The benchmark's held-out workloads (specs), i < cm_corpus_heldout_count(). */
int cm_corpus_heldout_count(void);
const char *cm_corpus_heldout(int i);

#endif
