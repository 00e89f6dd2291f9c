/* test_layout.c — weight layout rewrite (ir/schedule/layout.h): the map a
 * tiled loop nest suggests (matmul, a conv with a fused loop), packing on
 * the host, TransformLayout's result on packed inputs against the
 * interpreter on unpacked ones, the trace round trip and replay without
 * the rewrite, the reference function verification uses, the refusals
 * (guarded split, two readers, two index tuples, outputs, invalid maps,
 * a second rewrite), the layout-free mark that the structural hash
 * ignores, and a weight widened to i16 by the map. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ir/interp.h"
#include "ir/print.h"
#include "ir/schedule/layout.h"
#include "ir/struct.h"
#include "util.h"

static ts_diag D;

/* Interprets orig on seeded inputs and sched on the same inputs with param
 * m->param packed through m; true when every output matches. */
static bool packed_equivalent(const ir_func *orig, const ir_func *sched, const sch_layout_map *m, uint64_t seed) {
  int np = orig->nparams;
  ck_assert_int_eq(np, sched->nparams);
  ir_tensor a[8], b[8];
  memset(a, 0, sizeof a);
  memset(b, 0, sizeof b);
  tu_ok(ir_tensors_for_func(orig, NULL, a, &D), &D);
  tu_ok(ir_tensors_for_func(sched, NULL, b, &D), &D);
  for (int i = 0; i < orig->ninputs; i++) {
    ir_tensor_fill_random(&a[i], seed + (uint64_t)i);
    ck_assert_int_eq(ir_tensor_numel(&a[i]), ir_tensor_numel(&b[i]));
    if (i == m->param)
      tu_ok(sch_layout_pack_as(m, a[i].dtype, a[i].data, b[i].data, &D), &D);
    else
      memcpy(b[i].data, a[i].data, (size_t)ir_tensor_numel(&a[i]) * (size_t)ir_dtype_bytes(a[i].dtype));
  }
  tu_ok(ir_interp_run(orig, a, &D), &D);
  tu_ok(ir_interp_run(sched, b, &D), &D);
  bool ok = true;
  for (int i = orig->ninputs; i < np; i++) {
    double err = 0;
    ok &= ir_tensor_allclose(&b[i], &a[i], 1e-4, 1e-5, &err);
  }
  for (int i = 0; i < np; i++) {
    ir_tensor_free(&a[i]);
    ir_tensor_free(&b[i]);
  }
  return ok;
}

static sch_loop L(sch_state *s, const char *block, int i) {
  sch_loop l[16];
  int n = tu_loops(s, block, l, 16);
  ck_assert_int_lt(i, n);
  return l[i];
}

/* matmul: j split 3x4, k split 2x3, order j0 k0 i k1 j1 */
static sch_state *tiled_matmul(ts_arena *a, ir_func **orig) {
  sch_state *s = tu_schedule(a, "matmul:m=8,n=12,k=6", orig);
  sch_loop j[2], k[2];
  tu_ok(sch_split(s, L(s, "C", 1), 2, (int64_t[]){3, 4}, j, &D), &D);
  tu_ok(sch_split(s, L(s, "C", 3), 2, (int64_t[]){2, 3}, k, &D), &D);
  sch_loop i = L(s, "C", 0);
  tu_ok(sch_reorder(s, 5, (sch_loop[]){j[0], k[0], i, k[1], j[1]}, &D), &D);
  return s;
}

START_TEST(matmul_suggest_and_transform) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *orig;
  sch_state *s = tiled_matmul(&a, &orig);
  sch_layout_map m;
  tu_ok(sch_layout_suggest(sch_func(s), 1, &m, &D), &D);
  char buf[256];
  sch_layout_str(&m, "B", buf, sizeof buf);
  /* B[k, j]: j0 outermost, then k0 and k1 (contiguous digits of k: merged), then j1 */
  ck_assert_str_eq(buf, "B[d0, d1] -> [d1//4, d0, d1%4]");
  ck_assert(!sch_layout_is_identity(&m));
  int64_t shape[8];
  ck_assert_int_eq(sch_layout_packed_shape(&m, shape), 3);
  ck_assert(shape[0] == 3 && shape[1] == 6 && shape[2] == 4);
  /* A[i, k] is walked k0 i k1: not row-major either */
  sch_layout_map ma;
  tu_ok(sch_layout_suggest(sch_func(s), 0, &ma, &D), &D);
  sch_layout_str(&ma, "A", buf, sizeof buf);
  ck_assert_str_eq(buf, "A[d0, d1] -> [d1//3, d0, d1%3]");

  tu_ok(sch_transform_layout(s, &m, &D), &D);
  const ir_buffer *pb = sch_func(s)->params[1];
  ck_assert_int_eq(pb->ndim, 3);
  ck_assert_str_eq(pb->name, "B");
  ck_assert_msg(packed_equivalent(orig, sch_func(s), &m, 7), "packed matmul differs");
  /* the layout matters: unpacked inputs give other results */
  char why[256];
  ck_assert(!tu_equivalent(orig, sch_func(s), 7, why, sizeof why));
  /* a second rewrite of the same param is refused */
  TU_REFUSED(&D, s, sch_transform_layout(s, &m, &D), "already rewritten");
  TU_REFUSED(&D, s, sch_layout_suggest(sch_func(s), 1, &m, &D), "already rewritten");
  /* A can still be rewritten, and both together stay right */
  tu_ok(sch_transform_layout(s, &ma, &D), &D);
  ck_assert_int_eq(sch_func(s)->params[0]->ndim, 3);
  sch_free(s);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(identity_when_row_major) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *orig;
  sch_state *s = tu_schedule(&a, "matmul:m=8,n=12,k=6", &orig);
  sch_layout_map m;
  tu_ok(sch_layout_suggest(sch_func(s), 0, &m, &D), &D);
  ck_assert(sch_layout_is_identity(&m)); /* A[i, k] under i j k: row-major */
  tu_ok(sch_layout_suggest(sch_func(s), 1, &m, &D), &D);
  ck_assert(!sch_layout_is_identity(&m)); /* B[k, j] walked j then k: transposed */
  char buf[128];
  sch_layout_str(&m, "B", buf, sizeof buf);
  ck_assert_str_eq(buf, "B[d0, d1] -> [d1, d0]");
  tu_ok(sch_transform_layout(s, &m, &D), &D);
  ck_assert(packed_equivalent(orig, sch_func(s), &m, 3));
  sch_free(s);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(conv_fused_loop) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *orig;
  sch_state *s = tu_schedule(&a, "conv2d_nchw:n=1,c=4,h=6,w=6,k=8,r=3,s=3,pad=0", &orig);
  /* loops b o p q ci ri si: o -> o0 o1 (2x4), ci -> c0 c1 (2x2); order b o0 p c0 q ri si c1 o1; fuse o0 p */
  sch_loop o[2], c[2], f;
  tu_ok(sch_split(s, L(s, "Y", 1), 2, (int64_t[]){2, 4}, o, &D), &D);
  tu_ok(sch_split(s, L(s, "Y", 5), 2, (int64_t[]){2, 2}, c, &D), &D);
  sch_loop b = L(s, "Y", 0), p = L(s, "Y", 3), q = L(s, "Y", 4), ri = L(s, "Y", 7), si = L(s, "Y", 8);
  tu_ok(sch_reorder(s, 9, (sch_loop[]){b, o[0], p, c[0], q, ri, si, c[1], o[1]}, &D), &D);
  tu_ok(sch_fuse(s, 2, (sch_loop[]){o[0], p}, &f, &D), &D);
  sch_layout_map m;
  tu_ok(sch_layout_suggest(sch_func(s), 1, &m, &D), &D);
  char buf[256];
  sch_layout_str(&m, "W", buf, sizeof buf);
  ck_assert_str_eq(buf, "W[d0, d1, d2, d3] -> [d0//4, d1//2, d2, d3, d1%2, d0%4]");
  tu_ok(sch_transform_layout(s, &m, &D), &D);
  ck_assert_msg(packed_equivalent(orig, sch_func(s), &m, 11), "packed conv differs");
  sch_free(s);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(pack_on_host) {
  sch_layout_map m = {.param = 0, .ndim = 2, .shape = {4, 6}, .ncomp = 3,
                      .comp = {{1, 3, 2}, {0, 1, 4}, {1, 1, 3}}, .naxes = 2, .group = {1, 2}};
  tu_ok(sch_layout_check(&m, &D), &D);
  float src[24], dst[24];
  for (int i = 0; i < 24; i++) src[i] = (float)i;
  sch_layout_pack(&m, sizeof(float), src, dst);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++) ck_assert(dst[(j / 3) * 12 + i * 3 + j % 3] == src[i * 6 + j]);
  /* a padded map (dim 1: 5 covered by 2 x 4): the padding packs as zeros */
  sch_layout_map pm = {.param = 0, .ndim = 2, .shape = {3, 5}, .ncomp = 3,
                       .comp = {{1, 4, 2}, {0, 1, 3}, {1, 1, 4}}, .naxes = 2, .group = {1, 2}};
  tu_ok(sch_layout_check(&pm, &D), &D);
  float psrc[15], pdst[24];
  for (int i = 0; i < 15; i++) psrc[i] = (float)(i + 1);
  for (int i = 0; i < 24; i++) pdst[i] = -1.0f;
  sch_layout_pack(&pm, sizeof(float), psrc, pdst);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 8; j++)
      ck_assert(pdst[(j / 4) * 12 + i * 4 + j % 4] == (j < 5 ? psrc[i * 5 + j] : 0.0f));
  /* a top digit larger than the cover needs (3 x 4 for 5) is no map */
  sch_layout_map over = pm;
  over.comp[0].extent = 3;
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_layout_check(&over, &D), TS_EINVAL);
  ck_assert(strstr(D.msg, "no bijection"));
  /* one digit wider than its dim (16 lanes for 13): padded, a map */
  sch_layout_map wide = {.param = 0, .ndim = 2, .shape = {3, 13}, .ncomp = 3,
                         .comp = {{1, 16, 1}, {0, 1, 3}, {1, 1, 16}}, .naxes = 2, .group = {1, 2}};
  tu_ok(sch_layout_check(&wide, &D), &D);
  float wsrc[39], wdst[48];
  for (int i = 0; i < 39; i++) wsrc[i] = (float)(i + 1);
  for (int i = 0; i < 48; i++) wdst[i] = -1.0f;
  sch_layout_pack(&wide, sizeof(float), wsrc, wdst);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 16; j++) ck_assert(wdst[i * 16 + j] == (j < 13 ? wsrc[i * 13 + j] : 0.0f));
  /* invalid maps name their fault */
  sch_layout_map bad = m;
  bad.comp[2].extent = 2; /* dim 1: 2 * 2 != 6 */
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_layout_check(&bad, &D), TS_EINVAL);
  ck_assert(strstr(D.msg, "no bijection"));
  ts_diag_clear(&D);
  bad = m;
  bad.group[1] = 1;
  ck_assert_int_eq(sch_layout_check(&bad, &D), TS_EINVAL);
  ck_assert(strstr(D.msg, "group"));
}
END_TEST

START_TEST(refusals) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *orig;
  sch_layout_map m;
  /* a guarded split covers 15 of 12 */
  sch_state *s = tu_schedule(&a, "matmul:m=8,n=12,k=6", &orig);
  sch_loop j[2];
  tu_ok(sch_split(s, L(s, "C", 1), 2, (int64_t[]){5, -1}, j, &D), &D);
  TU_REFUSED(&D, s, sch_layout_suggest(sch_func(s), 1, &m, &D), "B", "15 of 12", "bijection");
  /* an output, and a param out of range */
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_layout_suggest(sch_func(s), 2, &m, &D), TS_EINVAL);
  /* a map for another shape */
  tu_ok(sch_layout_suggest(sch_func(s), 0, &m, &D), &D);
  m.shape[0] = 4;
  m.comp[0].extent = m.comp[0].dim == 0 ? 4 : m.comp[0].extent;
  for (int i = 0; i < m.ncomp; i++)
    if (m.comp[i].dim == 0) m.comp[i].extent = 4;
  TU_REFUSED(&D, s, sch_transform_layout(s, &m, &D), "not the constant 4");
  m.param = 2;
  TU_REFUSED(&D, s, sch_transform_layout(s, &m, &D), "not an input");
  sch_free(s);

  /* two readers; one reader at two index tuples */
  const char *two =
      "func two(A: f32[4, 6]) -> B: f32[4, 6], C: f32[6, 4] {\n"
      "  block root() {\n"
      "    for i in serial(0, 4) {\n"
      "      for j in serial(0, 6) {\n"
      "        block B(vi: S(0, 4) = i, vj: S(0, 6) = j) {\n"
      "          reads A[vi, vj]\n"
      "          writes B[vi, vj]\n"
      "          B[vi, vj] = A[vi, vj] + 1.0\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "    for j in serial(0, 6) {\n"
      "      for i in serial(0, 4) {\n"
      "        block C(vj: S(0, 6) = j, vi: S(0, 4) = i) {\n"
      "          reads A[vi, vj]\n"
      "          writes C[vj, vi]\n"
      "          C[vj, vi] = A[vi, vj]\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  s = tu_schedule_text(&a, two, &orig);
  TU_REFUSED(&D, s, sch_layout_suggest(sch_func(s), 0, &m, &D), "blocks B and C both read it");
  sch_free(s);
  const char *tuples =
      "func tup(A: f32[4, 4]) -> B: f32[4, 4] {\n"
      "  block root() {\n"
      "    for i in serial(0, 4) {\n"
      "      for j in serial(0, 4) {\n"
      "        block B(vi: S(0, 4) = i, vj: S(0, 4) = j) {\n"
      "          reads A[0 :+ 4, 0 :+ 4]\n"
      "          writes B[vi, vj]\n"
      "          B[vi, vj] = A[vi, vj] + A[vj, vi]\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  s = tu_schedule_text(&a, tuples, &orig);
  TU_REFUSED(&D, s, sch_layout_suggest(sch_func(s), 0, &m, &D), "two different index tuples");
  sch_free(s);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(trace_roundtrip_and_reference) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "matmul:m=8,n=12,k=6");
  sch_traced *t = sch_traced_new(f, 1, &D);
  ck_assert_ptr_nonnull(t);
  int b, n, jj[2], kk[2];
  const int *l;
  tu_ok(sch_t_get_block(t, "C", &b, &D), &D);
  tu_ok(sch_t_get_loops(t, b, &l, &n, &D), &D);
  int i0 = l[0], j0 = l[1], k0 = l[2];
  tu_ok(sch_t_split(t, j0, 2, (sch_arg[]){sch_arg_int(3), sch_arg_int(4)}, jj, &D), &D);
  tu_ok(sch_t_split(t, k0, 2, (sch_arg[]){sch_arg_int(2), sch_arg_int(3)}, kk, &D), &D);
  tu_ok(sch_t_reorder(t, 5, (int[]){jj[0], kk[0], i0, kk[1], jj[1]}, &D), &D);
  sch_layout_map m;
  tu_ok(sch_layout_suggest(sch_traced_func(t), 1, &m, &D), &D);
  tu_ok(sch_t_transform_layout(t, &m, &D), &D);
  char *js = sch_trace_to_json(sch_traced_trace(t));
  ck_assert_ptr_nonnull(strstr(js, "TransformLayout"));
  sch_trace *tr = sch_trace_from_json(js, &D);
  ck_assert_msg(tr != NULL, "%s", D.msg);
  char *js2 = sch_trace_to_json(tr);
  ck_assert_str_eq(js, js2);
  sch_traced *r = sch_trace_replay(tr, f, 1, &D);
  ck_assert_msg(r != NULL, "%s", D.msg);
  char why[512];
  ck_assert_msg(ir_struct_equal_func_explain(sch_traced_func(t), sch_traced_func(r), why, sizeof why), "%s", why);
  /* the maps of the trace, and the reference verification compares against */
  sch_layout_map got[4];
  ck_assert_int_eq(sch_layout_maps_of_trace(tr, f, got, 4, &D), 1);
  ck_assert(got[0].param == m.param && got[0].ndim == m.ndim && got[0].ncomp == m.ncomp && got[0].naxes == m.naxes);
  for (int i = 0; i < m.ncomp; i++)
    ck_assert(got[0].comp[i].dim == m.comp[i].dim && got[0].comp[i].stride == m.comp[i].stride &&
              got[0].comp[i].extent == m.comp[i].extent);
  const ir_func *ref = sch_layout_reference(&a, f, tr, &D);
  ck_assert_msg(ref != NULL && ref != f, "%s", D.msg);
  ck_assert_msg(tu_equivalent(ref, sch_traced_func(r), 5, why, sizeof why), "%s", why);
  ck_assert(!tu_equivalent(f, sch_traced_func(r), 5, why, sizeof why));
  /* a trace from before the rewrite (no TransformLayout) replays to the original layout */
  sch_trace *old = sch_trace_without_kind(tr, SCH_I_TRANSFORM_LAYOUT);
  ck_assert_ptr_nonnull(old);
  ck_assert_int_eq(sch_trace_len(old), sch_trace_len(tr) - 1);
  ck_assert_ptr_eq(sch_layout_reference(&a, f, old, &D), f);
  sch_traced *o = sch_trace_replay(old, f, 1, &D);
  ck_assert_msg(o != NULL, "%s", D.msg);
  ck_assert_int_eq(sch_traced_func(o)->params[1]->ndim, 2);
  ck_assert_msg(tu_equivalent(f, sch_traced_func(o), 5, why, sizeof why), "%s", why);
  /* malformed TransformLayout attrs are refused at parse or replay, naming the fault */
  char *bad = strdup(js);
  char *p = strstr(bad, "TransformLayout");
  ck_assert_ptr_nonnull(p);
  /* attrs [1, [...], [...]]: point the map at the output */
  char *q = strstr(p, "[1,");
  ck_assert_ptr_nonnull(q);
  q[1] = '2';
  sch_trace *bt = sch_trace_from_json(bad, &D);
  if (bt) {
    ts_diag_clear(&D);
    ck_assert_ptr_null(sch_trace_replay(bt, f, 1, &D));
    ck_assert_msg(strstr(D.msg, "TransformLayout") && strstr(D.msg, "not an input"), "%s", D.msg);
    sch_trace_free(bt);
  }
  free(bad);
  sch_traced_free(o);
  sch_trace_free(old);
  sch_traced_free(r);
  sch_trace_free(tr);
  ts_free(js);
  ts_free(js2);
  sch_traced_free(t);
  ts_arena_fini(&a);
}
END_TEST

/* The AVX2 int8 weight layout stored as i16 (a widening map): the packed
 * param is i16 in the packed shape, the block reads i32(B) of it directly
 * (no cast back to i8), results equal the original's on every u8 / i8
 * input packed on the host (values kept, signs extended), the trace carries
 * the dtype through JSON and replay, and a dtype change that is no widening
 * of an 8-bit integer is refused. */
START_TEST(widened_to_i16) {
  static const char *specs[] = {"matmul_u8s8:m=5,n=16,k=6", "matmul_int8:m=3,n=24,k=8"};
  for (size_t w = 0; w < 2; w++) {
    ts_arena a;
    ts_arena_init(&a);
    ir_func *f = tu_workload(&a, specs[w]);
    sch_layout_map m;
    tu_ok(sch_layout_vnni(f, 1, 0, 1, 8, 2, &m, &D), &D);
    m.dtype = ir_dt(IR_I16);
    ck_assert(!sch_layout_is_identity(&m));
    char buf[256];
    sch_layout_str(&m, "B", buf, sizeof buf);
    ck_assert_msg(strstr(buf, " as i16"), "%s", buf);
    sch_traced *t = sch_traced_new(f, 1, &D);
    ck_assert_ptr_nonnull(t);
    tu_ok(sch_t_transform_layout(t, &m, &D), &D);
    const ir_func *g = sch_traced_func(t);
    ck_assert_int_eq(g->params[1]->dtype.code, IR_I16);
    ck_assert_int_eq(g->params[1]->ndim, 3);
    char *text = ir_func_to_string(g);
    ck_assert_msg(!strstr(text, "i8(B["), "the weight is cast back: %s", text);
    ck_assert_msg(strstr(text, "i32(B["), "%s", text);
    ts_free(text);
    for (uint64_t seed = 1; seed <= 3; seed++) ck_assert(packed_equivalent(f, g, &m, seed));
    char *js = sch_trace_to_json(sch_traced_trace(t));
    ck_assert_msg(strstr(js, "\"i16\""), "%s", js);
    sch_trace *tr = sch_trace_from_json(js, &D);
    ck_assert_msg(tr != NULL, "%s", D.msg);
    sch_traced *r = sch_trace_replay(tr, f, 1, &D);
    ck_assert_msg(r != NULL, "%s", D.msg);
    char why[512];
    ck_assert_msg(ir_struct_equal_func_explain(g, sch_traced_func(r), why, sizeof why), "%s", why);
    sch_layout_map got;
    ck_assert_int_eq(sch_layout_maps_of_trace(tr, f, &got, 1, &D), 1);
    ck_assert(got.dtype.lanes == 1 && got.dtype.code == IR_I16);
    const ir_func *ref = sch_layout_reference(&a, f, tr, &D);
    ck_assert_msg(ref != NULL && ref->params[1]->dtype.code == IR_I16, "%s", D.msg);
    /* refused: an 8-bit weight narrowed or kept 8-bit, a float one widened */
    sch_layout_map bad = m;
    bad.dtype = ir_dt(IR_U8);
    sch_traced *t2 = sch_traced_new(f, 1, &D);
    ts_diag_clear(&D);
    ck_assert_int_eq(sch_t_transform_layout(t2, &bad, &D), TS_ESCHEDULE);
    ck_assert_msg(strstr(D.msg, "no widening"), "%s", D.msg);
    sch_traced_free(t2);
    sch_traced_free(r);
    sch_trace_free(tr);
    ts_free(js);
    sch_traced_free(t);
    ts_arena_fini(&a);
  }
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "matmul:m=4,n=16,k=4");
  sch_layout_map m;
  tu_ok(sch_layout_vnni(f, 1, 0, 1, 8, 2, &m, &D), &D);
  m.dtype = ir_dt(IR_I16);
  sch_traced *t = sch_traced_new(f, 1, &D);
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_t_transform_layout(t, &m, &D), TS_ESCHEDULE);
  sch_traced_free(t);
  /* host packing: i8 sign-extended, u8 zero-extended, padding zeros */
  sch_layout_map pm = {.param = 0, .ndim = 2, .shape = {3, 2}, .ncomp = 3,
                       .comp = {{1, 1, 2}, {0, 2, 2}, {0, 1, 2}}, .naxes = 2, .group = {1, 2}};
  pm.dtype = ir_dt(IR_I16);
  tu_ok(sch_layout_check(&pm, &D), &D);
  const uint8_t src[6] = {0x80, 0x7f, 0xff, 0x01, 0x00, 0xfe};
  int16_t dst[8];
  tu_ok(sch_layout_pack_as(&pm, ir_dt(IR_I8), src, dst, &D), &D);
  /* [n=2][k/2=2][k%2=2]: dst[n][ko][kk] = src[2ko+kk][n] */
  const int16_t want_s[8] = {-128, -1, 0, 0, 127, 1, -2, 0};
  for (int i = 0; i < 8; i++) ck_assert_int_eq(dst[i], want_s[i]);
  tu_ok(sch_layout_pack_as(&pm, ir_dt(IR_U8), src, dst, &D), &D);
  const int16_t want_u[8] = {128, 255, 0, 0, 127, 1, 254, 0};
  for (int i = 0; i < 8; i++) ck_assert_int_eq(dst[i], want_u[i]);
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_layout_pack_as(&pm, ir_dt(IR_F32), src, dst, &D), TS_EINVAL);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(layout_free_mark_keeps_the_key) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "conv2d_nchw:n=1,c=4,h=6,w=6,k=8,r=3,s=3");
  ir_func *g = ir_func_copy(&a, f);
  tu_ok(ir_annot_set(&a, &g->nannot, &g->annots,
                     (ir_annot){.key = IR_FUNC_ANN_LAYOUT_FREE, .kind = IR_ANN_INT, .v.i = 2}),
        &D);
  ck_assert(ir_struct_hash_func(f) == ir_struct_hash_func(g));
  ck_assert(ir_struct_equal_func(f, g));
  /* control: another function annotation does change it */
  ir_func *h = ir_func_copy(&a, f);
  tu_ok(ir_annot_set(&a, &h->nannot, &h->annots, (ir_annot){.key = "other", .kind = IR_ANN_INT, .v.i = 2}), &D);
  ck_assert(ir_struct_hash_func(f) != ir_struct_hash_func(h));
  /* the mark survives the printer (what the tuning log stores) */
  char *text = ir_func_to_string(g);
  ck_assert_ptr_nonnull(strstr(text, IR_FUNC_ANN_LAYOUT_FREE));
  ts_free(text);
  ts_arena_fini(&a);
}
END_TEST

static Suite *suite(void) {
  Suite *su = suite_create("schedule_layout");
  TCase *tc = tcase_create("layout");
  tcase_add_test(tc, matmul_suggest_and_transform);
  tcase_add_test(tc, identity_when_row_major);
  tcase_add_test(tc, conv_fused_loop);
  tcase_add_test(tc, pack_on_host);
  tcase_add_test(tc, refusals);
  tcase_add_test(tc, trace_roundtrip_and_reference);
  tcase_add_test(tc, layout_free_mark_keeps_the_key);
  tcase_add_test(tc, widened_to_i16);
  suite_add_tcase(su, tc);
  return su;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
