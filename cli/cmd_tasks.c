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

#include "ir/graph/graph.h"
#include "ir/graph/onnx.h"
#include "ir/graph/passes.h"
#include "ir/graph/tasks.h"
#include "cli/cli.h"

static const char *usage =
    "usage: tessel tasks MODEL.onnx [--json] [--sym NAME=VALUE]... [--dump DIR]\n"
    "Imports the model, runs the graph passes (fold, legalize, fuse, ...) and lists its tuning\n"
    "tasks: the distinct fused kernels, their workload keys, weights (calls per inference) and FLOPs.\n"
    "  --json             print {tasks: [{name, key, weight, flops}], ...} on stdout\n"
    "  --sym NAME=VALUE   the value a symbolic dim (e.g. batch) takes in the tasks (default 1)\n"
    "  --dump DIR         write each task's kernel as loop-IR script to DIR/NAME.tsl\n";

#define MAX_SYMS 16

int tun_cmd_tasks(int argc, char **argv) {
  const char *path = NULL, *dump = NULL;
  bool json = false;
  const char *snames[MAX_SYMS];
  int64_t svals[MAX_SYMS];
  char sbuf[MAX_SYMS][128];
  int nsyms = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("%s", usage);
      return 0;
    } else if (!strcmp(argv[i], "--dump") && i + 1 < argc) {
      dump = argv[++i];
    } else if (!strcmp(argv[i], "--sym") && i + 1 < argc) {
      const char *s = argv[++i], *eq = strchr(s, '=');
      char *end = NULL;
      long long v = eq ? strtoll(eq + 1, &end, 10) : 0;
      if (!eq || eq == s || !end || *end || end == eq + 1 || v < 1 || (size_t)(eq - s) >= sizeof sbuf[0]) {
        fprintf(stderr, "tessel tasks: --sym wants NAME=VALUE with VALUE >= 1, got '%s'\n", s);
        return 2;
      }
      if (nsyms == MAX_SYMS) {
        fprintf(stderr, "tessel tasks: at most %d --sym options\n", MAX_SYMS);
        return 2;
      }
      memcpy(sbuf[nsyms], s, (size_t)(eq - s));
      sbuf[nsyms][eq - s] = '\0';
      snames[nsyms] = sbuf[nsyms];
      svals[nsyms++] = v;
    } else if (argv[i][0] == '-' || path) {
      fprintf(stderr, "tessel tasks: unexpected argument '%s'\n%s", argv[i], usage);
      return 2;
    } else {
      path = argv[i];
    }
  }
  if (!path) {
    fprintf(stderr, "tessel tasks: no model given\n%s", usage);
    return 2;
  }
  ir_module *m = ir_module_new();
  if (!m) {
    fprintf(stderr, "tessel tasks: out of memory\n");
    return 1;
  }
  ts_diag d;
  ts_diag_clear(&d);
  tg_graph *g = NULL;
  tg_task *t = NULL;
  int n = 0, rc = 2;
  if (tg_onnx_import(path, m, &g, &d) != TS_OK || tg_run_pipeline(g, NULL, &d) != TS_OK ||
      tg_extract_tasks_at(g, nsyms, snames, svals, &t, &n, &d) != TS_OK) {
    fprintf(stderr, "tessel tasks: %s: %s\n", path, d.msg);
    goto out;
  }
  /* a --sym for a symbol the model does not have is a mistake worth saying */
  for (int s = 0; s < nsyms; s++) {
    bool found = false;
    for (int v = 0; v < g->nvalues && !found; v++)
      for (int a = 0; a < g->values[v]->ndim && !found; a++)
        found = g->values[v]->dims[a].sym && !strcmp(g->values[v]->dims[a].sym, snames[s]);
    if (!found) {
      fprintf(stderr, "tessel tasks: %s has no symbolic dim named '%s'\n", path, snames[s]);
      goto out;
    }
  }
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
    char *s = json_dumps(root, JSON_INDENT(1));
    json_decref(root);
    if (!s) {
      fprintf(stderr, "tessel tasks: out of memory\n");
      rc = 1;
      goto out;
    }
    printf("%s\n", s);
    free(s);
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
