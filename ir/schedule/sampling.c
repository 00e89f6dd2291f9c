/* sampling.c — the random samplers a trace records as decisions:
 * sample_perfect_tile (n factors whose product is a loop's extent, uniform
 * over ordered factorizations) and sample_categorical (an index drawn from a
 * discrete distribution). Both draw from the state's RNG when no decision is
 * given and return the decision they used, so replaying a trace reproduces
 * the draw; a stored perfect-tile decision that no longer divides the extent
 * is repaired the way TVM does (src/s_tir/schedule/primitive/sampling.cc).
 * sample_compute_location lives with compute_at (compute_at.c), whose
 * legality checks it needs. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sch_int.h"

/* Writes "[a, b, c]" for messages. */
static void fmt_ints(char *buf, size_t n, int cnt, const int64_t *v) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "[");
  for (int i = 0; i < cnt && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)v[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* Prime factorization by trial division: p[i]^e[i]. Extents are loop trip
 * counts, so at most 63 prime factors counted with multiplicity. */
static int factorize(int64_t x, int64_t *p, int *e) {
  int m = 0;
  for (int64_t q = 2; q <= x / q; q++) {
    if (x % q) continue;
    p[m] = q;
    e[m] = 0;
    while (x % q == 0) {
      x /= q;
      e[m]++;
    }
    m++;
  }
  if (x > 1) {
    p[m] = x;
    e[m++] = 1;
  }
  return m;
}

/* One uniform draw over ordered factorizations of extent into n factors:
 * each prime power p^k is spread over the n slots by stars and bars (n-1
 * distinct bar positions among k+n-1), independently per prime. */
static void draw_tiles(ts_rng *rng, int nprimes, const int64_t *p, const int *e, int n, int64_t *res) {
  for (int i = 0; i < n; i++) res[i] = 1;
  for (int j = 0; j < nprimes; j++) {
    int k = e[j], m = k + n - 1;
    int pos[128];
    for (int i = 0; i < m; i++) pos[i] = i;
    /* partial Fisher-Yates: the first n-1 entries are the bars */
    for (int i = 0; i < n - 1; i++) {
      int r = i + (int)ts_rng_below(rng, (uint64_t)(m - i));
      int t = pos[i];
      pos[i] = pos[r];
      pos[r] = t;
    }
    bool bar[128] = {false};
    for (int i = 0; i < n - 1; i++) bar[pos[i]] = true;
    int slot = 0;
    for (int i = 0; i < m; i++) {
      if (bar[i]) slot++;
      else res[slot] *= p[j];
    }
  }
}

ts_status sch_sample_perfect_tile(sch_state *s, sch_loop l, int n, int64_t max_innermost,
                                  const int64_t *decision, int64_t *out, ts_diag *d) {
  if (l.mark != SCH_LOC_LOOP || !l.var)
    return ts_diag_set(d, TS_EINVAL, "sample_perfect_tile: the loop is a compute-location mark, not a loop");
  if (n < 1 || n > 64)
    return ts_diag_set(d, TS_EINVAL, "sample_perfect_tile: loop '%s': n = %d tiles (want 1..64)",
                       l.var->name, n);
  if (max_innermost != -1 && max_innermost < 1)
    return ts_diag_set(d, TS_EINVAL,
                       "sample_perfect_tile: loop '%s': max_innermost_factor %lld (want -1 or >= 1)",
                       l.var->name, (long long)max_innermost);
  sch_path p;
  ts_status st = sch_find_loop(s, l.var, &p, "sample_perfect_tile", d);
  if (st) return st;
  const ir_stmt *loop = p.node[p.n - 1];
  int64_t extent;
  if (!ir_as_int(loop->u.loop.extent, &extent)) {
    /* split infers the outer factor from a symbolic extent */
    out[0] = -1;
    for (int i = 1; i < n; i++) out[i] = 1;
    return TS_OK;
  }
  if (extent < 1)
    return ts_diag_set(d, TS_EINVAL, "sample_perfect_tile: loop '%s' has extent %lld", l.var->name,
                       (long long)extent);

  if (decision) {
    /* Replay: keep the stored tiles where they still divide what is left
     * (innermost first); a tile that no longer fits takes the whole rest,
     * and the outermost absorbs the remainder. */
    for (int i = 1; i < n; i++)
      if (decision[i] < 1) {
        char buf[256];
        fmt_ints(buf, sizeof buf, n, decision);
        return ts_diag_set(d, TS_EINVAL,
                           "sample_perfect_tile: loop '%s': decision %s has a non-positive tile",
                           l.var->name, buf);
      }
    int64_t len = extent;
    for (int i = n - 1; i > 0; i--) {
      out[i] = len % decision[i] ? len : decision[i];
      len /= out[i];
    }
    out[0] = len;
    return TS_OK;
  }

  if (n == 1) {
    if (max_innermost != -1 && extent > max_innermost)
      return ts_diag_set(d, TS_EINVAL,
                         "sample_perfect_tile: loop '%s': one tile of %lld exceeds max_innermost_factor %lld",
                         l.var->name, (long long)extent, (long long)max_innermost);
    out[0] = extent;
    return TS_OK;
  }
  int64_t primes[64];
  int exps[64];
  int np = factorize(extent, primes, exps);
  for (int tries = 0;; tries++) {
    draw_tiles(&s->rng, np, primes, exps, n, out);
    if (max_innermost == -1 || out[n - 1] <= max_innermost) return TS_OK;
    if (tries == 100000) break;
  }
  /* Practically unreachable (an innermost tile of 1 is always allowed and is
   * drawn with probability >= prod (n-1)/(k+n-1)); fall back to it. */
  draw_tiles(&s->rng, np, primes, exps, n - 1, out);
  out[n - 1] = 1;
  return TS_OK;
}

ts_status sch_sample_categorical(sch_state *s, int n, const int64_t *candidates,
                                 const double *probs, const int *decision, int64_t *value,
                                 int *index, ts_diag *d) {
  if (n < 1) return ts_diag_set(d, TS_EINVAL, "sample_categorical: no candidates");
  double total = 0;
  for (int i = 0; i < n; i++) {
    if (!(probs[i] >= 0) || isinf(probs[i]))
      return ts_diag_set(d, TS_EINVAL, "sample_categorical: probability %d is %g (want a finite value >= 0)",
                         i, probs[i]);
    total += probs[i];
  }
  if (!(total > 0)) return ts_diag_set(d, TS_EINVAL, "sample_categorical: the probabilities sum to 0");
  int k;
  if (decision) {
    k = *decision;
    if (k < 0 || k >= n)
      return ts_diag_set(d, TS_EINVAL, "sample_categorical: decision %d is not an index into %d candidates",
                         k, n);
  } else {
    double u = ts_rng_unit(&s->rng) * total, acc = 0;
    k = -1;
    for (int i = 0; i < n; i++) {
      if (probs[i] <= 0) continue;
      acc += probs[i];
      k = i;
      if (u < acc) break;
    }
  }
  *index = k;
  *value = candidates[k];
  return TS_OK;
}
