/* test_trace.c — the trace layer. For every instruction kind: a traced
 * schedule on a small workload, the same primitive called directly on a
 * concrete schedule (struct-equal results), the trace written to JSON, read
 * back and applied to a fresh copy of the function (struct-equal again, and
 * the same JSON). Then: replay with changed decisions (re-derived and
 * repaired deterministically), dead-instruction elimination, malformed JSON
 * (every error names the instruction and the problem), a failing
 * instruction during replay (named; the schedule stays usable), argument
 * checking of the traced API, and the text form. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/print.h"
#include "ir/schedule/blockize.h"
#include "ir/schedule/layout.h"
#include "ir/schedule/tensorize.h"
#include "ir/schedule/trace.h"
#include "ir/struct.h"
#include "util.h"

static ts_diag D;
static ts_arena A;
#define OK(x) tu_ok((x), &D)

static void setup(void) {
  ts_arena_init(&A);
  ts_diag_clear(&D);
}
static void teardown(void) { ts_arena_fini(&A); }

/* ---- one case per instruction kind ------------------------------------------ */
typedef struct kcase {
  sch_inst_kind kind;
  const char *spec;
  void (*traced)(sch_traced *t);
  void (*direct)(sch_state *s, sch_traced *t); /* may read values the traced run drew */
} kcase;

static int tb(sch_traced *t, const char *name) {
  int b;
  OK(sch_t_get_block(t, name, &b, &D));
  return b;
}
static const int *tl(sch_traced *t, int b, int want) {
  const int *l;
  int n;
  OK(sch_t_get_loops(t, b, &l, &n, &D));
  ck_assert_int_eq(n, want);
  return l;
}
static sch_block db(sch_state *s, const char *name) {
  sch_block b;
  OK(sch_get_block(s, name, &b, &D));
  return b;
}
static sch_loop dl(sch_state *s, const char *block, int k) {
  sch_loop l[16];
  int n = tu_loops(s, block, l, 16);
  ck_assert_int_lt(k, n);
  return l[k];
}
static void nothing(sch_state *s, sch_traced *t) {
  (void)s;
  (void)t;
}

static void t_get_block(sch_traced *t) {
  int b = tb(t, "C");
  ck_assert_str_eq(sch_t_block(t, b).name, "C");
}

static void t_get_loops(sch_traced *t) {
  const int *l = tl(t, tb(t, "C"), 3);
  ck_assert_str_eq(sch_t_loop(t, l[0]).var->name, "i");
  ck_assert_str_eq(sch_t_loop(t, l[2]).var->name, "k");
}

static void t_get_child_blocks(sch_traced *t) {
  const int *c;
  int n;
  OK(sch_t_get_child_blocks(t, tb(t, "root"), &c, &n, &D));
  ck_assert_int_eq(n, 3);
  ck_assert_str_eq(sch_t_block(t, c[1]).name, "bb");
  const int *l = tl(t, c[0], 3);
  OK(sch_t_get_child_blocks(t, l[1], &c, &n, &D));
  ck_assert_int_eq(n, 1);
  ck_assert_str_eq(sch_t_block(t, c[0]).name, "mm");
}

static void t_get_producers(sch_traced *t) {
  const int *c;
  int n;
  OK(sch_t_get_producers(t, tb(t, "bb"), &c, &n, &D));
  ck_assert_int_eq(n, 1);
  ck_assert_str_eq(sch_t_block(t, c[0]).name, "mm");
}

static void t_get_consumers(sch_traced *t) {
  const int *c;
  int n;
  OK(sch_t_get_consumers(t, tb(t, "bb"), &c, &n, &D));
  ck_assert_int_eq(n, 1);
  ck_assert_str_eq(sch_t_block(t, c[0]).name, "Y");
}

static void t_split(sch_traced *t) {
  const int *l = tl(t, tb(t, "C"), 3);
  sch_arg f[2] = {sch_arg_none(), sch_arg_int(3)};
  int out[2];
  OK(sch_t_split(t, l[1], 2, f, out, &D));
  tl(t, tb(t, "C"), 4);
}
static void d_split(sch_state *s, sch_traced *t) {
  int64_t f[2] = {-1, 3};
  sch_loop out[2];
  OK(sch_split(s, dl(s, "C", 1), 2, f, out, &D));
}

static void t_fuse(sch_traced *t) {
  const int *l = tl(t, tb(t, "C"), 3);
  int f;
  OK(sch_t_fuse(t, 2, l, &f, &D));
  tl(t, tb(t, "C"), 2);
}
static void d_fuse(sch_state *s, sch_traced *t) {
  sch_loop l[2] = {dl(s, "C", 0), dl(s, "C", 1)}, f;
  OK(sch_fuse(s, 2, l, &f, &D));
}

static void t_reorder(sch_traced *t) {
  const int *l = tl(t, tb(t, "C"), 3);
  int order[2] = {l[2], l[0]};
  OK(sch_t_reorder(t, 2, order, &D));
}
static void d_reorder(sch_state *s, sch_traced *t) {
  sch_loop l[2] = {dl(s, "C", 2), dl(s, "C", 0)};
  OK(sch_reorder(s, 2, l, &D));
}

static void t_parallel(sch_traced *t) { OK(sch_t_parallel(t, tl(t, tb(t, "C"), 3)[0], &D)); }
static void d_parallel(sch_state *s, sch_traced *t) { OK(sch_parallel(s, dl(s, "C", 0), &D)); }

static void t_vectorize(sch_traced *t) { OK(sch_t_vectorize(t, tl(t, tb(t, "C"), 2)[1], &D)); }
static void d_vectorize(sch_state *s, sch_traced *t) { OK(sch_vectorize(s, dl(s, "C", 1), &D)); }

static void t_unroll(sch_traced *t) { OK(sch_t_unroll(t, tl(t, tb(t, "C"), 3)[2], &D)); }
static void d_unroll(sch_state *s, sch_traced *t) { OK(sch_unroll(s, dl(s, "C", 2), &D)); }

static void t_bind(sch_traced *t) {
  const int *l = tl(t, tb(t, "C"), 3);
  OK(sch_t_bind(t, l[0], "blockIdx.x", &D));
  OK(sch_t_bind(t, l[1], "threadIdx.x", &D));
}
static void d_bind(sch_state *s, sch_traced *t) {
  OK(sch_bind(s, dl(s, "C", 0), "blockIdx.x", &D));
  OK(sch_bind(s, dl(s, "C", 1), "threadIdx.x", &D));
}

/* every kind of annotation value: int, float, string, a sampled value */
static int64_t ann_cand[3] = {16, 64, 512};
static void t_annotate(sch_traced *t) {
  int b = tb(t, "C");
  const int *l = tl(t, b, 3);
  OK(sch_t_annotate(t, l[0], "pragma_auto_unroll_max_step", sch_arg_int(16), &D));
  OK(sch_t_annotate(t, l[1], "weight", sch_arg_float(0.25), &D));
  OK(sch_t_annotate(t, b, "schedule_rule", sch_arg_str("mlt \"quoted\""), &D));
  double probs[3] = {0.2, 0.3, 0.5};
  int v;
  OK(sch_t_sample_categorical(t, 3, ann_cand, probs, NULL, &v, &D));
  OK(sch_t_annotate(t, b, "unroll", sch_arg_rv(v), &D));
}
static void d_annotate(sch_state *s, sch_traced *t) {
  ir_annot a1 = {.key = "pragma_auto_unroll_max_step", .kind = IR_ANN_INT, .v.i = 16};
  ir_annot a2 = {.key = "weight", .kind = IR_ANN_FLOAT, .v.f = 0.25};
  ir_annot a3 = {.key = "schedule_rule", .kind = IR_ANN_STR, .v.s = "mlt \"quoted\""};
  const sch_inst *x = sch_trace_inst(sch_traced_trace(t), 5);
  ck_assert_int_eq(x->kind, SCH_I_SAMPLE_CATEGORICAL);
  ir_annot a4 = {.key = "unroll", .kind = IR_ANN_INT, .v.i = ann_cand[x->decision.v[0]]};
  OK(sch_annotate_loop(s, dl(s, "C", 0), a1, &D));
  OK(sch_annotate_loop(s, dl(s, "C", 1), a2, &D));
  OK(sch_annotate_block(s, db(s, "C"), a3, &D));
  OK(sch_annotate_block(s, db(s, "C"), a4, &D));
}

static void t_add_unit_loop(sch_traced *t) {
  int b = tb(t, "C"), u1, u2;
  OK(sch_t_add_unit_loop(t, b, &u1, &D));
  const int *l = tl(t, b, 4);
  OK(sch_t_add_unit_loop(t, l[0], &u2, &D));
  tl(t, b, 5);
}
static void d_add_unit_loop(sch_state *s, sch_traced *t) {
  sch_loop u;
  OK(sch_add_unit_loop_block(s, db(s, "C"), &u, &D));
  OK(sch_add_unit_loop_loop(s, dl(s, "C", 0), &u, &D));
}

static void t_compute_at(sch_traced *t) {
  int mm = tb(t, "mm");
  const int *l = tl(t, tb(t, "bb"), 2);
  OK(sch_t_compute_at(t, mm, l[0], false, -1, &D));
}
static void d_compute_at(sch_state *s, sch_traced *t) {
  OK(sch_compute_at(s, db(s, "mm"), dl(s, "bb", 0), false, -1, &D));
}

static void t_reverse_compute_at(sch_traced *t) {
  int bb = tb(t, "bb");
  const int *l = tl(t, tb(t, "mm"), 3);
  OK(sch_t_reverse_compute_at(t, bb, l[1], true, -1, &D));
}
static void d_reverse_compute_at(sch_state *s, sch_traced *t) {
  OK(sch_reverse_compute_at(s, db(s, "bb"), dl(s, "mm", 1), true, -1, &D));
}

static void t_compute_inline(sch_traced *t) { OK(sch_t_compute_inline(t, tb(t, "bb"), &D)); }
static void d_compute_inline(sch_state *s, sch_traced *t) { OK(sch_compute_inline(s, db(s, "bb"), &D)); }

static void t_reverse_compute_inline(sch_traced *t) { OK(sch_t_reverse_compute_inline(t, tb(t, "Y"), &D)); }
static void d_reverse_compute_inline(sch_state *s, sch_traced *t) {
  OK(sch_reverse_compute_inline(s, db(s, "Y"), &D));
}

static void t_cache_read(sch_traced *t) {
  int c = tb(t, "C"), o1, o2;
  OK(sch_t_cache_read(t, c, 0, "shared", 0, NULL, &o1, &D));
  OK(sch_t_cache_read(t, c, 1, "local", 1, &c, &o2, &D));
}
static void d_cache_read(sch_state *s, sch_traced *t) {
  sch_block o, c = db(s, "C");
  OK(sch_cache_read(s, c, 0, "shared", 0, NULL, &o, &D));
  c = db(s, "C");
  OK(sch_cache_read(s, c, 1, "local", 1, &c, &o, &D));
}

static void t_cache_write(sch_traced *t) {
  int o;
  OK(sch_t_cache_write(t, tb(t, "C"), 0, "local", 0, NULL, &o, &D));
}
static void d_cache_write(sch_state *s, sch_traced *t) {
  sch_block o;
  OK(sch_cache_write(s, db(s, "C"), 0, "local", 0, NULL, &o, &D));
}

static void t_set_scope(sch_traced *t) { OK(sch_t_set_scope(t, tb(t, "mm"), 0, "shared", &D)); }
static void d_set_scope(sch_state *s, sch_traced *t) { OK(sch_set_scope(s, db(s, "mm"), 0, "shared", &D)); }

static void t_storage_align(sch_traced *t) { OK(sch_t_storage_align(t, tb(t, "mm"), 0, 0, 8, 1, &D)); }
static void d_storage_align(sch_state *s, sch_traced *t) {
  OK(sch_storage_align(s, db(s, "mm"), 0, 0, 8, 1, &D));
}

static void t_decompose_reduction(sch_traced *t) {
  int c = tb(t, "C"), init;
  OK(sch_t_decompose_reduction(t, c, tl(t, c, 3)[0], &init, &D));
  ck_assert_ptr_nonnull(sch_t_block(t, init).name);
}
static void d_decompose_reduction(sch_state *s, sch_traced *t) {
  sch_block init;
  OK(sch_decompose_reduction(s, db(s, "C"), dl(s, "C", 0), &init, &D));
}

static void t_rfactor(sch_traced *t) {
  int c = tb(t, "C"), rf;
  OK(sch_t_rfactor(t, tl(t, c, 3)[2], 0, &rf, &D));
  ck_assert_str_eq(sch_t_block(t, rf).name, "C_rf");
}
static void d_rfactor(sch_state *s, sch_traced *t) {
  (void)t;
  sch_block rf;
  OK(sch_rfactor(s, dl(s, "C", 2), 0, &rf, &D));
}

static void t_blockize(sch_traced *t) {
  int c = tb(t, "C"), ob;
  OK(sch_t_blockize(t, tl(t, c, 3)[1], &ob, &D));
  ck_assert_str_eq(sch_t_block(t, ob).name, "C_o");
}
static void d_blockize(sch_state *s, sch_traced *t) {
  (void)t;
  sch_block ob;
  OK(sch_blockize(s, dl(s, "C", 1), &ob, &D));
}

/* i -> (i0, i1 = 1), k -> (k0, k1 = 4); i0 k0 | i1 j k1 is the 1x16x4 tile */
static void t_tensorize(sch_traced *t) {
  int c = tb(t, "C"), l[3], o[2], q[2];
  memcpy(l, tl(t, c, 3), sizeof l);
  sch_arg f[2] = {sch_arg_none(), sch_arg_int(1)}, g[2] = {sch_arg_none(), sch_arg_int(4)};
  OK(sch_t_split(t, l[0], 2, f, o, &D));
  OK(sch_t_split(t, l[2], 2, g, q, &D));
  int order[5] = {o[0], q[0], o[1], l[1], q[1]};
  OK(sch_t_reorder(t, 5, order, &D));
  OK(sch_t_tensorize(t, o[1], "x86.avx512.vnni.i8i8.1x16x4", &D));
}
static void d_tensorize(sch_state *s, sch_traced *t) {
  (void)t;
  int64_t f[2] = {-1, 1}, g[2] = {-1, 4};
  sch_loop l[3], o[2], q[2];
  l[0] = dl(s, "C", 0);
  l[1] = dl(s, "C", 1);
  l[2] = dl(s, "C", 2);
  OK(sch_split(s, l[0], 2, f, o, &D));
  OK(sch_split(s, l[2], 2, g, q, &D));
  sch_loop order[5] = {o[0], q[0], o[1], l[1], q[1]};
  OK(sch_reorder(s, 5, order, &D));
  OK(sch_tensorize_loop(s, o[1], "x86.avx512.vnni.i8i8.1x16x4", NULL, &D));
}

static void t_sample_perfect_tile(sch_traced *t) {
  const int *l = tl(t, tb(t, "C"), 3);
  int v[3], out[3];
  OK(sch_t_sample_perfect_tile(t, l[1], 3, 4, NULL, v, &D));
  sch_arg f[3] = {sch_arg_rv(v[0]), sch_arg_rv(v[1]), sch_arg_rv(v[2])};
  OK(sch_t_split(t, l[1], 3, f, out, &D));
}
static void d_sample_perfect_tile(sch_state *s, sch_traced *t) {
  const sch_inst *x = sch_trace_inst(sch_traced_trace(t), 2);
  ck_assert_int_eq(x->kind, SCH_I_SAMPLE_PERFECT_TILE);
  sch_loop out[3];
  OK(sch_split(s, dl(s, "C", 1), 3, x->decision.v, out, &D));
}

static int64_t cat_cand[3] = {2, 3, 5};
static void t_sample_categorical(sch_traced *t) {
  const int *l = tl(t, tb(t, "C"), 3);
  double probs[3] = {1, 1, 2};
  int v, out[2];
  OK(sch_t_sample_categorical(t, 3, cat_cand, probs, NULL, &v, &D));
  sch_arg f[2] = {sch_arg_none(), sch_arg_rv(v)};
  OK(sch_t_split(t, l[0], 2, f, out, &D));
}
static void d_sample_categorical(sch_state *s, sch_traced *t) {
  const sch_inst *x = sch_trace_inst(sch_traced_trace(t), 2);
  ck_assert_int_eq(x->kind, SCH_I_SAMPLE_CATEGORICAL);
  int64_t f[2] = {-1, cat_cand[x->decision.v[0]]};
  sch_loop out[2];
  OK(sch_split(s, dl(s, "C", 0), 2, f, out, &D));
}

static void t_sample_compute_location(sch_traced *t) {
  int mm = tb(t, "mm"), loc, dec = 1;
  OK(sch_t_sample_compute_location(t, mm, &dec, &loc, &D));
  ck_assert_int_eq(sch_t_loop(t, loc).mark, SCH_LOC_LOOP);
  OK(sch_t_compute_at(t, mm, loc, true, -1, &D));
}
static void d_sample_compute_location(sch_state *s, sch_traced *t) {
  OK(sch_compute_at(s, db(s, "mm"), dl(s, "bb", 1), true, -1, &D));
}

static void t_enter_postproc(sch_traced *t) {
  const int *l = tl(t, tb(t, "C"), 3);
  OK(sch_t_parallel(t, l[0], &D));
  OK(sch_t_enter_postproc(t, &D));
  OK(sch_t_unroll(t, l[2], &D));
}
static void d_enter_postproc(sch_state *s, sch_traced *t) {
  OK(sch_parallel(s, dl(s, "C", 0), &D));
  OK(sch_unroll(s, dl(s, "C", 2), &D));
}

/* B[k, j] under i j0 j1 k: re-laid [j, k] (docs/LAYOUT.md) */
static void t_shift_to_unsigned(sch_traced *t) {
  int out[2];
  OK(sch_t_shift_to_unsigned(t, tb(t, "C"), out, &D));
  ck_assert_str_eq(sch_t_block(t, out[0]).name, "A_u8");
  ck_assert_str_eq(sch_t_block(t, out[1]).name, "B_sum");
}
static void d_shift_to_unsigned(sch_state *s, sch_traced *t) {
  (void)t;
  sch_block out[2];
  OK(sch_shift_to_unsigned(s, (sch_block){"C"}, out, &D));
}

static const int64_t pad_mult[3] = {4, 16, 4};
static void t_pad_einsum(sch_traced *t) {
  int out;
  OK(sch_t_pad_einsum(t, tb(t, "C"), 3, pad_mult, &out, &D));
  ck_assert_str_eq(sch_t_block(t, out).name, "C_unpad");
}
static void d_pad_einsum(sch_state *s, sch_traced *t) {
  (void)t;
  OK(sch_pad_einsum(s, (sch_block){"C"}, 3, pad_mult, NULL, &D));
}

static void t_set_dtype(sch_traced *t) {
  int out;
  OK(sch_t_cache_read(t, tb(t, "C"), 0 /* A */, "global", 0, NULL, &out, &D));
  OK(sch_t_set_dtype(t, out, 0, ir_dt(IR_I16), &D));
}
static void d_set_dtype(sch_state *s, sch_traced *t) {
  sch_block out;
  OK(sch_cache_read(s, (sch_block){"C"}, 0 /* A */, "global", 0, NULL, &out, &D));
  OK(sch_set_dtype(s, out, 0, ir_dt(IR_I16), &D));
}

static void t_transform_layout(sch_traced *t) {
  const int *l = tl(t, tb(t, "C"), 3);
  int out[2];
  OK(sch_t_split(t, l[1], 2, (sch_arg[]){sch_arg_int(2), sch_arg_int(5)}, out, &D));
  sch_layout_map m;
  OK(sch_layout_suggest(sch_traced_func(t), 1, &m, &D));
  OK(sch_t_transform_layout(t, &m, &D));
}
static void d_transform_layout(sch_state *s, sch_traced *t) {
  (void)t;
  sch_loop out[2];
  OK(sch_split(s, dl(s, "C", 1), 2, (int64_t[]){2, 5}, out, &D));
  sch_layout_map m;
  OK(sch_layout_suggest(sch_func(s), 1, &m, &D));
  OK(sch_transform_layout(s, &m, &D));
}

#define MM "matmul:m=6,n=10,k=7"
#define DENSE "dense:m=3,n=5,k=7"
static const kcase cases[] = {
    {SCH_I_GET_BLOCK, MM, t_get_block, nothing},
    {SCH_I_GET_LOOPS, MM, t_get_loops, nothing},
    {SCH_I_GET_CHILD_BLOCKS, DENSE, t_get_child_blocks, nothing},
    {SCH_I_GET_PRODUCERS, DENSE, t_get_producers, nothing},
    {SCH_I_GET_CONSUMERS, DENSE, t_get_consumers, nothing},
    {SCH_I_SPLIT, MM, t_split, d_split},
    {SCH_I_FUSE, MM, t_fuse, d_fuse},
    {SCH_I_REORDER, MM, t_reorder, d_reorder},
    {SCH_I_PARALLEL, MM, t_parallel, d_parallel},
    {SCH_I_VECTORIZE, "add:m=5,n=7", t_vectorize, d_vectorize},
    {SCH_I_UNROLL, MM, t_unroll, d_unroll},
    {SCH_I_BIND, MM, t_bind, d_bind},
    {SCH_I_ANNOTATE, MM, t_annotate, d_annotate},
    {SCH_I_ADD_UNIT_LOOP, MM, t_add_unit_loop, d_add_unit_loop},
    {SCH_I_COMPUTE_AT, DENSE, t_compute_at, d_compute_at},
    {SCH_I_REVERSE_COMPUTE_AT, DENSE, t_reverse_compute_at, d_reverse_compute_at},
    {SCH_I_COMPUTE_INLINE, DENSE, t_compute_inline, d_compute_inline},
    {SCH_I_REVERSE_COMPUTE_INLINE, DENSE, t_reverse_compute_inline, d_reverse_compute_inline},
    {SCH_I_CACHE_READ, MM, t_cache_read, d_cache_read},
    {SCH_I_CACHE_WRITE, MM, t_cache_write, d_cache_write},
    {SCH_I_SET_SCOPE, DENSE, t_set_scope, d_set_scope},
    {SCH_I_STORAGE_ALIGN, DENSE, t_storage_align, d_storage_align},
    {SCH_I_DECOMPOSE_REDUCTION, MM, t_decompose_reduction, d_decompose_reduction},
    {SCH_I_RFACTOR, MM, t_rfactor, d_rfactor},
    {SCH_I_BLOCKIZE, MM, t_blockize, d_blockize},
    {SCH_I_TENSORIZE, "matmul_int8:m=2,n=16,k=8", t_tensorize, d_tensorize},
    {SCH_I_SAMPLE_PERFECT_TILE, MM, t_sample_perfect_tile, d_sample_perfect_tile},
    {SCH_I_SAMPLE_CATEGORICAL, MM, t_sample_categorical, d_sample_categorical},
    {SCH_I_SAMPLE_COMPUTE_LOCATION, DENSE, t_sample_compute_location, d_sample_compute_location},
    {SCH_I_ENTER_POSTPROC, MM, t_enter_postproc, d_enter_postproc},
    {SCH_I_TRANSFORM_LAYOUT, MM, t_transform_layout, d_transform_layout},
    {SCH_I_SHIFT_TO_UNSIGNED, "matmul_int8:m=3,n=7,k=5", t_shift_to_unsigned, d_shift_to_unsigned},
    {SCH_I_PAD_EINSUM, "matmul_u8s8:m=3,n=7,k=5", t_pad_einsum, d_pad_einsum},
    {SCH_I_SET_DTYPE, "matmul_u8s8:m=3,n=7,k=5", t_set_dtype, d_set_dtype},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

START_TEST(test_every_kind_covered) {
  for (int k = 0; k < SCH_INST_KIND_COUNT; k++) {
    bool found = false;
    for (int i = 0; i < NCASES; i++) found |= cases[i].kind == (sch_inst_kind)k;
    ck_assert_msg(found, "no round-trip case for %s", sch_inst_kind_get(k)->name);
    sch_inst_kind back;
    ck_assert(sch_inst_kind_lookup(sch_inst_kind_get(k)->name, &back));
    ck_assert_int_eq(back, k);
  }
}
END_TEST

START_TEST(test_kind_roundtrip) {
  const kcase *c = &cases[_i];
  ir_func *orig = tu_workload(&A, c->spec);
  sch_traced *t = sch_traced_new(orig, 1, &D);
  ck_assert_ptr_nonnull(t);
  sch_set_debug_verify(sch_traced_state(t), true);
  c->traced(t);
  const sch_trace *tr = sch_traced_trace(t);
  bool has = false;
  for (int i = 0; i < sch_trace_len(tr); i++) has |= sch_trace_inst(tr, i)->kind == c->kind;
  ck_assert_msg(has, "the trace of case %s lacks its kind", sch_inst_kind_get(c->kind)->name);
  /* the direct result */
  sch_state *s = sch_create(orig, 1, &D);
  ck_assert_ptr_nonnull(s);
  sch_set_debug_verify(s, true);
  c->direct(s, t);
  char why[1024];
  ck_assert_msg(ir_struct_equal_func_explain(sch_traced_func(t), sch_func(s), why, sizeof why),
                "%s: traced and direct results differ: %s", sch_inst_kind_get(c->kind)->name, why);
  tu_assert_roundtrip(t, orig, 12345);
  sch_free(s);
  sch_traced_free(t);
}
END_TEST

/* ---- decisions ----------------------------------------------------------------- */
/* Two levels of tiling, the second drawn on the first's inner loop: changing
 * the first decision re-derives the second (repaired) deterministically. */
static sch_traced *two_level(const ir_func *f) {
  sch_traced *t = sch_traced_new(f, 1, &D);
  int c = tb(t, "C"), v[2], p[2], w[2], q[2];
  const int *l = tl(t, c, 3);
  int64_t d1[2] = {3, 4}, d2[2] = {2, 2};
  OK(sch_t_sample_perfect_tile(t, l[0], 2, -1, d1, v, &D));
  sch_arg f1[2] = {sch_arg_rv(v[0]), sch_arg_rv(v[1])};
  OK(sch_t_split(t, l[0], 2, f1, p, &D));
  OK(sch_t_sample_perfect_tile(t, p[1], 2, -1, d2, w, &D));
  sch_arg f2[2] = {sch_arg_rv(w[0]), sch_arg_rv(w[1])};
  OK(sch_t_split(t, p[1], 2, f2, q, &D));
  int order[2] = {q[1], l[1]};
  OK(sch_t_reorder(t, 2, order, &D));
  return t;
}

static void replay_with(const ir_func *f, const sch_trace *tr, int64_t a, int64_t b, int64_t want_a,
                        int64_t want_b) {
  sch_trace *c = sch_trace_copy(tr);
  int64_t v[2] = {a, b};
  sch_decision dec = {2, v};
  OK(sch_trace_set_decision(c, 2, &dec, &D));
  sch_traced *r = sch_trace_replay(c, f, 1, &D);
  ck_assert_msg(r != NULL, "%s", D.msg);
  const sch_inst *x = sch_trace_inst(sch_traced_trace(r), 4);
  ck_assert_int_eq(x->kind, SCH_I_SAMPLE_PERFECT_TILE);
  ck_assert_int_eq(x->decision.v[0], want_a);
  ck_assert_int_eq(x->decision.v[1], want_b);
  tu_assert_equivalent(f, sch_traced_func(r));
  /* deterministic: a second replay gives the same trace and function */
  sch_traced *r2 = sch_trace_replay(c, f, 77, &D);
  ck_assert_ptr_nonnull(r2);
  char *j1 = sch_trace_to_json(sch_traced_trace(r)), *j2 = sch_trace_to_json(sch_traced_trace(r2));
  ck_assert_str_eq(j1, j2);
  ck_assert(ir_struct_equal_func(sch_traced_func(r), sch_traced_func(r2)));
  ts_free(j1);
  ts_free(j2);
  sch_traced_free(r);
  sch_traced_free(r2);
  sch_trace_free(c);
}

START_TEST(test_changed_decision) {
  ir_func *f = tu_workload(&A, "matmul:m=12,n=5,k=3");
  sch_traced *t = two_level(f);
  tu_assert_equivalent(f, sch_traced_func(t));
  const sch_trace *tr = sch_traced_trace(t);
  replay_with(f, tr, 3, 4, 2, 2);   /* unchanged */
  replay_with(f, tr, 2, 6, 3, 2);   /* inner extent 6: [2, 2] -> [3, 2] */
  replay_with(f, tr, 4, 3, 1, 3);   /* inner extent 3: 2 does not divide it -> [1, 3] */
  replay_with(f, tr, 12, 1, 1, 1);  /* inner extent 1 */
  replay_with(f, tr, 1, 12, 6, 2);
  sch_traced_free(t);
}
END_TEST

/* A compute location that no longer exists falls back to the nearest smaller
 * candidate (or the root). */
START_TEST(test_changed_location_decision) {
  ir_func *f = tu_workload(&A, "dense:m=3,n=5,k=7");
  sch_traced *t = sch_traced_new(f, 1, &D);
  int mm = tb(t, "mm"), loc, dec = 0;
  OK(sch_t_sample_compute_location(t, mm, &dec, &loc, &D));
  OK(sch_t_compute_at(t, mm, loc, false, -1, &D));
  static const struct {
    int64_t dec, want;
  } locs[] = {{0, 0}, {1, 1}, {-1, -1}, {9, 1}, {-2, -1}};
  for (size_t i = 0; i < sizeof locs / sizeof *locs; i++) {
    sch_trace *c = sch_trace_copy(sch_traced_trace(t));
    int64_t v = locs[i].dec;
    sch_decision d1 = {1, &v};
    OK(sch_trace_set_decision(c, 1, &d1, &D));
    sch_traced *r = sch_trace_replay(c, f, 1, &D);
    ck_assert_msg(r != NULL, "decision %lld: %s", (long long)v, D.msg);
    ck_assert_int_eq(sch_trace_inst(sch_traced_trace(r), 1)->decision.v[0], locs[i].want);
    tu_assert_equivalent(f, sch_traced_func(r));
    sch_traced_free(r);
    sch_trace_free(c);
  }
  sch_traced_free(t);
}
END_TEST

/* Resampling replays the structure with fresh draws. */
START_TEST(test_resample) {
  ir_func *f = tu_workload(&A, "matmul:m=12,n=5,k=3");
  sch_traced *t = two_level(f);
  bool differs = false;
  for (uint64_t seed = 1; seed < 20; seed++) {
    sch_traced *r = sch_traced_new(f, seed, &D);
    OK(sch_trace_apply(sch_traced_trace(t), r, true, NULL, &D));
    tu_assert_equivalent(f, sch_traced_func(r));
    const sch_inst *x = sch_trace_inst(sch_traced_trace(r), 2);
    if (x->decision.v[0] != 3) differs = true;
    sch_traced_free(r);
  }
  ck_assert(differs);
  sch_traced_free(t);
}
END_TEST

/* ---- dead-instruction elimination -------------------------------------------------- */
START_TEST(test_simplified) {
  ir_func *f = tu_workload(&A, MM);
  sch_traced *t = sch_traced_new(f, 1, &D);
  int c = tb(t, "C");
  tb(t, "C");                     /* 1: unused GetBlock */
  const int *l = tl(t, c, 3);     /* 2 */
  int v[2], p[2], unused[2];
  OK(sch_t_sample_perfect_tile(t, l[2], 2, -1, NULL, unused, &D)); /* 3: unused sample */
  OK(sch_t_sample_perfect_tile(t, l[0], 2, -1, NULL, v, &D));      /* 4 */
  sch_arg fa[2] = {sch_arg_rv(v[0]), sch_arg_rv(v[1])};
  OK(sch_t_split(t, l[0], 2, fa, p, &D));                          /* 5 */
  const int *l2;
  int n;
  OK(sch_t_get_loops(t, c, &l2, &n, &D)); /* 6: unused */
  OK(sch_t_enter_postproc(t, &D));        /* 7 */
  OK(sch_t_parallel(t, p[0], &D));        /* 8 */
  const sch_trace *tr = sch_traced_trace(t);
  ck_assert_int_eq(sch_trace_len(tr), 9);

  sch_trace *s1 = sch_trace_simplified(tr, false);
  ck_assert_int_eq(sch_trace_len(s1), 6);
  static const sch_inst_kind want1[] = {SCH_I_GET_BLOCK, SCH_I_GET_LOOPS, SCH_I_SAMPLE_PERFECT_TILE, SCH_I_SPLIT,
                                        SCH_I_ENTER_POSTPROC, SCH_I_PARALLEL};
  for (int i = 0; i < 6; i++) ck_assert_int_eq(sch_trace_inst(s1, i)->kind, want1[i]);
  sch_traced *r = sch_trace_replay(s1, f, 3, &D);
  ck_assert_msg(r != NULL, "%s", D.msg);
  ck_assert(ir_struct_equal_func(sch_traced_func(t), sch_traced_func(r)));
  /* names are renumbered densely in JSON */
  char *json = sch_trace_to_json(s1);
  ck_assert_ptr_nonnull(strstr(json, "[\"GetLoops\",[\"b0\"],[],[\"l1\",\"l2\",\"l3\"]]"));
  ck_assert_ptr_nonnull(strstr(json, "[\"SamplePerfectTile\",[\"l1\"],[2,-1],[\"v4\",\"v5\"]]"));
  ts_free(json);
  sch_traced_free(r);

  sch_trace *s2 = sch_trace_simplified(tr, true);
  ck_assert_int_eq(sch_trace_len(s2), 4);
  ck_assert_int_eq(sch_trace_inst(s2, 3)->kind, SCH_I_SPLIT);
  r = sch_trace_replay(s2, f, 3, &D);
  ck_assert_msg(r != NULL, "%s", D.msg);
  tu_assert_equivalent(f, sch_traced_func(r));
  sch_traced_free(r);
  sch_trace_free(s1);
  sch_trace_free(s2);
  sch_traced_free(t);
}
END_TEST

/* ---- JSON errors ---------------------------------------------------------------------- */
static const struct {
  const char *json;
  const char *want[3];
} bad_json[] = {
    {"", {"trace JSON", "line 1"}},
    {"garbage", {"trace JSON", "line 1"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\"]]", {"trace JSON", "line"}},
    {"{}", {"expected [[instructions...], [decisions...]]", "object"}},
    {"[]", {"expected [[instructions...], [decisions...]]"}},
    {"[[], [], []]", {"expected [[instructions...], [decisions...]]"}},
    {"[[1], []]", {"instruction 0:", "expected [kind, inputs, attrs, outputs]", "integer"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"]]], []]", {"instruction 0:", "wrong length"}},
    {"[[[7,[],[],[]]], []]", {"instruction 0:", "kind is an integer"}},
    {"[[[\"Splt\",[],[],[]]], []]", {"instruction 0:", "unknown instruction kind 'Splt'"}},
    {"[[[\"GetBlock\",{},[\"C\",\"m\"],[\"b0\"]]], []]", {"instruction 0 (GetBlock)", "inputs are an object"}},
    {"[[[\"GetBlock\",[],\"C\",[\"b0\"]]], []]", {"instruction 0 (GetBlock)", "attrs are a string"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],\"b0\"]], []]", {"instruction 0 (GetBlock)", "outputs are a string"}},
    {"[[[\"GetBlock\",[],[\"C\"],[\"b0\"]]], []]", {"instruction 0 (GetBlock)", "takes 2 attrs, got 1"}},
    {"[[[\"GetBlock\",[],[3,\"m\"],[\"b0\"]]], []]", {"instruction 0 (GetBlock)", "attr 0", "a string"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\",\"b1\"]]], []]", {"instruction 0 (GetBlock)", "names 2 outputs"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[3]]], []]", {"instruction 0 (GetBlock)", "output 0 is an integer"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"None\"]]], []]", {"instruction 0 (GetBlock)", "cannot name"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\"]],[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\"]]], []]",
     {"instruction 1 (GetBlock)", "'b0' is defined twice"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\"]],[\"GetLoops\",[\"b9\"],[],[\"l1\"]]], []]",
     {"instruction 1 (GetLoops)", "'b9' is not defined"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\"]],[\"GetLoops\",[\"b0\",\"b0\"],[],[\"l1\"]]], []]",
     {"instruction 1 (GetLoops)", "takes 1 input, got 2"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\"]],[\"GetLoops\",[{}],[],[\"l1\"]]], []]",
     {"instruction 1 (GetLoops)", "input 0 is an object"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\"]],[\"Parallel\",[\"b0\"],[],[]]], []]",
     {"instruction 1 (Parallel)", "input 0 is a block, expected a loop"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\"]],[\"GetLoops\",[\"b0\"],[],[\"l1\"]],"
     "[\"Split\",[\"l1\"],[],[]]], []]",
     {"instruction 2 (Split)", "at least 2 inputs"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\"]],[\"GetLoops\",[\"b0\"],[],[\"l1\"]],"
     "[\"Split\",[\"l1\",\"None\",4],[],[\"l2\"]]], []]",
     {"instruction 2 (Split)", "names 1 output", "gives 2"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\"]],[\"GetLoops\",[\"b0\"],[],[\"l1\"]],"
     "[\"Split\",[\"l1\",\"b0\",4],[],[\"l2\",\"l3\"]]], []]",
     {"instruction 2 (Split)", "input 1 is a block", "split factor"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\"]],[\"GetLoops\",[\"b0\"],[],[\"l1\"]],"
     "[\"ComputeAt\",[\"b0\",\"l1\"],[1,-1],[]]], []]",
     {"instruction 2 (ComputeAt)", "attr 0", "a bool"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\"]],[\"GetLoops\",[\"b0\"],[],[\"l1\"]],"
     "[\"SamplePerfectTile\",[\"l1\"],[0,-1],[]]], []]",
     {"instruction 2 (SamplePerfectTile)", "n = 0"}},
    {"[[[\"SampleCategorical\",[],[[1,2],[0.5,\"x\"]],[\"v0\"]]], []]",
     {"instruction 0 (SampleCategorical)", "attr 1: element 1 is a string"}},
    {"[[[\"SampleCategorical\",[],[[1,2],[0.5,0.5]],[\"v0\"]]], [[0]]]",
     {"decision 0", "expected [instruction index, decision]"}},
    {"[[[\"SampleCategorical\",[],[[1,2],[0.5,0.5]],[\"v0\"]]], [[3,0]]]",
     {"decision 0", "instruction 3 does not exist"}},
    {"[[[\"SampleCategorical\",[],[[1,2],[0.5,0.5]],[\"v0\"]]], [[0,[1]]]]",
     {"instruction 0 (SampleCategorical)", "expected an integer index"}},
    {"[[[\"SampleCategorical\",[],[[1,2],[0.5,0.5]],[\"v0\"]]], [[0,1],[0,0]]]",
     {"instruction 0 (SampleCategorical)", "two decisions"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\"]]], [[0,1]]]", {"instruction 0 (GetBlock)", "takes no decision"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\"]],[\"GetLoops\",[\"b0\"],[],[\"l1\"]],"
     "[\"SamplePerfectTile\",[\"l1\"],[2,-1],[\"v2\",\"v3\"]]], [[2,[1,2,3]]]]",
     {"instruction 2 (SamplePerfectTile)", "the decision has 3 tiles", "draws 2"}},
    {"[[[\"GetBlock\",[],[\"C\",\"m\"],[\"b0\"]],[\"GetLoops\",[\"b0\"],[],[\"l1\"]],"
     "[\"SamplePerfectTile\",[\"l1\"],[2,-1],[\"v2\",\"v3\"]]], [[2,[1,\"x\"]]]]",
     {"instruction 2 (SamplePerfectTile)", "decision element 1 is a string"}},
};

START_TEST(test_malformed_json) {
  for (size_t i = 0; i < sizeof bad_json / sizeof *bad_json; i++) {
    ts_diag_clear(&D);
    sch_trace *tr = sch_trace_from_json(bad_json[i].json, &D);
    ck_assert_msg(tr == NULL, "case %zu parsed: %s", i, bad_json[i].json);
    ck_assert_int_eq(D.code, TS_EPARSE);
    for (int k = 0; k < 3 && bad_json[i].want[k]; k++)
      ck_assert_msg(strstr(D.msg, bad_json[i].want[k]) != NULL, "case %zu: '%s' lacks '%s'", i, D.msg,
                    bad_json[i].want[k]);
  }
  ts_diag_clear(&D);
  ck_assert_ptr_null(sch_trace_from_json(NULL, &D));
}
END_TEST

/* JSON literals: quoted strings, None, floats, ints all survive. */
START_TEST(test_json_literals) {
  static const char *text =
      "[[[\"GetBlock\",[],[\"C\",\"matmul\"],[\"b0\"]],[\"GetLoops\",[\"b0\"],[],[\"l1\",\"l2\",\"l3\"]],"
      "[\"Annotate\",[\"b0\",\"\\\"hello\\\"\"],[\"k1\"],[]],[\"Annotate\",[\"l2\",2.5],[\"k2\"],[]],"
      "[\"Split\",[\"l1\",\"None\",4],[],[\"l4\",\"l5\"]]],[]]";
  ir_func *f = tu_workload(&A, MM);
  sch_trace *tr = sch_trace_from_json(text, &D);
  ck_assert_msg(tr != NULL, "%s", D.msg);
  ck_assert_int_eq(sch_trace_inst(tr, 2)->in[1].kind, SCH_ARG_STR);
  ck_assert_str_eq(sch_trace_inst(tr, 2)->in[1].s, "hello");
  ck_assert_int_eq(sch_trace_inst(tr, 3)->in[1].kind, SCH_ARG_FLOAT);
  ck_assert_int_eq(sch_trace_inst(tr, 4)->in[1].kind, SCH_ARG_NONE);
  ck_assert_int_eq(sch_trace_inst(tr, 4)->in[2].kind, SCH_ARG_INT);
  char *back = sch_trace_to_json(tr);
  ck_assert_str_eq(back, text);
  sch_traced *r = sch_trace_replay(tr, f, 1, &D);
  ck_assert_msg(r != NULL, "%s", D.msg);
  tu_assert_equivalent(f, sch_traced_func(r));
  ts_free(back);
  sch_traced_free(r);
  sch_trace_free(tr);
}
END_TEST

/* ---- failures during replay -------------------------------------------------------------- */
START_TEST(test_replay_failure) {
  /* l1 is split away by instruction 2, so instruction 3 cannot use it */
  static const char *text =
      "[[[\"GetBlock\",[],[\"C\",\"matmul\"],[\"b0\"]],[\"GetLoops\",[\"b0\"],[],[\"l1\",\"l2\",\"l3\"]],"
      "[\"Split\",[\"l1\",\"None\",2],[],[\"l4\",\"l5\"]],[\"Parallel\",[\"l1\"],[],[]],"
      "[\"Unroll\",[\"l5\"],[],[]]],[]]";
  ir_func *f = tu_workload(&A, MM);
  sch_trace *tr = sch_trace_from_json(text, &D);
  ck_assert_msg(tr != NULL, "%s", D.msg);
  sch_traced *t = sch_traced_new(f, 1, &D);
  sch_set_debug_verify(sch_traced_state(t), true);
  int at = 0;
  ts_diag_clear(&D);
  ts_status st = sch_trace_apply(tr, t, false, &at, &D);
  ck_assert_int_ne(st, TS_OK);
  ck_assert_int_eq(at, 3);
  ck_assert_msg(strstr(D.msg, "instruction 3 (Parallel)") && strstr(D.msg, "no longer exists"), "%s", D.msg);
  /* the schedule is usable: three instructions applied, more can follow */
  ck_assert_int_eq(sch_trace_len(sch_traced_trace(t)), 3);
  tu_assert_equivalent(f, sch_traced_func(t));
  const int *l = tl(t, tb(t, "C"), 4);
  OK(sch_t_unroll(t, l[1], &D));
  tu_assert_roundtrip(t, f, 12345);
  sch_traced_free(t);
  /* a refusal in the middle: compute_inline of an output block */
  static const char *text2 =
      "[[[\"GetBlock\",[],[\"C\",\"matmul\"],[\"b0\"]],[\"ComputeInline\",[\"b0\"],[],[]]],[]]";
  sch_trace *tr2 = sch_trace_from_json(text2, &D);
  ck_assert_ptr_nonnull(tr2);
  ts_diag_clear(&D);
  ck_assert_ptr_null(sch_trace_replay(tr2, f, 1, &D));
  ck_assert_int_eq(D.code, TS_ESCHEDULE);
  ck_assert_msg(strstr(D.msg, "instruction 1 (ComputeInline)") && strstr(D.msg, "compute_inline"), "%s", D.msg);
  /* a block the function does not have */
  static const char *text3 = "[[[\"GetBlock\",[],[\"nope\",\"matmul\"],[\"b0\"]]],[]]";
  sch_trace *tr3 = sch_trace_from_json(text3, &D);
  ts_diag_clear(&D);
  ck_assert_ptr_null(sch_trace_replay(tr3, f, 1, &D));
  ck_assert_msg(strstr(D.msg, "instruction 0 (GetBlock)") && strstr(D.msg, "nope"), "%s", D.msg);
  /* GetLoops giving a different count than the trace names */
  static const char *text4 = "[[[\"GetBlock\",[],[\"C\",\"matmul\"],[\"b0\"]],"
                             "[\"GetLoops\",[\"b0\"],[],[\"l1\",\"l2\"]]],[]]";
  sch_trace *tr4 = sch_trace_from_json(text4, &D);
  ts_diag_clear(&D);
  ck_assert_ptr_null(sch_trace_replay(tr4, f, 1, &D));
  ck_assert_msg(strstr(D.msg, "instruction 1 (GetLoops)") && strstr(D.msg, "3 outputs"), "%s", D.msg);
  /* a loop RV that is a compute-location mark used as a loop */
  static const char *text5 = "[[[\"GetBlock\",[],[\"mm\",\"dense\"],[\"b0\"]],"
                             "[\"SampleComputeLocation\",[\"b0\"],[],[\"l1\"]],[\"Parallel\",[\"l1\"],[],[]]],"
                             "[[1,-1]]]";
  ir_func *dense = tu_workload(&A, DENSE);
  sch_trace *tr5 = sch_trace_from_json(text5, &D);
  ck_assert_ptr_nonnull(tr5);
  ts_diag_clear(&D);
  ck_assert_ptr_null(sch_trace_replay(tr5, dense, 1, &D));
  ck_assert_msg(strstr(D.msg, "instruction 2 (Parallel)") && strstr(D.msg, "root mark"), "%s", D.msg);
  sch_trace_free(tr);
  sch_trace_free(tr2);
  sch_trace_free(tr3);
  sch_trace_free(tr4);
  sch_trace_free(tr5);
}
END_TEST

/* ---- the traced API ------------------------------------------------------------------------ */
START_TEST(test_traced_api_checks) {
  ir_func *f = tu_workload(&A, MM);
  sch_traced *t = sch_traced_new(f, 1, &D);
  int c = tb(t, "C");
  const int *l = tl(t, c, 3);
  int n0 = sch_trace_len(sch_traced_trace(t));
  /* wrong RV kinds and undefined RVs: TS_EINVAL, nothing recorded */
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_t_parallel(t, c, &D), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(D.msg, "expected a loop"));
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_t_compute_inline(t, l[0], &D), TS_EINVAL);
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_t_unroll(t, 999, &D), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(D.msg, "not defined"));
  ts_diag_clear(&D);
  int out[2];
  sch_arg bad[2] = {sch_arg_str("x"), sch_arg_int(2)};
  ck_assert_int_eq(sch_t_split(t, l[0], 2, bad, out, &D), TS_EINVAL);
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_traced_call(t, SCH_I_GET_BLOCK, 0, NULL, 0, NULL, NULL, NULL, NULL, &D), TS_EINVAL);
  /* a refused primitive records nothing and changes nothing */
  ir_func before = *sch_traced_func(t);
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_t_compute_inline(t, c, &D), TS_ESCHEDULE);
  ck_assert_ptr_eq(sch_traced_func(t)->body, before.body);
  ck_assert_int_eq(sch_trace_len(sch_traced_trace(t)), n0);
  /* ... but the failure JSON shows the refused call, and replays to it */
  char *fj = sch_traced_failure_json(t);
  ck_assert_ptr_nonnull(strstr(fj, "[\"ComputeInline\",[\"b0\"],[],[]]"));
  sch_trace *ft = sch_trace_from_json(fj, &D);
  ck_assert_msg(ft != NULL, "%s", D.msg);
  ts_diag_clear(&D);
  ck_assert_ptr_null(sch_trace_replay(ft, f, 1, &D));
  ck_assert_int_eq(D.code, TS_ESCHEDULE);
  ts_free(fj);
  sch_trace_free(ft);
  /* a loop split away is dead: TS_ENOTFOUND naming the loop */
  sch_arg fs[2] = {sch_arg_none(), sch_arg_int(2)};
  OK(sch_t_split(t, l[0], 2, fs, out, &D));
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_t_unroll(t, l[0], &D), TS_ENOTFOUND);
  /* the RV accessors */
  ck_assert_int_eq(sch_t_rv_kind(t, c), SCH_RV_BLOCK);
  ck_assert_int_eq(sch_t_rv_kind(t, out[0]), SCH_RV_LOOP);
  ck_assert_int_eq(sch_t_rv_kind(t, 12345), 0);
  ck_assert_ptr_null(sch_t_block(t, out[0]).name);
  ck_assert_int_eq(sch_trace_rv_kind(sch_traced_trace(t), out[1]), SCH_RV_LOOP);
  sch_traced_free(t);
}
END_TEST

START_TEST(test_text_form) {
  ir_func *f = tu_workload(&A, MM);
  sch_traced *t = sch_traced_new(f, 1, &D);
  int c = tb(t, "C"), v[2], p[2];
  const int *l = tl(t, c, 3);
  int64_t dec[2] = {2, 3};
  OK(sch_t_sample_perfect_tile(t, l[0], 2, 8, dec, v, &D));
  sch_arg fa[2] = {sch_arg_rv(v[0]), sch_arg_rv(v[1])};
  OK(sch_t_split(t, l[0], 2, fa, p, &D));
  OK(sch_t_annotate(t, c, "k", sch_arg_str("s"), &D));
  char *text = sch_trace_to_text(sch_traced_trace(t));
  ck_assert_str_eq(text, "b0 = GetBlock(; \"C\", \"matmul\")\n"
                         "l1, l2, l3 = GetLoops(b0)\n"
                         "v4, v5 = SamplePerfectTile(l1; 2, 8) [2, 3]\n"
                         "l6, l7 = Split(l1, v4, v5)\n"
                         "Annotate(b0, \"s\"; \"k\")\n");
  ts_free(text);
  char *json = sch_trace_to_json(sch_traced_trace(t));
  ck_assert_str_eq(json, "[[[\"GetBlock\",[],[\"C\",\"matmul\"],[\"b0\"]],"
                         "[\"GetLoops\",[\"b0\"],[],[\"l1\",\"l2\",\"l3\"]],"
                         "[\"SamplePerfectTile\",[\"l1\"],[2,8],[\"v4\",\"v5\"]],"
                         "[\"Split\",[\"l1\",\"v4\",\"v5\"],[],[\"l6\",\"l7\"]],"
                         "[\"Annotate\",[\"b0\",\"\\\"s\\\"\"],[\"k\"],[]]],"
                         "[[2,[2,3]]]]");
  ts_free(json);
  sch_traced_free(t);
}
END_TEST

/* ---- fuzzing the reader and replay --------------------------------------------------------- */
/* Replaces a random leaf (or drops an element) of a valid trace's JSON with
 * a value of a random type, then parses and, if that works, replays: every
 * mutant must give OK or an error with a message, never a crash. */
static json_t *fuzz_value(ts_rng *r) {
  switch (ts_rng_below(r, 12)) {
  case 0: return json_integer(-1);
  case 1: return json_integer((json_int_t)ts_rng_below(r, 5));
  case 2: return json_integer(INT64_MAX);
  case 3: return json_integer(INT64_MIN);
  case 4: return json_string("b0");
  case 5: return json_string("l1");
  case 6: return json_string("None");
  case 7: return json_string("\"x\"");
  case 8: return json_null();
  case 9: return json_array();
  case 10: return json_object();
  default: return json_real(1e300);
  }
}

static void fuzz_mutate(json_t *j, ts_rng *r) {
  for (int depth = 0; depth < 6; depth++) {
    size_t n = json_array_size(j);
    if (!json_is_array(j) || n == 0) return;
    size_t k = ts_rng_below(r, n);
    json_t *c = json_array_get(j, k);
    uint64_t act = ts_rng_below(r, 4);
    if (act == 0 || !json_is_array(c)) {
      if (act == 1) json_array_remove(j, k);
      else json_array_set_new(j, k, fuzz_value(r));
      return;
    }
    j = c;
  }
}

START_TEST(test_fuzz_json) {
  ir_func *f = tu_workload(&A, DENSE);
  sch_traced *t = sch_traced_new(f, 1, &D);
  int mm = tb(t, "mm"), bb = tb(t, "bb"), loc, v[2], p[2], o;
  const int *l = tl(t, mm, 3);
  OK(sch_t_sample_perfect_tile(t, l[1], 2, 4, NULL, v, &D));
  sch_arg fa[2] = {sch_arg_rv(v[0]), sch_arg_rv(v[1])};
  OK(sch_t_split(t, l[1], 2, fa, p, &D));
  OK(sch_t_annotate(t, p[0], "k", sch_arg_str("s"), &D));
  OK(sch_t_cache_read(t, mm, 0, "shared", 0, NULL, &o, &D));
  OK(sch_t_sample_compute_location(t, bb, NULL, &loc, &D));
  OK(sch_t_compute_at(t, bb, loc, false, -1, &D));
  OK(sch_t_storage_align(t, mm, 0, 1, 8, 1, &D));
  OK(sch_t_decompose_reduction(t, mm, l[0], &o, &D));
  char *text = sch_trace_to_json(sch_traced_trace(t));
  json_t *orig = json_loads(text, 0, NULL);
  ck_assert_ptr_nonnull(orig);
  ts_rng r;
  ts_rng_seed(&r, 2024);
  int parsed = 0, replayed = 0;
  for (int i = 0; i < 4000; i++) {
    json_t *m = json_deep_copy(orig);
    int nmut = ts_rng_below(&r, 4) ? 1 : 2;
    for (int k = 0; k < nmut; k++) fuzz_mutate(m, &r);
    char *mt = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    ts_diag_clear(&D);
    sch_trace *tr = sch_trace_from_json(mt, &D);
    if (!tr) {
      ck_assert_msg(D.code == TS_EPARSE && D.msg[0], "mutant %d: no message for %s", i, mt);
    } else {
      parsed++;
      sch_traced *x = sch_traced_new(f, 1, &D);
      sch_set_debug_verify(sch_traced_state(x), true);
      ts_diag_clear(&D);
      int at = -5;
      ts_status st = sch_trace_apply(tr, x, false, &at, &D);
      ck_assert_msg(st == TS_OK || (D.msg[0] && at >= 0), "mutant %d: status %d without a message", i, st);
      ck_assert_msg(st != TS_EINTERNAL, "mutant %d: internal error %s\n%s", i, D.msg, mt);
      if (!st) {
        replayed++;
        tu_assert_equivalent(f, sch_traced_func(x));
      }
      sch_traced_free(x);
      sch_trace_free(tr);
    }
    free(mt);
  }
  fprintf(stderr, "fuzz: %d of 4000 mutants parsed, %d replayed\n", parsed, replayed);
  ck_assert_int_gt(parsed, 200);
  ck_assert_int_gt(replayed, 50);
  json_decref(orig);
  ts_free(text);
  sch_traced_free(t);
}
END_TEST

/* ---- allocation failures ------------------------------------------------------------------ */
/* Failing the n-th allocation anywhere in a traced schedule, its JSON and
 * its replay gives an error, never a crash or a half-recorded trace. */
START_TEST(test_oom) {
  ir_func *f = tu_workload(&A, DENSE);
  int failed = 0, n;
  for (n = 1; n < 400; n++) {
    ts_alloc_fail_after(n);
    ts_diag_clear(&D);
    sch_traced *t = sch_traced_new(f, 1, &D), *r = NULL;
    sch_trace *tr = NULL;
    char *j = NULL;
    ts_status st = t ? TS_OK : TS_ENOMEM;
    int mm = -1, bb = -1, v[2], p[2], o, loc, nl;
    const int *l = NULL;
    if (!st) st = sch_t_get_block(t, "mm", &mm, &D);
    if (!st) st = sch_t_get_block(t, "bb", &bb, &D);
    if (!st) st = sch_t_get_loops(t, mm, &l, &nl, &D);
    if (!st) st = sch_t_sample_perfect_tile(t, l[1], 2, 4, NULL, v, &D);
    if (!st) {
      sch_arg fa[2] = {sch_arg_rv(v[0]), sch_arg_rv(v[1])};
      st = sch_t_split(t, l[1], 2, fa, p, &D);
    }
    if (!st) st = sch_t_cache_read(t, mm, 0, "shared", 0, NULL, &o, &D);
    if (!st) st = sch_t_sample_compute_location(t, bb, NULL, &loc, &D);
    if (!st) st = sch_t_compute_at(t, bb, loc, false, -1, &D);
    if (!st && !(j = sch_trace_to_json(sch_traced_trace(t)))) st = TS_ENOMEM;
    if (!st && !(tr = sch_trace_from_json(j, &D))) st = D.code;
    if (!st && !(r = sch_trace_replay(tr, f, 1, &D))) st = D.code;
    ts_alloc_fail_after(0);
    if (st) {
      failed++;
      ck_assert_msg(st == TS_ENOMEM || D.code == TS_ENOMEM || D.msg[0], "allocation %d: status %d, no message", n,
                    st);
    } else {
      ck_assert(ir_struct_equal_func(sch_traced_func(t), sch_traced_func(r)));
    }
    sch_traced_free(r);
    sch_trace_free(tr);
    ts_free(j);
    sch_traced_free(t);
    if (!st) break; /* past the last allocation */
  }
  ck_assert_int_gt(failed, 10);
  ck_assert_int_lt(n, 400);
}
END_TEST

int main(void) {
  Suite *s = suite_create("trace");
  TCase *tc = tcase_create("trace");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_every_kind_covered);
  tcase_add_loop_test(tc, test_kind_roundtrip, 0, NCASES);
  tcase_add_test(tc, test_changed_decision);
  tcase_add_test(tc, test_changed_location_decision);
  tcase_add_test(tc, test_resample);
  tcase_add_test(tc, test_simplified);
  tcase_add_test(tc, test_malformed_json);
  tcase_add_test(tc, test_json_literals);
  tcase_add_test(tc, test_replay_failure);
  tcase_add_test(tc, test_traced_api_checks);
  tcase_add_test(tc, test_text_form);
  tcase_add_test(tc, test_fuzz_json);
  tcase_add_test(tc, test_oom);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
