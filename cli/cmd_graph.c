/* cmd_graph.c — `tessel graph show MODEL.onnx [--after PASS] [--json]`:
 * imports an ONNX model into the graph IR (ir/graph/onnx.h) and prints it,
 * as text (tg_graph_print) or as JSON (values with dtype/shape/kind, nodes
 * with op, inputs, outputs and attributes). --after runs the graph pass
 * pipeline up to and including PASS first (ir/graph/passes.h). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char *usage =
    "usage: tessel graph show MODEL.onnx [--after PASS] [--json] [--winograd on|off|all] [--polyphase on|off] [--qdq on|off] [--conv-layout nchw|nchwc]\n"
    "Imports an ONNX model (opsets 1-28) into tessel's graph IR and prints it: one line per\n"
    "constant and per node, with every value's dtype and shape (symbolic dims by name).\n"
    "  --after PASS  run the graph passes up to and including PASS first\n"
    "  --json        print the graph as JSON instead of text\n"
    TUN_CLI_GRAPH_USAGE;

static json_t *dims_json(const tg_value *v) {
  json_t *a = json_array();
  for (int i = 0; i < v->ndim; i++)
    json_array_append_new(a, v->dims[i].sym ? json_string(v->dims[i].sym) : json_integer(v->dims[i].value));
  return a;
}

static json_t *attr_json(const tg_attr *at) {
  switch (at->kind) {
  case TG_A_INT: return json_integer(at->i);
  case TG_A_FLOAT: return isfinite(at->f) ? json_real(at->f) : json_string(at->f > 0 ? "inf" : at->f < 0 ? "-inf" : "nan");
  case TG_A_STRING: return json_string(at->s ? at->s : "");
  case TG_A_INTS: {
    json_t *a = json_array();
    for (int i = 0; i < at->n; i++) json_array_append_new(a, json_integer(at->ints[i]));
    return a;
  }
  case TG_A_FLOATS: {
    json_t *a = json_array();
    for (int i = 0; i < at->n; i++) json_array_append_new(a, json_real(at->floats[i]));
    return a;
  }
  }
  return json_null();
}

static json_t *graph_json(const tg_graph *g) {
  static const char *const kinds[] = {"input", "const", "inter"};
  json_t *root = json_object();
  json_object_set_new(root, "name", json_string(g->name));
  json_object_set_new(root, "opset", json_integer(g->opset));
  json_t *vals = json_array();
  for (int i = 0; i < g->nvalues; i++) {
    const tg_value *v = g->values[i];
    char b[32];
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(v->name));
    json_object_set_new(o, "kind", json_string(kinds[v->kind]));
    json_object_set_new(o, "dtype", json_string(ir_dtype_str(v->dtype, b, sizeof b)));
    json_object_set_new(o, "shape", dims_json(v));
    json_array_append_new(vals, o);
  }
  json_object_set_new(root, "values", vals);
  json_t *ins = json_array(), *outs = json_array();
  for (int i = 0; i < g->ninputs; i++) json_array_append_new(ins, json_string(g->values[g->inputs[i]]->name));
  for (int i = 0; i < g->noutputs; i++) json_array_append_new(outs, json_string(g->values[g->outputs[i]]->name));
  json_object_set_new(root, "inputs", ins);
  json_object_set_new(root, "outputs", outs);
  json_t *nodes = json_array();
  for (int i = 0; i < g->nnodes; i++) {
    const tg_node *n = g->nodes[i];
    if (n->dead) continue;
    json_t *o = json_object(), *ni = json_array(), *no = json_array(), *at = json_object();
    json_object_set_new(o, "name", json_string(n->name));
    json_object_set_new(o, "op", json_string(tg_op_name(n->op)));
    if (n->callee) json_object_set_new(o, "callee", json_string(n->callee));
    for (int j = 0; j < n->nin; j++)
      json_array_append_new(ni, n->inputs[j] < 0 ? json_null() : json_string(g->values[n->inputs[j]]->name));
    for (int j = 0; j < n->nout; j++) json_array_append_new(no, json_string(g->values[n->outputs[j]]->name));
    for (int j = 0; j < n->nattr; j++) json_object_set_new(at, n->attrs[j].name, attr_json(&n->attrs[j]));
    json_object_set_new(o, "inputs", ni);
    json_object_set_new(o, "outputs", no);
    json_object_set_new(o, "attrs", at);
    json_array_append_new(nodes, o);
  }
  json_object_set_new(root, "nodes", nodes);
  return root;
}

static int graph_show(int argc, char **argv) {
  const char *path = NULL, *after = NULL;
  bool json = false;
  tun_model_opts mo;
  tun_model_opts_init(&mo);
  for (int i = 1; i < argc; i++) {
    bool sym = !strcmp(argv[i], "--sym") || !strcmp(argv[i], "--bind"); /* no symbols to bind here */
    int k = sym ? 0 : tun_cli_model_arg("graph show", argc, argv, &i, &mo);
    if (k < 0) return 2;
    if (k > 0) continue;
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--after")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "tessel graph show: --after needs a pass name\n%s", usage);
        return 2;
      }
      after = argv[++i];
    }
    else if ((k = tun_cli_other_arg("graph show", argv[i], &path, usage)) >= 0)
      return k;
  }
  if (tun_cli_need_model("graph show", path, usage)) return 2;
  ir_module *m = tun_cli_module("graph show");
  if (!m) return 1;
  ts_diag d;
  ts_diag_clear(&d);
  tg_graph *g = NULL;
  int rc = 1;
  /* no --after: the graph as imported */
  if (tun_model_import(path, &mo, after ? after : "", m, &g, &d) != TS_OK) {
    fprintf(stderr, "tessel graph show: %s\n", d.msg);
    goto out;
  }
  if (json) {
    json_t *j = graph_json(g);
    int bad = tun_cli_put_json("graph show", j, JSON_INDENT(1));
    json_decref(j);
    if (bad) goto out;
  } else {
    ts_strbuf sb;
    ts_strbuf_init(&sb);
    tg_graph_print(g, &sb);
    if (sb.oom) {
      ts_strbuf_fini(&sb);
      fprintf(stderr, "tessel graph show: out of memory\n");
      goto out;
    }
    fputs(sb.data ? sb.data : "", stdout);
    ts_strbuf_fini(&sb);
  }
  rc = 0;
out:
  ir_module_free(m);
  return rc;
}

int tun_cmd_graph(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "show")) return graph_show(argc - 1, argv + 1);
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("%s", usage);
    return 0;
  }
  fprintf(stderr, "tessel graph: %s%s%s\n%s", argc >= 2 ? "unknown subcommand '" : "a subcommand is needed",
          argc >= 2 ? argv[1] : "", argc >= 2 ? "'" : "", usage);
  return 2;
}
