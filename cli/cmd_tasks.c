/* cmd_tasks.c — `tessel tasks MODEL.onnx [--json] [--sym NAME=V]... [--dump DIR]`:
 * imports a model, runs the graph pass pipeline (ir/graph/passes.h) and
 * prints its tuning tasks (ir/graph/tasks.h): the distinct fused PrimFuncs
 * with their workload keys (the keys `tessel tune-model` logs and
 * `tessel build MODEL` looks up), weights and FLOPs. --dump writes each
 * task's function as loop-IR script (DIR/NAME.tsl), which `tessel show`,
 * `tessel tune` and `tessel bench` accept as a SUBJECT. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

static const char *usage =
    "usage: tessel tasks MODEL.onnx [--json] [--sym NAME=VALUE]... [--dump DIR]\n"
    "                    [--winograd on|off|all] [--polyphase on|off] [--qdq on|off] [--conv-layout nchw|nchwc]\n"
    "Imports the model, runs the graph passes (fold, legalize, fuse, ...) and lists its tuning\n"
    "tasks: the distinct fused kernels, their workload keys, weights (calls per inference) and FLOPs.\n"
    "  --json             print {tasks: [{name, key, weight, flops}], ...} on stdout\n"
    "  --sym NAME=VALUE   the value a symbolic dim (e.g. batch) takes in the tasks (default 1)\n"
    "  --dump DIR         write each task's kernel as loop-IR script to DIR/NAME.tsl\n"
    TUN_CLI_GRAPH_USAGE;

int tun_cmd_tasks(int argc, char **argv) {
  const char *path = NULL, *dump = NULL;
  bool json = false;
  tun_model_opts mo;
  tun_model_opts_init(&mo);
  for (int i = 1; i < argc; i++) {
    int m = tun_cli_model_arg("tasks", argc, argv, &i, &mo);
    if (m < 0) return 2;
    if (m > 0) continue;
    if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (!strcmp(argv[i], "--dump") && i + 1 < argc) {
      dump = argv[++i];
    } else if ((m = tun_cli_other_arg("tasks", argv[i], &path, usage)) >= 0) {
      return m;
    }
  }
  if (tun_cli_need_model("tasks", path, usage)) return 2;
  ir_module *m = NULL;
  tg_graph *g = NULL;
  tg_task *t = NULL;
  int n = 0;
  int rc = tun_cli_model_tasks("tasks", path, &mo, &m, &g, &t, &n);
  if (rc) goto out;
  rc = 2;
  if (dump) {
    if (mkdir(dump, 0777) != 0 && errno != EEXIST) {
      fprintf(stderr, "tessel tasks: cannot create %s: %s\n", dump, strerror(errno));
      goto out;
    }
    for (int i = 0; i < n; i++) {
      char fp[4096];
      snprintf(fp, sizeof fp, "%s/%s.tsl", dump, t[i].name);
      FILE *f = fopen(fp, "w");
      if (!f || fputs(t[i].definition, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "tessel tasks: cannot write %s\n", fp);
        goto out;
      }
    }
  }
  double total = 0;
  for (int i = 0; i < n; i++) total += t[i].weight * (t[i].flops > 0 ? t[i].flops : 0);
  if (json) {
    json_t *root = json_object(), *arr = json_array();
    for (int i = 0; i < n; i++) {
      char key[17];
      snprintf(key, sizeof key, "%016" PRIx64, t[i].key);
      json_t *o = json_object();
      json_object_set_new(o, "name", json_string(t[i].name));
      json_object_set_new(o, "key", json_string(key));
      json_object_set_new(o, "weight", json_integer(t[i].weight));
      json_object_set_new(o, "flops", json_real(t[i].flops));
      json_array_append_new(arr, o);
    }
    json_object_set_new(root, "model", json_string(path));
    json_object_set_new(root, "tasks", arr);
    int calls = 0;
    for (int i = 0; i < n; i++) calls += t[i].weight;
    json_object_set_new(root, "calls", json_integer(calls));
    json_object_set_new(root, "total_flops", json_real(total));
    int bad = tun_cli_put_json("tasks", root, JSON_INDENT(1));
    json_decref(root);
    if (bad) {
      rc = 1;
      goto out;
    }
  } else {
    printf("%-4s %-44s %-16s %6s %14s\n", "id", "task", "key", "weight", "MFLOP");
    for (int i = 0; i < n; i++)
      printf("%-4d %-44s %016" PRIx64 " %6d %14.3f\n", i, t[i].name, t[i].key, t[i].weight, t[i].flops * 1e-6);
    printf("%d tasks, %.3f MFLOP per inference\n", n, total * 1e-6);
  }
  rc = 0;
out:
  tg_tasks_free(t, n);
  ir_module_free(m);
  return rc;
}
