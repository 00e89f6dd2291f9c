/* test_passes.c — the graph passes (ir/graph/passes.h) on hand-built graphs:
 * every legalised op run on the interpreter against a hand-written C loop
 * or the workload library's reference; constant folding (shape arithmetic
 * and interpreter evaluation); batch-norm folding numerics against the
 * unfolded graph; fusion group counts (conv epilogues, residual add, a gelu
 * diamond, an injective prologue) with the fused graph's result equal to
 * the unfused one; symbolic batch dims run at two sizes from one pipeline;
 * the weight layout rewrite; task extraction (weights, keys = the tuner's
 * workload key, FLOPs); refusals naming the node. The generated ONNX models
 * are covered at the end when tests/models/gen_models.py and the venv exist. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph/graph.h"
#include "ir/graph/graph_interp.h"
#include "ir/graph/passes.h"
#include "ir/graph/tasks.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "ir/struct.h"
#include "ir/workloads/workloads.h"

#define MLP_BEFORE 6
#define MLP_AFTER 3
#define CNN_BEFORE 13
#define CNN_AFTER 7
#define TR_BEFORE 29
#define TR_AFTER 11
#define TRE_BEFORE 33
#define TRE_AFTER 11

static ir_module *M;
static tg_graph *G;

static void setup(void) {
  M = ir_module_new();
  ck_assert_ptr_nonnull(M);
  G = tg_graph_new(M, "net");
  ck_assert_ptr_nonnull(G);
}
static void teardown(void) { ir_module_free(M); }

static tg_dim C(int64_t v) { return (tg_dim){v, NULL}; }
static tg_dim S(const char *s) { return (tg_dim){-1, s}; }

static int value(tg_graph *g, const char *name, tg_value_kind k, ir_dtype dt, int n, const tg_dim *dims) {
  ts_diag d;
  ts_diag_clear(&d);
  int id = tg_value_add(g, name, k, dt, n, dims, &d);
  ck_assert_msg(id >= 0, "%s", d.msg);
  if (k == TG_V_INPUT) ck_assert_int_eq(tg_graph_add_input(g, id), TS_OK);
  return id;
}
#define F32 ir_dt(IR_F32)
#define I64 ir_dt(IR_I64)
static int input(tg_graph *g, const char *name, int n, const tg_dim *dims) {
  return value(g, name, TG_V_INPUT, F32, n, dims);
}
static int inter(tg_graph *g, const char *name, int n, const tg_dim *dims) {
  return value(g, name, TG_V_INTER, F32, n, dims);
}
/* A constant with seeded random f32 data in [-1, 1). */
static int rconst(tg_graph *g, const char *name, int n, const tg_dim *dims, uint64_t seed) {
  int id = value(g, name, TG_V_CONST, F32, n, dims);
  ir_tensor t;
  int64_t shp[8];
  for (int i = 0; i < n; i++) shp[i] = dims[i].value;
  ck_assert_int_eq(ir_tensor_alloc(&t, F32, n, shp), TS_OK);
  ir_tensor_fill_random(&t, seed);
  ck_assert_int_eq(tg_value_set_data(g, id, t.data, (size_t)ir_tensor_numel(&t) * 4, NULL), TS_OK);
  ir_tensor_free(&t);
  return id;
}
static int iconst(tg_graph *g, const char *name, int n, const int64_t *vals) {
  tg_dim dd = C(n);
  int id = value(g, name, TG_V_CONST, I64, 1, &dd);
  ck_assert_int_eq(tg_value_set_data(g, id, vals, (size_t)n * 8, NULL), TS_OK);
  return id;
}
static int fconst(tg_graph *g, const char *name, float v) {
  int id = value(g, name, TG_V_CONST, F32, 0, NULL);
  ck_assert_int_eq(tg_value_set_data(g, id, &v, 4, NULL), TS_OK);
  return id;
}
static tg_node *node(tg_graph *g, tg_op op, const char *name, int nin, const int *in, int nout, const int *out) {
  ts_diag d;
  ts_diag_clear(&d);
  int id = tg_node_add(g, op, name, nin, in, nout, out, &d);
  ck_assert_msg(id >= 0, "%s", d.msg);
  return g->nodes[id];
}
static void aint(tg_graph *g, tg_node *n, const char *k, int64_t v) {
  tg_attr a = {.name = k, .kind = TG_A_INT, .i = v};
  ck_assert_int_eq(tg_node_set_attr(g, n, &a), TS_OK);
}
static void afloat(tg_graph *g, tg_node *n, const char *k, double v) {
  tg_attr a = {.name = k, .kind = TG_A_FLOAT, .f = v};
  ck_assert_int_eq(tg_node_set_attr(g, n, &a), TS_OK);
}
static void aints(tg_graph *g, tg_node *n, const char *k, int cnt, const int64_t *v) {
  tg_attr a = {.name = k, .kind = TG_A_INTS, .n = cnt, .ints = (int64_t *)v};
  ck_assert_int_eq(tg_node_set_attr(g, n, &a), TS_OK);
}
static void output(tg_graph *g, int v) { ck_assert_int_eq(tg_graph_add_output(g, v), TS_OK); }

/* Seeded random inputs for g (symbols bound from sym_vals by name order of
 * appearance: every symbolic dim takes `symv`). */
static void make_inputs(const tg_graph *g, ir_tensor *in, int64_t symv, uint64_t seed) {
  for (int i = 0; i < g->ninputs; i++) {
    const tg_value *v = g->values[g->inputs[i]];
    int64_t shp[8];
    for (int a = 0; a < v->ndim; a++) shp[a] = v->dims[a].sym ? symv : v->dims[a].value;
    ck_assert_int_eq(ir_tensor_alloc(&in[i], v->dtype, v->ndim, shp), TS_OK);
    ir_tensor_fill_random(&in[i], seed + (uint64_t)i);
  }
}
static void free_tensors(ir_tensor *t, int n) {
  for (int i = 0; i < n; i++) ir_tensor_free(&t[i]);
}

static void run_pipe(tg_graph *g, const char *stop) {
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tg_run_pipeline(g, stop, &d) == TS_OK, "pipeline: %s", d.msg);
  ts_diag_clear(&d);
  ck_assert_msg(tg_graph_verify(g, &d) == TS_OK, "verify: %s", d.msg);
}
static void run(const tg_graph *g, const ir_tensor *in, ir_tensor *out) {
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tg_graph_run(g, in, out, &d) == TS_OK, "run: %s", d.msg);
}
/* run_pipe up to stop, then the graph on make_inputs(g, in, 0, seed). */
static void pipe_and_run(tg_graph *g, const char *stop, ir_tensor *in, ir_tensor *out, uint64_t seed) {
  run_pipe(g, stop);
  make_inputs(g, in, 0, seed);
  run(g, in, out);
}
/* Constant `name` of g as a tensor sharing its data (static shape). */
static ir_tensor const_tensor(const tg_graph *g, const char *name) {
  int id = tg_value_find(g, name);
  ck_assert_msg(id >= 0, "no value %s in the graph", name);
  const tg_value *v = g->values[id];
  ck_assert_msg(v->data != NULL, "%s has no data", name);
  ir_tensor t = {.dtype = v->dtype, .ndim = v->ndim, .data = v->data};
  for (int a = 0; a < v->ndim; a++) {
    ck_assert_msg(!v->dims[a].sym, "%s has a symbolic dim", name);
    t.shape[a] = v->dims[a].value;
  }
  return t;
}
/* The reference of workload spec: args[0..n-2] are its inputs; args[n-1],
 * its f32 output of rank nd and the given shape, is allocated and filled
 * (the caller frees it). */
static void wl_reference(const char *spec, ir_tensor *args, int n, int nd, const int64_t *shape) {
  ir_wl_inst wl;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ir_wl_parse(spec, &wl, &d) == TS_OK, "%s: %s", spec, d.msg);
  ck_assert_int_eq(ir_tensor_alloc(&args[n - 1], F32, nd, shape), TS_OK);
  ck_assert_msg(ir_wl_reference(&wl, args, &d) == TS_OK, "%s: %s", spec, d.msg);
}
static void expect_close(const ir_tensor *got, const ir_tensor *ref, double tol) {
  double err = 0;
  ck_assert_int_eq(ir_tensor_numel(got), ir_tensor_numel(ref));
  ck_assert_msg(ir_tensor_allclose(got, ref, tol, tol, &err), "max abs err %g", err);
}
/* wl_reference, then got against it (rtol = atol = 1e-5); frees the reference. */
static void expect_workload(const char *spec, ir_tensor *args, int n, int nd, const int64_t *shape,
                            const ir_tensor *got) {
  wl_reference(spec, args, n, nd, shape);
  expect_close(got, &args[n - 1], 1e-5);
  ir_tensor_free(&args[n - 1]);
}
/* a and b (one input, one output each) on the same seeded input, symbols at
 * symv: outputs within tol of each other. */
static void same_outputs(const tg_graph *a, const tg_graph *b, int64_t symv, uint64_t seed, double tol) {
  ir_tensor in[1], o1[1], o2[1];
  make_inputs(a, in, symv, seed);
  run(a, in, o1);
  run(b, in, o2);
  expect_close(&o1[0], &o2[0], tol);
  free_tensors(in, 1);
  free_tensors(o1, 1);
  free_tensors(o2, 1);
}
static float at(const ir_tensor *t, int64_t i) { return ((const float *)t->data)[i]; }

/* ---- legalisation, op by op ------------------------------------------------------ */

START_TEST(test_broadcast_binary) {
  int x = input(G, "x", 3, (tg_dim[]){C(2), C(3), C(5)});
  int b = input(G, "b", 2, (tg_dim[]){C(3), C(1)});
  int y = inter(G, "y", 3, (tg_dim[]){C(2), C(3), C(5)});
  int z = inter(G, "z", 3, (tg_dim[]){C(2), C(3), C(5)});
  node(G, TG_OP_SUB, "sub", 2, (int[]){x, b}, 1, &y);
  node(G, TG_OP_DIV, "div", 2, (int[]){y, x}, 1, &z);
  output(G, z);
  ir_tensor in[2], out[1];
  pipe_and_run(G, "legalize", in, out, 11);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 5; k++) {
        int64_t f = (i * 3 + j) * 5 + k;
        float xv = at(&in[0], f), r = (xv - at(&in[1], j)) / xv;
        ck_assert_msg(fabsf(at(&out[0], f) - r) <= 1e-5f * fabsf(r) + 1e-6f, "at %lld", (long long)f);
      }
  free_tensors(in, 2);
  free_tensors(out, 1);
}
END_TEST

/* conv (with bias added here by hand) against the workload reference */
static void conv_vs_workload(const char *spec, int64_t N, int64_t Cc, int64_t H, int64_t W, int64_t K, int64_t R,
                             int64_t st, int64_t pad, int64_t grp, int64_t P, int64_t Q) {
  int x = input(G, "x", 4, (tg_dim[]){C(N), C(Cc), C(H), C(W)});
  int w = rconst(G, "w", 4, (tg_dim[]){C(K), C(Cc / grp), C(R), C(R)}, 5);
  int bi = rconst(G, "bias", 1, (tg_dim[]){C(K)}, 6);
  int y = inter(G, "y", 4, (tg_dim[]){C(N), C(K), C(P), C(Q)});
  tg_node *n = node(G, TG_OP_CONV, "conv", 3, (int[]){x, w, bi}, 1, &y);
  aints(G, n, "strides", 2, (int64_t[]){st, st});
  aints(G, n, "pads", 4, (int64_t[]){pad, pad, pad, pad});
  aints(G, n, "kernel_shape", 2, (int64_t[]){R, R});
  aint(G, n, "group", grp);
  output(G, y);
  ir_tensor in[1], out[1];
  pipe_and_run(G, "legalize", in, out, 3);
  /* reference: the workload's loop, then + bias */
  ir_tensor args[3] = {in[0], const_tensor(G, "w")};
  wl_reference(spec, args, 3, 4, (int64_t[]){N, K, P, Q});
  const float *bd = G->values[tg_value_find(G, "bias")]->data;
  for (int64_t i = 0; i < ir_tensor_numel(&args[2]); i++) ((float *)args[2].data)[i] += bd[(i / (P * Q)) % K];
  expect_close(&out[0], &args[2], 1e-5);
  ir_tensor_free(&args[2]);
  free_tensors(in, 1);
  free_tensors(out, 1);
}


/* conv (no bias) from a workload spec, against its reference */
static void conv_vs_workload_d(const char *spec) {
  ir_wl_inst wl;
  ck_assert_int_eq(ir_wl_parse(spec, &wl, NULL), TS_OK);
  int64_t N = ir_wl_int(&wl, "n"), Cc = ir_wl_int(&wl, "c"), H = ir_wl_int(&wl, "h"), W = ir_wl_int(&wl, "w"),
          K = ir_wl_int(&wl, "k"), R = ir_wl_int(&wl, "r"), st = ir_wl_int(&wl, "stride"),
          pad = ir_wl_int(&wl, "pad"), dl = ir_wl_int(&wl, "dilation");
  int64_t P = (H + 2 * pad - dl * (R - 1) - 1) / st + 1, Q = (W + 2 * pad - dl * (R - 1) - 1) / st + 1;
  int x = input(G, "x", 4, (tg_dim[]){C(N), C(Cc), C(H), C(W)});
  int w = rconst(G, "w", 4, (tg_dim[]){C(K), C(Cc), C(R), C(R)}, 7);
  int y = inter(G, "y", 4, (tg_dim[]){C(N), C(K), C(P), C(Q)});
  tg_node *n = node(G, TG_OP_CONV, "conv", 2, (int[]){x, w}, 1, &y);
  aints(G, n, "strides", 2, (int64_t[]){st, st});
  aints(G, n, "dilations", 2, (int64_t[]){dl, dl});
  aints(G, n, "pads", 4, (int64_t[]){pad, pad, pad, pad});
  output(G, y);
  ir_tensor in[1], out[1];
  pipe_and_run(G, NULL, in, out, 13);
  ir_tensor args[3] = {in[0], const_tensor(G, "w")};
  expect_workload(spec, args, 3, 4, (int64_t[]){N, K, P, Q}, &out[0]);
  free_tensors(in, 1);
  free_tensors(out, 1);
}

START_TEST(test_conv_strided_padded) {
  conv_vs_workload("conv2d_nchw:n=1,c=3,h=7,w=7,k=5,r=3,s=3,stride=2,pad=1,dilation=1,groups=1", 1, 3, 7, 7, 5, 3,
                   2, 1, 1, 4, 4);
  /* the padded input in polyphase order [n, c, 2, 2, 4 + 1, 4 + 1] */
  bool poly = false;
  for (int i = 0; i < M->nfuncs && !poly; i++)
    if (M->funcs[i].kind == IR_MOD_PRIM) {
      char *txt = ir_func_to_string(M->funcs[i].u.prim);
      poly = txt && strstr(txt, "_pad: f32[1, 3, 2, 2, 5, 5]");
      ts_free(txt);
    }
  ck_assert_msg(poly, "the strided conv does not read a polyphase pad stage");
}
END_TEST

/* --polyphase off: the same conv, correct, with the pad stage in the plain order. */
START_TEST(test_conv_polyphase_off) {
  G->opts.polyphase_off = true;
  conv_vs_workload("conv2d_nchw:n=1,c=3,h=7,w=7,k=5,r=3,s=3,stride=2,pad=1,dilation=1,groups=1", 1, 3, 7, 7, 5, 3,
                   2, 1, 1, 4, 4);
  for (int i = 0; i < M->nfuncs; i++)
    if (M->funcs[i].kind == IR_MOD_PRIM) {
      char *txt = ir_func_to_string(M->funcs[i].u.prim);
      ck_assert_msg(txt && !strstr(txt, "_pad: f32[1, 3, 2, 2, 5, 5]"), "a polyphase pad stage with it off");
      ts_free(txt);
    }
}
END_TEST

/* The switches' spellings: set, the log's string and its parse round trip. */
START_TEST(test_pass_opts_strings) {
  tg_pass_opts o = {.conv_block = -1}, back; /* the model compiler's defaults */
  ts_diag d;
  ts_diag_clear(&d);
  char buf[64];
  ck_assert_str_eq(tg_pass_opts_str(&o, buf, sizeof buf), "");
  /* --conv-layout: nchw (0), nchwc (-1, the default: not written), nchwc<B> */
  ck_assert_int_eq(tg_pass_opts_set(&o, "conv-layout", "nchw", &d), TS_OK);
  ck_assert_str_eq(tg_pass_opts_str(&o, buf, sizeof buf), "conv_layout=nchw");
  ck_assert_int_eq(tg_pass_opts_parse(buf, &back, &d), TS_OK);
  ck_assert_int_eq(back.conv_block, 0);
  ck_assert_int_eq(tg_pass_opts_set(&o, "conv_layout", "nchwc16", &d), TS_OK);
  ck_assert_str_eq(tg_pass_opts_str(&o, buf, sizeof buf), "conv_layout=nchwc16");
  ck_assert_int_eq(tg_pass_opts_parse(buf, &back, &d), TS_OK);
  ck_assert_int_eq(back.conv_block, 16);
  ck_assert_int_eq(tg_pass_opts_set(&o, "conv_layout", "nchwc12", &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "conv_layout: 'nchwc12' is not nchw, nchwc or nchwc<B>"));
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_pass_opts_set(&o, "conv_layout", "nchwc", &d), TS_OK);
  ck_assert_str_eq(tg_pass_opts_str(&o, buf, sizeof buf), "");
  ck_assert_int_eq(tg_pass_opts_parse("", &back, &d), TS_OK);
  ck_assert_int_eq(back.conv_block, -1);
  ck_assert_int_eq(tg_pass_opts_set(&o, "winograd", "all", &d), TS_OK);
  ck_assert_str_eq(tg_pass_opts_str(&o, buf, sizeof buf), "winograd=all");
  ck_assert_int_eq(tg_pass_opts_set(&o, "polyphase", "off", &d), TS_OK);
  ck_assert_str_eq(tg_pass_opts_str(&o, buf, sizeof buf), "winograd=all,polyphase=off");
  ck_assert_int_eq(tg_pass_opts_parse(buf, &back, &d), TS_OK);
  ck_assert_int_eq(back.winograd, TG_WINOGRAD_ALL);
  ck_assert(back.polyphase_off);
  ck_assert(!back.qdq_off);
  ck_assert_int_eq(tg_pass_opts_set(&o, "qdq", "off", &d), TS_OK);
  ck_assert_str_eq(tg_pass_opts_str(&o, buf, sizeof buf), "winograd=all,polyphase=off,qdq=off");
  ck_assert_int_eq(tg_pass_opts_parse(buf, &back, &d), TS_OK);
  ck_assert(back.qdq_off && back.polyphase_off);
  {
    tg_pass_opts t = {0}, tb;
    ck_assert_int_eq(tg_pass_opts_set(&t, "winograd_tile", "2", &d), TS_OK);
    ck_assert_str_eq(tg_pass_opts_str(&t, buf, sizeof buf), "winograd_tile=2,conv_layout=nchw");
    ck_assert_int_eq(tg_pass_opts_parse(buf, &tb, &d), TS_OK);
    ck_assert_int_eq(tb.winograd_tile, 2);
    ck_assert_int_eq(tg_pass_opts_set(&t, "winograd-tile", "4", &d), TS_OK);
    ck_assert_int_eq(t.winograd_tile, 0);
    ck_assert_int_eq(tg_pass_opts_set(&t, "winograd_tile", "6", &d), TS_EINVAL);
    ck_assert_ptr_nonnull(strstr(d.msg, "winograd_tile: '6' is not 2 or 4"));
    ts_diag_clear(&d);
  }
  ck_assert_int_eq(tg_pass_opts_parse("qdq=off", &back, &d), TS_OK);
  ck_assert(back.qdq_off && !back.polyphase_off && back.winograd == TG_WINOGRAD_ON);
  ck_assert_int_eq(tg_pass_opts_set(&o, "qdq", "maybe", &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "qdq: 'maybe' is not on or off"));
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_pass_opts_parse("", &back, &d), TS_OK);
  ck_assert(back.winograd == TG_WINOGRAD_ON && !back.polyphase_off && !back.qdq_off);
  ck_assert_int_eq(tg_pass_opts_set(&o, "winograd", "maybe", &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "on, off or all"));
  ck_assert_int_eq(tg_pass_opts_set(&o, "tiling", "on", &d), TS_EINVAL);
  ck_assert_int_eq(tg_pass_opts_parse("winograd", &back, &d), TS_EPARSE);
  ck_assert_int_eq(tg_run_pipeline_opts(G, "nonsense", &o, &d), TS_ENOTFOUND);
}
END_TEST

/* conv(x, w, bias) -> relu, 3x3 stride 1 with pads (t, l, b, r); batch
 * dim `batch` symbolic when sym. */
static void wg_graph(tg_graph *g, bool sym, int64_t Cc, int64_t H, int64_t W, int64_t K, const int64_t *pads) {
  tg_dim N = sym ? S("batch") : C(2);
  int64_t P = H + pads[0] + pads[2] - 2, Q = W + pads[1] + pads[3] - 2;
  int x = input(g, "x", 4, (tg_dim[]){N, C(Cc), C(H), C(W)});
  int w = rconst(g, "w", 4, (tg_dim[]){C(K), C(Cc), C(3), C(3)}, 21);
  int bi = rconst(g, "bias", 1, (tg_dim[]){C(K)}, 22);
  int y = inter(g, "y", 4, (tg_dim[]){N, C(K), C(P), C(Q)});
  int z = inter(g, "z", 4, (tg_dim[]){N, C(K), C(P), C(Q)});
  tg_node *n = node(g, TG_OP_CONV, "conv", 3, (int[]){x, w, bi}, 1, &y);
  aints(g, n, "pads", 4, pads);
  aints(g, n, "kernel_shape", 2, (int64_t[]){3, 3});
  node(g, TG_OP_RELU, "relu", 1, &y, 1, &z);
  output(g, z);
}

static bool calls_winograd(const tg_graph *g) {
  for (int i = 0; i < g->nnodes; i++)
    if (!g->nodes[i]->dead && g->nodes[i]->callee && strstr(g->nodes[i]->callee, "conv2d_winograd")) return true;
  return false;
}

/* The Winograd F(4x4, 3x3) form against the direct convolution, on odd sizes
 * (tiles that overhang the output on both axes, asymmetric padding) and a
 * symbolic batch run at two sizes from one graph. */
static void winograd_tile_case(int tile, bool sym, int64_t Cc, int64_t H, int64_t W, int64_t K, const int64_t *pads) {
  ir_module *m2 = ir_module_new();
  tg_graph *g2 = tg_graph_new(m2, "direct");
  G->opts.winograd = TG_WINOGRAD_ALL;
  G->opts.winograd_tile = tile;
  wg_graph(G, sym, Cc, H, W, K, pads);
  run_pipe(G, NULL);
  g2->opts.winograd = TG_WINOGRAD_OFF;
  wg_graph(g2, sym, Cc, H, W, K, pads);
  run_pipe(g2, NULL);
  ck_assert_msg(calls_winograd(G), "the conv was not rewritten");
  ck_assert(!calls_winograd(g2));
  ck_assert_int_lt(tg_value_find(G, "w"), 0); /* the original weights are gone */
  /* the form's transform matrices: alpha x alpha input tiles, alpha = m + 2 */
  int bt = tg_value_find(G, tile == 2 ? "winograd_f2x3_BT" : "winograd_f4x3_BT");
  ck_assert_int_ge(bt, 0);
  ck_assert_int_eq(G->values[bt]->dims[0].value, tile == 2 ? 4 : 6);
  for (int b = 1; b <= (sym ? 3 : 1); b += 2) same_outputs(G, g2, b, 40 + (uint64_t)b, 1e-4);
  ir_module_free(m2);
}

static void winograd_case(bool sym, int64_t Cc, int64_t H, int64_t W, int64_t K, const int64_t *pads) {
  winograd_tile_case(0, sym, Cc, H, W, K, pads);
}

START_TEST(test_winograd_odd) { winograd_case(false, 5, 11, 13, 7, (int64_t[]){1, 0, 2, 1}); }
END_TEST

START_TEST(test_winograd_symbolic_batch) { winograd_case(true, 3, 9, 6, 4, (int64_t[]){1, 1, 1, 1}); }
END_TEST

/* F(2x2, 3x3) (--winograd-tile 2): odd sizes, tiles overhanging an odd
 * output, asymmetric pads, and a symbolic batch, against the direct conv. */
START_TEST(test_winograd_f2) {
  winograd_tile_case(2, false, 5, 11, 13, 7, (int64_t[]){1, 0, 2, 1});
  ir_module_free(M);
  M = ir_module_new();
  G = tg_graph_new(M, "g");
  winograd_tile_case(2, true, 3, 9, 6, 4, (int64_t[]){1, 1, 1, 1});
}
END_TEST

static bool calls_nchwc(const tg_graph *g) {
  for (int i = 0; i < g->nnodes; i++)
    if (!g->nodes[i]->dead && g->nodes[i]->callee && strstr(g->nodes[i]->callee, "conv2d_nchwc")) return true;
  return false;
}

/* The nchwc pass (block 8) against the NCHW convolution: asymmetric padding,
 * a plain input of 5 channels (cb 1) or 16 (blocked), and a symbolic batch
 * run at two sizes from one graph. */
static void nchwc_case(bool sym, int64_t Cc, int64_t K, const int64_t *pads) {
  ir_module *m2 = ir_module_new();
  tg_graph *g2 = tg_graph_new(m2, "plain");
  G->opts.winograd = g2->opts.winograd = TG_WINOGRAD_OFF;
  G->opts.conv_block = 8;
  wg_graph(G, sym, Cc, 11, 13, K, pads);
  run_pipe(G, NULL);
  wg_graph(g2, sym, Cc, 11, 13, K, pads);
  run_pipe(g2, NULL);
  ck_assert_msg(calls_nchwc(G), "the conv was not blocked");
  ck_assert(!calls_nchwc(g2));
  for (int b = 1; b <= (sym ? 3 : 1); b += 2) same_outputs(G, g2, b, 50 + (uint64_t)b, 1e-4);
  ir_module_free(m2);
}

START_TEST(test_nchwc_plain_input) { nchwc_case(false, 5, 16, (int64_t[]){1, 0, 2, 1}); }
END_TEST

START_TEST(test_nchwc_symbolic_batch) { nchwc_case(true, 16, 8, (int64_t[]){0, 2, 1, 0}); }
END_TEST

/* Output channels the block does not divide: the convolution stays NCHW. */
START_TEST(test_nchwc_fallback) {
  G->opts.conv_block = 8;
  wg_graph(G, false, 16, 9, 9, 12, (int64_t[]){1, 1, 1, 1});
  run_pipe(G, NULL);
  ck_assert(!calls_nchwc(G));
}
END_TEST

/* By default only convolutions with 16+ channels each way and 8+ output
 * tiles per image are rewritten. */
START_TEST(test_winograd_thresholds) {
  wg_graph(G, false, 5, 11, 13, 7, (int64_t[]){1, 1, 1, 1});
  run_pipe(G, NULL);
  ck_assert(!calls_winograd(G));
  ir_module *m2 = ir_module_new();
  tg_graph *g2 = tg_graph_new(m2, "wide");
  wg_graph(g2, false, 16, 12, 9, 16, (int64_t[]){1, 1, 1, 1}); /* 3 x 3 tiles */
  run_pipe(g2, NULL);
  ck_assert(calls_winograd(g2));
  ir_module_free(m2);
  /* 7x7 outputs: 2 x 2 tiles, too few */
  ir_module *m3 = ir_module_new();
  tg_graph *g3 = tg_graph_new(m3, "small");
  wg_graph(g3, false, 32, 7, 7, 32, (int64_t[]){1, 1, 1, 1});
  run_pipe(g3, NULL);
  ck_assert(!calls_winograd(g3));
  ir_module_free(m3);
}
END_TEST

START_TEST(test_conv_grouped) {
  conv_vs_workload("conv2d_nchw:n=2,c=4,h=5,w=5,k=6,r=3,s=3,stride=1,pad=1,dilation=1,groups=2", 2, 4, 5, 5, 6, 3,
                   1, 1, 2, 5, 5);
}
END_TEST

static void pool_vs_workload(tg_op op, const char *spec, int64_t P) {
  int x = input(G, "x", 4, (tg_dim[]){C(1), C(3), C(9), C(7)});
  int64_t Q = (7 + 2 - 3) / 2 + 1;
  int y = inter(G, "y", 4, (tg_dim[]){C(1), C(3), C(P), C(Q)});
  tg_node *n = node(G, op, "pool", 1, &x, 1, &y);
  aints(G, n, "kernel_shape", 2, (int64_t[]){3, 3});
  aints(G, n, "strides", 2, (int64_t[]){2, 2});
  aints(G, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
  aint(G, n, "count_include_pad", 1);
  output(G, y);
  ir_tensor in[1], out[1];
  pipe_and_run(G, "legalize", in, out, 9);
  ir_tensor args[2] = {in[0]};
  expect_workload(spec, args, 2, 4, (int64_t[]){1, 3, P, Q}, &out[0]);
  free_tensors(in, 1);
  free_tensors(out, 1);
}

START_TEST(test_max_pool) { pool_vs_workload(TG_OP_MAX_POOL, "max_pool2d:n=1,c=3,h=9,w=7,r=3,s=3,stride=2,pad=1", 5); }
END_TEST
START_TEST(test_avg_pool_include_pad) {
  pool_vs_workload(TG_OP_AVERAGE_POOL, "avg_pool2d:n=1,c=3,h=9,w=7,r=3,s=3,stride=2,pad=1", 5);
}
END_TEST

START_TEST(test_avg_pool_exclude_pad) {
  int x = input(G, "x", 4, (tg_dim[]){C(1), C(2), C(5), C(5)});
  int y = inter(G, "y", 4, (tg_dim[]){C(1), C(2), C(3), C(3)});
  tg_node *n = node(G, TG_OP_AVERAGE_POOL, "pool", 1, &x, 1, &y);
  aints(G, n, "kernel_shape", 2, (int64_t[]){3, 3});
  aints(G, n, "strides", 2, (int64_t[]){2, 2});
  aints(G, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
  output(G, y);
  ir_tensor in[1], out[1];
  pipe_and_run(G, "legalize", in, out, 2);
  for (int c = 0; c < 2; c++)
    for (int p = 0; p < 3; p++)
      for (int q = 0; q < 3; q++) {
        double s = 0;
        int cnt = 0;
        for (int r = 0; r < 3; r++)
          for (int t = 0; t < 3; t++) {
            int h = p * 2 - 1 + r, w = q * 2 - 1 + t;
            if (h < 0 || h >= 5 || w < 0 || w >= 5) continue;
            s += at(&in[0], (c * 5 + h) * 5 + w);
            cnt++;
          }
        ck_assert(fabs(at(&out[0], (c * 3 + p) * 3 + q) - s / cnt) < 1e-5);
      }
  free_tensors(in, 1);
  free_tensors(out, 1);
}
END_TEST

START_TEST(test_gemm_trans_alpha_beta) {
  int a = input(G, "a", 2, (tg_dim[]){C(5), C(3)}); /* transA: [K=5, M=3] */
  int b = input(G, "b", 2, (tg_dim[]){C(7), C(5)}); /* transB: [N=7, K=5] */
  int c = input(G, "c", 1, (tg_dim[]){C(7)});
  int y = inter(G, "y", 2, (tg_dim[]){C(3), C(7)});
  tg_node *n = node(G, TG_OP_GEMM, "gemm", 3, (int[]){a, b, c}, 1, &y);
  aint(G, n, "transA", 1);
  aint(G, n, "transB", 1);
  afloat(G, n, "alpha", 0.5);
  afloat(G, n, "beta", 2.0);
  output(G, y);
  ir_tensor in[3], out[1];
  pipe_and_run(G, "legalize", in, out, 4);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 7; j++) {
      double s = 0;
      for (int k = 0; k < 5; k++) s += (double)at(&in[0], k * 3 + i) * at(&in[1], j * 5 + k);
      double r = 0.5 * s + 2.0 * at(&in[2], j);
      ck_assert_msg(fabs(at(&out[0], i * 7 + j) - r) < 1e-5, "%d,%d", i, j);
    }
  free_tensors(in, 3);
  free_tensors(out, 1);
}
END_TEST

START_TEST(test_matmul_batch_broadcast) {
  int a = input(G, "a", 4, (tg_dim[]){C(2), C(1), C(3), C(5)});
  int b = input(G, "b", 3, (tg_dim[]){C(4), C(5), C(6)});
  int y = inter(G, "y", 4, (tg_dim[]){C(2), C(4), C(3), C(6)});
  node(G, TG_OP_MATMUL, "mm", 2, (int[]){a, b}, 1, &y);
  output(G, y);
  ir_tensor in[2], out[1];
  pipe_and_run(G, "legalize", in, out, 8);
  for (int p = 0; p < 2; p++)
    for (int q = 0; q < 4; q++)
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 6; j++) {
          double s = 0;
          for (int k = 0; k < 5; k++) s += (double)at(&in[0], (p * 3 + i) * 5 + k) * at(&in[1], (q * 5 + k) * 6 + j);
          ck_assert(fabs(at(&out[0], ((p * 4 + q) * 3 + i) * 6 + j) - s) < 1e-5);
        }
  free_tensors(in, 2);
  free_tensors(out, 1);
}
END_TEST

START_TEST(test_softmax_middle_axis) {
  int x = input(G, "x", 3, (tg_dim[]){C(2), C(5), C(3)});
  int y = inter(G, "y", 3, (tg_dim[]){C(2), C(5), C(3)});
  tg_node *n = node(G, TG_OP_SOFTMAX, "sm", 1, &x, 1, &y);
  aint(G, n, "axis", 1);
  output(G, y);
  ir_tensor in[1], out[1];
  pipe_and_run(G, "legalize", in, out, 1);
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 3; k++) {
      double mx = -1e30, s = 0;
      for (int j = 0; j < 5; j++) mx = fmax(mx, at(&in[0], (i * 5 + j) * 3 + k));
      for (int j = 0; j < 5; j++) s += exp(at(&in[0], (i * 5 + j) * 3 + k) - mx);
      for (int j = 0; j < 5; j++)
        ck_assert(fabs(at(&out[0], (i * 5 + j) * 3 + k) - exp(at(&in[0], (i * 5 + j) * 3 + k) - mx) / s) < 1e-6);
    }
  free_tensors(in, 1);
  free_tensors(out, 1);
}
END_TEST

START_TEST(test_layernorm_vs_workload) {
  int x = input(G, "x", 2, (tg_dim[]){C(3), C(7)});
  int g = rconst(G, "gamma", 1, (tg_dim[]){C(7)}, 21);
  int b = rconst(G, "beta", 1, (tg_dim[]){C(7)}, 22);
  int y = inter(G, "y", 2, (tg_dim[]){C(3), C(7)});
  node(G, TG_OP_LAYER_NORM, "ln", 3, (int[]){x, g, b}, 1, &y);
  output(G, y);
  ir_tensor in[1], out[1];
  pipe_and_run(G, "legalize", in, out, 5);
  ir_tensor args[4] = {in[0], const_tensor(G, "gamma"), const_tensor(G, "beta")};
  expect_workload("layernorm:m=3,n=7", args, 4, 2, (int64_t[]){3, 7}, &out[0]);
  free_tensors(in, 1);
  free_tensors(out, 1);
}
END_TEST

/* transpose, concat, slice, gather, pad, reshape, reduce in one graph, each
 * an output, checked element by element */
START_TEST(test_injective_and_reduce_ops) {
  int x = input(G, "x", 3, (tg_dim[]){C(2), C(3), C(7)});
  int x2 = input(G, "x2", 3, (tg_dim[]){C(2), C(2), C(7)});
  int tr = inter(G, "tr", 3, (tg_dim[]){C(7), C(2), C(3)});
  aints(G, node(G, TG_OP_TRANSPOSE, "tr", 1, &x, 1, &tr), "perm", 3, (int64_t[]){2, 0, 1});
  int cc = inter(G, "cc", 3, (tg_dim[]){C(2), C(5), C(7)});
  aint(G, node(G, TG_OP_CONCAT, "cat", 2, (int[]){x, x2}, 1, &cc), "axis", 1);
  int sl = inter(G, "sl", 3, (tg_dim[]){C(2), C(3), C(3)});
  tg_node *s = node(G, TG_OP_SLICE, "slice", 1, &x, 1, &sl);
  aints(G, s, "starts", 1, (int64_t[]){1});
  aints(G, s, "ends", 1, (int64_t[]){-1});
  aints(G, s, "axes", 1, (int64_t[]){2});
  aints(G, s, "steps", 1, (int64_t[]){2});
  int idx = iconst(G, "idx", 2, (int64_t[]){-1, 0});
  int ga = inter(G, "ga", 3, (tg_dim[]){C(2), C(2), C(7)});
  aint(G, node(G, TG_OP_GATHER, "gather", 2, (int[]){x, idx}, 1, &ga), "axis", 1);
  int pd = inter(G, "pd", 3, (tg_dim[]){C(2), C(6), C(7)});
  aints(G, node(G, TG_OP_PAD, "pad", 1, &x, 1, &pd), "pads", 6, (int64_t[]){0, 1, 0, 0, 2, 0});
  int rs = inter(G, "rs", 2, (tg_dim[]){C(7), C(6)});
  node(G, TG_OP_RESHAPE, "reshape", 1, &x, 1, &rs);
  int rm = inter(G, "rm", 3, (tg_dim[]){C(2), C(1), C(7)});
  tg_node *r = node(G, TG_OP_REDUCE_MEAN, "mean", 1, &x, 1, &rm);
  aints(G, r, "axes", 1, (int64_t[]){1});
  aint(G, r, "keepdims", 1);
  int outs[] = {tr, cc, sl, ga, pd, rs, rm};
  for (int i = 0; i < 7; i++) output(G, outs[i]);
  ir_tensor in[2], out[7];
  pipe_and_run(G, "legalize", in, out, 77);
#define X(i, j, k) at(&in[0], ((i) * 3 + (j)) * 7 + (k))
#define X2(i, j, k) at(&in[1], ((i) * 2 + (j)) * 7 + (k))
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 7; k++) ck_assert(at(&out[0], (k * 2 + i) * 3 + j) == X(i, j, k));
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 5; j++)
      for (int k = 0; k < 7; k++) ck_assert(at(&out[1], (i * 5 + j) * 7 + k) == (j < 3 ? X(i, j, k) : X2(i, j - 3, k)));
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 3; k++) ck_assert(at(&out[2], (i * 3 + j) * 3 + k) == X(i, j, 1 + 2 * k));
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 7; k++) {
      ck_assert(at(&out[3], (i * 2 + 0) * 7 + k) == X(i, 2, k));
      ck_assert(at(&out[3], (i * 2 + 1) * 7 + k) == X(i, 0, k));
    }
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 6; j++)
      for (int k = 0; k < 7; k++) {
        float want = j >= 1 && j - 1 < 3 ? X(i, j - 1, k) : 0.0f;
        ck_assert(at(&out[4], (i * 6 + j) * 7 + k) == want);
      }
  for (int f = 0; f < 42; f++) ck_assert(at(&out[5], f) == at(&in[0], f));
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 7; k++) {
      float sum = (X(i, 0, k) + X(i, 1, k)) + X(i, 2, k);
      ck_assert(fabsf(at(&out[6], i * 7 + k) - sum / 3.0f) < 1e-6f);
    }
#undef X
#undef X2
  free_tensors(in, 2);
  free_tensors(out, 7);
}
END_TEST


/* unary ops against libm, on one input through a chain of outputs */
START_TEST(test_unary_ops) {
  tg_dim d2[2] = {C(3), C(11)};
  int x = input(G, "x", 2, d2);
  static const tg_op ops[] = {TG_OP_RELU, TG_OP_LEAKY_RELU, TG_OP_SIGMOID, TG_OP_TANH, TG_OP_ERF,
                              TG_OP_GELU, TG_OP_CLIP, TG_OP_IDENTITY};
  enum { NOPS = (int)(sizeof ops / sizeof ops[0]) };
  int outs[NOPS + 3];
  for (int i = 0; i < NOPS; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "y%d", i);
    outs[i] = inter(G, nm, 2, d2);
    snprintf(nm, sizeof nm, "op%d", i);
    tg_node *n = node(G, ops[i], nm, 1, &x, 1, &outs[i]);
    if (ops[i] == TG_OP_LEAKY_RELU) afloat(G, n, "alpha", 0.2);
    if (ops[i] == TG_OP_GELU)
      ck_assert_int_eq(tg_node_set_attr(G, n, &(tg_attr){.name = "approximate", .kind = TG_A_STRING, .s = "tanh"}),
                       TS_OK);
    if (ops[i] == TG_OP_CLIP) {
      afloat(G, n, "min", -0.25);
      afloat(G, n, "max", 0.5);
    }
  }
  /* sqrt(x*x) = |x|; pow(x*x, 1.5) = |x|^3; cast to i32 truncates */
  int sq = inter(G, "sq", 2, d2);
  node(G, TG_OP_MUL, "sqm", 2, (int[]){x, x}, 1, &sq);
  outs[NOPS] = inter(G, "ab", 2, d2);
  node(G, TG_OP_SQRT, "sqrt", 1, &sq, 1, &outs[NOPS]);
  int e = fconst(G, "e", 1.5f);
  outs[NOPS + 1] = inter(G, "p", 2, d2);
  node(G, TG_OP_POW, "pow", 2, (int[]){sq, e}, 1, &outs[NOPS + 1]);
  int x10 = inter(G, "x10", 2, d2), ten = fconst(G, "ten", 10.0f);
  node(G, TG_OP_MUL, "x10m", 2, (int[]){x, ten}, 1, &x10);
  outs[NOPS + 2] = value(G, "ci", TG_V_INTER, ir_dt(IR_I32), 2, d2);
  node(G, TG_OP_CAST, "cast", 1, &x10, 1, &outs[NOPS + 2]);
  for (int i = 0; i < NOPS + 3; i++) output(G, outs[i]);
  run_pipe(G, NULL);
  /* siblings that share only an input are not fused (as in TVM): eight
   * kernels, {mul, sqrt, pow} with two outputs, {mul, cast} */
  ck_assert_int_eq(tg_count_called_funcs(G), 10);
  ir_tensor in[1], out[NOPS + 3];
  make_inputs(G, in, 0, 12);
  run(G, in, out);
  for (int f = 0; f < 33; f++) {
    double v = at(&in[0], f);
    double want[NOPS + 2] = {v > 0 ? v : 0,
                             v > 0 ? v : 0.2 * v,
                             1 / (1 + exp(-v)),
                             tanh(v),
                             erf(v),
                             0.5 * v * (1 + tanh(0.7978845608 * (v + 0.044715 * v * v * v))),
                             v < -0.25 ? -0.25 : v > 0.5 ? 0.5 : v,
                             v,
                             fabs(v),
                             fabs(v) * fabs(v) * fabs(v)};
    for (int i = 0; i < NOPS + 2; i++)
      ck_assert_msg(fabs(at(&out[i], f) - want[i]) < 2e-6, "output %d at %d: %g vs %g", i, f, at(&out[i], f), want[i]);
    ck_assert_int_eq(((int32_t *)out[NOPS + 2].data)[f], (int32_t)(float)(v * 10.0f));
  }
  free_tensors(in, 1);
  free_tensors(out, NOPS + 3);
}
END_TEST

START_TEST(test_split_and_edge_reflect_pad) {
  int x = input(G, "x", 2, (tg_dim[]){C(2), C(7)});
  int a = inter(G, "a", 2, (tg_dim[]){C(2), C(3)}), b = inter(G, "b", 2, (tg_dim[]){C(2), C(4)});
  aint(G, node(G, TG_OP_SPLIT, "split", 1, &x, 2, (int[]){a, b}), "axis", 1);
  int pe = inter(G, "pe", 2, (tg_dim[]){C(2), C(10)}), pr = inter(G, "pr", 2, (tg_dim[]){C(2), C(10)});
  tg_node *n = node(G, TG_OP_PAD, "pad_edge", 1, &x, 1, &pe);
  aints(G, n, "pads", 4, (int64_t[]){0, 2, 0, 1});
  tg_node_set_attr(G, n, &(tg_attr){.name = "mode", .kind = TG_A_STRING, .s = "edge"});
  n = node(G, TG_OP_PAD, "pad_reflect", 1, &x, 1, &pr);
  aints(G, n, "pads", 4, (int64_t[]){0, 2, 0, 1});
  tg_node_set_attr(G, n, &(tg_attr){.name = "mode", .kind = TG_A_STRING, .s = "reflect"});
  output(G, a);
  output(G, b);
  output(G, pe);
  output(G, pr);
  ir_tensor in[1], out[4];
  pipe_and_run(G, NULL, in, out, 21);
  for (int i = 0; i < 2; i++) {
    for (int j = 0; j < 3; j++) ck_assert(at(&out[0], i * 3 + j) == at(&in[0], i * 7 + j));
    for (int j = 0; j < 4; j++) ck_assert(at(&out[1], i * 4 + j) == at(&in[0], i * 7 + 3 + j));
    for (int j = 0; j < 10; j++) {
      int s = j - 2, e = s < 0 ? 0 : s > 6 ? 6 : s, r = s < 0 ? -s : s > 6 ? 12 - s : s;
      ck_assert(at(&out[2], i * 10 + j) == at(&in[0], i * 7 + e));
      ck_assert(at(&out[3], i * 10 + j) == at(&in[0], i * 7 + r));
    }
  }
  free_tensors(in, 1);
  free_tensors(out, 4);
}
END_TEST

START_TEST(test_conv_transpose_vs_workload) {
  int x = input(G, "x", 4, (tg_dim[]){C(2), C(2), C(5), C(3)});
  int w = rconst(G, "w", 4, (tg_dim[]){C(2), C(3), C(4), C(5)}, 90);
  /* oh = (5-1)*3 - 2*2 + 4 = 12, ow = (3-1)*3 - 4 + 5 = 7 */
  int y = inter(G, "y", 4, (tg_dim[]){C(2), C(3), C(12), C(7)});
  tg_node *n = node(G, TG_OP_CONV_TRANSPOSE, "convt", 2, (int[]){x, w}, 1, &y);
  aints(G, n, "strides", 2, (int64_t[]){3, 3});
  aints(G, n, "pads", 4, (int64_t[]){2, 2, 2, 2});
  output(G, y);
  ir_tensor in[1], out[1];
  pipe_and_run(G, NULL, in, out, 91);
  ir_tensor args[3] = {in[0], const_tensor(G, "w")};
  expect_workload("conv2d_transpose:n=2,c=2,h=5,w=3,k=3,r=4,s=5,stride=3,pad=2", args, 3, 4,
                  (int64_t[]){2, 3, 12, 7}, &out[0]);
  free_tensors(in, 1);
  free_tensors(out, 1);
}
END_TEST

START_TEST(test_conv_dilated_vs_workload) {
  conv_vs_workload_d("conv2d_nchw:n=1,c=2,h=9,w=9,k=3,r=3,s=3,stride=1,pad=2,dilation=2,groups=1");
}
END_TEST

START_TEST(test_matmul_vector_operands) {
  int v = input(G, "v", 1, (tg_dim[]){C(5)});
  int m = input(G, "m", 3, (tg_dim[]){C(2), C(5), C(3)});
  int y = inter(G, "y", 2, (tg_dim[]){C(2), C(3)});
  node(G, TG_OP_MATMUL, "vm", 2, (int[]){v, m}, 1, &y);
  int mt = input(G, "mt", 2, (tg_dim[]){C(4), C(5)});
  int z = inter(G, "z", 1, (tg_dim[]){C(4)});
  node(G, TG_OP_MATMUL, "mv", 2, (int[]){mt, v}, 1, &z);
  output(G, y);
  output(G, z);
  ir_tensor in[3], out[2];
  pipe_and_run(G, "legalize", in, out, 31);
  for (int b = 0; b < 2; b++)
    for (int j = 0; j < 3; j++) {
      double s = 0;
      for (int k = 0; k < 5; k++) s += (double)at(&in[0], k) * at(&in[1], (b * 5 + k) * 3 + j);
      ck_assert(fabs(at(&out[0], b * 3 + j) - s) < 1e-5);
    }
  for (int i = 0; i < 4; i++) {
    double s = 0;
    for (int k = 0; k < 5; k++) s += (double)at(&in[2], i * 5 + k) * at(&in[0], k);
    ck_assert(fabs(at(&out[1], i) - s) < 1e-5);
  }
  free_tensors(in, 3);
  free_tensors(out, 2);
}
END_TEST


/* 0-d results and rank-1 reductions: ReduceSum over all axes without
 * keepdims, softmax of a vector, a scalar constant broadcast */
START_TEST(test_scalar_and_vector_edges) {
  int x = input(G, "x", 2, (tg_dim[]){C(3), C(4)});
  int v = input(G, "v", 1, (tg_dim[]){C(5)});
  int s = inter(G, "s", 0, NULL);
  aint(G, node(G, TG_OP_REDUCE_SUM, "sum", 1, &x, 1, &s), "keepdims", 0);
  int sm = inter(G, "sm", 1, (tg_dim[]){C(5)});
  node(G, TG_OP_SOFTMAX, "softmax", 1, &v, 1, &sm);
  int two = fconst(G, "two", 2.0f);
  int t = inter(G, "t", 1, (tg_dim[]){C(5)});
  node(G, TG_OP_MUL, "twice", 2, (int[]){two, sm}, 1, &t);
  output(G, s);
  output(G, t);
  ir_tensor in[2], out[2];
  pipe_and_run(G, NULL, in, out, 4);
  ck_assert_int_eq(out[0].ndim, 0);
  double sum = 0;
  for (int i = 0; i < 12; i++) sum += at(&in[0], i);
  ck_assert(fabs(at(&out[0], 0) - sum) < 1e-5);
  double mx = -1e30, z = 0;
  for (int i = 0; i < 5; i++) mx = fmax(mx, at(&in[1], i));
  for (int i = 0; i < 5; i++) z += exp(at(&in[1], i) - mx);
  for (int i = 0; i < 5; i++) ck_assert(fabs(at(&out[1], i) - 2 * exp(at(&in[1], i) - mx) / z) < 1e-6);
  free_tensors(in, 2);
  free_tensors(out, 2);
}
END_TEST

/* ---- constant folding --------------------------------------------------------------- */

START_TEST(test_fold_shape_arithmetic) {
  /* y = Reshape(x, Concat(Gather(Shape(x), 0), [-1]))  with x [2, 3, 4] -> [2, 12];
   * plus c = 2 * 3 folded into a constant */
  int x = input(G, "x", 3, (tg_dim[]){C(2), C(3), C(4)});
  int sh = value(G, "sh", TG_V_INTER, I64, 1, (tg_dim[]){C(3)});
  node(G, TG_OP_SHAPE, "shape", 1, &x, 1, &sh);
  int i0 = iconst(G, "i0", 1, (int64_t[]){0});
  int g0 = value(G, "g0", TG_V_INTER, I64, 1, (tg_dim[]){C(1)});
  node(G, TG_OP_GATHER, "gather", 2, (int[]){sh, i0}, 1, &g0);
  int m1 = iconst(G, "m1", 1, (int64_t[]){-1});
  int tgt = value(G, "tgt", TG_V_INTER, I64, 1, (tg_dim[]){C(2)});
  aint(G, node(G, TG_OP_CONCAT, "cat", 2, (int[]){g0, m1}, 1, &tgt), "axis", 0);
  int y = inter(G, "y", 2, (tg_dim[]){C(2), C(12)});
  node(G, TG_OP_RESHAPE, "reshape", 2, (int[]){x, tgt}, 1, &y);
  int two = fconst(G, "two", 2.0f), three = fconst(G, "three", 3.0f);
  int six = value(G, "six", TG_V_INTER, F32, 0, NULL);
  node(G, TG_OP_MUL, "mul", 2, (int[]){two, three}, 1, &six);
  int z = inter(G, "z", 2, (tg_dim[]){C(2), C(12)});
  node(G, TG_OP_MUL, "scale", 2, (int[]){y, six}, 1, &z);
  output(G, z);
  run_pipe(G, "fold_constants");
  /* only the Reshape and the scaling remain; the target shape is [2, -1] */
  int live = 0;
  for (int i = 0; i < G->nnodes; i++) live += !G->nodes[i]->dead;
  ck_assert_int_eq(live, 2);
  int t = tg_value_find(G, "tgt");
  ck_assert_int_ge(t, 0);
  ck_assert_int_eq(G->values[t]->kind, TG_V_CONST);
  ck_assert_int_eq(((int64_t *)G->values[t]->data)[0], 2);
  ck_assert_int_eq(((int64_t *)G->values[t]->data)[1], -1);
  int s6 = tg_value_find(G, "six");
  ck_assert_int_eq(G->values[s6]->kind, TG_V_CONST);
  ck_assert(((float *)G->values[s6]->data)[0] == 6.0f);
  ir_tensor in[1], out[1];
  pipe_and_run(G, NULL, in, out, 3);
  for (int f = 0; f < 24; f++) ck_assert(at(&out[0], f) == at(&in[0], f) * 6.0f);
  ck_assert_int_eq(tg_count_called_funcs(G), 1); /* reshape fused with the scaling */
  free_tensors(in, 1);
  free_tensors(out, 1);
}
END_TEST


/* A Constant node in a hand-built graph (the importer never leaves one):
 * legalize alone folds it first; one it cannot read is refused by name */
START_TEST(test_constant_node) {
  int x = input(G, "x", 1, (tg_dim[]){C(3)});
  int c = inter(G, "c", 1, (tg_dim[]){C(3)});
  tg_node *k = node(G, TG_OP_CONSTANT, "const3", 0, NULL, 1, &c);
  tg_attr a = {.name = "value_floats", .kind = TG_A_FLOATS, .n = 3, .floats = (double[]){1.5, -2, 4}};
  ck_assert_int_eq(tg_node_set_attr(G, k, &a), TS_OK);
  int y = inter(G, "y", 1, (tg_dim[]){C(3)});
  node(G, TG_OP_MUL, "mul", 2, (int[]){x, c}, 1, &y);
  output(G, y);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tg_run_pass(G, "legalize", &d) == TS_OK, "%s", d.msg);
  ir_tensor in[1], out[1];
  make_inputs(G, in, 0, 1);
  run(G, in, out);
  ck_assert(at(&out[0], 0) == at(&in[0], 0) * 1.5f);
  ck_assert(at(&out[0], 1) == at(&in[0], 1) * -2.0f);
  ck_assert(at(&out[0], 2) == at(&in[0], 2) * 4.0f);
  free_tensors(in, 1);
  free_tensors(out, 1);
  /* a Constant without a readable value */
  ir_module *m2 = ir_module_new();
  tg_graph *g2 = tg_graph_new(m2, "g2");
  int c2 = inter(g2, "c2", 1, (tg_dim[]){C(2)});
  node(g2, TG_OP_CONSTANT, "mystery", 0, NULL, 1, &c2);
  output(g2, c2);
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_run_pipeline(g2, NULL, &d), TS_EUNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(d.msg, "mystery"));
  ir_module_free(m2);
}
END_TEST

/* ---- batch-norm folding ---------------------------------------------------------------- */

/* x[1,3,6,6] -> Conv(w, b) -> BN -> Relu -> y ; and a standalone BN on x */
static void conv_bn_graph(tg_graph *g, bool standalone) {
  int x = input(g, "x", 4, (tg_dim[]){C(1), C(3), C(6), C(6)});
  int bnin = x, ch = 3;
  if (!standalone) {
    int w = rconst(g, "w", 4, (tg_dim[]){C(4), C(3), C(3), C(3)}, 31);
    int b = rconst(g, "b", 1, (tg_dim[]){C(4)}, 32);
    int cv = inter(g, "cv", 4, (tg_dim[]){C(1), C(4), C(6), C(6)});
    tg_node *n = node(g, TG_OP_CONV, "conv", 3, (int[]){x, w, b}, 1, &cv);
    aints(g, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
    aints(g, n, "kernel_shape", 2, (int64_t[]){3, 3});
    bnin = cv;
    ch = 4;
  }
  int sc = rconst(g, "scale", 1, (tg_dim[]){C(ch)}, 33), bb = rconst(g, "bnb", 1, (tg_dim[]){C(ch)}, 34);
  int mn = rconst(g, "mean", 1, (tg_dim[]){C(ch)}, 35);
  int vr = value(g, "var", TG_V_CONST, F32, 1, (tg_dim[]){C(ch)});
  float vd[4] = {0.5f, 1.5f, 0.25f, 2.0f};
  ck_assert_int_eq(tg_value_set_data(g, vr, vd, (size_t)ch * 4, NULL), TS_OK);
  int bo = inter(g, "bo", 4, (tg_dim[]){C(1), C(ch), C(6), C(6)});
  afloat(g, node(g, TG_OP_BATCH_NORM, "bn", 5, (int[]){bnin, sc, bb, mn, vr}, 1, &bo), "epsilon", 1e-3);
  int y = inter(g, "y", 4, (tg_dim[]){C(1), C(ch), C(6), C(6)});
  node(g, TG_OP_RELU, "relu", 1, &bo, 1, &y);
  output(g, y);
}

static void bn_case(bool standalone) {
  conv_bn_graph(G, standalone);
  ir_module *m2 = ir_module_new();
  tg_graph *ref = tg_graph_new(m2, "ref");
  conv_bn_graph(ref, standalone);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tg_pass_legalize(ref, &d) == TS_OK, "%s", d.msg); /* BN computed as written */
  run_pipe(G, "fold_batchnorm");
  for (int i = 0; i < G->nnodes; i++) ck_assert(G->nodes[i]->dead || G->nodes[i]->op != TG_OP_BATCH_NORM);
  run_pipe(G, NULL);
  ck_assert_int_eq(tg_count_called_funcs(G), 1); /* conv+bias+relu (or mul+add+relu) in one */
  same_outputs(G, ref, 0, 17, 1e-5);
  ir_module_free(m2);
}

START_TEST(test_bn_into_conv) { bn_case(false); }
END_TEST
START_TEST(test_bn_standalone) { bn_case(true); }
END_TEST

/* ---- fusion ------------------------------------------------------------------------------ */

/* conv+bias -> relu -> conv -> add(residual) -> relu -> gap -> flatten -> gemm */
static void resnetish(tg_graph *g) {
  int x = input(g, "x", 4, (tg_dim[]){C(1), C(4), C(5), C(5)});
  tg_dim a4[4] = {C(1), C(4), C(5), C(5)};
  int w1 = rconst(g, "w1", 4, (tg_dim[]){C(4), C(4), C(3), C(3)}, 41);
  int w2 = rconst(g, "w2", 4, (tg_dim[]){C(4), C(4), C(3), C(3)}, 42);
  int b1 = rconst(g, "b1", 3, (tg_dim[]){C(4), C(1), C(1)}, 43);
  int c1 = inter(g, "c1", 4, a4), a1 = inter(g, "a1", 4, a4), r1 = inter(g, "r1", 4, a4);
  int c2 = inter(g, "c2", 4, a4), a2 = inter(g, "a2", 4, a4), r2 = inter(g, "r2", 4, a4);
  tg_node *n = node(g, TG_OP_CONV, "conv1", 2, (int[]){x, w1}, 1, &c1);
  aints(g, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
  node(g, TG_OP_ADD, "bias1", 2, (int[]){c1, b1}, 1, &a1);
  node(g, TG_OP_RELU, "relu1", 1, &a1, 1, &r1);
  n = node(g, TG_OP_CONV, "conv2", 2, (int[]){r1, w2}, 1, &c2);
  aints(g, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
  node(g, TG_OP_ADD, "res", 2, (int[]){c2, r1}, 1, &a2);
  node(g, TG_OP_RELU, "relu2", 1, &a2, 1, &r2);
  int gp = inter(g, "gp", 4, (tg_dim[]){C(1), C(4), C(1), C(1)});
  node(g, TG_OP_GLOBAL_AVERAGE_POOL, "gap", 1, &r2, 1, &gp);
  int fl = inter(g, "fl", 2, (tg_dim[]){C(1), C(4)});
  aint(g, node(g, TG_OP_FLATTEN, "flat", 1, &gp, 1, &fl), "axis", 1);
  int fw = rconst(g, "fw", 2, (tg_dim[]){C(3), C(4)}, 44), fb = rconst(g, "fb", 1, (tg_dim[]){C(3)}, 45);
  int y = inter(g, "y", 2, (tg_dim[]){C(1), C(3)});
  aint(g, node(g, TG_OP_GEMM, "fc", 3, (int[]){fl, fw, fb}, 1, &y), "transB", 1);
  output(g, y);
}

START_TEST(test_fuse_resnetish) {
  resnetish(G);
  ir_module *m2 = ir_module_new();
  tg_graph *ref = tg_graph_new(m2, "ref");
  resnetish(ref);
  run_pipe(ref, "legalize");
  ck_assert_int_eq(tg_count_called_funcs(ref), 9);
  run_pipe(G, NULL);
  /* {conv1, bias, relu}, {conv2, residual add, relu}, {gap}, {flatten, gemm} */
  ck_assert_int_eq(tg_count_called_funcs(G), 4);
  bool saw = false;
  for (int i = 0; i < G->nnodes; i++)
    if (!G->nodes[i]->dead && strstr(G->nodes[i]->callee, "fused_conv2d_add_relu")) saw = true;
  ck_assert(saw);
  ir_tensor in[1], o1[1], o2[1];
  make_inputs(G, in, 0, 5);
  run(G, in, o1);
  run(ref, in, o2);
  expect_close(&o1[0], &o2[0], 1e-5);
  free_tensors(in, 1);
  free_tensors(o1, 1);
  free_tensors(o2, 1);
  ir_module_free(m2);
}
END_TEST

/* MatMul then gelu written out: y*0.5*(1+erf(y/sqrt2)) — y read twice */
static void gelu_graph(tg_graph *g, const char *batch) {
  tg_dim xd[2] = {batch ? S(batch) : C(3), C(8)}, yd[2] = {batch ? S(batch) : C(3), C(5)};
  int x = input(g, "x", 2, xd);
  int w = rconst(g, "w", 2, (tg_dim[]){C(8), C(5)}, 51);
  int y = inter(g, "y", 2, yd), dv = inter(g, "dv", 2, yd), ef = inter(g, "ef", 2, yd), ad = inter(g, "ad", 2, yd),
      ml = inter(g, "ml", 2, yd), o = inter(g, "o", 2, yd);
  int s2 = fconst(g, "sqrt2", 1.41421356f), one = fconst(g, "one", 1.0f), half = fconst(g, "half", 0.5f);
  node(g, TG_OP_MATMUL, "mm", 2, (int[]){x, w}, 1, &y);
  node(g, TG_OP_DIV, "div", 2, (int[]){y, s2}, 1, &dv);
  node(g, TG_OP_ERF, "erf", 1, &dv, 1, &ef);
  node(g, TG_OP_ADD, "add", 2, (int[]){ef, one}, 1, &ad);
  node(g, TG_OP_MUL, "mul", 2, (int[]){y, ad}, 1, &ml);
  node(g, TG_OP_MUL, "mul2", 2, (int[]){ml, half}, 1, &o);
  output(g, o);
}

START_TEST(test_fuse_gelu_diamond_symbolic) {
  gelu_graph(G, "batch");
  ir_module *m2 = ir_module_new();
  tg_graph *ref = tg_graph_new(m2, "ref");
  gelu_graph(ref, "batch");
  run_pipe(ref, "legalize");
  ck_assert_int_eq(tg_count_called_funcs(ref), 6); /* one per node: the two Muls differ */
  run_pipe(G, NULL);
  ck_assert_int_eq(tg_count_called_funcs(G), 1);
  const tg_node *call = NULL;
  for (int i = 0; i < G->nnodes; i++)
    if (!G->nodes[i]->dead) call = G->nodes[i];
  const ir_func *f = ir_module_get(M, call->callee);
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(f->nsyms, 1);
  ck_assert_str_eq(f->syms[0]->name, "batch");
  /* one pipeline, two batch sizes */
  for (int64_t b = 1; b <= 3; b += 2) {
    ir_tensor in[1], o1[1], o2[1];
    make_inputs(G, in, b, 9 + (uint64_t)b);
    run(G, in, o1);
    run(ref, in, o2);
    ck_assert_int_eq(o1[0].shape[0], b);
    expect_close(&o1[0], &o2[0], 1e-5);
    /* and against C */
    const float *w = ref->values[tg_value_find(ref, "w")]->data;
    for (int i = 0; i < b; i++)
      for (int j = 0; j < 5; j++) {
        double s = 0;
        for (int k = 0; k < 8; k++) s += (double)at(&in[0], i * 8 + k) * w[k * 5 + j];
        double gl = s * 0.5 * (1 + erf(s / 1.41421356));
        ck_assert(fabs(at(&o1[0], i * 5 + j) - gl) < 1e-5);
      }
    free_tensors(in, 1);
    free_tensors(o1, 1);
    free_tensors(o2, 1);
  }
  ir_module_free(m2);
}
END_TEST

/* Transpose (injective) feeding a matmul is fused as its prologue; a value
 * read by two anchors is not pulled into either */
START_TEST(test_fuse_prologue_and_shared) {
  int x = input(G, "x", 2, (tg_dim[]){C(6), C(4)});
  int t = inter(G, "t", 2, (tg_dim[]){C(4), C(6)});
  aints(G, node(G, TG_OP_TRANSPOSE, "tr", 1, &x, 1, &t), "perm", 2, (int64_t[]){1, 0});
  int w = rconst(G, "w", 2, (tg_dim[]){C(6), C(3)}, 61);
  int y = inter(G, "y", 2, (tg_dim[]){C(4), C(3)});
  node(G, TG_OP_MATMUL, "mm", 2, (int[]){t, w}, 1, &y);
  int r = inter(G, "r", 2, (tg_dim[]){C(4), C(3)});
  node(G, TG_OP_RELU, "relu", 1, &y, 1, &r);
  int s1 = inter(G, "s1", 2, (tg_dim[]){C(4), C(3)}), s2 = inter(G, "s2", 2, (tg_dim[]){C(4), C(3)});
  aint(G, node(G, TG_OP_SOFTMAX, "sm1", 1, &r, 1, &s1), "axis", 1);
  aint(G, node(G, TG_OP_SOFTMAX, "sm2", 1, &r, 1, &s2), "axis", 0);
  output(G, s1);
  output(G, s2);
  run_pipe(G, NULL);
  /* {tr, mm, relu}, {sm1}, {sm2} */
  ck_assert_int_eq(tg_count_called_funcs(G), 3);
  ir_tensor in[1], out[2];
  make_inputs(G, in, 0, 2);
  run(G, in, out);
  /* softmax over axis 1 of relu(x^T w) sums to 1 per row */
  for (int i = 0; i < 4; i++) {
    double s = 0;
    for (int j = 0; j < 3; j++) s += at(&out[0], i * 3 + j);
    ck_assert(fabs(s - 1) < 1e-5);
  }
  free_tensors(in, 1);
  free_tensors(out, 2);
}
END_TEST


/* A transcendental op (TG_OPF_COSTLY) is never a matmul's prologue, which
 * would recompute it for every tile of outputs that reads the element
 * (GPT-2's tanh GELU in front of its second MLP Gemm): tanh and the mul
 * after it stay a kernel of their own, the cheap transpose still fuses. */
START_TEST(test_fuse_costly_not_prologue) {
  int x = input(G, "x", 2, (tg_dim[]){C(6), C(4)});
  int t = inter(G, "t", 2, (tg_dim[]){C(6), C(4)});
  node(G, TG_OP_TANH, "tanh", 1, &x, 1, &t);
  int u = inter(G, "u", 2, (tg_dim[]){C(4), C(6)});
  aints(G, node(G, TG_OP_TRANSPOSE, "tr", 1, &t, 1, &u), "perm", 2, (int64_t[]){1, 0});
  int w = rconst(G, "w", 2, (tg_dim[]){C(6), C(3)}, 61);
  int y = inter(G, "y", 2, (tg_dim[]){C(4), C(3)});
  node(G, TG_OP_MATMUL, "mm", 2, (int[]){u, w}, 1, &y);
  output(G, y);
  float wv[18];
  memcpy(wv, G->values[w]->data, sizeof wv); /* the passes renumber values */
  run_pipe(G, NULL);
  /* {tanh}, {tr, mm} */
  ck_assert_int_eq(tg_count_called_funcs(G), 2);
  ir_tensor in[1], out[1];
  make_inputs(G, in, 0, 1);
  run(G, in, out);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) {
      double r = 0;
      for (int k = 0; k < 6; k++) r += tanh(at(&in[0], k * 4 + i)) * wv[k * 3 + j];
      ck_assert_msg(fabs(at(&out[0], i * 3 + j) - r) < 1e-5, "y[%d,%d] = %g, want %g", i, j, at(&out[0], i * 3 + j), r);
    }
  free_tensors(in, 1);
  free_tensors(out, 1);
}
END_TEST

/* Pad is fused into the convolution that reads it (prologue), the relu
 * after it (epilogue); a second run of the pipeline changes nothing */
static void pad_conv(tg_graph *g) {
  int x = input(g, "x", 4, (tg_dim[]){C(1), C(2), C(5), C(6)});
  int p = inter(g, "p", 4, (tg_dim[]){C(1), C(2), C(7), C(9)});
  aints(g, node(g, TG_OP_PAD, "pad", 1, &x, 1, &p), "pads", 8, (int64_t[]){0, 0, 1, 2, 0, 0, 1, 1});
  int w = rconst(g, "w", 4, (tg_dim[]){C(3), C(2), C(3), C(3)}, 3);
  int c = inter(g, "c", 4, (tg_dim[]){C(1), C(3), C(5), C(7)});
  node(g, TG_OP_CONV, "conv", 2, (int[]){p, w}, 1, &c);
  int y = inter(g, "y", 4, (tg_dim[]){C(1), C(3), C(5), C(7)});
  node(g, TG_OP_RELU, "relu", 1, &c, 1, &y);
  output(g, y);
}

START_TEST(test_fuse_pad_prologue_idempotent) {
  pad_conv(G);
  ir_module *m2 = ir_module_new();
  tg_graph *ref = tg_graph_new(m2, "ref");
  pad_conv(ref);
  run_pipe(ref, "legalize");
  run_pipe(G, NULL);
  ck_assert_int_eq(tg_count_called_funcs(G), 1);
  const char *callee = NULL;
  for (int i = 0; i < G->nnodes; i++)
    if (!G->nodes[i]->dead) callee = G->nodes[i]->callee;
  ck_assert_ptr_nonnull(strstr(callee, "fused_pad_conv2d_relu"));
  int nn = G->nnodes, nv = G->nvalues, nf = M->nfuncs;
  run_pipe(G, NULL);
  ck_assert_int_eq(G->nnodes, nn);
  ck_assert_int_eq(G->nvalues, nv);
  ck_assert_int_eq(M->nfuncs, nf);
  ir_tensor in[1], o1[1], o2[1];
  make_inputs(G, in, 0, 8);
  run(G, in, o1);
  run(ref, in, o2);
  expect_close(&o1[0], &o2[0], 1e-6);
  free_tensors(in, 1);
  free_tensors(o1, 1);
  free_tensors(o2, 1);
  ir_module_free(m2);
}
END_TEST


/* Random DAGs of elementwise, broadcast, injective and anchor ops over
 * [4, 4] values, or [batch, 4, 4] run at batch 3 (reductions come back
 * through a broadcast add): whatever
 * fusion decides, the graph verifies (no cycles, every call well formed)
 * and computes what the unfused graph computes. */
static void random_dag(tg_graph *g, uint64_t seed, bool sym) {
  ts_rng r;
  ts_rng_seed(&r, seed * 7919 + 1);
  /* [4, 4] values, or with sym [batch, 4, 4] (the op axes shift by one) */
  int R = sym ? 3 : 2, o = R - 2;
  tg_dim sq[3] = {S("batch"), C(4), C(4)}, col[3] = {S("batch"), C(4), C(1)};
  tg_dim *vs = sym ? sq : sq + 1, *vc = sym ? col : col + 1;
  int vals[64], nv = 0;
  vals[nv++] = input(g, "x", R, vs);
  vals[nv++] = input(g, "z", R, vs);
  int w = rconst(g, "w", 2, (tg_dim[]){C(4), C(4)}, seed + 3);
  bool used[64] = {false};
  for (int i = 0; i < 18; i++) {
    char nm[32], vn[32];
    snprintf(nm, sizeof nm, "n%d", i);
    snprintf(vn, sizeof vn, "v%d", i);
    int a = vals[ts_rng_below(&r, (uint64_t)nv)], b = vals[ts_rng_below(&r, (uint64_t)nv)];
    int y = inter(g, vn, R, vs);
    switch (ts_rng_below(&r, 7)) {
      case 0: node(g, TG_OP_RELU, nm, 1, &a, 1, &y); break;
      case 1: node(g, TG_OP_ADD, nm, 2, (int[]){a, b}, 1, &y); break;
      case 2: node(g, TG_OP_MATMUL, nm, 2, (int[]){a, ts_rng_below(&r, 2) ? w : b}, 1, &y); break;
      case 3:
        aints(g, node(g, TG_OP_TRANSPOSE, nm, 1, &a, 1, &y), "perm", R, sym ? (int64_t[]){0, 2, 1} : (int64_t[]){1, 0});
        break;
      case 4: aint(g, node(g, TG_OP_SOFTMAX, nm, 1, &a, 1, &y), "axis", 1 + o); break;
      case 5: node(g, TG_OP_SIGMOID, nm, 1, &a, 1, &y); break;
      default: {
        snprintf(vn, sizeof vn, "s%d", i);
        int s = inter(g, vn, R, vc);
        tg_node *n = node(g, TG_OP_REDUCE_SUM, nm, 1, &a, 1, &s);
        aints(g, n, "axes", 1, (int64_t[]){1 + o});
        snprintf(nm, sizeof nm, "n%db", i);
        node(g, TG_OP_ADD, nm, 2, (int[]){b, s}, 1, &y);
        break;
      }
    }
    for (int k = 0; k < nv; k++)
      if (vals[k] == a || vals[k] == b) used[k] = true;
    vals[nv++] = y;
  }
  /* every value nobody reads is an output, and one read value too */
  for (int k = 2; k < nv; k++)
    if (!used[k] || k == nv / 2) output(g, vals[k]);
}

START_TEST(test_fuse_random_dags) {
  for (uint64_t seed = 0; seed < 200; seed++) {
    bool sym = seed % 4 == 3; /* every fourth graph has a symbolic batch */
    ir_module *m1 = ir_module_new(), *m2 = ir_module_new();
    tg_graph *ref = tg_graph_new(m1, "ref"), *g = tg_graph_new(m2, "g");
    random_dag(ref, seed, sym);
    random_dag(g, seed, sym);
    run_pipe(ref, "legalize");
    ts_diag d;
    ts_diag_clear(&d);
    ck_assert_msg(tg_run_pipeline(g, NULL, &d) == TS_OK, "seed %llu: %s", (unsigned long long)seed, d.msg);
    ck_assert_msg(tg_graph_verify(g, &d) == TS_OK, "seed %llu: %s", (unsigned long long)seed, d.msg);
    ck_assert_int_le(tg_count_called_funcs(g), tg_count_called_funcs(ref));
    ir_tensor in[2], o1[16], o2[16];
    ck_assert_int_le(g->noutputs, 16);
    make_inputs(g, in, sym ? 3 : 0, seed);
    run(g, in, o1);
    run(ref, in, o2);
    for (int i = 0; i < g->noutputs; i++) expect_close(&o1[i], &o2[i], 1e-5);
    free_tensors(in, 2);
    free_tensors(o1, g->noutputs);
    free_tensors(o2, g->noutputs);
    ir_module_free(m1);
    ir_module_free(m2);
  }
}
END_TEST

/* ---- layout rewrite ----------------------------------------------------------------------- */

/* Gemm with transB=1 and a constant B [N, K] gets B packed [K, N] (transB=0);
 * a MatMul's constant B [K, N] stays as it is. Extents odd and prime. */
START_TEST(test_layout_rewrite_gemm_matmul) {
  int x = input(G, "x", 2, (tg_dim[]){C(3), C(7)});
  int w = rconst(G, "w", 2, (tg_dim[]){C(5), C(7)}, 71); /* [N=5, K=7] */
  int y = inter(G, "y", 2, (tg_dim[]){C(3), C(5)});
  aint(G, node(G, TG_OP_GEMM, "fc", 2, (int[]){x, w}, 1, &y), "transB", 1);
  int w2 = rconst(G, "w2", 2, (tg_dim[]){C(5), C(11)}, 72); /* [K=5, N=11] */
  int z = inter(G, "z", 2, (tg_dim[]){C(3), C(11)});
  node(G, TG_OP_MATMUL, "mm", 2, (int[]){y, w2}, 1, &z);
  output(G, z);
  float wv[35], w2v[55];
  memcpy(wv, G->values[w]->data, sizeof wv);
  memcpy(w2v, G->values[w2]->data, sizeof w2v);
  run_pipe(G, NULL);
  int p = tg_value_find(G, "w_packed_kn");
  ck_assert_int_ge(p, 0);
  ck_assert_int_eq(G->values[p]->dims[0].value, 7);
  ck_assert_int_eq(G->values[p]->dims[1].value, 5);
  ck_assert_int_lt(tg_value_find(G, "w"), 0); /* the unpacked weight is gone */
  ck_assert_int_ge(tg_value_find(G, "w2"), 0); /* MatMul's B is kept */
  ir_tensor in[1], out[1];
  make_inputs(G, in, 0, 3);
  run(G, in, out);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 11; j++) {
      double s = 0;
      for (int n = 0; n < 5; n++) {
        double yv = 0;
        for (int k = 0; k < 7; k++) yv += (double)at(&in[0], i * 7 + k) * wv[n * 7 + k];
        s += yv * w2v[n * 11 + j];
      }
      ck_assert_msg(fabs(at(&out[0], i * 11 + j) - s) < 1e-4, "%d,%d", i, j);
    }
  free_tensors(in, 1);
  free_tensors(out, 1);
}
END_TEST

/* ---- tasks ---------------------------------------------------------------------------------- */

START_TEST(test_tasks_weights_keys_flops) {
  /* three identical conv+relu blocks (same shapes) and one different */
  int cur = input(G, "x", 4, (tg_dim[]){C(1), C(4), C(6), C(6)});
  tg_dim a4[4] = {C(1), C(4), C(6), C(6)};
  for (int i = 0; i < 3; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "w%d", i);
    int w = rconst(G, nm, 4, (tg_dim[]){C(4), C(4), C(3), C(3)}, 80 + (uint64_t)i);
    snprintf(nm, sizeof nm, "c%d", i);
    int c = inter(G, nm, 4, a4);
    snprintf(nm, sizeof nm, "r%d", i);
    int r = inter(G, nm, 4, a4);
    snprintf(nm, sizeof nm, "conv%d", i);
    aints(G, node(G, TG_OP_CONV, nm, 2, (int[]){cur, w}, 1, &c), "pads", 4, (int64_t[]){1, 1, 1, 1});
    snprintf(nm, sizeof nm, "relu%d", i);
    node(G, TG_OP_RELU, nm, 1, &c, 1, &r);
    cur = r;
  }
  int sm = inter(G, "sm", 4, a4);
  aint(G, node(G, TG_OP_SOFTMAX, "soft", 1, &cur, 1, &sm), "axis", 1);
  output(G, sm);
  run_pipe(G, NULL);
  tg_task *t = NULL;
  int n = 0;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tg_extract_tasks(G, &t, &n, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_eq(n, 2);
  ck_assert_int_eq(t[0].weight, 3);
  ck_assert_int_eq(t[1].weight, 1);
  ck_assert_ptr_nonnull(strstr(t[0].name, "fused_conv2d_relu"));
  /* the key is the tuner's workload key of the function */
  char key[17], mine[17];
  ir_workload_key(t[0].func, key);
  snprintf(mine, sizeof mine, "%016llx", (unsigned long long)t[0].key);
  ck_assert_str_eq(key, mine);
  /* conv: 2 * (1*4*6*6) * 4*3*3 = 10368 MAC-FLOPs (padded taps counted, as the
   * workload library does) + 144 relu maxes */
  ck_assert_msg(fabs(t[0].flops - (10368.0 + 144.0)) < 0.5, "flops %g", t[0].flops);
  /* the definition parses back into the same function */
  ir_func *back = NULL;
  ts_arena *a = ts_arena_new();
  ck_assert_msg(ir_parse_func(a, t[0].definition, strlen(t[0].definition), "def", &back, &d) == TS_OK, "%s", d.msg);
  ck_assert(ir_struct_equal_func(back, t[0].func));
  ts_arena_free(a);
  tg_tasks_free(t, n);
}
END_TEST

START_TEST(test_tasks_symbolic_bound) {
  gelu_graph(G, "batch");
  run_pipe(G, NULL);
  tg_task *t = NULL;
  int n = 0;
  ck_assert_int_eq(tg_extract_tasks(G, &t, &n, NULL), TS_OK);
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(t[0].func->nsyms, 0);
  uint64_t k1 = t[0].key;
  double f1 = t[0].flops;
  tg_tasks_free(t, n);
  const char *nm[] = {"batch"};
  int64_t vals[] = {4};
  ck_assert_int_eq(tg_extract_tasks_at(G, 1, nm, vals, &t, &n, NULL), TS_OK);
  ck_assert(t[0].key != k1);                 /* a different size, a different task */
  ck_assert(fabs(t[0].flops - 4 * f1) < 1e-6); /* everything scales with the batch */
  tg_tasks_free(t, n);
}
END_TEST

/* ---- refusals --------------------------------------------------------------------------------- */

START_TEST(test_refusals) {
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_run_pipeline(G, "nonsense", &d), TS_ENOTFOUND);
  ck_assert_ptr_nonnull(strstr(d.msg, "fold_constants"));
  int x = input(G, "x", 3, (tg_dim[]){C(2), C(3), C(4)});
  int st = input(G, "st", 1, (tg_dim[]){C(1)});
  G->values[st]->dtype = I64;
  int y = inter(G, "y", 3, (tg_dim[]){C(2), C(3), C(2)});
  int e = iconst(G, "e", 1, (int64_t[]){3});
  node(G, TG_OP_SLICE, "runtime_slice", 3, (int[]){x, st, e}, 1, &y);
  output(G, y);
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_run_pipeline(G, NULL, &d), TS_EUNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(d.msg, "runtime_slice"));
  ck_assert_ptr_nonnull(strstr(d.msg, "Slice"));
  /* the graph interpreter refuses an unlegalised graph, naming the node */
  ir_tensor in[2], out[1];
  make_inputs(G, in, 0, 1);
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_run(G, in, out, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "runtime_slice"));
  free_tensors(in, 2);
}
END_TEST

START_TEST(test_pass_names) {
  int n = 0;
  const char *const *names = tg_pass_names(&n);
  ck_assert_int_eq(n, 10);
  ck_assert_str_eq(names[0], "qdq");
  ck_assert_str_eq(names[1], "fold_constants");
  ck_assert_str_eq(names[n - 1], "dce");
  for (int i = 0; i < n; i++) {
    ir_module *m = ir_module_new();
    tg_graph *g = tg_graph_new(m, "g");
    resnetish(g);
    ts_diag d;
    ts_diag_clear(&d);
    ck_assert_msg(tg_run_pipeline(g, names[i], &d) == TS_OK, "%s: %s", names[i], d.msg);
    ck_assert_msg(tg_graph_verify(g, &d) == TS_OK, "%s: %s", names[i], d.msg);
    ir_module_free(m);
  }
}
END_TEST


/* ---- the generated ONNX models ------------------------------------------------------------- */

#include <sys/stat.h>
#include <unistd.h>

#include "ir/graph/onnx.h"

static bool exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

/* MODELS_DIR (set by meson, generated by tests/models) or, when the test
 * runs by hand, a fresh directory written by the set-up's venv. NULL (the
 * model tests are skipped, saying why) when neither is there. */
static const char *models_dir(void) {
  static char dir[512];
  static int state = 0;
  if (state) return state > 0 ? dir : NULL;
  char p[700];
  const char *m = getenv("MODELS_DIR");
  snprintf(p, sizeof p, "%s/mlp.onnx", m ? m : "");
  if (m && exists(p)) {
    snprintf(dir, sizeof dir, "%s", m);
    state = 1;
    return dir;
  }
  const char *root = getenv("TESSEL_SOURCE_ROOT");
  char py[600], cmd[2000];
  snprintf(py, sizeof py, "%s/.venv/bin/python", root ? root : ".");
  snprintf(dir, sizeof dir, "/tmp/tessel-passes-models-XXXXXX");
  if (!exists(py) || !mkdtemp(dir)) {
    fprintf(stderr, "test_passes: no MODELS_DIR and no %s: the ONNX model checks are skipped\n", py);
    state = -1;
    return NULL;
  }
  snprintf(cmd, sizeof cmd, "%s %s/tests/models/gen_models.py %s >/dev/null", py, root ? root : ".", dir);
  state = system(cmd) == 0 ? 1 : -1;
  if (state < 0) fprintf(stderr, "test_passes: '%s' failed: the ONNX model checks are skipped\n", cmd);
  return state > 0 ? dir : NULL;
}

static tg_graph *import(ir_module *m, const char *name) {
  char p[700];
  snprintf(p, sizeof p, "%s/%s.onnx", models_dir(), name);
  tg_graph *g = NULL;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tg_onnx_import(p, m, &g, &d) == TS_OK, "%s: %s", p, d.msg);
  return g;
}

/* PrimFuncs before fusion (after legalize: one per op) and after the whole
 * pipeline; the fused graph's interpreter result equals the unfused one's
 * (at two sizes of every symbolic dim). */
static void model_case(const char *name, int before, int after) {
  if (!models_dir()) return;
  ir_module *m1 = ir_module_new(), *m2 = ir_module_new();
  tg_graph *ref = import(m1, name), *g = import(m2, name);
  run_pipe(ref, "legalize");
  run_pipe(g, NULL);
  int nb = tg_count_called_funcs(ref), na = tg_count_called_funcs(g);
  fprintf(stderr, "%s: %d PrimFuncs before fusion, %d after\n", name, nb, na);
  ck_assert_int_eq(nb, before);
  ck_assert_int_eq(na, after);
  for (int64_t b = 1; b <= 3; b += 2) {
    ir_tensor in[8], o1[8], o2[8];
    ck_assert_int_le(g->ninputs, 8);
    ck_assert_int_le(g->noutputs, 8);
    make_inputs(g, in, b, 100 + (uint64_t)b);
    run(g, in, o1);
    run(ref, in, o2);
    for (int i = 0; i < g->noutputs; i++) expect_close(&o1[i], &o2[i], 1e-5);
    free_tensors(in, g->ninputs);
    free_tensors(o1, g->noutputs);
    free_tensors(o2, g->noutputs);
  }
  ir_module_free(m1);
  ir_module_free(m2);
}

START_TEST(test_model_mlp) { model_case("mlp", MLP_BEFORE, MLP_AFTER); }
END_TEST
START_TEST(test_model_cnn) { model_case("cnn", CNN_BEFORE, CNN_AFTER); }
END_TEST
START_TEST(test_model_transformer) { model_case("transformer", TR_BEFORE, TR_AFTER); }
END_TEST
START_TEST(test_model_transformer_erf) { model_case("transformer_erf", TRE_BEFORE, TRE_AFTER); }
END_TEST

static Suite *passes_suite(void) {
  Suite *s = suite_create("passes");
  TCase *tc = tcase_create("ops");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_broadcast_binary);
  tcase_add_test(tc, test_conv_strided_padded);
  tcase_add_test(tc, test_conv_grouped);
  tcase_add_test(tc, test_winograd_odd);
  tcase_add_test(tc, test_conv_polyphase_off);
  tcase_add_test(tc, test_pass_opts_strings);
  tcase_add_test(tc, test_winograd_symbolic_batch);
  tcase_add_test(tc, test_winograd_f2);
  tcase_add_test(tc, test_winograd_thresholds);
  tcase_add_test(tc, test_nchwc_plain_input);
  tcase_add_test(tc, test_nchwc_symbolic_batch);
  tcase_add_test(tc, test_nchwc_fallback);
  tcase_add_test(tc, test_max_pool);
  tcase_add_test(tc, test_avg_pool_include_pad);
  tcase_add_test(tc, test_avg_pool_exclude_pad);
  tcase_add_test(tc, test_gemm_trans_alpha_beta);
  tcase_add_test(tc, test_matmul_batch_broadcast);
  tcase_add_test(tc, test_softmax_middle_axis);
  tcase_add_test(tc, test_layernorm_vs_workload);
  tcase_add_test(tc, test_injective_and_reduce_ops);
  tcase_add_test(tc, test_unary_ops);
  tcase_add_test(tc, test_split_and_edge_reflect_pad);
  tcase_add_test(tc, test_conv_transpose_vs_workload);
  tcase_add_test(tc, test_conv_dilated_vs_workload);
  tcase_add_test(tc, test_matmul_vector_operands);
  tcase_add_test(tc, test_scalar_and_vector_edges);
  suite_add_tcase(s, tc);
  tc = tcase_create("passes");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_fold_shape_arithmetic);
  tcase_add_test(tc, test_constant_node);
  tcase_add_test(tc, test_bn_into_conv);
  tcase_add_test(tc, test_bn_standalone);
  tcase_add_test(tc, test_fuse_resnetish);
  tcase_add_test(tc, test_fuse_gelu_diamond_symbolic);
  tcase_add_test(tc, test_fuse_prologue_and_shared);
  tcase_add_test(tc, test_fuse_costly_not_prologue);
  tcase_add_test(tc, test_fuse_pad_prologue_idempotent);
  tcase_add_test(tc, test_fuse_random_dags);
  tcase_add_test(tc, test_layout_rewrite_gemm_matmul);
  tcase_add_test(tc, test_tasks_weights_keys_flops);
  tcase_add_test(tc, test_tasks_symbolic_bound);
  tcase_add_test(tc, test_refusals);
  tcase_add_test(tc, test_pass_names);
  suite_add_tcase(s, tc);
  tc = tcase_create("models");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_model_mlp);
  tcase_add_test(tc, test_model_cnn);
  tcase_add_test(tc, test_model_transformer);
  tcase_add_test(tc, test_model_transformer_erf);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(passes_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
