/* test_library.c — library candidates (tuner/library.h, docs/TUNING.md
 * "Library candidates"): `tessel tune` measures the OpenBLAS / oneDNN call of
 * a matrix product as candidates, verified against the interpreter, and logs
 * them as library records (schema 2, kind "library", the call's parameters,
 * no trace); odd and prime extents, a batched product (a loop of calls), a
 * matrix-vector product (sgemv), a fused epilogue (dense: bias and
 * activation after the call) and the int8 products (oneDNN's u8s8s32 and
 * s8s8s32 gemm). A log whose library record is the best (the
 * other records' times scaled up by a script, so the winner does not depend
 * on the machine's noise) is replayed by `tessel build --log` into an
 * artifact that links the library (readelf: NEEDED), and by `tessel bench
 * --log`, whose output matches the interpreter; --no-library logs none and
 * its build links nothing. A model (mlp.onnx) tuned the same way builds into
 * a library that links the library and equals onnxruntime; built without
 * the log it has no such dependency. A transformer with dynamic batch and
 * sequence tuned at two sequence buckets, its library records made to win,
 * built once: the library calls cover their buckets and serve as the generic
 * kernels, and the model equals onnxruntime below, between and beyond the
 * buckets (docs/TUNING.md "Any size"). The same transformer with its
 * generated kernels made the best and the calls 2x slower: the call runs
 * below the first padded bucket, the padded kernels above (docs/MODEL.md
 * "Shape buckets"). The packed call (oneDNN's gemm on a weight packed once):
 * a candidate where B is a 2-d input, used by a model build only where the
 * weight is a constant. The database's side: a library record
 * round-trips, a trace record is still written as schema 1, an unknown kind
 * is skipped with its name. argv[1]: the tessel binary. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"
#include "tessel_config.h"
#include "tuner/database.h"
#include "util/run.h"

static const char *tessel, *models, *root;
static char tmpdir[256], python[TR_PATH_MAX], ort_script[TR_PATH_MAX];

/* Occurrences of needle in text. */
static int count_in_text(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

/* Occurrences of needle in the file at path. */
static int count_in(const char *path, const char *needle) {
  char *s = tr_slurp(path);
  ck_assert_msg(s != NULL, "read %s", path);
  int n = 0;
  for (char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
  free(s);
  return n;
}

/* The NEEDED entries of a shared library, as readelf prints them. */
static char *needed(const char *so) {
  tr_result r = tr_sh(tmpdir, "readelf -d '%s'", so);
  ck_assert_msg(r.status == 0, "readelf %s: %s", so, r.err);
  char *s = strdup(r.out ? r.out : "");
  tr_result_free(&r);
  return s;
}

/* Rewrites log so every non-library record is 1000x slower: the best
 * record is then a library call whatever the machine's noise did. */
static void make_library_win(const char *log) {
  tr_ok(tr_sh(tmpdir,
              "'%s' -c \"import json,sys; p='%s'; L=[json.loads(l) for l in open(p)]; "
              "[r.__setitem__('run_secs', [x*1000 for x in r['run_secs']]) for r in L if r.get('kind') != 'library']; "
              "open(p,'w').write(''.join(json.dumps(r)+chr(10) for r in L))\"",
              python, log),
        "scaling the log");
}

/* Tunes spec with `trials` trials into log; each library candidate must be
 * logged verified and error-free. Returns the number of library records.
 * Without the run-off: these tests count the log's records and decide the
 * winner by editing the trials' times (make_library_win); the run-off's
 * choice is test_runoff's. */
static int tune_spec(const char *spec, int trials, const char *log, const char *extra) {
  tr_ok(tr_sh(tmpdir, "'%s' tune '%s' --trials %d --log '%s' --repeat 2 --min-repeat-ms 1 --threads 1 --no-runoff %s", tessel, spec,
              trials, log, extra),
        spec);
  int lib = count_in(log, "\"kind\":\"library\"");
  int libbad = 0;
  char *s = tr_slurp(log);
  for (char *l = s; l && *l;) {
    char *e = strchr(l, '\n');
    if (e) *e = 0;
    if (strstr(l, "\"kind\":\"library\"") && (!strstr(l, "\"error\":null") || !strstr(l, "\"verified\":true") ||
                                             !strstr(l, "\"schema\":2") || !strstr(l, "\"trace\":null"))) {
      fprintf(stderr, "bad library record: %.600s\n", l);
      libbad++;
    }
    l = e ? e + 1 : NULL;
  }
  free(s);
  ck_assert_msg(libbad == 0, "%s: %d library records with an error or unverified", spec, libbad);
  return lib;
}

static int nlibs(void) { return (TESSEL_HAVE_OPENBLAS ? 1 : 0) + (TESSEL_HAVE_DNNL ? 1 : 0); }
/* the library candidates of a model's f32 product task: nlibs() plus oneDNN's
 * call on a weight packed once (its B is a task input); a budget of one
 * trial more than these per task leaves the generated default its trial
 * whatever order the task scheduler gives them */
static int nlibs_product(void) { return nlibs() + (TESSEL_HAVE_DNNL ? 1 : 0); }

START_TEST(library_record_wins_and_links) {
  char log[400], so[400], so0[400], log0[400];
  snprintf(log, sizeof log, "%s/mm.jsonl", tmpdir);
  snprintf(so, sizeof so, "%s/mm.so", tmpdir);
  const char *spec = "matmul:m=37,n=29,k=41";
  ck_assert_int_eq(tune_spec(spec, 1 + nlibs(), log, ""), nlibs());
  ck_assert_int_eq(count_in(log, "\"schema\":1"), 1); /* the default schedule: a trace record, schema 1 */
  make_library_win(log);
  tr_result r = tr_sh(tmpdir, "'%s' build '%s' --log '%s' -o '%s'", tessel, spec, log, so);
  ck_assert_msg(r.status == 0, "build: %s", r.err);
  ck_assert_msg(strstr(r.err, "(library "), "the build did not use the library record: %s", r.err);
  bool blas = strstr(r.err, "cblas_") != NULL;
  tr_result_free(&r);
  char *ne = needed(so);
  ck_assert_msg(strstr(ne, blas ? "libopenblas" : "libdnnl"), "the artifact does not link the library: %s", ne);
  free(ne);
  r = tr_sh(tmpdir, "'%s' bench '%s' --log '%s' --repeat 1 --min-repeat-ms 1", tessel, spec, log);
  ck_assert_msg(r.status == 0 && strstr(r.out, "output matches the reference interpreter"), "bench: %s %s", r.out,
                r.err);
  tr_result_free(&r);
  /* --no-library: no library record, and the build links no library */
  snprintf(log0, sizeof log0, "%s/mm0.jsonl", tmpdir);
  snprintf(so0, sizeof so0, "%s/mm0.so", tmpdir);
  ck_assert_int_eq(tune_spec(spec, 2, log0, "--no-library"), 0);
  tr_ok(tr_sh(tmpdir, "'%s' build '%s' --log '%s' -o '%s'", tessel, spec, log0, so0), "build without library");
  ne = needed(so0);
  ck_assert_msg(!strstr(ne, "openblas") && !strstr(ne, "dnnl"), "a build without library records links: %s", ne);
  free(ne);
}
END_TEST

/* The general case: batched (a loop of calls at offsets), a vector product,
 * a fused epilogue, odd and prime extents; each candidate verified. */
START_TEST(library_shapes_verified) {
  static const char *const specs[] = {"batch_matmul:b=3,m=17,n=19,k=23", "matmul:m=1,n=67,k=53",
                                      "matmul:m=61,n=1,k=47", "dense:m=5,n=7,k=11",
                                      "matmul_u8s8:m=37,n=29,k=41", "matmul_int8:m=13,n=31,k=7"};
  int dnnl = TESSEL_HAVE_DNNL ? 1 : 0;
  const int want[] = {nlibs(), nlibs(), nlibs(), nlibs(), dnnl, dnnl}; /* int8: oneDNN only */
  for (int i = 0; i < 6; i++) {
    char log[400];
    snprintf(log, sizeof log, "%s/shape%d.jsonl", tmpdir, i);
    int n = tune_spec(specs[i], 1 + want[i], log, "");
    ck_assert_msg(n == want[i], "%s: %d library records, %d expected", specs[i], n, want[i]);
  }
  /* an operand computed in the task (a transpose into an allocation, as
   * BERT's attention products): the call reads the allocation */
  char dsl[400], log6[400];
  snprintf(dsl, sizeof dsl, "%s/tp_mm.tsl", tmpdir);
  snprintf(log6, sizeof log6, "%s/shape6.jsonl", tmpdir);
  FILE *f = fopen(dsl, "w");
  ck_assert_ptr_nonnull(f);
  fputs("func tp_mm(in0: f32[6, 9], in1: f32[6, 5]) -> out0: f32[9, 5] {\n"
        "  block root() {\n"
        "    alloc t0: f32[9, 6]\n"
        "    for i in serial(0, 9) { for j in serial(0, 6) {\n"
        "      block t0(vi: S(0, 9) = i, vj: S(0, 6) = j) {\n"
        "        reads in0[vj, vi]\n        writes t0[vi, vj]\n"
        "        t0[vi, vj] = in0[vj, vi]\n      } } }\n"
        "    for i in serial(0, 9) { for j in serial(0, 5) { for r in serial(0, 6) {\n"
        "      block out0(vi: S(0, 9) = i, vj: S(0, 5) = j, vr: R(0, 6) = r) {\n"
        "        reads t0[vi, vr], in1[vr, vj]\n        writes out0[vi, vj]\n"
        "        init { out0[vi, vj] = 0.0 }\n"
        "        out0[vi, vj] = out0[vi, vj] + t0[vi, vr] * in1[vr, vj]\n      } } } }\n"
        "  }\n}\n",
        f);
  fclose(f);
  ck_assert_int_eq(tune_spec(dsl, 1 + nlibs(), log6, ""), nlibs());
  /* the vector products call sgemv */
  char log[400];
  snprintf(log, sizeof log, "%s/shape1.jsonl", tmpdir);
  if (TESSEL_HAVE_OPENBLAS) ck_assert_int_eq(count_in(log, "cblas_sgemv"), 1);
}
END_TEST

/* A model: tuned with library candidates, built from a log where they win,
 * equal to onnxruntime; built without a log, no library dependency. */
START_TEST(model_links_library_only_with_records) {
  char log[400], so[400], so0[400], dir[400];
  snprintf(log, sizeof log, "%s/mlp.jsonl", tmpdir);
  snprintf(so, sizeof so, "%s/mlp.so", tmpdir);
  snprintf(so0, sizeof so0, "%s/mlp0.so", tmpdir);
  snprintf(dir, sizeof dir, "%s/mlp_run", tmpdir);
  tr_ok(tr_sh(tmpdir, "'%s' tune-model '%s/mlp.onnx' --trials %d --log '%s' --repeat 2 --min-repeat-ms 1 --threads 1 --no-runoff",
              tessel, models, 3 * (1 + nlibs()), log),
        "tune-model");
  ck_assert_int_eq(count_in(log, "\"kind\":\"library\""), 3 * nlibs());
  make_library_win(log);
  tr_result r = tr_sh(tmpdir, "'%s' build '%s/mlp.onnx' --log '%s' -o '%s'", tessel, models, log, so);
  ck_assert_msg(r.status == 0 && strstr(r.out, "3 of the tuned ones call a library"), "model build: %s %s", r.out,
                r.err);
  tr_result_free(&r);
  char *ne = needed(so);
  ck_assert_msg(strstr(ne, "openblas") || strstr(ne, "dnnl"), "the model does not link the library: %s", ne);
  free(ne);
  tr_ok(tr_sh(tmpdir, "'%s' '%s' '%s/mlp.onnx' '%s/in' '%s/ref' --random 3", python, ort_script, models, dir, dir),
        "ort_run.py");
  tr_ok(tr_sh(tmpdir, "'%s' run '%s' --input 'x=%s/in/x.npy' --output-dir '%s/out'", tessel, so, dir, dir),
        "tessel run");
  r = tr_sh(tmpdir, "'%s' -c \"import numpy as n; a=n.load('%s/out/y.npy'); b=n.load('%s/ref/y.npy'); "
            "print(float(abs(a.astype('f8')-b).max() / max(abs(b).max(), 1e-30)))\"", python, dir, dir);
  ck_assert_msg(r.status == 0, "compare: %s", r.err);
  double e = atof(r.out);
  tr_result_free(&r);
  fprintf(stderr, "mlp with library kernels vs onnxruntime: max abs error / max |ref| %.3g\n", e);
  ck_assert_msg(e <= 1e-5, "relative error %g", e);
  tr_ok(tr_sh(tmpdir, "'%s' build '%s/mlp.onnx' -o '%s'", tessel, models, so0), "model build without a log");
  ne = needed(so0);
  ck_assert_msg(!strstr(ne, "openblas") && !strstr(ne, "dnnl"), "a model without library records links: %s", ne);
  free(ne);
}
END_TEST

/* Shape buckets with library records (docs/TUNING.md "Library candidates",
 * "Any size"): the transformer with dynamic batch and sequence, tuned at
 * sequence buckets 8 and 16 with the library calls measured, the log scaled
 * so they win, built ONCE: each bucket's library record is the call on the
 * symbolic function (covering), and the generic kernel of each product task
 * is the library call too (the largest bucket chose it). Run against
 * onnxruntime below the first bucket, between the buckets, beyond the last
 * and at a batch beyond the one tuned: the call takes every size. */
START_TEST(library_generic_every_size) {
  char log[400], so[400];
  snprintf(log, sizeof log, "%s/dyn.jsonl", tmpdir);
  snprintf(so, sizeof so, "%s/dyn.so", tmpdir);
  tr_result r = tr_sh(tmpdir, "'%s' tasks '%s/transformer_dyn.onnx' --sym batch=2 --buckets seq=8,16 --json", tessel,
                      models);
  ck_assert_msg(r.status == 0, "tasks: %s", r.err);
  int ntasks = count_in_text(r.out, "\"key\"");
  tr_result_free(&r);
  ck_assert_int_gt(ntasks, 0);
  /* each task's first round: the default schedule and every library call */
  tr_ok(tr_sh(tmpdir, "'%s' tune-model '%s/transformer_dyn.onnx' --sym batch=2 --buckets seq=8,16 --trials %d "
                      "--repeat 2 --min-repeat-ms 1 --threads 1 --log '%s'",
              tessel, models, ntasks * (1 + nlibs_product()), log),
        "tune-model");
  ck_assert_int_gt(count_in(log, "\"kind\":\"library\""), 0);
  make_library_win(log);
  r = tr_sh(tmpdir, "'%s' build '%s/transformer_dyn.onnx' -o '%s' --log '%s' --threads 1 --sym batch=2 "
                    "--buckets seq=8,16 --json", tessel, models, so, log);
  ck_assert_msg(r.status == 0, "build: %s", r.err);
  const char *g = strstr(r.out, "\"library_generic\":");
  ck_assert_msg(g && atoi(g + 18) >= 1, "no generic kernel is a library call: %s", r.out);
  const char *cov = strstr(r.out, "\"covering\":");
  ck_assert_msg(cov && atoi(cov + 11) >= 2, "no covering library kernels: %s", r.out);
  tr_result_free(&r);
  char *ne = needed(so);
  ck_assert_msg(strstr(ne, "openblas") || strstr(ne, "dnnl"), "the model does not link the library: %s", ne);
  free(ne);
  static const struct { int batch, seq; } runs[] = {{2, 3}, {2, 12}, {2, 16}, {2, 29}, {3, 21}};
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/dyn_b%d_s%d", tmpdir, runs[i].batch, runs[i].seq);
    tr_ok(tr_sh(tmpdir, "'%s' '%s' '%s/transformer_dyn.onnx' '%s/in' '%s/ref' --random 5 --sym batch=%d --sym seq=%d",
                python, ort_script, models, dir, dir, runs[i].batch, runs[i].seq),
          "ort_run.py");
    tr_ok(tr_sh(tmpdir, "'%s' run '%s' --input 'input_ids=%s/in/input_ids.npy' --input "
                        "'attention_mask=%s/in/attention_mask.npy' --output-dir '%s/out' --threads 1",
                tessel, so, dir, dir, dir),
          "tessel run");
    r = tr_sh(tmpdir, "'%s' -c \"import numpy as n; a=n.load('%s/out/y.npy'); b=n.load('%s/ref/y.npy'); "
              "assert a.shape == b.shape, (a.shape, b.shape); "
              "print(float(abs(a.astype('f8')-b).max() / max(abs(b).max(), 1e-30)))\"", python, dir, dir);
    ck_assert_msg(r.status == 0, "compare: %s", r.err);
    double e = atof(r.out);
    tr_result_free(&r);
    fprintf(stderr, "library kernels at every size: batch %d seq %d: max abs error / max |ref| %.3g\n",
            runs[i].batch, runs[i].seq, e);
    ck_assert_msg(e <= 1e-5, "batch %d seq %d: relative error %g", runs[i].batch, runs[i].seq, e);
  }
}
END_TEST

/* Rewrites log so every library record of a task takes `factor` times its
 * fastest trace record: the generated kernel is then the best whatever the
 * machine's noise did, and the call `factor` times slower at the bucket. */
static void make_library_slower(const char *log, double factor) {
  tr_ok(tr_sh(tmpdir,
              "'%s' -c \"import json; p='%s'; L=[json.loads(l) for l in open(p)]; m={}; "
              "[m.__setitem__(r['workload_key'], min(m.get(r['workload_key'], 1e9), sum(r['run_secs'])/len(r['run_secs']))) "
              "for r in L if r.get('kind') != 'library' and r.get('run_secs')]; "
              "[r.__setitem__('run_secs', [m[r['workload_key']] * %g] * 3) for r in L "
              "if r.get('kind') == 'library' and r['workload_key'] in m]; "
              "open(p,'w').write(''.join(json.dumps(r)+chr(10) for r in L))\"",
              python, log, factor),
        "rewriting the log");
}

/* Calls of a `tessel run --profile --json` output that ran specialisation
 * spec of a kernel with nspecs of them. */
static int calls_on_spec(const char *json, int spec, int nspecs) {
  char a[64], b[64];
  snprintf(a, sizeof a, "\"spec\": %d,", spec);
  snprintf(b, sizeof b, "\"nspecs\": %d,", nspecs);
  int n = 0;
  for (const char *p = json; (p = strstr(p, a)); p += strlen(a)) {
    const char *e = strchr(p, '}');
    const char *q = strstr(p, b);
    n += q && e && q < e;
  }
  return n;
}

/* Padding waste (docs/MODEL.md "Shape buckets", "Below a padded bucket"):
 * the transformer tuned at buckets batch 1 (which cannot shrink) and
 * sequence 8 and 16, its generated kernels
 * made the best and every library call 2x slower than them at its bucket.
 * The build puts the call below bucket 8's padded kernel, up to sequence 4
 * (8 x 1/2: there it does at most the bucket's work), and not below bucket
 * 16 (up to 8: bucket 8 takes those sizes). A run at sequence 3 takes the
 * call, one at 6 the padded bucket-8 kernel, one at 12 bucket 16's; all
 * equal onnxruntime. */
START_TEST(library_below_padded_bucket) {
  char log[400], so[400];
  snprintf(log, sizeof log, "%s/below.jsonl", tmpdir);
  snprintf(so, sizeof so, "%s/below.so", tmpdir);
  tr_result r = tr_sh(tmpdir, "'%s' tasks '%s/transformer_dyn.onnx' --buckets batch=1 --buckets seq=8,16 --json", tessel,
                      models);
  ck_assert_msg(r.status == 0, "tasks: %s", r.err);
  int ntasks = count_in_text(r.out, "\"key\"");
  tr_result_free(&r);
  tr_ok(tr_sh(tmpdir, "'%s' tune-model '%s/transformer_dyn.onnx' --buckets batch=1 --buckets seq=8,16 --trials %d "
                      "--repeat 2 --min-repeat-ms 1 --threads 1 --no-runoff --log '%s'",
              tessel, models, ntasks * (1 + nlibs_product()), log),
        "tune-model");
  ck_assert_int_gt(count_in(log, "\"kind\":\"library\""), 0);
  make_library_slower(log, 2.0);
  r = tr_sh(tmpdir, "'%s' build '%s/transformer_dyn.onnx' -o '%s' --log '%s' --threads 1 --buckets batch=1 "
                    "--buckets seq=8,16 --json", tessel, models, so, log);
  ck_assert_msg(r.status == 0, "build: %s", r.err);
  const char *lb = strstr(r.out, "\"library_below\":");
  const char *lg = strstr(r.out, "\"library_generic\":");
  const char *li = strstr(r.out, "\"library\":");
  ck_assert_msg(lb && atoi(lb + 16) >= 1, "no library call below a padded bucket: %.400s", r.out);
  ck_assert_msg(lg && atoi(lg + 18) == 0, "a generic kernel is a library call though no bucket chose one: %.400s", r.out);
  ck_assert_msg(li && atoi(li + 10) == atoi(lb + 16), "library kernels other than those below a bucket: %.400s", r.out);
  tr_result_free(&r);
  static const struct { int seq, spec; } runs[] = {{3, 0}, {6, 1}, {12, 2}};
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/below_s%d", tmpdir, runs[i].seq);
    tr_ok(tr_sh(tmpdir, "'%s' '%s' '%s/transformer_dyn.onnx' '%s/in' '%s/ref' --random 5 --sym batch=1 --sym seq=%d",
                python, ort_script, models, dir, dir, runs[i].seq),
          "ort_run.py");
    r = tr_sh(tmpdir, "'%s' run '%s' --input 'input_ids=%s/in/input_ids.npy' --input "
                      "'attention_mask=%s/in/attention_mask.npy' --output-dir '%s/out' --threads 1 --profile --json",
              tessel, so, dir, dir, dir);
    ck_assert_msg(r.status == 0, "tessel run at seq %d: %s", runs[i].seq, r.err);
    int on = calls_on_spec(r.out, runs[i].spec, 3);
    ck_assert_msg(on > 0, "seq %d: no call of a kernel with 3 specialisations ran the %d-th: %.300s", runs[i].seq,
                  runs[i].spec, r.out);
    for (int sp = 0; sp < 3; sp++)
      if (sp != runs[i].spec)
        ck_assert_msg(calls_on_spec(r.out, sp, 3) == 0, "seq %d: a call ran specialisation %d, not %d",
                      runs[i].seq, sp, runs[i].spec);
    tr_result_free(&r);
    r = tr_sh(tmpdir, "'%s' -c \"import numpy as n; a=n.load('%s/out/y.npy'); b=n.load('%s/ref/y.npy'); "
              "assert a.shape == b.shape, (a.shape, b.shape); "
              "print(float(abs(a.astype('f8')-b).max() / max(abs(b).max(), 1e-30)))\"", python, dir, dir);
    ck_assert_msg(r.status == 0, "compare: %s", r.err);
    double e = atof(r.out);
    tr_result_free(&r);
    fprintf(stderr, "library below a padded bucket: seq %d (specialisation %d): max abs error / max |ref| %.3g\n",
            runs[i].seq, runs[i].spec, e);
    ck_assert_msg(e <= 1e-5, "seq %d: relative error %g", runs[i].seq, e);
  }
}
END_TEST

/* Rewrites log so every record but the packed call's is 1000x slower. */
static void make_packed_win(const char *log) {
  tr_ok(tr_sh(tmpdir,
              "'%s' -c \"import json,sys; p='%s'; L=[json.loads(l) for l in open(p)]; "
              "[r.__setitem__('run_secs', [x*1000 for x in r['run_secs']]) for r in L "
              "if (r.get('params') or {}).get('call') != 'tsrt_dnnl_sgemm_packed']; "
              "open(p,'w').write(''.join(json.dumps(r)+chr(10) for r in L))\"",
              python, log),
        "scaling the log");
}

/* The packed call (oneDNN packs the weight once, runtime/dnnl_packed.c): a
 * candidate of a product whose B is a 2-d input (dense's weight, odd sizes),
 * verified, replayed by build and bench; in a model, used where the weight
 * is a constant, refused where one call of the shared kernel feeds it from a
 * graph input (which may change between runs), and the outputs equal NumPy's
 * either way. */
START_TEST(library_packed_weight) {
  char log[400], so[800], dir[400];
  snprintf(log, sizeof log, "%s/packed.jsonl", tmpdir);
  const char *spec = "dense:m=37,n=29,k=41";
  ck_assert_int_eq(tune_spec(spec, 2 + nlibs(), log, ""), nlibs() + 1);
  ck_assert_int_eq(count_in(log, "\"call\":\"tsrt_dnnl_sgemm_packed\""), 1);
  make_packed_win(log);
  tr_result r = tr_sh(tmpdir, "'%s' bench '%s' --log '%s' --repeat 1 --min-repeat-ms 1", tessel, spec, log);
  ck_assert_msg(r.status == 0 && strstr(r.out, "output matches the reference interpreter") &&
                    strstr(r.err, "tsrt_dnnl_sgemm_packed"),
                "bench: %s %s", r.out, r.err);
  tr_result_free(&r);
  /* models: y1 = x . Wc (a constant), y2 = x . w (a graph input), one shared kernel; and y1 alone */
  snprintf(dir, sizeof dir, "%s/packed_model", tmpdir);
  tr_ok(tr_sh(tmpdir,
              "mkdir -p '%s' && '%s' -c \"import numpy as n, onnx; from onnx import helper as h, numpy_helper as nh; "
              "F=onnx.TensorProto.FLOAT; g=n.random.default_rng(3); wc=g.standard_normal((13, 11)).astype('f4'); "
              "vi=lambda a, s: h.make_tensor_value_info(a, F, s); "
              "mk=lambda nodes, ins, outs, name: h.make_model(h.make_graph(nodes, name, ins, outs, [nh.from_array(wc, 'wc')]), "
              "opset_imports=[h.make_opsetid('', 17)], ir_version=8); "
              "onnx.save(mk([h.make_node('MatMul', ['x', 'wc'], ['y1']), h.make_node('MatMul', ['x', 'w'], ['y2'])], "
              "[vi('x', [5, 13]), vi('w', [13, 11])], [vi('y1', [5, 11]), vi('y2', [5, 11])], 'two'), '%s/two.onnx'); "
              "onnx.save(mk([h.make_node('MatMul', ['x', 'wc'], ['y1'])], [vi('x', [5, 13])], [vi('y1', [5, 11])], 'one'), "
              "'%s/one.onnx'); x=g.standard_normal((5, 13)).astype('f4'); w=g.standard_normal((13, 11)).astype('f4'); "
              "n.save('%s/x.npy', x); n.save('%s/w.npy', w); n.save('%s/y1.npy', x @ wc); n.save('%s/y2.npy', x @ w)\"",
              dir, python, dir, dir, dir, dir, dir, dir),
        "writing the models");
  static const struct {
    const char *stem;
    bool packed;
  } ms[] = {{"two", false}, {"one", true}};
  for (int i = 0; i < 2; i++) {
    char mlog[800];
    snprintf(mlog, sizeof mlog, "%s/%s.jsonl", dir, ms[i].stem);
    snprintf(so, sizeof so, "%s/%s.so", dir, ms[i].stem);
    tr_ok(tr_sh(tmpdir, "'%s' tune-model '%s/%s.onnx' --trials %d --log '%s' --repeat 2 --min-repeat-ms 1 --threads 1 "
                        "--no-runoff", tessel, dir, ms[i].stem, 2 + nlibs(), mlog),
          "tune-model");
    ck_assert_int_eq(count_in(mlog, "\"call\":\"tsrt_dnnl_sgemm_packed\""), 1);
    make_packed_win(mlog);
    r = tr_sh(tmpdir, "'%s' build '%s/%s.onnx' --log '%s' -o '%s' --json", tessel, dir, ms[i].stem, mlog, so);
    ck_assert_msg(r.status == 0, "build %s: %s", ms[i].stem, r.err);
    bool refused = strstr(r.err, "packs its weight once") != NULL;
    const char *li = strstr(r.out, "\"library\":");
    ck_assert_msg(refused == !ms[i].packed, "%s: the packed record was %s: %s", ms[i].stem,
                  refused ? "refused" : "used", r.err);
    /* "two": the next best record (scaled like every other) may be another library call */
    ck_assert_msg(li && (!ms[i].packed || atoi(li + 10) == 1), "%s: library kernels: %.300s", ms[i].stem, r.out);
    tr_result_free(&r);
    tr_ok(tr_sh(tmpdir, "'%s' run '%s' --input 'x=%s/x.npy' %s%s%s --output-dir '%s/out_%s'", tessel, so, dir,
                ms[i].packed ? "" : "--input 'w=", ms[i].packed ? "" : dir, ms[i].packed ? "" : "/w.npy'", dir,
                ms[i].stem),
          "tessel run");
    r = tr_sh(tmpdir, "'%s' -c \"import numpy as n; d='%s'; s='%s'; ys=['y1'] + (['y2'] if s == 'two' else []); "
              "print(max(float(abs(n.load(d+'/out_'+s+'/'+y+'.npy').astype('f8') - n.load(d+'/'+y+'.npy')).max()) "
              "for y in ys))\"", python, dir, ms[i].stem);
    ck_assert_msg(r.status == 0, "compare: %s", r.err);
    double e = atof(r.out);
    tr_result_free(&r);
    ck_assert_msg(e <= 1e-4, "%s: max abs error %g against NumPy", ms[i].stem, e);
  }
}
END_TEST

START_TEST(library_record_roundtrip) {
  tun_record r;
  memset(&r, 0, sizeof r);
  memcpy(r.workload_key, "0123456789abcdef", 17);
  r.workload = "matmul:m=2,n=2,k=2";
  r.target = "llvm";
  r.nruns = 1;
  r.run_secs[0] = 1e-6;
  r.verified = true;
  r.version = "0.1.0";
  r.trace_hash = 0x1234;
  r.kind = TUN_KIND_LIBRARY;
  r.params = "{\"call\":\"cblas_sgemm\",\"lib\":\"openblas\"}";
  char *js = tun_record_to_json(&r);
  ck_assert_ptr_nonnull(js);
  ck_assert_ptr_nonnull(strstr(js, "\"schema\":2"));
  ck_assert_ptr_nonnull(strstr(js, "\"trace\":null"));
  tun_record back;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(tun_record_from_json(js, &back, &d), TS_OK);
  ck_assert_str_eq(back.kind, TUN_KIND_LIBRARY);
  ck_assert_str_eq(back.params, r.params);
  ck_assert_ptr_null(back.trace);
  tun_record_fini(&back);
  /* an unknown kind is refused, naming it; a library record without params too */
  char *bad = strdup(js);
  char *k = strstr(bad, "\"kind\":\"library\"");
  memcpy(k, "\"kind\":\"libxxxx\"", 16);
  ts_diag_clear(&d);
  ck_assert_int_eq(tun_record_from_json(bad, &back, &d), TS_EUNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(d.msg, "libxxxx"));
  free(bad);
  ts_diag_clear(&d);
  ck_assert_int_eq(tun_record_from_json("{\"schema\":2,\"workload_key\":\"0123456789abcdef\",\"workload\":\"w\","
                                        "\"target\":\"llvm\",\"trace\":null,\"run_secs\":[1e-6],\"build_secs\":0,"
                                        "\"error\":null,\"verified\":true,\"time\":0,\"version\":\"v\","
                                        "\"trace_hash\":\"0000000000000001\",\"kind\":\"library\"}",
                                        &back, &d),
                   TS_EPARSE);
  /* a trace record is written as schema 1 */
  r.kind = r.params = NULL;
  r.trace = "[[],[]]";
  ts_free(js);
  js = tun_record_to_json(&r);
  ck_assert_ptr_nonnull(strstr(js, "\"schema\":1"));
  ck_assert_ptr_null(strstr(js, "\"kind\""));
  ts_free(js);
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s TESSEL\n", argv[0]);
    return 2;
  }
  tessel = argv[1];
  if (!tr_model_env(&models, &root, python, ort_script)) return 1;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessel_library_XXXXXX");
  if (!mkdtemp(tmpdir)) return 2;
  Suite *s = suite_create("library");
  TCase *tc = tcase_create("library");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, library_record_roundtrip);
  if (nlibs() > 0) { /* a tessel built without OpenBLAS and oneDNN has no library candidates */
    tcase_add_test(tc, library_record_wins_and_links);
    tcase_add_test(tc, library_shapes_verified);
    tcase_add_test(tc, model_links_library_only_with_records);
    tcase_add_test(tc, library_generic_every_size);
    tcase_add_test(tc, library_below_padded_bucket);
    if (TESSEL_HAVE_DNNL && tsrt_dnnl_packed_available()) tcase_add_test(tc, library_packed_weight);
  } else {
    fprintf(stderr, "test_library: built without OpenBLAS and oneDNN: only the record format is tested\n");
  }
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  if (!failures) tr_rmtree(tmpdir);
  return failures ? 1 : 0;
}
