/* test_features.c — per-store features on hand-checkable kernels: counts and
 * bytes of an elementwise add, vectorize/parallel counters after the default
 * schedule, one row per stored buffer, a reduction's rows, stability and
 * sensitivity to the tiling, and group 6 (size-free ratios) by hand. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "costmodel/costmodel.h"
#include "ir/schedule/trace.h"
#include "ir/workloads/workloads.h"
#include "schedule/util.h"
#include "tuner/build.h"

static ts_diag D;

static int fidx(const char *name) {
  for (int i = 0; i < CM_NUM_FEATURES; i++)
    if (!strcmp(cm_feature_name(i), name)) return i;
  ck_abort_msg("no feature %s", name);
  return -1;
}
static double slog(double x) { return log2(fabs(x) + 1); }
static cg_target target(void) {
  cg_target t;
  ck_assert_int_eq(cg_target_parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4 -mattr=+avx2", &t, &D), TS_OK);
  if (!t.vector_bits) t.vector_bits = 256;
  return t;
}
static void extract(const ir_func *f, cm_features *out) {
  cg_target t = target();
  ts_diag_clear(&D);
  ck_assert_msg(cm_extract(f, &t, out, &D) == TS_OK, "%s", D.msg);
  for (int i = 0; i < out->nrows * CM_NUM_FEATURES; i++) ck_assert(isfinite(out->rows[i]));
}
static float F(const cm_features *f, int row, const char *name) {
  return f->rows[row * CM_NUM_FEATURES + fidx(name)];
}
static void near(double a, double b) { ck_assert_msg(fabs(a - b) < 1e-3, "%g vs %g", a, b); }

START_TEST(names_unique) {
  for (int i = 0; i < CM_NUM_FEATURES; i++) {
    ck_assert_ptr_nonnull(cm_feature_name(i));
    ck_assert_ptr_nonnull(cm_feature_desc(i));
    for (int j = 0; j < i; j++) ck_assert_str_ne(cm_feature_name(i), cm_feature_name(j));
  }
  ck_assert_str_eq(cm_feature_name(57), "B0.acc_type.read");
  ck_assert_str_eq(cm_feature_name(147), "arith_intensity_curve_0");
  ck_assert_str_eq(cm_feature_name(163), "auto_unroll_max_step");
}
END_TEST

START_TEST(elementwise_add) {
  ts_arena *a = ts_arena_new();
  ir_func *f = tu_workload(a, "add:m=64,n=32");
  cm_features ft;
  extract(f, &ft);
  ck_assert_int_eq(ft.nrows, 1);
  near(F(&ft, 0, "float_addsub"), slog(64 * 32));
  near(F(&ft, 0, "float_mul"), 0);
  near(F(&ft, 0, "outer_prod"), slog(64 * 32));
  near(F(&ft, 0, "num_loops"), slog(2));
  near(F(&ft, 0, "vec_num"), 0);
  near(F(&ft, 0, "vec_type.none"), 1);
  near(F(&ft, 0, "blockIdx_x_len"), 1);
  int reads = 0, writes = 0;
  for (int b = 0; b < 3; b++) {
    char n[64];
    snprintf(n, sizeof n, "B%d.bytes", b);
    near(F(&ft, 0, n), slog(4.0 * 64 * 32));
    snprintf(n, sizeof n, "B%d.unique_bytes", b);
    near(F(&ft, 0, n), slog(4.0 * 64 * 32));
    snprintf(n, sizeof n, "B%d.stride", b);
    near(F(&ft, 0, n), slog(1));
    snprintf(n, sizeof n, "B%d.acc_type.read", b);
    reads += F(&ft, 0, n) == 1;
    snprintf(n, sizeof n, "B%d.acc_type.write", b);
    writes += F(&ft, 0, n) == 1;
  }
  ck_assert_int_eq(reads, 2);
  ck_assert_int_eq(writes, 1);
  near(F(&ft, 0, "B3.bytes"), 0); /* padding */
  near(F(&ft, 0, "alloc_outer_prod"), 1); /* parameter: no allocation */
  cm_features_fini(&ft);
  ts_arena_free(a);
}
END_TEST

START_TEST(default_schedule_counters) {
  ts_arena *a = ts_arena_new();
  ir_func *f = tu_workload(a, "add:m=64,n=32");
  cg_target t = target();
  sch_traced *tr = NULL;
  ck_assert_msg(tun_schedule(f, NULL, &t, &tr, &D) == TS_OK, "%s", D.msg);
  cm_features ft;
  extract(sch_traced_func(tr), &ft);
  ck_assert_int_eq(ft.nrows, 1);
  printf("add scheduled: vec_num %g vec_len %g parallel_num %g parallel_len %g\n",
         F(&ft, 0, "vec_num"), F(&ft, 0, "vec_len"), F(&ft, 0, "parallel_num"),
         F(&ft, 0, "parallel_len"));
  ck_assert(F(&ft, 0, "vec_num") > 0);
  near(F(&ft, 0, "vec_type.mixed"), 1);
  ck_assert(F(&ft, 0, "parallel_num") > 0);
  near(F(&ft, 0, "parallel_type.mixed"), 1);
  near(F(&ft, 0, "float_addsub"), slog(64 * 32)); /* lanes x iterations = numel */
  cm_features_fini(&ft);
  sch_traced_free(tr);
  ts_arena_free(a);
}
END_TEST

START_TEST(reduction_rows) {
  ts_arena *a = ts_arena_new();
  ir_func *f = tu_workload(a, "matmul:m=32,n=16,k=8");
  cm_features ft;
  extract(f, &ft);
  /* the init stores a literal (no row); the update is one row for C */
  ck_assert_int_eq(ft.nrows, 1);
  near(F(&ft, 0, "float_addsub"), slog(32 * 16 * 8));
  near(F(&ft, 0, "float_mul"), slog(32 * 16 * 8));
  near(F(&ft, 0, "num_loops"), slog(3));
  int rw = 0;
  for (int b = 0; b < 3; b++) {
    char n[64];
    snprintf(n, sizeof n, "B%d.acc_type.readwrite", b);
    rw += F(&ft, 0, n) == 1;
  }
  ck_assert_int_eq(rw, 1);
  /* A is reused across j, B across i: some buffer reports loop reuse */
  double reuse = 0;
  for (int b = 0; b < 3; b++) {
    char n[64];
    snprintf(n, sizeof n, "B%d.reuse_type.loop_multiple_read", b);
    reuse += F(&ft, 0, n);
  }
  ck_assert(reuse >= 1);
  ck_assert(F(&ft, 0, "arith_intensity_curve_9") > 0);
  cm_features_fini(&ft);
  ts_arena_free(a);
}
END_TEST

START_TEST(stability_and_sensitivity) {
  ts_arena *a = ts_arena_new();
  ir_func *f = tu_workload(a, "matmul:m=64,n=64,k=64");
  cm_features f1, f2, f3;
  extract(f, &f1);
  extract(f, &f2);
  ck_assert_int_eq(f1.nrows, f2.nrows);
  ck_assert(!memcmp(f1.rows, f2.rows, (size_t)f1.nrows * CM_NUM_FEATURES * sizeof(float)));
  sch_traced *t = sch_traced_new(f, 1, &D);
  ck_assert_ptr_nonnull(t);
  int b, n2;
  const int *l;
  ck_assert_int_eq(sch_t_get_block(t, "C", &b, &D), TS_OK);
  ck_assert_int_eq(sch_t_get_loops(t, b, &l, &n2, &D), TS_OK);
  int loops[3] = {l[0], l[1], l[2]};
  sch_arg fac[2] = {sch_arg_none(), sch_arg_int(8)};
  int out[2];
  ck_assert_msg(sch_t_split(t, loops[1], 2, fac, out, &D) == TS_OK, "%s", D.msg);
  int ord[4] = {loops[0], out[0], loops[2], out[1]};
  ck_assert_msg(sch_t_reorder(t, 4, ord, &D) == TS_OK, "%s", D.msg);
  extract(sch_traced_func(t), &f3);
  ck_assert_int_eq(f3.nrows, 1);
  ck_assert(memcmp(f1.rows, f3.rows, CM_NUM_FEATURES * sizeof(float)) != 0);
  cm_features_fini(&f1);
  cm_features_fini(&f2);
  cm_features_fini(&f3);
  sch_traced_free(t);
  ts_arena_free(a);
}
END_TEST

START_TEST(rows_per_stored_buffer) {
  /* one row per stored buffer: the plain matmul stores C only (its init
   * stores a literal: no row); a cache_write adds C_global (two rows) */
  ts_arena *a = ts_arena_new();
  ir_func *f = tu_workload(a, "matmul:m=32,n=16,k=8");
  for (int with_cache = 0; with_cache < 2; with_cache++) {
    sch_traced *tr = sch_traced_new(f, 1, &D);
    ck_assert_ptr_nonnull(tr);
    if (with_cache) {
      int b, cw = -1;
      ck_assert_int_eq(sch_t_get_block(tr, "C", &b, &D), TS_OK);
      ck_assert_msg(sch_t_cache_write(tr, b, 0, "global", 0, NULL, &cw, &D) == TS_OK, "%s", D.msg);
    }
    cm_features ft;
    extract(sch_traced_func(tr), &ft);
    printf("matmul%s: %d rows\n", with_cache ? " + cache_write" : "", ft.nrows);
    ck_assert_int_eq(ft.nrows, with_cache ? 2 : 1);
    for (int r = 0; r < ft.nrows; r++) ck_assert(F(&ft, r, "outer_prod") > 0);
    cm_features_fini(&ft);
    sch_traced_free(tr);
  }
  ts_arena_free(a);
}
END_TEST

START_TEST(transfer_features) {
  ts_arena *a = ts_arena_new();
  /* unscheduled add: one row, 3 buffers of 2048 floats, stride 1, no reuse */
  ir_func *f = tu_workload(a, "add:m=64,n=32");
  cm_features ft;
  extract(f, &ft);
  ck_assert_int_eq(ft.nrows, 1);
  ck_assert_int_eq(fidx("rel_flops"), 164);
  near(F(&ft, 0, "rel_flops"), 1);
  near(F(&ft, 0, "rel_prod"), 1);
  near(F(&ft, 0, "cand_flops"), slog(2048));
  near(F(&ft, 0, "cand_rows"), 1);
  near(F(&ft, 0, "inner_extent"), slog(32));
  near(F(&ft, 0, "vec_bytes"), 0);
  near(F(&ft, 0, "vec_contig"), 0);
  /* lines per buffer: 2048 accesses x 4 bytes / 64-byte lines = 128 */
  near(F(&ft, 0, "flops_per_line"), slog(2048.0 / (3 * 128)));
  near(F(&ft, 0, "flops_per_ubyte"), slog(2048.0 / (3 * 4 * 2048)));
  for (int b = 0; b < 3; b++) {
    char n[64];
    snprintf(n, sizeof n, "B%d.lines_per_iter", b);
    near(F(&ft, 0, n), 128.0 / 2048);
    snprintf(n, sizeof n, "B%d.reuse_factor", b);
    near(F(&ft, 0, n), slog(1));
    snprintf(n, sizeof n, "B%d.lines_share", b);
    near(F(&ft, 0, n), 1.0 / 3);
  }
  cm_features_fini(&ft);
  /* the default schedule vectorises the add: stride-1 lanes */
  cg_target t = target();
  sch_traced *tr = NULL;
  ck_assert_msg(tun_schedule(f, NULL, &t, &tr, &D) == TS_OK, "%s", D.msg);
  extract(sch_traced_func(tr), &ft);
  ck_assert(F(&ft, 0, "vec_bytes") >= slog(4 * 4));
  near(F(&ft, 0, "vec_contig"), 1);
  cm_features_fini(&ft);
  sch_traced_free(tr);
  /* matmul with a cache_write: two rows; the float ops are all C_global's,
   * rel_flops sums to 1, and B reuse shows in reuse_factor */
  f = tu_workload(a, "matmul:m=32,n=16,k=8");
  tr = sch_traced_new(f, 1, &D);
  ck_assert_ptr_nonnull(tr);
  int b, cw = -1;
  ck_assert_int_eq(sch_t_get_block(tr, "C", &b, &D), TS_OK);
  ck_assert_msg(sch_t_cache_write(tr, b, 0, "global", 0, NULL, &cw, &D) == TS_OK, "%s", D.msg);
  extract(sch_traced_func(tr), &ft);
  ck_assert_int_eq(ft.nrows, 2);
  double rel = 0, share = 0, reuse = 0;
  for (int r = 0; r < 2; r++) {
    rel += F(&ft, r, "rel_flops");
    near(F(&ft, r, "cand_rows"), 2);
    near(F(&ft, r, "cand_flops"), F(&ft, 0, "cand_flops"));
    for (int k = 0; k < 3; k++) {
      char n[64];
      snprintf(n, sizeof n, "B%d.lines_share", k);
      share += F(&ft, r, n);
      snprintf(n, sizeof n, "B%d.reuse_factor", k);
      reuse = fmax(reuse, F(&ft, r, n));
    }
  }
  near(rel, 1);
  near(share, 1);
  ck_assert(reuse >= slog(16)); /* A[i,k] read for each of 16 j */
  cm_features_fini(&ft);
  sch_traced_free(tr);
  ts_arena_free(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("costmodel_features");
  TCase *tc = tcase_create("features");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, names_unique);
  tcase_add_test(tc, elementwise_add);
  tcase_add_test(tc, default_schedule_counters);
  tcase_add_test(tc, reduction_rows);
  tcase_add_test(tc, stability_and_sensitivity);
  tcase_add_test(tc, rows_per_stored_buffer);
  tcase_add_test(tc, transfer_features);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
