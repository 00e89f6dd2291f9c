/* cmd_model.c — whole models: `tessel build MODEL.onnx -o MODEL.so` (the
 * model compiler of tuner/model_build.h: argument parsing and the summary
 * here) and `tessel run MODEL.so` (the graph executor of runtime/model.c on
 * .npy or seeded random inputs; outputs as .npy; latency; on a board
 * through the tracker with --tracker). docs/MODEL.md. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/fork_pipe.h"
#include "runtime/model.h"
#include "include/tessel/tessel_model.h"
#include "cli/cli.h"
#include "tuner/model_build.h"
#include "tuner/npy.h"
#include "rpc/client.h"
#include "tracker/tracker_client.h"

/* ==== build ================================================================================ */

static const char *build_usage =
    "usage: tessel build MODEL.onnx -o MODEL.so [--log LOG [--threads N]] [--target T] [--sym NAME=VALUE]... [--json]\n"
    "                    [--winograd on|off|all] [--polyphase on|off] [--qdq on|off] [--conv-layout nchw|nchwc]\n"
    "Imports the model, runs the graph passes and builds one shared library holding a kernel per\n"
    "distinct fused PrimFunc, the execution plan and the weights (docs/MODEL.md); run it with\n"
    "`tessel run MODEL.so` or the C API (include/tessel/tessel_model.h).\n"
    "  --log LOG          replay the best verified record per task key on this target (tasks without\n"
    "                     one get the default schedule; the build says how many)\n"
    "  --threads N        the thread count the build is for (default TESSEL_NUM_THREADS or all cores):\n"
    "                     per task the best record measured at N threads, else the best of any count\n"
    "                     (said per task)\n"
    "  --target T         llvm (host, default), \"llvm -mtriple=aarch64-linux-gnu\", ...\n"
    "  --sym NAME=VALUE   (or --bind, as tune-model) the size a symbolic dim was tuned at (the task\n"
    "                     keys' binding, default 1);\n"
    "                     the artifact still runs at any size\n"
    "  --buckets NAME=V1,V2,...  shape buckets (as tune-model): per symbolic kernel, the record of\n"
    "                     every combination of bucket values becomes a specialisation padded to it;\n"
    "                     a run takes the smallest bucket covering its sizes, the symbolic kernel\n"
    "                     beyond the last (docs/MODEL.md \"Shape buckets\")\n"
    TUN_CLI_GRAPH_USAGE
    "  --json             print a JSON summary on stdout\n";

static void build_json(const char *path, const char *out, const tun_model_result *r) {
  json_t *o = json_object();
  json_object_set_new(o, "model", json_string(path));
  json_object_set_new(o, "artifact", json_string(out));
  json_object_set_new(o, "target", json_string(r->target));
  const struct {
    const char *name;
    json_int_t v;
  } counts[] = {{"kernels", r->kernels},          {"tuned", r->ntuned},
                {"default", r->ndefault},         {"specialised", r->nspec},
                {"calls", r->ncalls},             {"tensors", r->ntensors},
                {"weights_bytes", (json_int_t)r->weights_bytes},
                {"prepacked_weights", r->npacked_weights}, {"packed_copies", r->npacked_copies},
                {"threads", r->threads},          {"other_thread_records", r->nother_threads},
                {"library", r->nlibrary},         {"covering", r->ncovering},
                {"library_generic", r->nlib_generic}, {"library_below", r->nlib_below}};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
    json_object_set_new(o, counts[i].name, json_integer(counts[i].v));
  json_object_set_new(o, "build_s", json_real(r->build_seconds));
  json_t *ks = json_array();
  for (int i = 0; i < r->nk; i++) {
    const tun_model_kernel *k = &r->k[i];
    json_t *jk = json_object();
    json_object_set_new(jk, "index", json_integer(i));
    json_object_set_new(jk, "name", json_string(k->name));
    json_object_set_new(jk, "key", json_string(k->key));
    json_object_set_new(jk, "tuned", json_boolean(k->tuned));
    json_object_set_new(jk, "symbolic", json_boolean(k->symbolic));
    json_object_set_new(jk, "specialisation", json_boolean(k->specialisation));
    json_object_set_new(jk, "covers", json_boolean(k->covers));
    json_t *pp = json_array();
    for (int m = 0; m < k->npacked; m++) json_array_append_new(pp, json_integer(k->packed_params[m]));
    json_object_set_new(jk, "packed_params", pp);
    json_array_append_new(ks, jk);
  }
  json_object_set_new(o, "kernel_list", ks);
  tun_cli_put_json("build", o, JSON_INDENT(1));
  json_decref(o);
}

static void build_text(const char *path, const char *out, const char *log, const tun_model_result *r) {
  printf("built %s from %s for %s: %d kernels (%d tuned from %s, %d with the default schedule", out, path,
         r->target, r->kernels, r->ntuned, log ? log : "no log", r->ndefault);
  if (r->nspec)
    printf("; %d of the default ones are symbolic and carry a tuned specialisation for the tuned sizes", r->nspec);
  if (r->ncovering) printf(" (%d padded to cover every size up to their bucket)", r->ncovering);
  if (r->nlibrary) printf("; %d of the tuned ones call a library, which the model links", r->nlibrary);
  if (r->nlib_generic) printf(" (%d of them symbolic kernels: the call serves every size)", r->nlib_generic);
  if (r->nlib_below) printf(" (%d below a padded bucket, where padding costs more)", r->nlib_below);
  printf("), %d calls, %d tensors, %.1f KiB of weights", r->ncalls, r->ntensors, (double)r->weights_bytes / 1024.0);
  if (log)
    printf("; records for %d thread%s (%d kernel(s) from another thread count's best)", r->threads,
           r->threads == 1 ? "" : "s", r->nother_threads);
  if (r->npacked_weights)
    printf(" (%d pre-packed into the layout their kernels read, %d packed copies)", r->npacked_weights,
           r->npacked_copies);
  printf("; %.2f s (codegen %.2f s)\n", r->build_seconds, r->codegen_seconds);
}

int tun_cmd_build_model(int argc, char **argv) {
  const char *path = NULL, *out = NULL;
  bool json = false;
  tun_model_opts o;
  tun_model_opts_init(&o);
  o.warn = stderr;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int m = tun_cli_model_arg("build", argc, argv, &i, &o);
    if (m < 0) return 2;
    if (m > 0) continue;
    if (!strcmp(a, "-o") && i + 1 < argc) {
      out = argv[++i];
    } else if (!strcmp(a, "--log") && i + 1 < argc) {
      o.log = argv[++i];
    } else if (!strcmp(a, "--target") && i + 1 < argc) {
      o.target = argv[++i];
    } else if (!strcmp(a, "--threads") && i + 1 < argc) {
      if (!tun_cli_int("build", "--threads", argv[++i], 1, 4096, &o.threads)) return 2;
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if ((m = tun_cli_other_arg("build", a, &path, build_usage)) >= 0) {
      return m;
    }
  }
  if (!path || !out) {
    fprintf(stderr, "tessel build: %s\n%s", !path ? "no model given" : "-o MODEL.so is required", build_usage);
    return 2;
  }
  ts_diag d;
  ts_diag_clear(&d);
  tun_model_result r;
  if (tun_model_build(path, out, &o, &r, &d) != TS_OK) {
    fprintf(stderr, "tessel build: %s\n", d.msg);
    tun_model_result_fini(&r);
    return d.code == TS_ENOMEM ? 1 : 2;
  }
  if (json) build_json(path, out, &r);
  else build_text(path, out, o.log, &r);
  if (r.nrecord_unused)
    fprintf(stderr, "tessel build: %d kernel(s) had a log record that did not replay (see above)\n",
            r.nrecord_unused);
  tun_model_result_fini(&r);
  return 0;
}

/* ==== run ================================================================================== */

typedef struct run_input {
  const char *name, *file;
} run_input;

static const char *run_usage =
    "usage: tessel run MODEL.so [--input NAME=FILE.npy]... [--sym NAME=VALUE]... [--seed S]\n"
    "                  [--output-dir DIR] [--bench] [--repeat N] [--profile] [--threads N] [--json]\n"
    "                  [--tracker HOST:PORT --key KEY [--secret-file F] [--rpc-wait SEC]]\n"
    "Runs a model built by `tessel build MODEL.onnx` with the graph executor.\n"
    "  --input NAME=FILE.npy  an input (.npy: C order, little-endian); inputs not given are seeded\n"
    "                         random values (uniform [-1, 1) floats), shaped with --sym (default 1)\n"
    "  --sym NAME=VALUE       the size of a symbolic dim for random inputs\n"
    "  --output-dir DIR       write every output as DIR/NAME.npy\n"
    "  --bench                time --repeat runs (default 20) after a warm-up; report median/mean/min\n"
    "  --profile              per kernel call: mean ms over the timed runs (one run without --bench),\n"
    "                         largest first, and their sum (local runs only)\n"
    "  --threads N            thread pool size (default TESSEL_NUM_THREADS or all cores)\n"
    "  --json                 print {outputs: [{name, dtype, shape, file, checksum}], latency_ms, ...}\n"
    "  --tracker H:P --key K  run on a board the tracker grants (the artifact built for its triple;\n"
    "                         inputs described by MODEL.so.json when this host cannot load it);\n"
    "                         the secret from --secret-file or $TESSEL_RPC_SECRET_FILE; wait up to\n"
    "                         --rpc-wait seconds (60) for a free board\n";


typedef struct loaded_input {
  char name[256];
  int dtype, ndim;
  int64_t shape[TSRT_MAX_DIMS];
  void *data;
  size_t nbytes;
  const char *source; /* file or "random" */
} loaded_input;

static void sanitize(const char *in, char *out, size_t n) {
  size_t k = 0;
  for (; in[k] && k + 1 < n; k++) {
    char c = in[k];
    out[k] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                     c == '.'
                 ? c
                 : '_';
  }
  out[k] = '\0';
  if (!strcmp(out, ".") || !strcmp(out, "..") || !k) snprintf(out, n, "output");
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* What `tessel run` needs to know of a model without running it: its
 * inputs' names, dtypes and shapes (strings owned here). From the artifact
 * itself when this host can load it, else from the MODEL.so.json that
 * `tessel build` writes next to it (a cross-built artifact). */
#define SIG_MAX 64
typedef struct model_sig {
  int ni;
  tessel_tensor_info in[SIG_MAX];
  char names[SIG_MAX][256];
  char dims[SIG_MAX][TSRT_MAX_DIMS][64];
} model_sig;

static void sig_set(model_sig *s, int i, const char *name, int dtype, int ndim, const int64_t *shape,
                    const char *const *dim_names) {
  tessel_tensor_info *x = &s->in[i];
  memset(x, 0, sizeof *x);
  snprintf(s->names[i], sizeof s->names[i], "%s", name);
  x->name = s->names[i];
  x->dtype = dtype;
  x->ndim = ndim;
  for (int j = 0; j < ndim; j++) {
    x->shape[j] = shape[j];
    if (dim_names[j]) {
      snprintf(s->dims[i][j], sizeof s->dims[i][j], "%s", dim_names[j]);
      x->dim_names[j] = s->dims[i][j];
    }
  }
}

static int sig_load(const char *so, model_sig *s, char *err, size_t errn) {
  memset(s, 0, sizeof *s);
  char lerr[600];
  tessel_model *m = tessel_model_load_with(so, NULL, lerr, sizeof lerr);
  if (m) {
    s->ni = tessel_model_num_inputs(m);
    if (s->ni > SIG_MAX) s->ni = SIG_MAX;
    for (int i = 0; i < s->ni; i++) {
      tessel_tensor_info info;
      tessel_model_input_info(m, i, &info);
      sig_set(s, i, info.name, info.dtype, info.ndim, info.shape, info.dim_names);
    }
    tessel_model_free(m);
    return 0;
  }
  char side[4200];
  snprintf(side, sizeof side, "%s.json", so);
  json_error_t je;
  char *text = NULL;
  size_t tlen = 0;
  ts_diag rd;
  ts_diag_clear(&rd);
  if (ts_read_file_as(side, TS_FILE_JSON, &text, &tlen, &rd)) {
    snprintf(err, errn, "%.250s (and no readable side file: %.300s)", lerr, rd.msg);
    return -1;
  }
  json_t *j = json_loadb(text, tlen, 0, &je);
  ts_free(text);
  if (!j) {
    snprintf(err, errn, "%.250s (and no readable %.250s: %.60s)", lerr, side, je.text);
    return -1;
  }
  json_t *ins = json_object_get(j, "inputs");
  int rc = 0;
  if (!json_is_array(ins) || json_array_size(ins) > SIG_MAX) rc = -1;
  for (size_t i = 0; !rc && i < json_array_size(ins); i++) {
    json_t *o = json_array_get(ins, i), *sh = json_object_get(o, "shape"), *dn = json_object_get(o, "dims");
    const char *name = json_string_value(json_object_get(o, "name"));
    json_int_t dt = json_integer_value(json_object_get(o, "dtype"));
    size_t nd = json_array_size(sh);
    if (!name || !json_is_integer(json_object_get(o, "dtype")) || dt < 0 || dt >= TSRT_DTYPE_COUNT ||
        !json_is_array(sh) || nd > TSRT_MAX_DIMS || json_array_size(dn) != nd) {
      rc = -1;
      break;
    }
    int64_t shape[TSRT_MAX_DIMS];
    const char *names[TSRT_MAX_DIMS];
    for (size_t k = 0; k < nd; k++) {
      shape[k] = json_integer_value(json_array_get(sh, k));
      names[k] = json_string_value(json_array_get(dn, k));
      if (shape[k] < 0 && !names[k]) rc = -1;
    }
    sig_set(s, (int)i, name, (int)dt, (int)nd, shape, names);
    s->ni = (int)i + 1;
  }
  if (rc) snprintf(err, errn, "%.400s: malformed model description (inputs: [{name, dtype, shape, dims}])", side);
  json_decref(j);
  return rc;
}

/* The size given for symbol name (a --sym or an input file's dim), else 1. */
static int64_t sym_value(const tun_model_opts *l, const char *name) {
  for (int i = 0; i < l->nsyms; i++)
    if (!strcmp(l->sym_names[i], name)) return l->sym_values[i];
  return 1;
}

/* Loads the inputs of the model: .npy files by name, the rest seeded random.
 * Fills ins (sig->ni entries). */
static int prepare_inputs(const model_sig *sig, const run_input *given, int ngiven, const tun_model_opts *syms,
                          uint64_t seed, loaded_input *ins) {
  int ni = sig->ni;
  for (int g = 0; g < ngiven; g++) {
    bool found = false;
    for (int i = 0; i < ni; i++) found |= !strcmp(sig->in[i].name, given[g].name);
    if (!found) {
      fprintf(stderr, "tessel run: the model has no input named '%s' (inputs:", given[g].name);
      for (int i = 0; i < ni; i++) fprintf(stderr, " %s", sig->in[i].name);
      fprintf(stderr, ")\n");
      return 2;
    }
  }
  tun_model_opts bound = *syms;
  for (int i = 0; i < ni; i++) {
    tessel_tensor_info info = sig->in[i];
    loaded_input *in = &ins[i];
    snprintf(in->name, sizeof in->name, "%s", info.name);
    in->dtype = info.dtype;
    in->ndim = info.ndim;
    const char *file = NULL;
    for (int g = 0; g < ngiven; g++)
      if (!strcmp(given[g].name, info.name)) file = given[g].file;
    if (!file) continue;
    tun_npy npy;
    ts_diag d;
    ts_diag_clear(&d);
    if (tun_npy_read(file, &npy, &d) != TS_OK) {
      fprintf(stderr, "tessel run: input %s: %s\n", info.name, d.msg);
      return 2;
    }
    if (npy.dtype != info.dtype || npy.ndim != info.ndim) {
      fprintf(stderr, "tessel run: input %s wants %s with %d dims; %s holds %s with %d dims\n", info.name,
              tessel_dtype_name(info.dtype), info.ndim, file, tessel_dtype_name(npy.dtype), npy.ndim);
      tun_npy_free(&npy);
      return 2;
    }
    in->data = malloc(npy.nbytes ? npy.nbytes : 1);
    if (!in->data) {
      tun_npy_free(&npy);
      fprintf(stderr, "tessel run: out of memory for input %s\n", info.name);
      return 1;
    }
    memcpy(in->data, npy.data, npy.nbytes);
    in->nbytes = npy.nbytes;
    memcpy(in->shape, npy.shape, sizeof(int64_t) * (size_t)npy.ndim);
    in->source = file;
    tun_npy_free(&npy);
    /* a file's symbolic dims size the random inputs too */
    for (int j = 0; j < info.ndim; j++)
      if (info.dim_names[j]) {
        bool have = false;
        for (int s = 0; s < bound.nsyms; s++) have |= !strcmp(bound.sym_names[s], info.dim_names[j]);
        if (!have && bound.nsyms < TUN_MODEL_MAX_SYMS) {
          snprintf(bound.sym_buf[bound.nsyms], sizeof bound.sym_buf[0], "%s", info.dim_names[j]);
          bound.sym_names[bound.nsyms] = bound.sym_buf[bound.nsyms];
          bound.sym_values[bound.nsyms++] = in->shape[j];
        }
      }
  }
  for (int i = 0; i < ni; i++) {
    loaded_input *in = &ins[i];
    if (in->data) continue;
    tessel_tensor_info info = sig->in[i];
    int64_t n = 1;
    for (int j = 0; j < info.ndim; j++) {
      in->shape[j] = info.dim_names[j] ? sym_value(&bound, info.dim_names[j]) : info.shape[j];
      n *= in->shape[j];
    }
    in->nbytes = (size_t)n * (size_t)tessel_dtype_bytes(info.dtype);
    in->data = malloc(in->nbytes ? in->nbytes : 1);
    if (!in->data) {
      fprintf(stderr, "tessel run: out of memory for input %s\n", info.name);
      return 1;
    }
    tsrt_fill_random(info.dtype, in->data, n, seed + (uint64_t)i);
    in->source = "random";
  }
  return 0;
}

/* Writes one output (DIR/NAME.npy with outdir), adds it to jouts and, in
 * text mode, prints it. 0 or 2. */
static int emit_output(const char *name, int dtype, int nd, const int64_t *shape, const void *data,
                       const char *outdir, bool json, json_t *jouts) {
  int64_t n = 1;
  for (int j = 0; j < nd; j++) n *= shape[j];
  size_t nbytes = (size_t)n * (size_t)tessel_dtype_bytes(dtype);
  char file[4096] = "";
  if (outdir) {
    char base[256];
    sanitize(name, base, sizeof base);
    snprintf(file, sizeof file, "%s/%s.npy", outdir, base);
    ts_diag d;
    ts_diag_clear(&d);
    if (tun_npy_write(file, dtype, nd, shape, data, &d) != TS_OK) {
      fprintf(stderr, "tessel run: output %s: %s\n", name, d.msg);
      return 2;
    }
  }
  uint64_t ck = tsrt_checksum(data, nbytes);
  json_t *o = json_object(), *sh = json_array();
  for (int j = 0; j < nd; j++) json_array_append_new(sh, json_integer(shape[j]));
  json_object_set_new(o, "name", json_string(name));
  json_object_set_new(o, "dtype", json_string(tessel_dtype_name(dtype)));
  json_object_set_new(o, "shape", sh);
  char cks[17];
  snprintf(cks, sizeof cks, "%016" PRIx64, ck);
  json_object_set_new(o, "checksum", json_string(cks));
  if (outdir) json_object_set_new(o, "file", json_string(file));
  json_array_append_new(jouts, o);
  if (!json) {
    printf("output %s: %s[", name, tessel_dtype_name(dtype));
    for (int j = 0; j < nd; j++) printf("%s%lld", j ? ", " : "", (long long)shape[j]);
    printf("]");
    if (dtype == TESSEL_DT_F32) {
      const float *f = data;
      printf(" =");
      for (int64_t e = 0; e < n && e < 6; e++) printf(" %.6g", f[e]);
      if (n > 6) printf(" ...");
    }
    printf("  checksum %s%s%s\n", cks, outdir ? "  -> " : "", outdir ? file : "");
  }
  return 0;
}

/* Median/mean/min/max of times (sorted in place) into root (and printed),
 * with every run's time in run order ("each"). */
static void report_latency(double *times, int ntimes, bool json, json_t *root) {
  if (ntimes <= 0) return;
  json_t *each = json_array(); /* in run order, before the sort */
  for (int r = 0; r < ntimes; r++) json_array_append_new(each, json_real(times[r] * 1e3));
  double sum = 0;
  for (int r = 0; r < ntimes; r++) sum += times[r];
  qsort(times, (size_t)ntimes, sizeof *times, cmp_double);
  double med = ntimes % 2 ? times[ntimes / 2] : 0.5 * (times[ntimes / 2 - 1] + times[ntimes / 2]);
  json_t *lat = json_object();
  json_object_set_new(lat, "runs", json_integer(ntimes));
  json_object_set_new(lat, "median", json_real(med * 1e3));
  json_object_set_new(lat, "mean", json_real(sum / ntimes * 1e3));
  json_object_set_new(lat, "min", json_real(times[0] * 1e3));
  json_object_set_new(lat, "max", json_real(times[ntimes - 1] * 1e3));
  json_object_set_new(lat, "each", each);
  json_object_set_new(root, "latency_ms", lat);
  if (!json)
    printf("latency over %d runs: median %.4f ms, mean %.4f ms, min %.4f ms, max %.4f ms\n", ntimes, med * 1e3,
           sum / ntimes * 1e3, times[0] * 1e3, times[ntimes - 1] * 1e3);
}

static json_t *inputs_json(const loaded_input *ins, int ni) {
  json_t *jins = json_array();
  for (int i = 0; i < ni; i++) {
    json_t *o = json_object(), *sh = json_array();
    for (int j = 0; j < ins[i].ndim; j++) json_array_append_new(sh, json_integer(ins[i].shape[j]));
    json_object_set_new(o, "name", json_string(ins[i].name));
    json_object_set_new(o, "shape", sh);
    json_object_set_new(o, "source", json_string(ins[i].source));
    json_array_append_new(jins, o);
  }
  return jins;
}

/* --profile: per-call mean time over the timed runs, largest first. */
static void report_profile(tessel_model *m, bool json, json_t *root) {
  tessel_model_stats st;
  tessel_model_get_stats(m, &st);
  int n = st.ncalls;
  double *sec = calloc((size_t)(n > 0 ? n : 1), sizeof *sec);
  const char **name = calloc((size_t)(n > 0 ? n : 1), sizeof *name);
  int *order = calloc((size_t)(n > 0 ? n : 1), sizeof *order);
  if (!sec || !name || !order) goto out;
  double total = 0;
  for (int c = 0; c < n; c++) {
    if (tessel_model_get_call_profile(m, c, &name[c], &sec[c])) goto out;
    total += sec[c];
    order[c] = c;
  }
  for (int i = 1; i < n; i++) /* insertion sort by time, largest first */
    for (int j = i; j > 0 && sec[order[j]] > sec[order[j - 1]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  json_t *jp = json_array();
  if (!json) printf("%-5s %-40s %10s %7s\n", "call", "kernel", "ms", "%");
  for (int i = 0; i < n; i++) {
    int c = order[i];
    int spec = -1, nspecs = 0, covers = 0;
    tessel_model_get_call_spec(m, c, &spec, &nspecs, NULL, &covers);
    if (json) {
      json_t *o = json_object();
      json_object_set_new(o, "call", json_integer(c));
      json_object_set_new(o, "kernel", json_string(name[c]));
      json_object_set_new(o, "ms", json_real(sec[c] * 1e3));
      /* which specialisation ran (-1: the symbolic kernel), of how many */
      json_object_set_new(o, "spec", json_integer(spec));
      json_object_set_new(o, "nspecs", json_integer(nspecs));
      json_object_set_new(o, "covers", json_boolean(covers));
      json_array_append_new(jp, o);
    } else {
      printf("%-5d %-40s %10.4f %6.1f%%%s\n", c, name[c], sec[c] * 1e3, total > 0 ? 100 * sec[c] / total : 0,
             spec >= 0 ? (covers ? "  (bucket)" : "  (exact)") : "");
    }
  }
  if (!json) printf("%-5s %-40s %10.4f\n", "", "sum of calls", total * 1e3);
  json_object_set_new(root, "profile", jp);
  json_object_set_new(root, "profile_sum_ms", json_real(total * 1e3));
out:
  free(sec);
  free(name);
  free(order);
}

static int run_local(const char *so, loaded_input *ins, const char *outdir, bool bench, int repeat, bool json,
                     bool profile) {
  char err[600];
  tessel_model *m = tessel_model_load_with(so, NULL, err, sizeof err);
  if (!m) {
    fprintf(stderr, "tessel run: %s\n", err);
    return 2;
  }
  int rc = 2;
  int ni = tessel_model_num_inputs(m), no = tessel_model_num_outputs(m);
  double *times = NULL;
  int ntimes = 0;
  json_t *root = json_object(), *jouts = json_array(), *jins = inputs_json(ins, ni);
  for (int i = 0; i < ni; i++)
    if (tessel_model_set_input(m, i, ins[i].data, ins[i].ndim, ins[i].shape)) {
      fprintf(stderr, "tessel run: %s\n", tessel_model_error(m));
      goto out;
    }
  double t0 = tsrt_now();
  if (tessel_model_run(m)) {
    fprintf(stderr, "tessel run: %s\n", tessel_model_error(m));
    goto out;
  }
  double first = tsrt_now() - t0;
  if (profile && tessel_model_set_profiling(m, 1)) {
    fprintf(stderr, "tessel run: %s\n", tessel_model_error(m));
    goto out;
  }
  if (profile && !bench && tessel_model_run(m)) {
    fprintf(stderr, "tessel run: %s\n", tessel_model_error(m));
    goto out;
  }
  if (bench) {
    times = malloc(sizeof *times * (size_t)repeat);
    if (!times) goto out;
    for (int r = 0; r < repeat; r++) {
      double s = tsrt_now();
      if (tessel_model_run(m)) {
        fprintf(stderr, "tessel run: %s\n", tessel_model_error(m));
        goto out;
      }
      times[ntimes++] = tsrt_now() - s;
    }
  }
  if (outdir && mkdir(outdir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "tessel run: cannot create %s: %s\n", outdir, strerror(errno));
    goto out;
  }
  for (int i = 0; i < no; i++) {
    tessel_tensor_info info;
    tessel_model_output_info(m, i, &info);
    const void *data;
    int nd;
    int64_t shape[TESSEL_MODEL_MAX_DIMS];
    if (tessel_model_get_output(m, i, &data, &nd, shape)) {
      fprintf(stderr, "tessel run: %s\n", tessel_model_error(m));
      goto out;
    }
    if (emit_output(info.name, info.dtype, nd, shape, data, outdir, json, jouts)) goto out;
  }
  tessel_model_stats st;
  tessel_model_get_stats(m, &st);
  json_object_set_new(root, "model", json_string(so));
  json_object_set_new(root, "inputs", jins);
  json_object_set_new(root, "outputs", jouts);
  jins = jouts = NULL;
  json_object_set_new(root, "kernels", json_integer(st.nkernels));
  json_object_set_new(root, "calls", json_integer(st.ncalls));
  json_object_set_new(root, "weights_bytes", json_integer((json_int_t)st.weights_bytes));
  json_object_set_new(root, "workspace_bytes", json_integer((json_int_t)st.workspace_bytes));
  json_object_set_new(root, "workspace_no_reuse_bytes", json_integer((json_int_t)st.naive_bytes));
  json_object_set_new(root, "first_run_ms", json_real(first * 1e3));
  if (!json)
    printf("%d calls of %d kernels; workspace %.1f KiB (%.1f KiB without reuse); first run %.3f ms\n", st.ncalls,
           st.nkernels, (double)st.workspace_bytes / 1024.0, (double)st.naive_bytes / 1024.0, first * 1e3);
  if (bench) report_latency(times, ntimes, json, root);
  if (profile) report_profile(m, json, root);
  if (json) tun_cli_put_json("run", root, JSON_INDENT(1));
  rc = 0;
out:
  json_decref(root);
  json_decref(jouts);
  json_decref(jins);
  free(times);
  tessel_model_free(m);
  return rc;
}

/* --tracker: a board from the tracker runs the artifact (rpc "run_model"). */
static int run_remote(const char *so, const loaded_input *ins, int ni, const char *tracker, const char *key,
                      const char *secret_file, double wait_s, const char *outdir, int repeat, bool json) {
  ts_diag err = {0};
  rpc_secret sec;
  if (tun_cli_secret("run", secret_file, &sec)) return 2;
  int rc = 2;
  trk_conn *conn = NULL;
  rpc_client *cl = NULL;
  trk_grant g;
  bool granted = false;
  tsrt_model_run_result res;
  memset(&res, 0, sizeof res);
  tsrt_model_io *io = calloc((size_t)(ni ? ni : 1), sizeof *io);
  json_t *root = json_object(), *jouts = json_array();
  if (!io) goto out;
  if (trk_conn_open(tracker, &sec, "client", 10000, &conn, &err)) {
    fprintf(stderr, "tessel run: tracker %s: %s\n", tracker, err.msg);
    goto out;
  }
  if (trk_request(conn, key, 0, (int64_t)(wait_s * 1000), 0, &g, &err)) {
    fprintf(stderr, "tessel run: no board with key '%s' from %s: %s\n", key, tracker, err.msg);
    goto out;
  }
  granted = true;
  char url[RPC_MAX_ADDR + 16];
  trk_url(g.address, url, sizeof url);
  if (rpc_client_open(&cl, url, &sec, g.token, 10, &err)) {
    fprintf(stderr, "tessel run: board %s: %s\n", g.address, err.msg);
    goto out;
  }
  char id[64];
  if (rpc_client_upload(cl, so, id, sizeof id, &err)) {
    fprintf(stderr, "tessel run: uploading %s to %s: %s\n", so, g.address, err.msg);
    goto out;
  }
  for (int i = 0; i < ni; i++) {
    snprintf(io[i].name, sizeof io[i].name, "%s", ins[i].name);
    io[i].dtype = ins[i].dtype;
    io[i].ndim = ins[i].ndim;
    memcpy(io[i].shape, ins[i].shape, sizeof io[i].shape);
    io[i].data = ins[i].data;
    io[i].nbytes = ins[i].nbytes;
  }
  double t0 = tsrt_now();
  if (rpc_client_run_model(cl, id, io, ni, repeat, 600, 0, &res, &err)) {
    fprintf(stderr, "tessel run: on %s: %s\n", g.address, err.msg);
    goto out;
  }
  double wall = tsrt_now() - t0;
  if (res.status != TS_OK) {
    fprintf(stderr, "tessel run: on %s (%s): %s: %s\n", g.address, key, tsrt_status_name(res.status), res.error);
    goto out;
  }
  if (outdir && mkdir(outdir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "tessel run: cannot create %s: %s\n", outdir, strerror(errno));
    goto out;
  }
  for (int i = 0; i < res.noutputs; i++)
    if (emit_output(res.outputs[i].name, res.outputs[i].dtype, res.outputs[i].ndim, res.outputs[i].shape,
                    res.outputs[i].data, outdir, json, jouts))
      goto out;
  json_object_set_new(root, "model", json_string(so));
  json_object_set_new(root, "board", json_string(g.address));
  json_object_set_new(root, "key", json_string(key));
  json_object_set_new(root, "inputs", inputs_json(ins, ni));
  json_object_set_new(root, "outputs", jouts);
  jouts = NULL;
  json_object_set_new(root, "round_trip_ms", json_real(wall * 1e3));
  if (!json) printf("ran on %s (key %s); round trip with upload of inputs %.1f ms\n", g.address, key, wall * 1e3);
  report_latency(res.secs, res.nsecs, json, root);
  if (json) tun_cli_put_json("run", root, JSON_INDENT(1));
  rc = 0;
out:
  tsrt_model_run_result_fini(&res);
  json_decref(root);
  json_decref(jouts);
  free(io);
  if (cl) rpc_client_close(cl);
  if (granted) trk_release(conn, &g, NULL);
  if (conn) trk_conn_close(conn);
  rpc_secret_wipe(&sec);
  return rc;
}

int tun_cmd_run_model(int argc, char **argv) {
  const char *so = NULL, *outdir = NULL, *tracker = NULL, *key = NULL, *secret_file = NULL;
  double rpc_wait = 60;
  run_input given[64];
  int ngiven = 0, repeat = 20;
  bool bench = false, json = false, profile = false;
  uint64_t seed = 1;
  tun_model_opts syms; /* only its symbol sizes */
  tun_model_opts_init(&syms);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool more = i + 1 < argc;
    if (!strcmp(a, "--input") && more) {
      const char *s = argv[++i], *eq = strchr(s, '=');
      if (!eq || eq == s || !eq[1] || ngiven == 64) {
        fprintf(stderr, "tessel run: --input wants NAME=FILE.npy (at most 64), got '%s'\n", s);
        return 2;
      }
      char *nm = strndup(s, (size_t)(eq - s));
      if (!nm) return 1;
      given[ngiven].name = nm;
      given[ngiven++].file = eq + 1;
    } else if (!strcmp(a, "--sym") && more) {
      if (tun_cli_sym_arg("run", argv[++i], &syms)) return 2;
    } else if (!strcmp(a, "--seed") && more) {
      if (!tun_cli_seed("run", "--seed", argv[++i], &seed)) return 2;
    } else if (!strcmp(a, "--output-dir") && more) {
      outdir = argv[++i];
    } else if (!strcmp(a, "--bench")) {
      bench = true;
    } else if (!strcmp(a, "--profile")) {
      profile = true;
    } else if (!strcmp(a, "--repeat") && more) {
      if (!tun_cli_int("run", "--repeat", argv[++i], 1, 100000, &repeat)) return 2;
    } else if (!strcmp(a, "--threads") && more) {
      int t;
      if (!tun_cli_int("run", "--threads", argv[++i], 1, 4096, &t)) return 2;
      char tv[16];
      snprintf(tv, sizeof tv, "%d", t);
      setenv("TESSEL_NUM_THREADS", tv, 1);
      /* library kernels (docs/TUNING.md "Library candidates") get as many
       * (the OpenMP runtime tessel has loaded already included) */
      tsrt_library_threads(t);
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "--tracker") && more) {
      tracker = argv[++i];
    } else if (!strcmp(a, "--key") && more) {
      key = argv[++i];
    } else if (!strcmp(a, "--secret-file") && more) {
      secret_file = argv[++i];
    } else if (!strcmp(a, "--rpc-wait") && more) {
      if (!tun_cli_real("run", "--rpc-wait", argv[++i], 0, 1e7, &rpc_wait)) return 2;
    } else {
      int rc = tun_cli_other_arg("run", a, &so, run_usage);
      if (rc >= 0) return rc;
    }
  }
  if (!so) {
    fprintf(stderr, "tessel run: no model artifact given\n%s", run_usage);
    return 2;
  }
  if (repeat < 1 || repeat > 100000) {
    fprintf(stderr, "tessel run: --repeat wants 1..100000\n");
    return 2;
  }
  if (!tracker != !key) {
    fprintf(stderr, "tessel run: --tracker and --key go together\n");
    return 2;
  }
  /* the inputs' names and shapes come from the artifact (or its .json) */
  char err[700];
  model_sig *sig = calloc(1, sizeof *sig);
  if (!sig) return 1;
  if (sig_load(so, sig, err, sizeof err)) {
    fprintf(stderr, "tessel run: %s\n", err);
    free(sig);
    return 2;
  }
  int ni = sig->ni;
  loaded_input *ins = calloc((size_t)(ni ? ni : 1), sizeof *ins);
  int rc = ins ? prepare_inputs(sig, given, ngiven, &syms, seed, ins) : 1;
  if (rc == 0 && tracker)
    rc = run_remote(so, ins, ni, tracker, key, secret_file, rpc_wait, outdir, bench ? repeat : 0, json);
  else if (rc == 0)
    rc = run_local(so, ins, outdir, bench, repeat, json, profile);
  free(sig);
  for (int i = 0; ins && i < ni; i++) free(ins[i].data);
  free(ins);
  for (int g = 0; g < ngiven; g++) free((void *)given[g].name);
  return rc;
}
