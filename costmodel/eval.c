/* eval.c — ranking metrics for a model's scores on held-out candidates of
 * one workload: pairwise accuracy (over all pairs with different costs, or
 * only over pairs whose costs differ by more than a relative margin, i.e.
 * beyond measurement noise) and recall@k (lower cost = better; higher
 * score = predicted better). */
#include <stdlib.h>

#include "costmodel/cm_int.h"

double cm_pairwise_accuracy(const double *scores, const double *costs, int n) {
  return cm_pairwise_accuracy_margin(scores, costs, n, 0);
}

double cm_pairwise_accuracy_margin(const double *scores, const double *costs, int n, double margin) {
  double good = 0, total = 0;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      if (costs[i] == costs[j]) continue; /* ties carry no order */
      double lo = costs[i] < costs[j] ? costs[i] : costs[j], hi = costs[i] < costs[j] ? costs[j] : costs[i];
      if (margin > 0 && hi < lo * (1 + margin)) continue; /* within noise: no order */
      total++;
      bool ti = costs[i] < costs[j];
      if (scores[i] == scores[j]) good += 0.5;
      else if ((scores[i] > scores[j]) == ti) good++;
    }
  return total > 0 ? good / total : 0.5;
}

typedef struct kv {
  double key;
  int idx;
} kv;

static int cmp_desc(const void *pa, const void *pb) {
  const kv *a = pa, *b = pb;
  if (a->key != b->key) return a->key > b->key ? -1 : 1;
  return a->idx - b->idx;
}

double cm_recall_at_k(const double *scores, const double *costs, int n, int k) {
  if (n <= 0 || k <= 0) return 0;
  if (k > n) k = n;
  kv *bs = ts_malloc((size_t)n * sizeof *bs), *bc = ts_malloc((size_t)n * sizeof *bc);
  if (!bs || !bc) {
    ts_free(bs);
    ts_free(bc);
    return 0;
  }
  for (int i = 0; i < n; i++) {
    bs[i] = (kv){scores[i], i};
    bc[i] = (kv){-costs[i], i};
  }
  qsort(bs, (size_t)n, sizeof *bs, cmp_desc);
  qsort(bc, (size_t)n, sizeof *bc, cmp_desc);
  int hit = 0;
  for (int i = 0; i < k; i++)
    for (int j = 0; j < k; j++)
      if (bc[i].idx == bs[j].idx) {
        hit++;
        break;
      }
  ts_free(bs);
  ts_free(bc);
  return (double)hit / k;
}
