/* test_rfactor_rule.c — the AddRFactor rule: where it applies (row
 * reductions with a long reduction, a tiling-eligible block with little
 * spatial parallelism) and where it does not (a tiling-eligible block with
 * enough spatial work, a short reduction, no reduction); its sketches
 * (rfactor at the outer and at the inner piece of the split, on several
 * cores also threads' shares summed in vector lanes, plus the original);
 * sampled candidates equal to the unscheduled function in the interpreter
 * at small odd sizes; the tile-size mutator on the split;
 * rfactor'd reduce_sum and softmax candidates with vectorized partial
 * reductions built through LLVM, run and verified; and a two-level rfactor
 * (parallel tasks of vector partial sums) written as a trace, lowered,
 * built and verified, and the same shape sampled from the rule's sketch. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "ir/print.h"
#include "search/search.h"
#include "tests/schedule/util.h"
#include "tuner/build.h"
#include "tuner/verify.h"

static cg_target host(void) {
  cg_target t;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(cg_target_parse("llvm", &t, &d) == TS_OK, "%s", d.msg);
  return t;
}

static sch_trace **sketches(const ir_func *f, int cores, int *n) {
  cg_target t = host();
  srch_space_opts o = {.num_cores = cores};
  sch_trace **sk;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(srch_sketches(f, &t, &o, &sk, n, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_gt(*n, 0);
  return sk;
}

static void free_sketches(sch_trace **sk, int n) {
  for (int i = 0; i < n; i++) sch_trace_free(sk[i]);
  ts_free(sk);
}

static int count_kind(const sch_trace *tr, sch_inst_kind k) {
  int c = 0;
  for (int i = 0; i < sch_trace_len(tr); i++) c += sch_trace_inst(tr, i)->kind == k;
  return c;
}

/* Is tr annotated with parallel limit 1 (a small kernel's serial sketch)? */
static bool serial_twin(const sch_trace *tr) {
  for (int i = 0; i < sch_trace_len(tr); i++) {
    const sch_inst *in = sch_trace_inst(tr, i);
    if (in->kind == SCH_I_ANNOTATE && in->nin >= 2 && in->nattr >= 1 && in->attrs[0].s &&
        !strcmp(in->attrs[0].s, "meta_schedule.parallel") && in->in[1].kind == SCH_ARG_INT)
      return in->in[1].i == 1;
  }
  return false;
}

/* Parallel sketches with at least one RFactor. */
static int rf_sketches(const char *spec, int cores, int *total) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, spec);
  int n;
  sch_trace **sk = sketches(f, cores, &n);
  int r = 0;
  /* a small kernel on several cores also has serial twins of its sketches
   * (test_rules.c, test_serial_sketch_small): only the parallel ones count */
  int par = 0;
  for (int i = 0; i < n; i++) {
    if (serial_twin(sk[i])) continue;
    par++;
    r += count_kind(sk[i], SCH_I_RFACTOR) > 0;
  }
  *total = par;
  free_sketches(sk, n);
  ts_arena_fini(&a);
  return r;
}

START_TEST(test_applies_where_claimed) {
  int n;
  /* one row reduction of 512 > 4 cores: rfactor outer, inner, threads'
   * shares in lanes (several cores only), original */
  ck_assert_int_eq(rf_sketches("reduce_sum:m=2,n=512", 4, &n), 3);
  ck_assert_int_eq(n, 4);
  ck_assert_int_eq(rf_sketches("reduce_sum:m=2,n=512", 1, &n), 2);
  ck_assert_int_eq(n, 3);
  /* a reduction no longer than the core count: nothing */
  ck_assert_int_eq(rf_sketches("reduce_sum:m=2,n=8", 16, &n), 0);
  ck_assert_int_eq(n, 1);
  /* matmul with plenty of spatial work: multi-level tiling only */
  ck_assert_int_eq(rf_sketches("matmul:m=64,n=64,k=64", 4, &n), 0);
  /* matmul with a tiny output and a long k (spatial 4 < 4096 and <= 64) */
  ck_assert_int_gt(rf_sketches("matmul:m=1,n=4,k=4096", 4, &n), 0);
  /* ... but not when the spatial part exceeds cores * 16 */
  ck_assert_int_eq(rf_sketches("matmul:m=16,n=16,k=4096", 4, &n), 0);
  /* no reduction */
  ck_assert_int_eq(rf_sketches("add:m=64,n=64", 4, &n), 0);
  /* softmax: both row reductions, each with three rfactor choices on 2
   * cores (4 x 4 sketches, all but one with an rfactor), two on 1 */
  ck_assert_int_eq(rf_sketches("softmax:m=8,n=256", 2, &n), 15);
  ck_assert_int_eq(n, 16);
  ck_assert_int_eq(rf_sketches("softmax:m=8,n=256", 1, &n), 8);
  ck_assert_int_eq(n, 9);
}
END_TEST

/* Every sketch with an rfactor: 10 random candidates each rejected with a
 * reason or equal to the unscheduled function; at least one passes; the
 * write-back carries the producer annotation and the rf block exists. */
static const char *specs[] = {
    "reduce_sum:m=3,n=60", "reduce_mean:m=5,n=21", "softmax:m=5,n=24",
    "layernorm:m=3,n=35",  "matmul:m=1,n=3,k=64",  "reduce_sum:m=2,n=13",
};

START_TEST(test_candidates_equivalent) {
  const char *spec = specs[_i];
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, spec);
  int n;
  sch_trace **sk = sketches(f, 2, &n);
  cg_target t = host();
  int passed = 0, with_rf = 0;
  for (int s = 0; s < n; s++) {
    if (!count_kind(sk[s], SCH_I_RFACTOR)) continue;
    with_rf++;
    for (int k = 0; k < 10; k++) {
      ts_diag d;
      ts_diag_clear(&d);
      sch_traced *ts = srch_instantiate(sk[s], f, &t, true, (uint64_t)(100 * s + k + 1), &d);
      if (!ts) {
        ck_assert_msg(d.msg[0], "%s sketch %d: rejected without a reason", spec, s);
        continue;
      }
      char why[512] = "";
      if (!tu_equivalent(f, sch_traced_func(ts), 5, why, sizeof why)) {
        char *js = sch_trace_to_json(sch_traced_trace(ts));
        ck_abort_msg("%s sketch %d seed %d: %s\n%s", spec, s, k, why, js ? js : "");
      }
      /* the tile-size mutator changes the split and the result still matches */
      ts_rng rng;
      ts_rng_seed(&rng, (uint64_t)k + 3);
      sch_trace *m = srch_mutate(SRCH_MUT_TILE_SIZE, sch_traced_trace(ts), f, &rng);
      if (m) {
        sch_traced *mt = srch_instantiate(m, f, &t, false, 1, &d);
        if (mt) {
          ck_assert_msg(tu_equivalent(f, sch_traced_func(mt), 5, why, sizeof why), "%s mutant: %s", spec, why);
          sch_traced_free(mt);
        }
        sch_trace_free(m);
      }
      sch_traced_free(ts);
      passed++;
    }
  }
  ck_assert_msg(with_rf > 0, "%s: no sketch with rfactor", spec);
  ck_assert_msg(passed > 0, "%s: no candidate passed", spec);
  free_sketches(sk, n);
  ts_arena_fini(&a);
}
END_TEST

/* Is there a vectorized loop above a block whose name ends in "_rf" (with
 * want_par, a vectorized loop inside a parallel one)? */
static void scan(const ir_stmt *s, bool want_par, int par, int vec, bool *found) {
  if (!s || *found) return;
  switch (s->kind) {
  case IR_FOR:
    scan(s->u.loop.body, want_par, par + (s->u.loop.kind == IR_FOR_PARALLEL),
         vec + ((par || !want_par) && s->u.loop.kind == IR_FOR_VECTORIZED), found);
    return;
  case IR_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) scan(s->u.seq.stmts[i], want_par, par, vec, found);
    return;
  case IR_BLOCK_REALIZE: {
    const char *nm = s->u.realize.block->name;
    size_t l = strlen(nm);
    if (vec && l > 3 && !strcmp(nm + l - 3, "_rf")) *found = true;
    scan(s->u.realize.block->body, want_par, par, vec, found);
    return;
  }
  case IR_IF:
    scan(s->u.ifs.then_s, want_par, par, vec, found);
    scan(s->u.ifs.else_s, want_par, par, vec, found);
    return;
  default:
    return;
  }
}

static bool has_vec_rf(const ir_func *f) {
  bool found = false;
  scan(f->body, false, 0, 0, &found);
  return found;
}

static bool has_par_vec_rf(const ir_func *f) {
  bool found = false;
  scan(f->body, true, 0, 0, &found);
  return found;
}

/* The first candidate (40 seeds per sketch with an rfactor, serial twins
 * left out when asked) whose function has `want`, or NULL. */
static sch_traced *find_candidate(const ir_func *f, sch_trace **sk, int n, bool skip_serial, uint64_t mul,
                                  bool (*want)(const ir_func *)) {
  cg_target t = host();
  sch_traced *ts = NULL;
  for (int s = 0; s < n && !ts; s++) {
    if (!count_kind(sk[s], SCH_I_RFACTOR) || (skip_serial && serial_twin(sk[s]))) continue;
    for (int k = 0; k < 40 && !ts; k++) {
      ts_diag d;
      ts_diag_clear(&d);
      ts = srch_instantiate(sk[s], f, &t, true, mul * (uint64_t)k + (uint64_t)s + 1, &d);
      if (ts && !want(sch_traced_func(ts))) {
        sch_traced_free(ts);
        ts = NULL;
      }
    }
  }
  return ts;
}

/* Builds scheduled through LLVM, runs it on `threads` threads with inputs
 * of seed and verifies its outputs against the interpreter on f. */
static void build_and_verify(const ir_func *f, const ir_func *scheduled, uint64_t seed, int threads, const char *what) {
  cg_target t = host();
  char path[] = "/tmp/tessel_rfrule_XXXXXX.so";
  int fd = mkstemps(path, 3);
  ck_assert_int_ge(fd, 0);
  close(fd);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_build_shared(scheduled, &t, path, &d) == TS_OK, "%s: %s", what, d.msg);
  tsrt_measure_opts mo = {.repeat = 1, .number = 1, .timeout_s = 30, .seed = seed, .want_outputs = true,
                          .num_threads = threads};
  tsrt_measure_result res;
  tsrt_measure_forked(path, &mo, &res);
  ck_assert_msg(res.status == TS_OK, "%s: %s", what, res.error);
  tun_verify_result vr;
  ck_assert_int_eq(tun_verify(f, seed, res.outputs, res.outputs_bytes, &vr, &d), TS_OK);
  ck_assert_msg(vr.matched, "%s: %s", what, vr.detail);
  tsrt_result_fini(&res);
  unlink(path);
}

/* Finds a candidate whose rf block is vectorized, builds it through LLVM,
 * runs it and verifies its outputs against the interpreter. */
static void build_vectorized_rf(const char *spec) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, spec);
  int n;
  sch_trace **sk = sketches(f, 2, &n);
  sch_traced *ts = find_candidate(f, sk, n, false, 7, has_vec_rf);
  ck_assert_msg(ts != NULL, "%s: no candidate with a vectorized rf block", spec);
  build_and_verify(f, sch_traced_func(ts), 3, 0, spec);
  sch_traced_free(ts);
  free_sketches(sk, n);
  ts_arena_fini(&a);
}

/* Cross-thread-style partial reductions on the CPU, written as a trace:
 * reduce_sum of one long row split (2 parallel, 2048, 16 lanes); rfactor the
 * parallel piece, then rfactor the lanes of that rf block: two parallel
 * tasks each keep 16 vector partial sums; two write-backs combine them. */
START_TEST(test_build_parallel_vector_partials) {
  static const char *json =
      "[[[\"GetBlock\",[],[\"Y\",\"reduce_sum\"],[\"b0\"]],[\"GetLoops\",[\"b0\"],[],[\"l1\",\"l2\"]],"
      "[\"Split\",[\"l2\",2,\"None\",16],[],[\"l3\",\"l4\",\"l5\"]],[\"RFactor\",[\"l3\"],[0],[\"b6\"]],"
      "[\"GetLoops\",[\"b6\"],[],[\"l7\",\"l8\",\"l9\",\"l10\"]],[\"RFactor\",[\"l10\"],[-1],[\"b11\"]],"
      "[\"GetLoops\",[\"b11\"],[],[\"l12\",\"l13\",\"l14\",\"l15\"]],[\"Parallel\",[\"l13\"],[],[]],"
      "[\"Vectorize\",[\"l15\"],[],[]]],[]]";
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "reduce_sum:m=1,n=4096");
  ts_diag d;
  ts_diag_clear(&d);
  sch_trace *tr = sch_trace_from_json(json, &d);
  ck_assert_msg(tr != NULL, "%s", d.msg);
  sch_traced *ts = sch_trace_replay(tr, f, 1, &d);
  ck_assert_msg(ts != NULL, "%s", d.msg);
  tu_assert_equivalent(f, sch_traced_func(ts));
  /* the lowered form holds a parallel loop over 16-lane vector stores */
  cg_target t = host();
  cg_lowered lw;
  ck_assert_msg(cg_lower(&a, sch_traced_func(ts), &t, &lw, &d) == TS_OK, "%s", d.msg);
  char *txt = ir_func_to_string(lw.func);
  ck_assert_ptr_nonnull(txt);
  ck_assert_msg(strstr(txt, "in parallel(0, 2)") && strstr(txt, "ramp(") && strstr(txt, ", 1, 16)"), "%s", txt);
  ts_free(txt);
  build_and_verify(f, sch_traced_func(ts), 5, 0, "two-level rfactor");
  sch_traced_free(ts);
  sch_trace_free(tr);
  ts_arena_fini(&a);
}
END_TEST

/* On 2 cores the rule's threads-and-lanes sketch gives one long row (a
 * length of 3 x 5 x 7 x 16) a candidate whose rf block runs each thread's
 * share in vector partial sums: sampled, built through LLVM, verified. On 1
 * core no sketch has that shape. */
START_TEST(test_build_threads_lanes) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "reduce_sum:m=1,n=1680");
  for (int cores = 1; cores <= 2; cores++) {
    int n;
    sch_trace **sk = sketches(f, cores, &n);
    sch_traced *ts = find_candidate(f, sk, n, true, 11, has_par_vec_rf);
    if (cores == 1) {
      ck_assert_msg(ts == NULL, "1 core: a parallel vectorised rf block");
    } else {
      ck_assert_msg(ts != NULL, "2 cores: no candidate with a parallel vectorised rf block");
      tu_assert_equivalent(f, sch_traced_func(ts));
      build_and_verify(f, sch_traced_func(ts), 9, 2, "threads and lanes");
      sch_traced_free(ts);
    }
    free_sketches(sk, n);
  }
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_build_reduce_sum) { build_vectorized_rf("reduce_sum:m=7,n=96"); }
END_TEST

START_TEST(test_build_softmax) { build_vectorized_rf("softmax:m=9,n=128"); }
END_TEST

int main(void) {
  Suite *s = suite_create("search_rfactor_rule");
  TCase *tc = tcase_create("add_rfactor");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_applies_where_claimed);
  tcase_add_loop_test(tc, test_candidates_equivalent, 0, (int)(sizeof specs / sizeof specs[0]));
  tcase_add_test(tc, test_build_parallel_vector_partials);
  tcase_add_test(tc, test_build_threads_lanes);
  tcase_add_test(tc, test_build_reduce_sum);
  tcase_add_test(tc, test_build_softmax);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
