/* test_graph.c — the graph IR (ir/graph/graph.h): building values and nodes,
 * attributes, the printer's text, consumers and replace_uses, compaction
 * (dead nodes, unreferenced values, renumbering, topological re-sort), the
 * verifier's refusals, calls into PrimFuncs, the name indexes (100k
 * values, compaction, node renames, allocation failures while they grow),
 * and the module freeing the graph's tables (run under valgrind with
 * --setup valgrind). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "ir/graph/graph.h"
#include "ir/workloads/workloads.h"

static ir_module *M;
static tg_graph *G;

static void gsetup(void) {
  M = ir_module_new();
  ck_assert_ptr_nonnull(M);
  G = tg_graph_new(M, "net");
  ck_assert_ptr_nonnull(G);
}
static void gteardown(void) { ir_module_free(M); }

static tg_dim C(int64_t v) { return (tg_dim){v, NULL}; }
static tg_dim S(const char *s) { return (tg_dim){-1, s}; }

static int val(const char *name, tg_value_kind k, int n, const tg_dim *dims) {
  ts_diag d;
  ts_diag_clear(&d);
  int id = tg_value_add(G, name, k, ir_dt(IR_F32), n, dims, &d);
  ck_assert_msg(id >= 0, "%s", d.msg);
  return id;
}

static int node(tg_op op, const char *name, int nin, const int *in, int nout, const int *out) {
  ts_diag d;
  ts_diag_clear(&d);
  int id = tg_node_add(G, op, name, nin, in, nout, out, &d);
  ck_assert_msg(id >= 0, "%s", d.msg);
  return id;
}

static char *print_graph(void) {
  ts_strbuf sb;
  ts_strbuf_init(&sb);
  tg_graph_print(G, &sb);
  return ts_strbuf_take(&sb);
}

/* x[batch,4] -> Relu -> r; r + b(const[4]) -> y; output y */
static void small_graph(int *x, int *b, int *r, int *y) {
  tg_dim xd[2] = {S("batch"), C(4)};
  *x = val("x", TG_V_INPUT, 2, xd);
  *b = val("b", TG_V_CONST, 1, (tg_dim[]){C(4)});
  float bd[4] = {1, 2, 3, 4};
  ck_assert_int_eq(tg_value_set_data(G, *b, bd, sizeof bd, NULL), TS_OK);
  *r = val("r", TG_V_INTER, 2, xd);
  *y = val("y", TG_V_INTER, 2, xd);
  node(TG_OP_RELU, "relu0", 1, x, 1, r);
  node(TG_OP_ADD, "add0", 2, (int[]){*r, *b}, 1, y);
  ck_assert_int_eq(tg_graph_add_input(G, *x), TS_OK);
  ck_assert_int_eq(tg_graph_add_output(G, *y), TS_OK);
}

START_TEST(test_op_names) {
  ck_assert_str_eq(tg_op_name(TG_OP_CONV), "Conv");
  ck_assert_str_eq(tg_op_name(TG_OP_LAYER_NORM), "LayerNormalization");
  for (int i = 0; i < TG_OP_COUNT; i++) ck_assert_int_eq(tg_op_from_name(tg_op_name((tg_op)i)), i);
  ck_assert_int_eq(tg_op_from_name("NotAnOp"), TG_OP_COUNT);
  ck_assert_int_eq(tg_op_from_name(NULL), TG_OP_COUNT);
}
END_TEST

START_TEST(test_build_and_lookup) {
  int x, b, r, y;
  small_graph(&x, &b, &r, &y);
  ck_assert_int_eq(G->nvalues, 4);
  ck_assert_int_eq(G->nnodes, 2);
  ck_assert_ptr_eq(tg_graph_get(M, NULL), G);
  ck_assert_ptr_eq(tg_graph_get(M, "net"), G);
  ck_assert_ptr_null(tg_graph_get(M, "other"));
  ck_assert_ptr_null(ir_module_get(M, "net")); /* not a PrimFunc */
  ck_assert_int_eq(tg_value_find(G, "r"), r);
  ck_assert_int_eq(tg_value_find(G, "nope"), -1);
  ck_assert_int_eq(G->values[r]->producer, 0);
  ck_assert_int_eq(G->values[x]->producer, -1);
  ck_assert(!tg_value_is_static(G->values[x]));
  ck_assert_int_eq(tg_value_numel(G->values[x]), -1);
  ck_assert_int_eq(tg_value_numel(G->values[b]), 4);
  ck_assert(tg_value_is_static(G->values[b]));
  /* dims are copied, symbol strings too */
  char sym[8] = "batch";
  int z = val("z", TG_V_INTER, 1, (tg_dim[]){S(sym)});
  sym[0] = 'X';
  ck_assert_str_eq(G->values[z]->dims[0].sym, "batch");
  ck_assert_int_eq(G->values[z]->dims[0].value, -1);
  ck_assert(tg_dim_eq(G->values[z]->dims[0], S("batch")));
  ck_assert(!tg_dim_eq(G->values[z]->dims[0], C(4)));
  ck_assert(tg_dim_eq(C(7), C(7)));
  /* a made-up name for an unnamed value, unique */
  int u1 = val(NULL, TG_V_INTER, 0, NULL), u2 = val("", TG_V_INTER, 0, NULL);
  ck_assert_str_ne(G->values[u1]->name, G->values[u2]->name);
  /* an unnamed node gets a unique name from its op */
  int n1 = node(TG_OP_RELU, NULL, 1, (int[]){y}, 1, (int[]){u1});
  ck_assert_str_eq(G->nodes[n1]->name, "Relu_2");
}
END_TEST

START_TEST(test_value_errors) {
  int x, b, r, y;
  small_graph(&x, &b, &r, &y);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_value_add(G, "x", TG_V_INTER, ir_dt(IR_F32), 0, NULL, &d), -1);
  ck_assert_int_eq(d.code, TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "'x' is already taken"));
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_value_add(G, "q", TG_V_INTER, ir_dt(IR_F32), 1, (tg_dim[]){C(-3)}, &d), -1);
  ck_assert_ptr_nonnull(strstr(d.msg, "value q: dim 0"));
  ts_diag_clear(&d);
  float three[3] = {0};
  ck_assert_int_eq(tg_value_set_data(G, b, three, sizeof three, &d), TS_ESHAPE);
  ck_assert_ptr_nonnull(strstr(d.msg, "constant b: 12 bytes given, its type needs 16"));
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_value_set_data(G, 99, three, sizeof three, &d), TS_EINVAL);
  ck_assert_int_eq(tg_graph_add_input(G, 99), TS_EINVAL);
  ck_assert_int_eq(tg_graph_add_output(G, -1), TS_EINVAL);
}
END_TEST

START_TEST(test_node_errors) {
  int x, b, r, y;
  small_graph(&x, &b, &r, &y);
  ts_diag d;
  int z = val("z", TG_V_INTER, 0, NULL);
  ts_diag_clear(&d);
  /* a second producer for r */
  ck_assert_int_eq(tg_node_add(G, TG_OP_SIGMOID, "sig", 1, &x, 1, &r, &d), -1);
  ck_assert_ptr_nonnull(strstr(d.msg, "node sig (Sigmoid): output r already has producer relu0"));
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_node_add(G, TG_OP_SIGMOID, "sig", 1, (int[]){42}, 1, &z, &d), -1);
  ck_assert_ptr_nonnull(strstr(d.msg, "input 0 refers to no value (id 42)"));
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_node_add(G, TG_OP_SIGMOID, "sig", 1, &x, 1, &b, &d), -1);
  ck_assert_ptr_nonnull(strstr(d.msg, "output b is a graph constant"));
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_node_add(G, TG_OP_COUNT, "bad", 1, &x, 1, &z, &d), -1);
  ck_assert_int_eq(d.code, TS_EINVAL);
  /* nothing was added by the failures */
  ck_assert_int_eq(G->nnodes, 2);
  ck_assert_int_eq(G->values[z]->producer, -1);
  /* an omitted optional input (-1) is fine */
  node(TG_OP_CLIP, "clip", 3, (int[]){x, -1, b}, 1, &z);
}
END_TEST

START_TEST(test_attrs) {
  int x, b, r, y;
  small_graph(&x, &b, &r, &y);
  tg_node *n = G->nodes[0];
  int64_t pads[4] = {1, 1, 2, 2};
  ck_assert_int_eq(tg_node_set_attr(G, n, &(tg_attr){.name = "pads", .kind = TG_A_INTS, .n = 4, .ints = pads}), TS_OK);
  pads[0] = 9; /* copied */
  ck_assert_int_eq(tg_node_set_attr(G, n, &(tg_attr){.name = "alpha", .kind = TG_A_FLOAT, .f = 0.25}), TS_OK);
  ck_assert_int_eq(tg_node_set_attr(G, n, &(tg_attr){.name = "mode", .kind = TG_A_STRING, .s = "constant"}), TS_OK);
  ck_assert_int_eq(tg_node_set_attr(G, n, &(tg_attr){.name = "axis", .kind = TG_A_INT, .i = -1}), TS_OK);
  ck_assert_int_eq(n->nattr, 4);
  int cnt;
  const int64_t *p = tg_attr_ints(n, "pads", &cnt);
  ck_assert_int_eq(cnt, 4);
  ck_assert_int_eq(p[0], 1);
  ck_assert_int_eq(p[3], 2);
  ck_assert_ptr_null(tg_attr_ints(n, "strides", &cnt));
  ck_assert_int_eq(cnt, 0);
  ck_assert_double_eq(tg_attr_float(n, "alpha", 1.0), 0.25);
  ck_assert_double_eq(tg_attr_float(n, "beta", 1.0), 1.0);
  ck_assert_int_eq(tg_attr_int(n, "axis", 1), -1);
  ck_assert_int_eq(tg_attr_int(n, "other", 7), 7);
  ck_assert_str_eq(tg_attr_str(n, "mode", "x"), "constant");
  ck_assert_str_eq(tg_attr_str(n, "pads", "dflt"), "dflt"); /* wrong kind -> default */
  /* replacing keeps the count */
  ck_assert_int_eq(tg_node_set_attr(G, n, &(tg_attr){.name = "axis", .kind = TG_A_INT, .i = 3}), TS_OK);
  ck_assert_int_eq(n->nattr, 4);
  ck_assert_int_eq(tg_attr_int(n, "axis", 1), 3);
  ck_assert_int_eq(tg_node_set_attr(G, n, &(tg_attr){.name = "bad", .kind = TG_A_INTS, .n = 2, .ints = NULL}),
                   TS_EINVAL);
  char *s = print_graph();
  ck_assert_msg(strstr(s, "%r = Relu(%x) {pads=[1,1,2,2], alpha=0.25, mode=\"constant\", axis=3} : f32[batch,4]"), "%s", s);
  ts_free(s);
}
END_TEST

START_TEST(test_print) {
  int x, b, r, y;
  small_graph(&x, &b, &r, &y);
  G->opset = 17;
  /* a long constant shows its first elements; a name with spaces is quoted */
  int w = val("w eight", TG_V_CONST, 2, (tg_dim[]){C(3), C(5)});
  float wd[15];
  for (int i = 0; i < 15; i++) wd[i] = (float)i * 0.5f;
  ck_assert_int_eq(tg_value_set_data(G, w, wd, sizeof wd, NULL), TS_OK);
  int s0 = val("s0", TG_V_INTER, 1, (tg_dim[]){S("batch")});
  int s1 = val("s1", TG_V_INTER, 1, (tg_dim[]){C(3)});
  node(TG_OP_SPLIT, "split", 2, (int[]){y, -1}, 2, (int[]){s0, s1});
  char *s = print_graph();
  const char *want =
      "graph @net(%x: f32[batch,4]) opset 17 {\n"
      "  %b = const f32[4] [1, 2, 3, 4]\n"
      "  %\"w eight\" = const f32[3,5] [0, 0.5, 1, 1.5, ... (15 elements)]\n"
      "\n"
      "  %r = Relu(%x) : f32[batch,4]\n"
      "  %y = Add(%r, %b) : f32[batch,4]\n"
      "  %s0, %s1 = Split(%y, _) : f32[batch], f32[3]\n"
      "  return %y\n"
      "}\n";
  ck_assert_str_eq(s, want);
  ts_free(s);
}
END_TEST

START_TEST(test_consumers_replace) {
  int x, b, r, y;
  small_graph(&x, &b, &r, &y);
  int t = val("t", TG_V_INTER, 2, (tg_dim[]){S("batch"), C(4)});
  node(TG_OP_MUL, "mul0", 2, (int[]){r, r}, 1, &t); /* r twice: one consumer */
  int out[4];
  ck_assert_int_eq(tg_value_consumers(G, r, out, 4), 2);
  ck_assert_int_eq(out[0], 1);
  ck_assert_int_eq(out[1], 2);
  ck_assert_int_eq(tg_value_consumers(G, r, out, 1), 2); /* count beyond max */
  ck_assert_int_eq(tg_value_consumers(G, y, NULL, 0), 0);
  G->nodes[2]->dead = true;
  ck_assert_int_eq(tg_value_consumers(G, r, out, 4), 1);
  G->nodes[2]->dead = false;
  /* bypass the relu: uses of r become x; the graph output y -> t */
  tg_replace_uses(G, r, x);
  ck_assert_int_eq(G->nodes[1]->inputs[0], x);
  ck_assert_int_eq(G->nodes[2]->inputs[0], x);
  ck_assert_int_eq(G->nodes[2]->inputs[1], x);
  ck_assert_int_eq(tg_value_consumers(G, r, NULL, 0), 0);
  tg_replace_uses(G, y, t);
  ck_assert_int_eq(G->outputs[0], t);
}
END_TEST

START_TEST(test_compact) {
  int x, b, r, y;
  small_graph(&x, &b, &r, &y);
  int unused = val("unused", TG_V_CONST, 0, NULL);
  (void)unused;
  /* Relu bypassed and marked dead: r, unused disappear; ids become dense */
  tg_replace_uses(G, r, x);
  G->nodes[0]->dead = true;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_compact(G, &d), TS_OK);
  ck_assert_int_eq(G->nnodes, 1);
  ck_assert_int_eq(G->nvalues, 3);
  ck_assert_str_eq(G->nodes[0]->name, "add0");
  ck_assert_int_eq(G->nodes[0]->id, 0);
  ck_assert_int_eq(tg_value_find(G, "r"), -1);
  ck_assert_int_eq(tg_value_find(G, "unused"), -1);
  for (int i = 0; i < G->nvalues; i++) ck_assert_int_eq(G->values[i]->id, i);
  int ny = tg_value_find(G, "y");
  ck_assert_int_eq(G->values[ny]->producer, 0);
  ck_assert_int_eq(G->outputs[0], ny);
  ck_assert_int_eq(G->inputs[0], tg_value_find(G, "x"));
  ck_assert_int_eq(G->nodes[0]->inputs[1], tg_value_find(G, "b"));
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_OK);
}
END_TEST

START_TEST(test_compact_resorts) {
  /* nodes added consumer-first (as a pass inserting a producer would) */
  tg_dim d4 = C(4);
  int x = val("x", TG_V_INPUT, 1, &d4);
  int a = val("a", TG_V_INTER, 1, &d4), c = val("c", TG_V_INTER, 1, &d4), e = val("e", TG_V_INTER, 1, &d4);
  tg_graph_add_input(G, x);
  node(TG_OP_TANH, "last", 1, &c, 1, &e);
  node(TG_OP_SIGMOID, "mid", 1, &a, 1, &c);
  node(TG_OP_RELU, "first", 1, &x, 1, &a);
  tg_graph_add_output(G, e);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_EINVAL);
  ck_assert_msg(strstr(d.msg, "node last (Tanh): input 0 (c) is used before it is defined"), "%s", d.msg);
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_compact(G, &d), TS_OK);
  ck_assert_str_eq(G->nodes[0]->name, "first");
  ck_assert_str_eq(G->nodes[1]->name, "mid");
  ck_assert_str_eq(G->nodes[2]->name, "last");
  ck_assert_int_eq(G->values[tg_value_find(G, "c")]->producer, 1);
  ts_diag_clear(&d);
  ck_assert_msg(tg_graph_verify(G, &d) == TS_OK, "%s", d.msg);
  /* a cycle is refused */
  G->nodes[0]->inputs[0] = tg_value_find(G, "e");
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_compact(G, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "cycle"));
}
END_TEST

START_TEST(test_compact_dead_producer_in_use) {
  int x, b, r, y;
  small_graph(&x, &b, &r, &y);
  G->nodes[0]->dead = true; /* r still read by add0 */
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "(r) is used before it is defined"));
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_compact(G, &d), TS_EINVAL);
  ck_assert_msg(strstr(d.msg, "value r is still used but its producer relu0 is dead"), "%s", d.msg);
  /* a replacement producer makes it fine */
  node(TG_OP_SIGMOID, "sig", 1, &x, 1, &r);
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_compact(G, &d), TS_OK);
  ck_assert_str_eq(G->nodes[0]->name, "sig");
  ck_assert_str_eq(G->nodes[1]->name, "add0");
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_OK);
}
END_TEST

START_TEST(test_verify_errors) {
  int x, b, r, y;
  small_graph(&x, &b, &r, &y);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tg_graph_verify(G, &d) == TS_OK, "%s", d.msg);
  /* an output nobody produces */
  int z = val("z", TG_V_INTER, 0, NULL);
  tg_graph_add_output(G, z);
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "graph output z is never produced"));
  G->noutputs--;
  /* a constant with the wrong byte count */
  G->values[b]->nbytes = 8;
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "constant b holds 8 bytes, its type needs 16"));
  G->values[b]->nbytes = 16;
  /* a graph input that is not an input value */
  tg_graph_add_input(G, b);
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "graph input 1 (b) is not an input value"));
  G->ninputs--;
  /* an input id out of range */
  G->nodes[1]->inputs[1] = 77;
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "node add0 (Add): input 1 refers to no value (id 77)"));
}
END_TEST

START_TEST(test_calls) {
  ts_diag d;
  ts_diag_clear(&d);
  ir_func *f = NULL;
  ck_assert_msg(ir_workload_from_spec(M->arena, "relu:m=2,n=4", &f, &d) == TS_OK, "%s", d.msg);
  f->name = "fused_relu_0";
  ck_assert_int_eq(ir_module_add(M, f), TS_OK);
  tg_dim dims[2] = {C(2), C(4)};
  int x = val("x", TG_V_INPUT, 2, dims), y = val("y", TG_V_INTER, 2, dims);
  tg_graph_add_input(G, x);
  int n = node(TG_OP_CALL, "call0", 1, &x, 1, &y);
  tg_graph_add_output(G, y);
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "node call0 calls @(none)"));
  G->nodes[n]->callee = "nope";
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "calls @nope, which is not a PrimFunc of the module"));
  G->nodes[n]->callee = "fused_relu_0";
  ts_diag_clear(&d);
  ck_assert_msg(tg_graph_verify(G, &d) == TS_OK, "%s", d.msg);
  char *s = print_graph();
  ck_assert_msg(strstr(s, "  %y = call @fused_relu_0(%x) : f32[2,4]\n"), "%s", s);
  ts_free(s);
  /* wrong argument count and dtype */
  G->nodes[n]->nin = 0;
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "with 0 inputs and 1 outputs; it takes 1 and 1"));
  G->nodes[n]->nin = 1;
  G->values[x]->dtype = ir_dt(IR_I32);
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_EINVAL);
  ck_assert_msg(strstr(d.msg, "argument 0 (x) is i32"), "%s", d.msg);
}
END_TEST

START_TEST(test_many_and_free) {
  /* a long chain: the tables grow; compact after killing every other node
   * is not possible (uses), so bypass odd nodes instead */
  enum { N = 300 };
  int prev = val("in", TG_V_INPUT, 1, (tg_dim[]){S("n")});
  tg_graph_add_input(G, prev);
  for (int i = 0; i < N; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "t%d", i);
    int v = val(nm, TG_V_INTER, 1, (tg_dim[]){S("n")});
    node(i % 2 ? TG_OP_RELU : TG_OP_IDENTITY, NULL, 1, &prev, 1, &v);
    prev = v;
  }
  tg_graph_add_output(G, prev);
  for (int i = 0; i < N; i++) {
    tg_node *n = G->nodes[i];
    if (n->op != TG_OP_IDENTITY) continue;
    tg_replace_uses(G, n->outputs[0], n->inputs[0]);
    n->dead = true;
  }
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_compact(G, &d), TS_OK);
  ck_assert_int_eq(G->nnodes, N / 2);
  ck_assert_int_eq(G->nvalues, N / 2 + 1);
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_OK);
  /* a second graph in the same module; both freed by ir_module_free */
  tg_graph *g2 = tg_graph_new(M, "second");
  ck_assert_int_eq(tg_value_add(g2, "x", TG_V_INPUT, ir_dt(IR_F32), 0, NULL, &d), 0);
  ck_assert_ptr_eq(tg_graph_get(M, "second"), g2);
  ck_assert_ptr_eq(tg_graph_get(M, NULL), G);
  /* freeing twice (by hand, then through the module) is safe */
  tg_graph_free(g2);
  ck_assert_int_eq(g2->nvalues, 0);
}
END_TEST

START_TEST(test_oom) {
  /* every allocation failing in turn: never a crash, a status or -1 */
  for (long k = 1; k < 40; k++) {
    ir_module *m = ir_module_new();
    ck_assert_ptr_nonnull(m);
    ts_alloc_fail_after(k);
    tg_graph *g = tg_graph_new(m, "g");
    ts_diag d;
    ts_diag_clear(&d);
    if (g) {
      int x = tg_value_add(g, "x", TG_V_INPUT, ir_dt(IR_F32), 1, (tg_dim[]){C(3)}, &d);
      int y = tg_value_add(g, "y", TG_V_INTER, ir_dt(IR_F32), 1, (tg_dim[]){C(3)}, &d);
      if (x >= 0 && y >= 0 && tg_node_add(g, TG_OP_RELU, "r", 1, &x, 1, &y, &d) >= 0 &&
          tg_graph_add_input(g, x) == TS_OK && tg_graph_add_output(g, y) == TS_OK)
        (void)tg_graph_compact(g, &d);
    }
    ts_alloc_fail_after(0);
    ir_module_free(m);
  }
}
END_TEST

/* The name indexes at scale (100k values and nodes: a linear scan per
 * lookup would take minutes) and across compaction's renumbering. */
START_TEST(test_name_index_large) {
  enum { N = 100000 };
  int prev = val("in", TG_V_INPUT, 1, (tg_dim[]){C(8)});
  tg_graph_add_input(G, prev);
  char nm[32];
  for (int i = 0; i < N; i++) {
    snprintf(nm, sizeof nm, "t%d", i);
    int v = val(nm, TG_V_INTER, 1, (tg_dim[]){C(8)});
    if (i % 2) { /* a dead side branch: its value and node go at compaction */
      snprintf(nm, sizeof nm, "side%d", i);
      int sv = val(nm, TG_V_INTER, 1, (tg_dim[]){C(8)});
      int sn = node(TG_OP_SIGMOID, nm, 1, &prev, 1, &sv);
      G->nodes[sn]->dead = true;
    }
    snprintf(nm, sizeof nm, "n%d", i);
    node(TG_OP_RELU, i % 3 ? nm : NULL, 1, &prev, 1, &v);
    prev = v;
  }
  tg_graph_add_output(G, prev);
  ck_assert_int_eq(G->nvalues, 1 + N + N / 2);
  for (int i = 0; i < G->nvalues; i++) ck_assert_int_eq(tg_value_find(G, G->values[i]->name), i);
  ck_assert_int_eq(tg_value_find(G, "t100000"), -1);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_value_add(G, "t777", TG_V_INTER, ir_dt(IR_F32), 0, NULL, &d), -1);
  ck_assert_ptr_nonnull(strstr(d.msg, "value name 't777' is already taken"));
  ck_assert_int_eq(tg_graph_compact(G, &d), TS_OK);
  ck_assert_int_eq(G->nvalues, 1 + N);
  ck_assert_int_eq(G->nnodes, N);
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_OK);
  for (int i = 0; i < N; i += 997) {
    snprintf(nm, sizeof nm, "t%d", i);
    int id = tg_value_find(G, nm);
    ck_assert_int_eq(id, i + 1);
    ck_assert_str_eq(G->values[id]->name, nm);
    snprintf(nm, sizeof nm, "side%d", i | 1);
    ck_assert_int_eq(tg_value_find(G, nm), -1);
  }
  /* made-up node names stay unique: compaction reindexed the survivors */
  prev = tg_value_find(G, "t99999");
  ck_assert_int_eq(prev, N);
  int z = val(NULL, TG_V_INTER, 0, NULL);
  int id = node(TG_OP_RELU, NULL, 1, &prev, 1, &z);
  for (int i = 0; i < id; i++) ck_assert_str_ne(G->nodes[i]->name, G->nodes[id]->name);
}
END_TEST

/* Renaming a node keeps the index in step: the made-up name skips it. */
START_TEST(test_node_rename) {
  int x, b, r, y;
  small_graph(&x, &b, &r, &y);
  /* nodes relu0, add0; the next made-up Relu name would be Relu_2 */
  ck_assert_int_eq(tg_node_rename(G, G->nodes[1], "Relu_2"), TS_OK);
  ck_assert_str_eq(G->nodes[1]->name, "Relu_2");
  int z = val("z", TG_V_INTER, 2, G->values[y]->dims);
  int id = node(TG_OP_RELU, NULL, 1, &y, 1, &z);
  ck_assert_str_eq(G->nodes[id]->name, "Relu_3");
  ck_assert_int_eq(tg_node_rename(G, G->nodes[1], NULL), TS_EINVAL);
  /* a value renamed behind the index's back is a broken invariant */
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_OK);
  G->values[r]->name = "elsewhere";
  ck_assert_int_eq(tg_graph_verify(G, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "value elsewhere (id 2) is missing from the name index"));
}
END_TEST

/* Failures while the value index grows (16 slots, then 32, 64): whatever
 * was added stays findable, and the graph stays valid. */
START_TEST(test_index_oom) {
  for (long k = 1; k < 80; k++) {
    ir_module *m = ir_module_new();
    ck_assert_ptr_nonnull(m);
    tg_graph *g = tg_graph_new(m, "g");
    ck_assert_ptr_nonnull(g);
    int ids[40];
    ts_diag d;
    ts_alloc_fail_after(k);
    for (int i = 0; i < 40; i++) {
      char nm[16];
      snprintf(nm, sizeof nm, "v%d", i);
      ts_diag_clear(&d);
      ids[i] = tg_value_add(g, nm, TG_V_INPUT, ir_dt(IR_F32), 1, (tg_dim[]){C(3)}, &d);
      if (ids[i] < 0) ck_assert_int_eq(d.code, TS_ENOMEM);
    }
    ts_alloc_fail_after(0);
    for (int i = 0; i < 40; i++) {
      char nm[16];
      snprintf(nm, sizeof nm, "v%d", i);
      ck_assert_int_eq(tg_value_find(g, nm), ids[i]);
    }
    ts_diag_clear(&d);
    ck_assert_msg(tg_graph_verify(g, &d) == TS_OK, "%s", d.msg);
    ir_module_free(m);
  }
}
END_TEST

/* Symbolic dims as monomials (dim.c): canonical names, exact division,
 * evaluation at bound symbols, refusals. */
static int64_t dim_lookup(void *ctx, const char *sym) {
  (void)ctx;
  return !strcmp(sym, "batch") ? 3 : !strcmp(sym, "seq") ? 7 : -1;
}

START_TEST(test_dim_products) {
  ts_arena *a = M->arena;
  tg_dim r, q;
  /* products are canonical whatever the order: factors sorted, coefficient first */
  ck_assert(tg_dim_mul(a, S("seq"), S("batch"), &r));
  ck_assert_str_eq(r.sym, "batch*seq");
  ck_assert(tg_dim_mul(a, C(12), r, &r));
  ck_assert_str_eq(r.sym, "12*batch*seq");
  ck_assert(tg_dim_mul(a, S("batch"), C(12), &q));
  ck_assert(tg_dim_mul(a, S("seq"), q, &q));
  ck_assert(tg_dim_eq(r, q));
  ck_assert(tg_dim_mul(a, S("seq"), S("seq"), &q));
  ck_assert_str_eq(q.sym, "seq*seq");
  ck_assert(tg_dim_mul(a, S("seq"), C(1), &q) && !strcmp(q.sym, "seq"));
  ck_assert(tg_dim_mul(a, S("seq"), C(0), &q) && !q.sym && q.value == 0);
  ck_assert(!tg_dim_mul(a, C(INT64_MAX), C(2), &q)); /* overflow */
  /* exact division only */
  ck_assert(tg_dim_div(a, r, S("seq"), &q));
  ck_assert_str_eq(q.sym, "12*batch");
  ck_assert(tg_dim_div(a, q, C(4), &q));
  ck_assert_str_eq(q.sym, "3*batch");
  ck_assert(tg_dim_div(a, q, S("batch"), &q) && !q.sym && q.value == 3);
  ck_assert(!tg_dim_div(a, r, C(5), &q));      /* 12 is not a multiple of 5 */
  ck_assert(!tg_dim_div(a, S("batch"), S("seq"), &q));
  ck_assert(!tg_dim_div(a, C(6), C(0), &q));
  tg_dim dims[3] = {S("batch"), S("seq"), C(768)};
  ck_assert(tg_dims_product(a, dims, 3, &q));
  ck_assert_str_eq(q.sym, "768*batch*seq");
  ck_assert(tg_dims_product(a, dims, 0, &q) && q.value == 1);
  /* evaluation */
  ts_diag d;
  ts_diag_clear(&d);
  int64_t v = 0;
  ck_assert_int_eq(tg_dim_eval(r, dim_lookup, NULL, &v, &d), TS_OK);
  ck_assert_int_eq(v, 12 * 3 * 7);
  ck_assert_int_eq(tg_dim_eval(S("heads"), dim_lookup, NULL, &v, &d), TS_EINVAL);
  ck_assert_msg(strstr(d.msg, "'heads'"), "%s", d.msg);
  ck_assert(tg_dim_is_base(S("batch")) && !tg_dim_is_base(r) && !tg_dim_is_base(C(3)));
  /* names that are not monomials are refused */
  tg_mono m;
  ck_assert(!tg_mono_parse(S("1*batch"), &m));
  ck_assert(!tg_mono_parse(S("batch**seq"), &m));
  ck_assert(!tg_mono_parse(S("7"), &m));
}
END_TEST

static Suite *graph_suite(void) {
  Suite *s = suite_create("ir_graph");
  TCase *tc = tcase_create("graph");
  tcase_add_checked_fixture(tc, gsetup, gteardown);
  tcase_add_test(tc, test_op_names);
  tcase_add_test(tc, test_build_and_lookup);
  tcase_add_test(tc, test_value_errors);
  tcase_add_test(tc, test_node_errors);
  tcase_add_test(tc, test_attrs);
  tcase_add_test(tc, test_print);
  tcase_add_test(tc, test_consumers_replace);
  tcase_add_test(tc, test_compact);
  tcase_add_test(tc, test_compact_resorts);
  tcase_add_test(tc, test_compact_dead_producer_in_use);
  tcase_add_test(tc, test_verify_errors);
  tcase_add_test(tc, test_calls);
  tcase_add_test(tc, test_many_and_free);
  tcase_add_test(tc, test_oom);
  tcase_add_test(tc, test_name_index_large);
  tcase_add_test(tc, test_node_rename);
  tcase_add_test(tc, test_index_oom);
  tcase_add_test(tc, test_dim_products);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(graph_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
