/* test_evo.c — mutators and the evolutionary search: a mutant differs from
 * its parent in exactly one decision (or, for parallel, one annotation
 * limit) and replays; a batch never repeats a measured candidate nor itself,
 * and holds mutants of the best measured one (the local share);
 * proposed candidates replay and compute what the unscheduled function
 * computes (matmul and conv2d at small sizes); the replay cache and the
 * worker count change nothing but the cost. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/struct.h"
#include "schedule/util.h"
#include "search/search.h"

#include <time.h>
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static cg_target host(void) {
  cg_target t;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(cg_target_parse("llvm", &t, &d) == TS_OK, "%s", d.msg);
  return t;
}

/* Number of instructions whose decision or literal inputs differ. */
static int count_changes(const sch_trace *a, const sch_trace *b, int *ndec) {
  ck_assert_int_eq(sch_trace_len(a), sch_trace_len(b));
  int n = 0;
  *ndec = 0;
  for (int i = 0; i < sch_trace_len(a); i++) {
    const sch_inst *x = sch_trace_inst(a, i), *y = sch_trace_inst(b, i);
    ck_assert_int_eq(x->kind, y->kind);
    bool dec = x->decision.n != y->decision.n ||
               (x->decision.n && memcmp(x->decision.v, y->decision.v, sizeof(int64_t) * (size_t)x->decision.n));
    bool lit = false;
    for (int k = 0; k < x->nin; k++)
      if (x->in[k].kind == SCH_ARG_INT && x->in[k].i != y->in[k].i) lit = true;
    if (dec) (*ndec)++;
    if (dec || lit) n++;
  }
  return n;
}

static sch_trace *random_bare(const ir_func *f, const cg_target *t, uint64_t seed) {
  sch_trace **sk = NULL;
  int nsk = 0;
  ts_diag d;
  ts_diag_clear(&d);
  srch_space_opts so = {0, 64, 0};
  ck_assert_msg(srch_sketches(f, t, &so, &sk, &nsk, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_gt(nsk, 0);
  sch_trace *out = NULL;
  for (uint64_t s = seed; !out && s < seed + 50; s++) {
    sch_traced *ts = srch_instantiate(sk[s % (uint64_t)nsk], f, t, true, s, &d);
    if (!ts) continue;
    out = sch_trace_simplified(sch_traced_trace(ts), true);
    sch_traced_free(ts);
  }
  for (int i = 0; i < nsk; i++) sch_trace_free(sk[i]);
  ts_free(sk);
  ck_assert_ptr_nonnull(out);
  return out;
}

START_TEST(mutators_change_one_decision) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "matmul:m=64,n=64,k=64");
  cg_target t = host();
  ts_rng rng;
  ts_rng_seed(&rng, 7);
  int produced[SRCH_MUT_COUNT] = {0};
  for (int k = 0; k < 12; k++) {
    sch_trace *tr = random_bare(f, &t, 100 + (uint64_t)k * 13);
    for (int m = 0; m < SRCH_MUT_COUNT; m++) {
      sch_trace *mt = srch_mutate((srch_mutator)m, tr, f, &rng);
      if (!mt) continue;
      int ndec, nchg = count_changes(tr, mt, &ndec);
      ck_assert_msg(nchg == 1, "mutator %d changed %d instructions", m, nchg);
      if (m != SRCH_MUT_PARALLEL) ck_assert_int_eq(ndec, 1);
      if (m == SRCH_MUT_TILE_SIZE)
        for (int i = 0; i < sch_trace_len(mt); i++) {
          const sch_inst *x = sch_trace_inst(tr, i), *y = sch_trace_inst(mt, i);
          if (x->kind != SCH_I_SAMPLE_PERFECT_TILE) continue;
          int64_t px = 1, py = 1;
          for (int j = 0; j < x->decision.n; j++) px *= x->decision.v[j], py *= y->decision.v[j];
          ck_assert_int_eq(px, py);
          if (y->attrs[1].i > 0) ck_assert_int_le(y->decision.v[y->decision.n - 1], y->attrs[1].i);
        }
      ts_diag d;
      ts_diag_clear(&d);
      sch_traced *ts = sch_trace_replay(mt, f, 1, &d);
      ck_assert_msg(ts != NULL, "mutant of mutator %d does not replay: %s", m, d.msg);
      sch_traced_free(ts);
      produced[m]++;
      sch_trace_free(mt);
    }
    sch_trace_free(tr);
  }
  ck_assert_int_gt(produced[SRCH_MUT_TILE_SIZE], 0);
  ts_arena_fini(&a);
}
END_TEST

static void propose(const char *spec, int nbatches, int n, bool check_equiv) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, spec);
  cg_target t = host();
  srch_evo_opts o;
  srch_evo_opts_default(&o);
  o.population = 64; /* small, for test time */
  o.init_min_unmeasured = 16;
  ts_diag d;
  ts_diag_clear(&d);
  srch_evo *e = srch_evo_new(f, &t, &o, 42, &d);
  ck_assert_msg(e != NULL, "%s", d.msg);
  cm_model *m = cm_random_new(3);
  uint64_t seen[1024];
  int nseen = 0;
  for (int b = 0; b < nbatches; b++) {
    srch_candidate *c = NULL;
    int nc = 0;
    ck_assert_msg(srch_evo_next_batch(e, m, n, &c, &nc, &d) == TS_OK, "%s", d.msg);
    ck_assert_int_gt(nc, 0);
    ck_assert_int_le(nc, n);
    for (int i = 0; i < nc; i++) {
      for (int j = 0; j < nseen; j++)
        ck_assert_msg(seen[j] != c[i].hash, "%s batch %d: candidate %d repeats a measured/proposed one", spec,
                      b, i);
      seen[nseen++] = c[i].hash;
      sch_traced *ts = sch_trace_replay(c[i].trace, f, 1, &d);
      ck_assert_msg(ts != NULL, "candidate does not replay: %s", d.msg);
      ck_assert_msg(ir_struct_hash_func(sch_traced_func(ts)) == c[i].hash, "hash differs after replay");
      if (check_equiv && i < 3) tu_assert_equivalent(f, sch_traced_func(ts));
      /* pretend it was measured: slower for later ones */
      ck_assert_int_eq(srch_evo_notify(e, c[i].trace, c[i].hash, 1e-3 * (1 + i), &d), TS_OK);
      sch_traced_free(ts);
      srch_candidate_fini(&c[i]);
    }
    ts_free(c);
  }
  cm_model_free(m);
  srch_evo_free(e);
  ts_arena_fini(&a);
}

START_TEST(batches_never_repeat) { propose("matmul:m=32,n=32,k=32", 3, 16, false); }
END_TEST

START_TEST(valid_matmul) { propose("matmul:m=16,n=24,k=8", 1, 8, true); }
END_TEST

START_TEST(valid_conv2d) {
  propose("conv2d_nchw:n=1,c=4,h=8,w=8,k=8,r=3,s=3,stride=1,pad=1", 1, 8, true);
}
END_TEST

START_TEST(measured_never_proposed) {
  /* Everything of a first batch notified to a fresh search: the second
   * search never proposes any of them. */
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "matmul:m=32,n=32,k=32");
  cg_target t = host();
  srch_evo_opts o;
  srch_evo_opts_default(&o);
  o.population = 64;
  o.init_min_unmeasured = 16;
  ts_diag d;
  ts_diag_clear(&d);
  srch_evo *e1 = srch_evo_new(f, &t, &o, 5, &d), *e2 = srch_evo_new(f, &t, &o, 5, &d);
  ck_assert_ptr_nonnull(e1);
  ck_assert_ptr_nonnull(e2);
  cm_model *m = cm_random_new(1);
  srch_candidate *c = NULL;
  int nc = 0;
  ck_assert_int_eq(srch_evo_next_batch(e1, m, 16, &c, &nc, &d), TS_OK);
  ck_assert_int_gt(nc, 0);
  for (int i = 0; i < nc; i++) srch_evo_notify(e2, c[i].trace, c[i].hash, 1e-3, &d);
  srch_candidate *c2 = NULL;
  int nc2 = 0;
  ck_assert_int_eq(srch_evo_next_batch(e2, m, 16, &c2, &nc2, &d), TS_OK);
  for (int i = 0; i < nc2; i++) {
    for (int j = 0; j < nc; j++) ck_assert(c2[i].hash != c[j].hash);
    for (int j = 0; j < i; j++) ck_assert(c2[i].hash != c2[j].hash);
  }
  for (int i = 0; i < nc; i++) srch_candidate_fini(&c[i]);
  for (int i = 0; i < nc2; i++) srch_candidate_fini(&c2[i]);
  ts_free(c);
  ts_free(c2);
  cm_model_free(m);
  srch_evo_free(e1);
  srch_evo_free(e2);
  ts_arena_fini(&a);
}
END_TEST

/* Whether b is a one-step neighbour of a: the same instructions, one of
 * them with another decision or literal. */
static bool one_step(const sch_trace *a, const sch_trace *b) {
  if (sch_trace_len(a) != sch_trace_len(b)) return false;
  int n = 0;
  for (int i = 0; i < sch_trace_len(a); i++) {
    const sch_inst *x = sch_trace_inst(a, i), *y = sch_trace_inst(b, i);
    if (x->kind != y->kind || x->nin != y->nin) return false;
    bool dec = x->decision.n != y->decision.n ||
               (x->decision.n && memcmp(x->decision.v, y->decision.v, sizeof(int64_t) * (size_t)x->decision.n));
    for (int k = 0; k < x->nin; k++)
      if (x->in[k].kind == SCH_ARG_INT && x->in[k].i != y->in[k].i) dec = true;
    n += dec;
  }
  return n == 1;
}

START_TEST(local_share_mutates_the_best) {
  /* One measured candidate, a model that knows nothing (random): a batch of
   * 16 still holds at least 16 / 8 one-step mutants of it (the local share),
   * none of them the measured one. */
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "matmul:m=64,n=64,k=64");
  cg_target t = host();
  srch_evo_opts o;
  srch_evo_opts_default(&o);
  o.population = 64;
  o.init_min_unmeasured = 16;
  ts_diag d;
  ts_diag_clear(&d);
  srch_evo *e = srch_evo_new(f, &t, &o, 9, &d);
  ck_assert_ptr_nonnull(e);
  sch_trace *best = random_bare(f, &t, 21);
  sch_traced *bt = srch_instantiate(best, f, &t, false, 1, &d);
  ck_assert_msg(bt, "%s", d.msg);
  uint64_t bh = ir_struct_hash_func(sch_traced_func(bt));
  ck_assert_int_eq(srch_evo_notify(e, sch_traced_trace(bt), bh, 1e-4, &d), TS_OK);
  cm_model *m = cm_random_new(3);
  srch_candidate *c = NULL;
  int nc = 0, near = 0;
  ck_assert_int_eq(srch_evo_next_batch(e, m, 16, &c, &nc, &d), TS_OK);
  for (int i = 0; i < nc; i++) {
    ck_assert(c[i].hash != bh);
    sch_trace *bare = sch_trace_simplified(c[i].trace, true);
    near += one_step(best, bare);
    sch_trace_free(bare);
  }
  ck_assert_msg(near >= 2, "%d of %d candidates are neighbours of the measured one", near, nc);
  for (int i = 0; i < nc; i++) srch_candidate_fini(&c[i]);
  ts_free(c);
  sch_traced_free(bt);
  sch_trace_free(best);
  cm_model_free(m);
  srch_evo_free(e);
  ts_arena_fini(&a);
}
END_TEST

/* Two searches of workload spec, same seed, options o1 and o2, each fed
 * the same made-up times for the candidates they propose: over nb batches
 * of 8 they must propose the same candidates in the same order. With
 * same_replays, after each batch they must also have replayed as often.
 * Their stats at the end go to s1 and s2. */
static void twin_searches(const char *spec, const srch_evo_opts *o1, const srch_evo_opts *o2, uint64_t seed, int nb,
                          bool same_replays, srch_evo_stats *s1, srch_evo_stats *s2) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, spec);
  cg_target t = host();
  ts_diag d;
  ts_diag_clear(&d);
  srch_evo *e1 = srch_evo_new(f, &t, o1, seed, &d), *e2 = srch_evo_new(f, &t, o2, seed, &d);
  ck_assert_ptr_nonnull(e1);
  ck_assert_ptr_nonnull(e2);
  cm_model *m1 = cm_random_new(seed), *m2 = cm_random_new(seed);
  for (int b = 0; b < nb; b++) {
    srch_candidate *c1 = NULL, *c2 = NULL;
    int n1 = 0, n2 = 0;
    ck_assert_int_eq(srch_evo_next_batch(e1, m1, 8, &c1, &n1, &d), TS_OK);
    ck_assert_int_eq(srch_evo_next_batch(e2, m2, 8, &c2, &n2, &d), TS_OK);
    ck_assert_int_gt(n1, 0);
    ck_assert_int_eq(n1, n2);
    srch_evo_get_stats(e1, s1);
    srch_evo_get_stats(e2, s2);
    if (same_replays) ck_assert_msg(s1->replays == s2->replays, "batch %d: %ld replays against %ld", b, s1->replays, s2->replays);
    for (int i = 0; i < n1; i++) {
      ck_assert_msg(c1[i].hash == c2[i].hash, "batch %d, candidate %d differs between the two searches", b, i);
      double secs = 1e-3 * (1 + (double)((c1[i].hash >> 7) % 97)); /* a made-up time */
      srch_evo_notify(e1, c1[i].trace, c1[i].hash, secs, &d);
      srch_evo_notify(e2, c2[i].trace, c2[i].hash, secs, &d);
      srch_candidate_fini(&c1[i]);
      srch_candidate_fini(&c2[i]);
    }
    ts_free(c1);
    ts_free(c2);
  }
  cm_model_free(m1);
  cm_model_free(m2);
  srch_evo_free(e1);
  srch_evo_free(e2);
  ts_arena_fini(&a);
}

START_TEST(replay_cache_is_transparent) {
  /* The replay cache changes nothing but the cost: a search with it and one
   * without propose the same candidates in the same order over two
   * batches, and the cached one serves replays from the cache (the
   * measured seeds at least) in the second. */
  srch_evo_opts on;
  srch_evo_opts_default(&on);
  on.population = 48;
  on.init_min_unmeasured = 12;
  srch_evo_opts off = on;
  off.no_replay_cache = true;
  srch_evo_stats st, su;
  twin_searches("matmul:m=24,n=40,k=12", &on, &off, 11, 2, false, &st, &su);
  ck_assert_int_gt(st.cache_hits, 0);
  ck_assert_int_eq(su.cache_hits, 0);
  ck_assert_int_eq(st.replays + st.cache_hits, su.replays);
}
END_TEST

START_TEST(thread_count_changes_nothing) {
  /* One worker or six: the same candidates in the same order, at the same
   * replay cost, batch after batch. (The unchanged copies of a parent were
   * once given to whichever child got there first, so the children, and
   * the replays they cost, varied with the workers' timing: 3 runs in 8
   * failed.) */
  srch_evo_opts o1;
  srch_evo_opts_default(&o1);
  o1.population = 96;
  o1.init_min_unmeasured = 16;
  o1.no_replay_cache = true;
  o1.mutate_prob = 0.3; /* most children draw an unchanged copy: many draw the same parent */
  srch_evo_opts o6 = o1;
  o1.num_threads = 1;
  o6.num_threads = 6;
  srch_evo_stats s1, s6;
  twin_searches("matmul:m=48,n=36,k=20", &o1, &o6, 5, 3, true, &s1, &s6);
}
END_TEST

START_TEST(full_population_speed) {
  /* One batch at the default population of 512 stays in seconds. */
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "matmul:m=64,n=64,k=64");
  cg_target t = host();
  srch_evo_opts o;
  srch_evo_opts_default(&o);
  ts_diag d;
  ts_diag_clear(&d);
  srch_evo *e = srch_evo_new(f, &t, &o, 9, &d);
  ck_assert_ptr_nonnull(e);
  cm_model *m = cm_random_new(1);
  srch_candidate *c = NULL;
  int nc = 0;
  double t0 = now_s();
  ck_assert_int_eq(srch_evo_next_batch(e, m, 64, &c, &nc, &d), TS_OK);
  double el = now_s() - t0;
  fprintf(stderr, "population 512, batch 64: %d candidates in %.2f s\n", nc, el);
  ck_assert_int_eq(nc, 64);
  ck_assert_msg(el < 60, "one batch took %.1f s", el);
  for (int i = 0; i < nc; i++) srch_candidate_fini(&c[i]);
  ts_free(c);
  cm_model_free(m);
  srch_evo_free(e);
  ts_arena_fini(&a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("search_evo");
  TCase *tc = tcase_create("evo");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, mutators_change_one_decision);
  tcase_add_test(tc, batches_never_repeat);
  tcase_add_test(tc, measured_never_proposed);
  tcase_add_test(tc, local_share_mutates_the_best);
  tcase_add_test(tc, valid_matmul);
  tcase_add_test(tc, valid_conv2d);
  tcase_add_test(tc, replay_cache_is_transparent);
  tcase_add_test(tc, thread_count_changes_nothing);
  tcase_add_test(tc, full_population_speed);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
