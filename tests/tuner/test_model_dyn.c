/* test_model_dyn.c — a transformer exported with dynamic batch AND sequence
 * axes, built ONCE and run at two batch sizes times two sequence lengths
 * against onnxruntime (tests/models/gen_models.py transformer_dyn: int64
 * input_ids/attention_mask, a Slice of the position ids to the symbolic
 * sequence length, the Where(Equal(shape, -1)) + Expand idiom, a causal mask
 * from Range + LessOrEqual And the padding mask, Where-masked scores). The
 * shape logic folds at import (docs/GRAPH.md "Known values"); the bool and
 * int64 kernels run through codegen and the runtime. A negative control
 * checks that the comparison can fail; a shape that depends on tensor data
 * is refused clearly. transformer_flat does the same for dims that are
 * products of batch and seq (Flatten, Reshape -1, heads folded into the
 * batch). transformer_dyn tuned with shape buckets (seq 8 and 16 at batch
 * 2, a few trials), built ONCE, runs at the bucket sizes, between them,
 * below the first and beyond the last (and at a batch beyond its bound)
 * against onnxruntime, and `tessel run --profile --json` says which calls
 * ran a bucket kernel: some at every size inside a bucket, none beyond the
 * last (docs/MODEL.md "Shape buckets"). argv[1]: the tessel binary. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/run.h"

static const char *tessel, *models, *root;
static char tmpdir[256], python[TR_PATH_MAX], ort_script[TR_PATH_MAX];

/* The largest |tessel - onnxruntime| of output y over its largest |reference|
 * (shapes and dtypes must agree), computed by numpy. */
static double rel_error(const char *dir, const char *sub) {
  tr_result r = tr_sh(tmpdir, "'%s' -c \"import numpy as n; a=n.load('%s/%s/y.npy'); b=n.load('%s/ref/y.npy'); "
                   "assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype); "
                   "print(float(abs(a.astype('f8')-b).max() / max(abs(b).max(), 1e-30)))\"",
                   python, dir, sub, dir);
  ck_assert_msg(r.status == 0, "compare %s/%s: %s", dir, sub, r.err);
  double e = atof(r.out);
  tr_result_free(&r);
  return e;
}

/* Builds models/NAME.onnx once and runs it at batch {1, 3} x seq {5, 12}
 * against onnxruntime; the last run's directory goes to last. */
static void run_dyn(const char *name, char *last, size_t nlast) {
  char so[400];
  snprintf(so, sizeof so, "%s/%s.so", tmpdir, name);
  tr_ok(tr_sh(tmpdir, "'%s' build '%s/%s.onnx' -o '%s'", tessel, models, name, so), name);
  static const int batches[2] = {1, 3}, seqs[2] = {5, 12};
  for (int bi = 0; bi < 2; bi++)
    for (int si = 0; si < 2; si++) {
      char dir[400];
      snprintf(dir, sizeof dir, "%s/%s_b%d_s%d", tmpdir, name, batches[bi], seqs[si]);
      tr_ok(tr_sh(tmpdir, "'%s' '%s' '%s/%s.onnx' '%s/in' '%s/ref' --random 5 --sym batch=%d --sym seq=%d", python,
               ort_script, models, name, dir, dir, batches[bi], seqs[si]),
            "ort_run.py");
      tr_ok(tr_sh(tmpdir, "'%s' run '%s' --input 'input_ids=%s/in/input_ids.npy' --input 'attention_mask=%s/in/attention_mask.npy' "
               "--output-dir '%s/out'", tessel, so, dir, dir, dir),
            "tessel run");
      double e = rel_error(dir, "out");
      fprintf(stderr, "%s batch %d seq %d (one build): max abs error / max |ref| %.3g\n", name, batches[bi], seqs[si], e);
      ck_assert_msg(e <= 1e-5, "%s batch %d seq %d: relative error %g", name, batches[bi], seqs[si], e);
      snprintf(last, nlast, "%s", dir);
    }
}

START_TEST(transformer_dyn_batch_and_seq) {
  char so[400], last[400] = "";
  run_dyn("transformer_dyn", last, sizeof last);
  snprintf(so, sizeof so, "%s/transformer_dyn.so", tmpdir);
  /* negative control: another attention mask gives other outputs */
  tr_ok(tr_sh(tmpdir, "'%s' -c \"import numpy as n; m=n.load('%s/in/attention_mask.npy'); n.save('%s/m0.npy', m*0)\"", python, last,
           tmpdir), "zero mask");
  tr_ok(tr_sh(tmpdir, "'%s' run '%s' --input 'input_ids=%s/in/input_ids.npy' --input 'attention_mask=%s/m0.npy' "
           "--output-dir '%s/other'", tessel, so, last, tmpdir, last),
        "tessel run (zero mask)");
  ck_assert_double_gt(rel_error(last, "other"), 1e-3);
}
END_TEST

/* Dims that are products of the symbols (batch*seq rows of a Flatten,
 * batch*H heads, -1 inferred by division: ir/graph/dim.c), one build. */
START_TEST(transformer_flat_products) {
  char last[400] = "";
  run_dyn("transformer_flat", last, sizeof last);
}
END_TEST

/* Calls of the last `tessel run --profile --json` (in dir/run.json) that
 * ran a padded bucket kernel, and all calls. */
static int bucket_calls(const char *dir, int *ncalls) {
  tr_result r = tr_sh(tmpdir, "'%s' -c \"import json; p=json.load(open('%s/run.json'))['profile']; "
                              "print(sum(1 for c in p if c['spec'] >= 0 and c['covers']), len(p))\"", python, dir);
  ck_assert_msg(r.status == 0, "profile of %s: %s", dir, r.err);
  int nb = -1;
  ck_assert_int_eq(sscanf(r.out, "%d %d", &nb, ncalls), 2);
  tr_result_free(&r);
  return nb;
}

/* Library candidates are off (--no-library): a library call is made for
 * its exact sizes, and the point here is the padded generated kernels. */
START_TEST(transformer_buckets_one_build) {
  char log[400], so[400];
  snprintf(log, sizeof log, "%s/buckets.jsonl", tmpdir);
  snprintf(so, sizeof so, "%s/buckets.so", tmpdir);
  tr_result r = tr_sh(tmpdir, "'%s' tune-model '%s/transformer_dyn.onnx' --sym batch=2 --buckets seq=16,8 --trials 14 "
                              "--no-default --no-library --threads 1 --log '%s' --json", tessel, models, log);
  ck_assert_msg(r.status == 0, "tune-model: %s", r.err);
  ck_assert_msg(strstr(r.out, "\"softmax_0@seq=8\"") && strstr(r.out, "\"softmax_0@seq=16\""), "%s", r.out);
  tr_result_free(&r);
  r = tr_sh(tmpdir, "'%s' build '%s/transformer_dyn.onnx' -o '%s' --log '%s' --threads 1 --sym batch=2 "
                    "--buckets seq=8,16 --json", tessel, models, so, log);
  ck_assert_msg(r.status == 0, "build: %s", r.err);
  const char *cov = strstr(r.out, "\"covering\":");
  ck_assert_msg(cov && atoi(cov + 11) >= 4, "%s", r.out);
  tr_result_free(&r);
  static const struct { int batch, seq, inside; } runs[] = {
      {2, 8, 1}, {2, 16, 1}, {1, 3, 1}, {2, 12, 1}, {1, 9, 1}, {2, 20, 0}, {3, 12, 1}};
  int nb[7];
  for (int i = 0; i < 7; i++) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/bk_b%d_s%d", tmpdir, runs[i].batch, runs[i].seq);
    tr_ok(tr_sh(tmpdir, "'%s' '%s' '%s/transformer_dyn.onnx' '%s/in' '%s/ref' --random 5 --sym batch=%d --sym seq=%d",
                python, ort_script, models, dir, dir, runs[i].batch, runs[i].seq),
          "ort_run.py");
    tr_result rr = tr_sh(tmpdir, "'%s' run '%s' --input 'input_ids=%s/in/input_ids.npy' --input "
                                 "'attention_mask=%s/in/attention_mask.npy' --output-dir '%s/out' --profile --json",
                         tessel, so, dir, dir, dir);
    ck_assert_msg(rr.status == 0, "tessel run: %s", rr.err);
    char js[460];
    snprintf(js, sizeof js, "%s/run.json", dir);
    FILE *jf = fopen(js, "w");
    ck_assert_ptr_nonnull(jf);
    fputs(rr.out, jf);
    fclose(jf);
    tr_result_free(&rr);
    double e = rel_error(dir, "out");
    int ncalls = 0;
    nb[i] = bucket_calls(dir, &ncalls);
    fprintf(stderr, "buckets: batch %d seq %d: max abs error / max |ref| %.3g; %d of %d calls on a bucket kernel\n",
            runs[i].batch, runs[i].seq, e, nb[i], ncalls);
    ck_assert_msg(e <= 1e-5, "batch %d seq %d: relative error %g", runs[i].batch, runs[i].seq, e);
    if (runs[i].inside) ck_assert_int_ge(nb[i], 1);
    else ck_assert_int_eq(nb[i], 0); /* beyond the last bucket: the symbolic kernels */
  }
  /* batch 3 is beyond the batch every bucket was padded to: only the kernels
   * without a batch size (the position ids) keep a bucket */
  ck_assert_int_lt(nb[6], nb[3]);
}
END_TEST

/* A Range whose length is tensor data has no plannable shape: refused,
 * naming the node, the op and the input. */
START_TEST(data_dependent_shape_refused) {
  tr_result r = tr_sh(tmpdir, "'%s' build '%s/ops/bad_range_data.onnx' -o '%s/bad.so'", tessel, models, tmpdir);
  ck_assert_int_ne(r.status, 0);
  ck_assert_msg(strstr(r.err, "node #2 (Range, opset 17): input 1 (n, the limit) depends on tensor data"), "%s", r.err);
  tr_result_free(&r);
  r = tr_sh(tmpdir, "'%s' build '%s/ops/bad_nonzero.onnx' -o '%s/bad.so'", tessel, models, tmpdir);
  ck_assert_int_ne(r.status, 0);
  ck_assert_msg(strstr(r.err, "operator NonZero (opset 17) is not supported: its output shape depends on tensor data"),
                "%s", r.err);
  tr_result_free(&r);
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s TESSEL\n", argv[0]);
    return 2;
  }
  tessel = argv[1];
  if (!tr_model_env(&models, &root, python, ort_script)) return 1;
  if (access(python, X_OK) != 0) {
    fprintf(stderr, "test_model_dyn: no python at %s (onnxruntime is needed)\n", python);
    return 1;
  }
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessel_model_dyn_XXXXXX");
  if (!mkdtemp(tmpdir)) return 2;
  Suite *s = suite_create("model_dyn");
  TCase *tc = tcase_create("dyn");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, transformer_dyn_batch_and_seq);
  tcase_add_test(tc, transformer_flat_products);
  tcase_add_test(tc, data_dependent_shape_refused);
  tcase_add_test(tc, transformer_buckets_one_build);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  if (!failures) tr_rmtree(tmpdir);
  return failures ? 1 : 0;
}
