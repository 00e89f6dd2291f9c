/* cmd_ir.c — the IR-level subcommands: `workloads`, `show` and `run`, and
 * subject resolution (workload spec or DSL file) shared by later commands. */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ir/interp.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "ir/schedule/trace.h"
#include "ir/struct.h"
#include "cli/cli.h"

static int print_json(json_t *j) {
  if (!j) {
    fprintf(stderr, "tessel: out of memory building JSON\n");
    return 2;
  }
  char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(j);
  if (!s) return 2;
  puts(s);
  free(s);
  return 0;
}

static bool file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

ts_status tun_subject_load(ts_arena *a, const char *arg, tun_subject *out, ts_diag *d) {
  memset(out, 0, sizeof *out);
  char path[4096];
  snprintf(path, sizeof path, "%s", arg);
  char *fname = strrchr(path, '#');
  if (fname && !file_exists(path)) *fname++ = '\0';
  else fname = NULL;

  if (!file_exists(path)) {
    /* a workload spec */
    ts_status st = ir_wl_parse(arg, &out->wl, d);
    if (st != TS_OK) {
      if (strchr(arg, '/') || strchr(arg, '.')) {
        ts_diag_clear(d);
        return ts_diag_set(d, TS_ENOTFOUND,
                           "'%s' is neither a file nor a built-in workload (see `tessel workloads`)",
                           arg);
      }
      return st;
    }
    out->is_workload = true;
    ir_wl_canonical(&out->wl, out->label, sizeof out->label);
    return ir_wl_build(a, &out->wl, &out->func, d);
  }

  char *src = NULL;
  size_t len = 0;
  ts_status st = ts_read_file_as(path, TS_FILE_DSL, &src, &len, d);
  if (st != TS_OK) return st;
  ir_module *m = ir_module_new();
  if (!m) {
    ts_free(src);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  st = ir_parse_module(m, src, len, path, d);
  ts_free(src);
  if (st == TS_OK) {
    ir_func *f = NULL;
    if (fname) {
      f = ir_module_get(m, fname);
      if (!f) st = ts_diag_set(d, TS_ENOTFOUND, "%s: no function named '%s'", path, fname);
    } else if (m->nfuncs == 1) {
      f = m->funcs[0].u.prim;
    } else {
      ts_strbuf sb;
      ts_strbuf_init(&sb);
      for (int i = 0; i < m->nfuncs; i++) ts_strbuf_printf(&sb, "%s%s", i ? ", " : "", m->funcs[i].name);
      st = ts_diag_set(d, TS_EINVAL, "%s holds %d functions; pick one with %s#NAME (%s)", path,
                       m->nfuncs, path, sb.data ? sb.data : "none");
      ts_strbuf_fini(&sb);
    }
    if (f) {
      out->func = ir_func_copy(a, f);
      if (!out->func) st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    }
  }
  ir_module_free(m);
  snprintf(out->label, sizeof out->label, "%s", arg);
  return st;
}

/* ---- workloads ---- */
static json_t *param_json(const char *v) {
  char *end;
  long long x = strtoll(v, &end, 10);
  if (*v && !*end) return json_integer(x);
  return json_string(v);
}

int tun_cmd_workloads(int argc, char **argv) {
  bool as_json = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) as_json = true;
    else if (!strcmp(argv[i], "--help")) {
      printf("usage: tessel workloads [--json]\n"
             "Lists the built-in workloads with their parameters (defaults) and the FLOPs at\n"
             "the defaults (a multiply-add counts 2). --json prints an array of\n"
             "{name, params: {KEY: default}, flops, description}.\n");
      return 0;
    } else {
      fprintf(stderr, "tessel workloads: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  json_t *arr = as_json ? json_array() : NULL;
  for (int i = 0; i < ir_workload_count(); i++) {
    const ir_workload *w = ir_workload_at(i);
    ir_wl_inst inst;
    ts_diag d;
    ts_diag_clear(&d);
    double flops = 0;
    if (ir_wl_parse(w->name, &inst, &d) == TS_OK) flops = ir_wl_flops(&inst);
    if (as_json) {
      json_t *o = json_object(), *p = json_object();
      for (int k = 0; k < w->nparams; k++) json_object_set_new(p, w->params[k].key, param_json(w->params[k].def));
      json_object_set_new(o, "name", json_string(w->name));
      json_object_set_new(o, "params", p);
      json_object_set_new(o, "flops", json_real(flops));
      json_object_set_new(o, "description", json_string(w->desc ? w->desc : ""));
      json_array_append_new(arr, o);
    } else {
      printf("%-18s%s", w->name, strlen(w->name) >= 18 ? " " : ""); /* a long name keeps a gap */
      for (int k = 0; k < w->nparams; k++) printf("%s%s=%s", k ? "," : "", w->params[k].key, w->params[k].def);
      printf("  (%.4g FLOPs)\n", flops);
      if (w->desc) printf("%18s  %s\n", "", w->desc);
    }
  }
  return as_json ? print_json(arr) : 0;
}

/* ---- show ---- */
/* Reads a trace file and replays it on f; NULL (message printed) on error. */
static sch_traced *show_apply_trace(const char *path, const ir_func *f) {
  ts_diag d;
  ts_diag_clear(&d);
  char *text = NULL;
  size_t len = 0;
  if (ts_read_file_as(path, TS_FILE_TRACE, &text, &len, &d) != TS_OK) {
    fprintf(stderr, "tessel show: %s\n", d.msg);
    return NULL;
  }
  sch_trace *tr = sch_trace_from_json(text, &d);
  ts_free(text);
  if (!tr) {
    fprintf(stderr, "tessel show: %s: %s\n", path, d.msg);
    return NULL;
  }
  sch_traced *t = sch_trace_replay(tr, f, 1, &d);
  sch_trace_free(tr);
  if (!t) fprintf(stderr, "tessel show: %s: %s\n", path, d.msg);
  return t;
}

static const char show_usage[] =
    "usage: tessel show SUBJECT [--trace TRACE.json] [--json]\n"
    "Prints the loop IR of SUBJECT (a workload spec such as matmul:m=64,n=64,k=64, or\n"
    "a DSL file) as script text that `tessel show` can read back.\n"
    "--trace applies a schedule trace (JSON, docs/TRACE.md) to SUBJECT first and\n"
    "prints the scheduled IR; errors name the file and the failing instruction.\n"
    "--json prints {subject, workload_key, flops, ir} (plus trace with --trace).\n";

int tun_cmd_show(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, 0, 'h'},
                                       {"trace", required_argument, 0, 't'},
                                       {"json", no_argument, 0, 'j'},
                                       {0, 0, 0, 0}};
  const char *trace = NULL;
  bool as_json = false;
  tun_cli_getopt g = tun_cli_getopt_start("h", opts, show_usage);
  for (int c; (c = tun_cli_getopt_next(&g, argc, argv));) {
    if (c == 't') trace = optarg;
    else if (c == 'j') as_json = true;
  }
  if (g.rc >= 0) return g.rc;
  ts_arena a;
  tun_subject sub;
  sch_traced *sched = NULL;
  int rc = tun_cli_subject("show", "SUBJECT", argc, argv, &a, &sub);
  if (rc) {
    /* said */
  } else if (trace && !(sched = show_apply_trace(trace, sub.func))) {
    rc = 2;
  } else {
    char key[17];
    ir_workload_key(sub.func, key);
    char *text = ir_func_to_string(sched ? sch_traced_func(sched) : sub.func);
    if (!text) {
      fprintf(stderr, "tessel show: out of memory\n");
      rc = 2;
    } else if (as_json) {
      json_t *o = json_object();
      json_object_set_new(o, "subject", json_string(sub.label));
      json_object_set_new(o, "workload_key", json_string(key));
      if (sub.is_workload) json_object_set_new(o, "flops", json_real(ir_wl_flops(&sub.wl)));
      if (trace) json_object_set_new(o, "trace", json_string(trace));
      json_object_set_new(o, "ir", json_string(text));
      rc = print_json(o);
    } else {
      printf("# %s  (workload key %s", sub.label, key);
      if (sub.is_workload) printf(", %.6g FLOPs", ir_wl_flops(&sub.wl));
      if (trace) printf(", scheduled by %s", trace);
      printf(")\n%s", text);
    }
    ts_free(text);
  }
  sch_traced_free(sched);
  ts_arena_fini(&a);
  return rc;
}

/* ---- run ---- */
static double tensor_sum(const ir_tensor *t) {
  double s = 0;
  for (int64_t i = 0; i < ir_tensor_numel(t); i++) s += ir_tensor_get(t, i);
  return s;
}

static const char run_usage[] =
    "usage: tessel run SUBJECT [--check] [--seed S] [--sym NAME=VALUE ...] [--json]\n"
    "Runs SUBJECT with the reference interpreter on seeded random inputs.\n"
    "--check (workloads only) compares every output with the workload's hand-written\n"
    "C loop; exit status 1 on a mismatch. --sym binds a symbolic size of a DSL file.\n"
    "--json prints {workload, matched, max_abs_err} (with --check) or output sums.\n";

int tun_cmd_run(int argc, char **argv) {
  /* a model artifact built by `tessel build MODEL.onnx` (cmd_model.c) */
  for (int i = 1; i < argc; i++) {
    size_t n = strlen(argv[i]);
    if (argv[i][0] != '-' && n > 3 && !strcmp(argv[i] + n - 3, ".so")) return tun_cmd_run_model(argc, argv);
  }
  static const struct option opts[] = {{"help", no_argument, 0, 'h'},
                                       {"check", no_argument, 0, 'c'},
                                       {"json", no_argument, 0, 'j'},
                                       {"seed", required_argument, 0, 's'},
                                       {"sym", required_argument, 0, 'y'},
                                       {0, 0, 0, 0}};
  bool check = false, as_json = false;
  uint64_t seed = 1;
  const char *sym_names[16];
  int64_t sym_vals[16];
  int nsym = 0;
  tun_cli_getopt g = tun_cli_getopt_start("h", opts, run_usage);
  for (int c; (c = tun_cli_getopt_next(&g, argc, argv));) {
    switch (c) {
    case 'c':
      check = true;
      break;
    case 'j':
      as_json = true;
      break;
    case 's':
      if (!tun_cli_seed("run", "--seed", optarg, &seed)) return 2;
      break;
    case 'y': {
      char *eq = strchr(optarg, '=');
      const char *why = "no '='";
      int64_t v = 0;
      if (!eq || eq == optarg || nsym == 16 || !ts_parse_i64(eq + 1, 1, INT64_MAX, &v, &why)) {
        fprintf(stderr, "tessel run: --sym wants NAME=VALUE with VALUE an integer >= 1 (at most 16), got '%s' (%s)\n",
                optarg, nsym == 16 ? "too many" : !eq || eq == optarg ? "not NAME=VALUE" : why);
        return 2;
      }
      *eq = '\0';
      sym_names[nsym] = optarg;
      sym_vals[nsym++] = v;
      break;
    }
    }
  }
  if (g.rc >= 0) return g.rc;
  ts_arena a;
  tun_subject sub;
  ir_tensor *args = NULL, *ref = NULL;
  int np = 0;
  ts_diag d;
  ts_diag_clear(&d);
  int rc = tun_cli_subject("run", "SUBJECT", argc, argv, &a, &sub);
  if (rc) goto out;
  ir_func *f = sub.func;
  if (nsym) {
    f = ir_func_bind_syms(&a, f, nsym, sym_names, sym_vals, &d);
    if (!f) {
      fprintf(stderr, "tessel run: %s\n", d.msg);
      rc = 2;
      goto out;
    }
  }
  if (f->nsyms) {
    fprintf(stderr, "tessel run: %s has symbolic sizes; bind them with --sym (e.g. --sym %s=16)\n",
            sub.label, f->syms[0]->name);
    rc = 2;
    goto out;
  }
  if (check && !sub.is_workload) {
    fprintf(stderr, "tessel run: --check needs a built-in workload (it compares with its hand-written C loop)\n");
    rc = 2;
    goto out;
  }
  np = f->nparams;
  args = ts_calloc((size_t)np, sizeof *args);
  ref = ts_calloc((size_t)np, sizeof *ref);
  if (!args || !ref || ir_tensors_for_func(f, NULL, args, &d) != TS_OK ||
      ir_tensors_for_func(f, NULL, ref, &d) != TS_OK) {
    fprintf(stderr, "tessel run: %s\n", d.code ? d.msg : "out of memory");
    rc = 2;
    goto out;
  }
  for (int i = 0; i < f->ninputs; i++) {
    ir_tensor_fill_random(&args[i], seed + (uint64_t)i);
    ir_tensor_fill_random(&ref[i], seed + (uint64_t)i);
  }
  if (ir_interp_run(f, args, &d) != TS_OK) {
    fprintf(stderr, "tessel run: interpreter: %s\n", d.msg);
    rc = 2;
    goto out;
  }
  if (check) {
    if (ir_wl_reference(&sub.wl, ref, &d) != TS_OK) {
      fprintf(stderr, "tessel run: reference: %s\n", d.msg);
      rc = 2;
      goto out;
    }
    bool matched = true;
    double max_err = 0;
    for (int i = f->ninputs; i < np; i++) {
      double e = 0;
      if (!ir_tensor_allclose(&args[i], &ref[i], 1e-4, 1e-4, &e)) matched = false;
      if (e > max_err || isnan(e)) max_err = e;
    }
    if (as_json) {
      json_t *o = json_object();
      json_object_set_new(o, "workload", json_string(sub.label));
      json_object_set_new(o, "matched", json_boolean(matched));
      json_object_set_new(o, "max_abs_err", json_real(max_err));
      rc = print_json(o);
    } else {
      printf("%s: interpreter %s the hand-written C reference (max abs err %.3g)\n", sub.label,
             matched ? "matches" : "DOES NOT match", max_err);
    }
    if (!matched) rc = 1;
  } else {
    json_t *o = as_json ? json_object() : NULL, *outs = as_json ? json_array() : NULL;
    for (int i = f->ninputs; i < np; i++) {
      double s = tensor_sum(&args[i]);
      if (as_json) {
        json_t *t = json_object();
        json_object_set_new(t, "name", json_string(f->params[i]->name));
        json_object_set_new(t, "sum", json_real(s));
        json_array_append_new(outs, t);
      } else {
        printf("%s: output %s: %lld elements, sum %.9g\n", sub.label, f->params[i]->name,
               (long long)ir_tensor_numel(&args[i]), s);
      }
    }
    if (as_json) {
      json_object_set_new(o, "workload", json_string(sub.label));
      json_object_set_new(o, "outputs", outs);
      rc = print_json(o);
    }
  }
out:
  for (int i = 0; i < np; i++) {
    if (args) ir_tensor_free(&args[i]);
    if (ref) ir_tensor_free(&ref[i]);
  }
  ts_free(args);
  ts_free(ref);
  ts_arena_fini(&a);
  return rc;
}
