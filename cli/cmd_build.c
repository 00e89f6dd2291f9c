/* cmd_build.c — `tessel build` (subject -> shared library) and `tessel
 * bench` (build, time in a forked child, verify the outputs against the
 * interpreter on the unscheduled function). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/llvm.h"
#include "runtime/runtime.h"
#include "ir/print.h"
#include "ir/schedule/layout.h"
#include "tuner/build.h"
#include "cli/cli.h"
#include "tuner/database.h"
#include "tuner/library.h"
#include "ir/struct.h"
#include "tuner/verify.h"

typedef struct build_args {
  const char *subject, *trace, *target, *out, *log;
  tsrt_measure_opts mo;
  tun_default_opts defaults; /* --no-default-tiling */
  bool json, print_ir;
} build_args;

enum { OPT_TRACE = 1000, OPT_TARGET, OPT_JSON, OPT_SEED, OPT_COOLDOWN, OPT_PRINT, OPT_LOG, OPT_NODEFTILING };

static int parse_args(int argc, char **argv, build_args *a, bool bench, const char *usage) {
  static const struct option own[] = {{"help", no_argument, 0, 'h'},
                                      {"trace", required_argument, 0, OPT_TRACE},
                                      {"target", required_argument, 0, OPT_TARGET},
                                      {"log", required_argument, 0, OPT_LOG},
                                      {"cooldown-ms", required_argument, 0, OPT_COOLDOWN},
                                      {"seed", required_argument, 0, OPT_SEED},
                                      {"json", no_argument, 0, OPT_JSON},
                                      {"print-ir", no_argument, 0, OPT_PRINT},
                                      {"no-default-tiling", no_argument, 0, OPT_NODEFTILING},
                                      {"output", required_argument, 0, 'o'},
                                      {0, 0, 0, 0}};
  struct option opts[32];
  if (!tun_cli_options_join(opts, 32, (const struct option *const[]){own, tun_cli_measure_options}, 2)) return 2;
  memset(a, 0, sizeof *a);
  a->target = "llvm";
  a->mo.repeat = 5;
  a->mo.min_repeat_ms = 100;
  a->mo.timeout_s = 60;
  a->mo.seed = 1;
  a->mo.want_outputs = true;
  const char *cmd = bench ? "bench" : "build";
  tun_cli_getopt g = tun_cli_getopt_start("ho:", opts, usage);
  for (int c; (c = tun_cli_getopt_next(&g, argc, argv));) {
    switch (c) {
    case OPT_TRACE: a->trace = optarg; break;
    case OPT_TARGET: a->target = optarg; break;
    case OPT_LOG: a->log = optarg; break;
    case 'o': a->out = optarg; break;
    case OPT_COOLDOWN:
      if (!tun_cli_real(cmd, "--cooldown-ms", optarg, 0, 1e7, &a->mo.cooldown_ms)) return 2;
      break;
    case OPT_SEED:
      if (!tun_cli_seed(cmd, "--seed", optarg, &a->mo.seed)) return 2;
      break;
    case OPT_JSON: a->json = true; break;
    case OPT_PRINT: a->print_ir = true; break;
    case OPT_NODEFTILING: a->defaults.no_tiling = true; break;
    default:
      if (tun_cli_measure_option(cmd, &a->mo, c, optarg) < 0) return 2;
    }
  }
  if (g.rc >= 0) return g.rc;
  if (optind != argc - 1) {
    fprintf(stderr, "tessel %s: expected one SUBJECT (see --help)\n", bench ? "bench" : "build");
    return 2;
  }
  a->subject = argv[optind];
  if (a->trace && a->log) {
    fprintf(stderr, "tessel %s: give --trace or --log, not both\n", bench ? "bench" : "build");
    return 2;
  }
  if (!bench && !a->out) {
    fprintf(stderr, "tessel build: -o OUT.so is required\n");
    return 2;
  }
  if (a->mo.repeat < 1 || a->mo.repeat > TSRT_MAX_REPEAT || a->mo.number < 0 || a->mo.timeout_s <= 0) {
    fprintf(stderr, "tessel %s: --repeat must be 1..%d, --number >= 0, --timeout > 0\n",
            bench ? "bench" : "build", TSRT_MAX_REPEAT);
    return 2;
  }
  return -1;
}

/* --log: replays the trace of the best verified, error-free record of the
 * log for this subject's workload key on this target; when it does not
 * replay (a log from another tessel, a hand-edited trace), the next best,
 * saying so on stderr. */
static int schedule_from_log(const char *log, const tun_subject *sub, const cg_target *tg, int threads,
                             sch_traced **out, const char *cmd) {
  ts_diag d;
  ts_diag_clear(&d);
  int nwarn = 0;
  tun_db *db = tun_db_load(log, stderr, &nwarn, &d);
  if (!db) {
    fprintf(stderr, "tessel %s: %s\n", cmd, d.msg);
    return 2;
  }
  char key[17];
  ir_workload_key(sub->func, key);
  int n = 0;
  bool other = false;
  const tun_record **rs = tun_db_ranked_for_build(db, key, tg->text, threads, &n, &other);
  int rc = 2;
  if (other)
    fprintf(stderr, "tessel %s: %s has no record of %s [%s] measured at %d thread%s; using the best of any thread count\n",
            cmd, log, sub->label, key, threads, threads == 1 ? "" : "s");
  if (!n)
    fprintf(stderr,
            "tessel %s: %s has no usable record for %s [%s] on %s (%d records of it on this target, "
            "none verified and error-free)\n",
            cmd, log, sub->label, key, tg->text, tun_db_count_for(db, key, tg->text));
  for (int i = 0; i < n && rc; i++) {
    const tun_record *r = rs[i];
    ts_diag_clear(&d);
    *out = tun_record_schedule(r, sub->func, tg, &d); /* a trace replayed, or a library call */
    if (!*out) {
      fprintf(stderr, "tessel %s: %s: the %s record (mean %.6g ms, trace %016llx) does not replay: %s%s\n", cmd, log,
              i ? "next best" : "best", tun_record_mean(r) * 1e3, (unsigned long long)r->trace_hash, d.msg,
              i + 1 < n ? "; trying the next best" : "");
      continue;
    }
    char thr[32] = "an unknown thread count";
    if (r->threads > 0) snprintf(thr, sizeof thr, "%d thread%s", r->threads, r->threads == 1 ? "" : "s");
    char lib[32], ro[48] = "";
    if (r->runoff > 0) /* re-timed back to back with the task's other best candidates (tuner/runoff.h) */
      snprintf(ro, sizeof ro, ", median of run-off %d", r->runoff);
    if (tun_record_is_library(r, lib, sizeof lib))
      fprintf(stderr, "using the %s record of %s: mean %.6g ms at %s (library %s: %s)%s\n",
              i ? "next best replaying" : "best", log, tun_record_mean(r) * 1e3, thr, lib, r->params, ro);
    else
      fprintf(stderr, "using the %s record of %s: mean %.6g ms at %s (trace %016llx)%s\n",
              i ? "next best replaying" : "best", log, tun_record_mean(r) * 1e3, thr, (unsigned long long)r->trace_hash,
              ro);
    rc = 0;
  }
  if (rc && n) fprintf(stderr, "tessel %s: %s: none of the %d usable records replays\n", cmd, log, n);
  ts_free(rs);
  tun_db_close(db);
  return rc;
}

/* Subject -> scheduled function -> shared library at path. */
static int build_to(const build_args *a, ts_arena *ar, tun_subject *sub, cg_target *tg, const char *path,
                    const char *cmd) {
  ts_diag d;
  ts_diag_clear(&d);
  if (cg_target_parse(a->target, tg, &d) || tun_resolve_target(tg, &d)) {
    fprintf(stderr, "tessel %s: %s\n", cmd, d.msg);
    return 2;
  }
  if (tun_subject_load(ar, a->subject, sub, &d)) {
    fprintf(stderr, "tessel %s: %s\n", cmd, d.msg);
    return 2;
  }
  if (sub->func->nsyms) {
    fprintf(stderr, "tessel %s: %s has symbolic sizes; bind them in the DSL file or use a workload spec\n",
            cmd, sub->label);
    return 2;
  }
  sch_traced *t = NULL;
  if (a->log) {
    if (schedule_from_log(a->log, sub, tg, tun_device_threads(tg, a->mo.num_threads, false), &t, cmd)) return 2;
  } else if (tun_schedule_opts(sub->func, a->trace, tg, &a->defaults, &t, &d)) {
    fprintf(stderr, "tessel %s: %s\n", cmd, d.msg);
    return 2;
  }
  if (a->print_ir) {
    char *text = ir_func_to_string(sch_traced_func(t));
    if (text) fprintf(stderr, "%s", text);
    ts_free(text);
  }
  int rc = 0;
  /* tessel build --target cuda describes each kernel (launch, registers and
   * spills from the cubin): lines on stderr, or with --json an object on stdout */
  const tun_device *dev = tun_device_of(tg);
  bool report = !strcmp(cmd, "build") && dev->kernel_report;
  json_t *js = report && a->json ? json_object() : NULL;
  if (js) {
    json_object_set_new(js, "workload", json_string(sub->label));
    json_object_set_new(js, "target", json_string(tg->text));
    json_object_set_new(js, "output", json_string(path));
  }
  if (dev->build(sch_traced_func(t), tg, path, report && !js ? stderr : NULL, js, &d)) {
    fprintf(stderr, "tessel %s: building %s: %s\n", cmd, sub->label, d.msg);
    rc = 2;
  } else if (js) {
    char *text = json_dumps(js, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text) puts(text);
    free(text);
  }
  json_decref(js);
  /* a kernel whose schedule re-laid a weight (TransformLayout, docs/LAYOUT.md)
   * reads its inputs packed: from here on the subject is the function with
   * the same layout rewrites, which is what bench verifies against */
  const ir_func *ref = rc ? NULL : sch_layout_reference(ar, sub->func, sch_traced_trace(t), &d);
  if (ref && ref != sub->func) {
    fprintf(stderr, "tessel %s: the schedule re-lays %s's weight(s): inputs are read in the packed layout\n", cmd,
            sub->label);
    sub->func = (ir_func *)ref;
  }
  sch_traced_free(t);
  return rc;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcmp(s + n - k, suffix);
}

int tun_cmd_build(int argc, char **argv) {
  /* a whole model (cmd_model.c) */
  for (int i = 1; i < argc; i++)
    if (argv[i][0] != '-' && ends_with(argv[i], ".onnx") && (i == 1 || strcmp(argv[i - 1], "-o")))
      return tun_cmd_build_model(argc, argv);
  build_args a;
  int rc = parse_args(argc, argv, &a, false,
                      "usage: tessel build SUBJECT [--trace TRACE.json | --log LOG [--threads N]] [--target T] -o OUT.so [--print-ir]\n"
                      "Schedules SUBJECT with the trace (default: the default schedule: reduction\n"
                      "decomposed, inner spatial loop vectorized, outer loop parallel), lowers it and\n"
                      "builds a shared library exporting tessel_kernel_entry/tessel_kernel_meta.\n"
                      "--log LOG replays the best verified record of the tuning log for SUBJECT\n"
                      "on the target measured at --threads N threads (default TESSEL_NUM_THREADS or\n"
                      "all cores), else the best of any thread count. --no-default-tiling: the plain default schedule (no\n"
                      "register-tiled micro-kernel, no inlining), for comparisons.\n"
                      "Targets: llvm (host), llvm -mtriple=aarch64-linux-gnu, llvm -mcpu=... -mattr=...\n"
                      "cuda -arch=sm_90 (default arch): OUT is a cubin; OUT ending .ptx gets PTX, .cu the\n"
                      "CUDA C (no NVRTC needed); without --trace/--log the default GPU schedule.\n"
                      "For cuda each kernel's launch, registers and spills (from the cubin) are\n"
                      "printed; --json prints {workload, target, output, kernels: [...]} instead.\n");
  if (rc >= 0) return rc;
  ts_arena ar;
  ts_arena_init(&ar);
  tun_subject sub;
  cg_target tg;
  rc = build_to(&a, &ar, &sub, &tg, a.out, "build");
  if (rc == 0) fprintf(stderr, "built %s for %s -> %s\n", sub.label, tg.text, a.out);
  ts_arena_fini(&ar);
  return rc;
}

int tun_cmd_bench(int argc, char **argv) {
  build_args a;
  int rc = parse_args(argc, argv, &a, true,
                      "usage: tessel bench SUBJECT [--trace TRACE.json | --log LOG] [--target T] [--number N]\n"
                      "         [--repeat N] [--min-repeat-ms MS] [--timeout S] [--cache-flush]\n"
                      "         [--cooldown-ms MS] [--threads N] [--seed S] [--json]\n"
                      "Builds SUBJECT (as tessel build), times it in a forked child (number runs per\n"
                      "repeat, grown until a repeat lasts min-repeat-ms; default repeat 5, 100 ms),\n"
                      "and verifies its outputs against the reference interpreter on the\n"
                      "unscheduled function. Prints the median and mean time and GFLOP/s.\n"
                      "--json prints {workload, target, seconds_median, seconds_mean, gflops,\n"
                      "matched, verified}. Exit status 1 when the outputs do not match.\n");
  if (rc >= 0) return rc;
  char dir[] = "/tmp/tessel-bench-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("tessel bench: mkdtemp");
    return 2;
  }
  char path[256];
  bool cuda = strncmp(a.target, "cuda", 4) == 0;
  snprintf(path, sizeof path, "%s/kernel.%s", dir, cuda ? "cubin" : "so");
  ts_arena ar;
  ts_arena_init(&ar);
  tun_subject sub;
  cg_target tg;
  rc = build_to(&a, &ar, &sub, &tg, path, "bench");
  if (rc == 0) {
    tsrt_measure_result res;
    tun_device_of(&tg)->measure(path, &a.mo, &res);
    if (res.status != TS_OK) {
      fprintf(stderr, "tessel bench: %s: %s\n", sub.label, res.error);
      rc = 2;
    } else {
      double med = tsrt_result_median(&res), mean = 0;
      for (int i = 0; i < res.repeat; i++) mean += res.secs[i] / res.repeat;
      double flops = sub.is_workload ? ir_wl_flops(&sub.wl) : 0;
      double gflops = flops > 0 && med > 0 ? flops / med * 1e-9 : 0;
      tun_verify_result vr;
      ts_diag d;
      ts_diag_clear(&d);
      ts_status vs = tun_verify(sub.func, a.mo.seed, res.outputs, res.outputs_bytes, &vr, &d);
      bool matched = vs == TS_OK && vr.matched;
      if (a.json) {
        json_t *o = json_object();
        json_object_set_new(o, "workload", json_string(sub.label));
        json_object_set_new(o, "target", json_string(tg.text));
        json_object_set_new(o, "seconds_median", json_real(med));
        json_object_set_new(o, "seconds_mean", json_real(mean));
        json_object_set_new(o, "gflops", json_real(gflops));
        json_object_set_new(o, "matched", json_boolean(matched));
        json_object_set_new(o, "verified", json_string(vs ? d.msg : vr.detail[0] ? vr.detail : "whole output"));
        json_object_set_new(o, "number", json_integer(res.number));
        json_object_set_new(o, "repeat", json_integer(res.repeat));
        char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (s) puts(s);
        free(s);
        json_decref(o);
      } else {
        printf("%s on %s: median %.6g ms, mean %.6g ms (%d x %d runs)", sub.label, tg.text, med * 1e3,
               mean * 1e3, res.repeat, res.number);
        if (gflops > 0) printf(", %.2f GFLOP/s", gflops);
        printf("\noutput %s the reference interpreter%s%s\n", matched ? "matches" : "DOES NOT match",
               vs ? ": " : (vr.sampled ? " (sampled)" : ""), vs ? d.msg : "");
        if (!matched && vs == TS_OK) printf("first mismatch: %s\n", vr.detail);
      }
      if (!matched) rc = 1;
    }
    tsrt_result_fini(&res);
  }
  unlink(path);
  rmdir(dir);
  ts_arena_fini(&ar);
  return rc;
}
