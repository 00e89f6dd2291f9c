/* test_library_conv.c — the convolution library candidate
 * (tuner/library_conv.h, runtime/dnnl_conv.c; docs/TUNING.md "Library
 * candidates"): `tessel tune` of a conv2d_nchw task measures oneDNN's
 * convolution (tsrt_dnnl_conv2d_f32) as a candidate, verified against the
 * interpreter, and logs a library record with the call's parameters; odd
 * and prime extents, stride 2, padding, dilation, groups, depthwise and an
 * unpadded 1x1 stride-2 convolution (a negative far padding), and the
 * channel-blocked conv2d_nchwc / depthwise_conv2d_nchwc (blocks of 8 and
 * 16) each get one, verified; NHWC and other blocks none. A log whose library record wins (the others' times scaled up)
 * is replayed by `tessel build --log` into an artifact that links libdnnl
 * (readelf) and by `tessel bench --log`, matching the interpreter; a small
 * CNN (cnn.onnx: bias, batch norm, relu, a residual add, a stride-2
 * convolution) tuned with the plain NCHW convolutions (--winograd off
 * --polyphase off --conv-layout nchw) builds from its conv library records
 * into a model that links libdnnl and equals onnxruntime, and so does the
 * same CNN through the nchwc pass (channel-blocked convolutions, oneDNN's
 * nChw8c layout, --winograd off); a CNN with a
 * symbolic batch, tuned at one batch, built once, equals onnxruntime at
 * three (the calls take the batch at run time). Skipped (77)
 * when tessel was built without oneDNN. argv[1]: the tessel binary. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessel_config.h"
#include "util/run.h"

static const char *tessel, *models, *root;
static char tmpdir[256], python[TR_PATH_MAX], ort_script[TR_PATH_MAX];

static int count_in(const char *path, const char *needle) {
  char *s = tr_slurp(path);
  ck_assert_msg(s != NULL, "read %s", path);
  int n = 0;
  for (char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
  free(s);
  return n;
}

static char *needed(const char *so) {
  tr_result r = tr_sh(tmpdir, "readelf -d '%s'", so);
  ck_assert_msg(r.status == 0, "readelf %s: %s", so, r.err);
  char *s = strdup(r.out ? r.out : "");
  tr_result_free(&r);
  return s;
}

/* Every non-library record 1000x slower: the library record wins. */
static void make_library_win(const char *log) {
  tr_ok(tr_sh(tmpdir,
              "'%s' -c \"import json,sys; p='%s'; L=[json.loads(l) for l in open(p)]; "
              "[r.__setitem__('run_secs', [x*1000 for x in r['run_secs']]) for r in L if r.get('kind') != 'library']; "
              "open(p,'w').write(''.join(json.dumps(r)+chr(10) for r in L))\"",
              python, log),
        "scaling the log");
}

/* The log's conv library records; each must be verified and error-free. */
static int conv_records(const char *log) {
  char *s = tr_slurp(log);
  ck_assert_ptr_nonnull(s);
  int n = 0;
  for (char *l = s; l && *l;) {
    char *e = strchr(l, '\n');
    if (e) *e = 0;
    if (strstr(l, "\"call\":\"tsrt_dnnl_conv2d_f32\"")) {
      ck_assert_msg(strstr(l, "\"error\":null") && strstr(l, "\"verified\":true") && strstr(l, "\"kind\":\"library\""),
                    "bad conv library record: %.600s", l);
      n++;
    }
    l = e ? e + 1 : NULL;
  }
  free(s);
  return n;
}

static void tune_spec(const char *spec, int trials, const char *log) {
  tr_ok(tr_sh(tmpdir, "'%s' tune '%s' --trials %d --log '%s' --repeat 2 --min-repeat-ms 1 --threads 1 --no-runoff",
              tessel, spec, trials, log),
        spec);
}

START_TEST(conv_record_wins_and_links) {
  char log[400], so[400];
  snprintf(log, sizeof log, "%s/conv.jsonl", tmpdir);
  snprintf(so, sizeof so, "%s/conv.so", tmpdir);
  const char *spec = "conv2d_nchw:n=2,c=7,h=13,w=12,k=5,r=3,s=3,stride=2,pad=1,dilation=1";
  tune_spec(spec, 2, log);
  ck_assert_int_eq(conv_records(log), 1);
  ck_assert_int_eq(count_in(log, "\"pad\":[1,1,1,0]"), 1); /* columns: (6-1)*2+3 = 13 = 12 + 1 left: none right */
  make_library_win(log);
  tr_result r = tr_sh(tmpdir, "'%s' build '%s' --log '%s' -o '%s'", tessel, spec, log, so);
  ck_assert_msg(r.status == 0 && strstr(r.err, "(library "), "build: %s", r.err);
  tr_result_free(&r);
  char *ne = needed(so);
  ck_assert_msg(strstr(ne, "libdnnl"), "the artifact does not link libdnnl: %s", ne);
  free(ne);
  r = tr_sh(tmpdir, "'%s' bench '%s' --log '%s' --repeat 1 --min-repeat-ms 1", tessel, spec, log);
  ck_assert_msg(r.status == 0 && strstr(r.out, "output matches the reference interpreter"), "bench: %s %s", r.out,
                r.err);
  tr_result_free(&r);
  /* --no-library: none, and the default build links nothing */
  char log0[400], so0[400];
  snprintf(log0, sizeof log0, "%s/conv0.jsonl", tmpdir);
  snprintf(so0, sizeof so0, "%s/conv0.so", tmpdir);
  tr_ok(tr_sh(tmpdir, "'%s' tune '%s' --trials 2 --log '%s' --repeat 2 --min-repeat-ms 1 --threads 1 --no-runoff "
              "--no-library", tessel, spec, log0), "tune --no-library");
  ck_assert_int_eq(conv_records(log0), 0);
  tr_ok(tr_sh(tmpdir, "'%s' build '%s' --log '%s' -o '%s'", tessel, spec, log0, so0), "build");
  ne = needed(so0);
  ck_assert_msg(!strstr(ne, "dnnl"), "a build without library records links: %s", ne);
  free(ne);
}
END_TEST

static const char comp_conv_tsl[] =
  "func comp_conv(in0: f32[1, 16, 7, 6], in1: f32[2, 2, 3, 3, 8, 8]) -> out0: f32[1, 2, 5, 4, 8] {\n"
  "  block root() {\n"
  "    alloc t1: f32[1, 2, 7, 6, 8]\n"
  "    for i0 in serial(0, 1) { for i1 in serial(0, 2) { for i2 in serial(0, 7) { for i3 in serial(0, 6) { for i4 in serial(0, 8) {\n"
  "      block t1(v0: S(0, 1) = i0, v1: S(0, 2) = i1, v2: S(0, 7) = i2, v3: S(0, 6) = i3, v4: S(0, 8) = i4) {\n"
  "        reads in0[v0, v1 * 8 + v4, v2, v3]\n"
  "        writes t1[v0, v1, v2, v3, v4]\n"
  "        t1[v0, v1, v2, v3, v4] = in0[v0, v1 * 8 + v4, v2, v3]\n"
  "      } } } } } }\n"
  "    for i0 in serial(0, 1) { for i1 in serial(0, 2) { for i2 in serial(0, 5) { for i3 in serial(0, 4) { for i4 in serial(0, 8) {\n"
  "      for r0 in serial(0, 2) { for r1 in serial(0, 3) { for r2 in serial(0, 3) { for r3 in serial(0, 8) {\n"
  "        block out0(v0: S(0, 1) = i0, v1: S(0, 2) = i1, v2: S(0, 5) = i2, v3: S(0, 4) = i3, v4: S(0, 8) = i4, w0: R(0, 2) = r0, w1: R(0, 3) = r1, w2: R(0, 3) = r2, w3: R(0, 8) = r3) {\n"
  "          reads t1[v0, w0, v2 + w1, v3 + w2, w3], in1[v1, w0, w1, w2, w3, v4]\n"
  "          writes out0[v0, v1, v2, v3, v4]\n"
  "          init { out0[v0, v1, v2, v3, v4] = 0.0 }\n"
  "          out0[v0, v1, v2, v3, v4] = out0[v0, v1, v2, v3, v4] + t1[v0, w0, v2 + w1, v3 + w2, w3] * in1[v1, w0, w1, w2, w3, v4]\n"
  "        } } } } } } } } } }\n"
  "  }\n"
  "}\n"
;

/* Odd and prime extents, stride, dilation, groups, depthwise, no padding
 * with a negative far padding: one verified candidate each. */
START_TEST(conv_shapes_verified) {
  static const char *const specs[] = {
      "conv2d_nchw:n=1,c=6,h=17,w=13,k=9,r=3,s=5,stride=1,pad=2,dilation=2",
      "conv2d_nchw:n=1,c=8,h=12,w=12,k=12,r=3,s=3,stride=1,pad=1,dilation=1,groups=4",
      "depthwise_conv2d:n=1,c=12,h=15,w=15,r=3,s=3,stride=2,pad=1,dilation=1",
      "conv2d_nchw:n=3,c=16,h=14,w=14,k=8,r=1,s=1,stride=2,pad=0,dilation=1",
      "conv2d_nchw:n=1,c=3,h=31,w=29,k=7,r=7,s=7,stride=2,pad=3,dilation=1",
      /* channel-blocked (oneDNN's nChw8c / nChw16c) */
      "conv2d_nchwc:n=2,c=16,h=13,w=11,k=24,r=3,s=3,stride=2,pad=1,dilation=2,cb=8,kb=8",
      "conv2d_nchwc:n=1,c=16,h=9,w=9,k=16,r=1,s=1,stride=1,pad=0,dilation=1,cb=16,kb=16",
      "depthwise_conv2d_nchwc:n=1,c=16,h=11,w=10,r=3,s=3,stride=2,pad=1,dilation=1,cb=8",
      /* ResNet-50's downsampling form: a row and a column never read, in blocks */
      "conv2d_nchwc:n=1,c=16,h=12,w=12,k=8,r=1,s=1,stride=2,pad=0,dilation=1,cb=8,kb=8",
  };
  for (int i = 0; i < 9; i++) {
    char log[400];
    snprintf(log, sizeof log, "%s/shape%d.jsonl", tmpdir, i);
    tune_spec(specs[i], 2, log);
    ck_assert_msg(conv_records(log) == 1, "%s: no conv library record", specs[i]);
  }
  /* the blocked input computed in the task (ResNet-50's layout transform
   * fused before a convolution): the call reads the allocation */
  char dsl[400], logc[400];
  snprintf(dsl, sizeof dsl, "%s/comp_conv.tsl", tmpdir);
  snprintf(logc, sizeof logc, "%s/comp_conv.jsonl", tmpdir);
  FILE *f = fopen(dsl, "w");
  ck_assert_ptr_nonnull(f);
  fputs(comp_conv_tsl, f);
  fclose(f);
  tune_spec(dsl, 2, logc);
  ck_assert_int_eq(conv_records(logc), 1);
  ck_assert_int_eq(count_in(logc, "\"other_blocks\":1"), 1);
  /* what is not a covered layout has none: NHWC, blocks other than 8/16, unequal blocks */
  static const char *const none[] = {"conv2d_nhwc:n=1,c=4,h=8,w=8,k=4,r=3,s=3,stride=1,pad=1,dilation=1",
                                     "conv2d_nchwc:n=1,c=8,h=8,w=8,k=8,r=3,s=3,stride=1,pad=1,dilation=1,cb=4,kb=4",
                                     "conv2d_nchwc:n=1,c=8,h=8,w=8,k=16,r=3,s=3,stride=1,pad=1,dilation=1,cb=8,kb=16"};
  for (int i = 0; i < 3; i++) {
    char log[400];
    snprintf(log, sizeof log, "%s/none%d.jsonl", tmpdir, i);
    tune_spec(none[i], 2, log);
    ck_assert_msg(conv_records(log) == 0, "%s has a conv library record", none[i]);
  }
}
END_TEST

/* A CNN built from conv library records equals onnxruntime and links libdnnl. */
/* _i 0: plain NCHW convolutions (all four covered); 1: the nchwc pass's
 * channel-blocked ones (the three with a blocked input; the first reads the
 * plain 3-channel input: none). */
START_TEST(cnn_from_conv_records) {
  char log[400], so[400], dir[400];
  const char *passes = _i == 0 ? "--winograd off --polyphase off --conv-layout nchw" : "--winograd off";
  snprintf(log, sizeof log, "%s/cnn%d.jsonl", tmpdir, _i);
  snprintf(so, sizeof so, "%s/cnn%d.so", tmpdir, _i);
  snprintf(dir, sizeof dir, "%s/cnn_run%d", tmpdir, _i);
  tr_ok(tr_sh(tmpdir, "'%s' tune-model '%s/cnn.onnx' %s --trials 16 --log '%s' --repeat 2 --min-repeat-ms 1 "
              "--threads 1 --no-runoff", tessel, models, passes, log),
        "tune-model");
  ck_assert_int_eq(conv_records(log), _i == 0 ? 4 : 3);
  if (_i == 1) ck_assert_int_eq(count_in(log, "\"layout\":\"nchw8c\""), 3);
  make_library_win(log);
  tr_result r = tr_sh(tmpdir, "'%s' build '%s/cnn.onnx' %s --log '%s' -o '%s'", tessel, models, passes, log, so);
  ck_assert_msg(r.status == 0 && strstr(r.out, "call a library"), "model build: %s %s", r.out, r.err);
  tr_result_free(&r);
  char *ne = needed(so);
  ck_assert_msg(strstr(ne, "libdnnl"), "the model does not link libdnnl: %s", ne);
  free(ne);
  tr_ok(tr_sh(tmpdir, "'%s' '%s' '%s/cnn.onnx' '%s/in' '%s/ref' --random 3", python, ort_script, models, dir, dir),
        "ort_run.py");
  tr_ok(tr_sh(tmpdir, "'%s' run '%s' --input 'x=%s/in/x.npy' --output-dir '%s/out'", tessel, so, dir, dir),
        "tessel run");
  r = tr_sh(tmpdir, "'%s' -c \"import numpy as n; a=n.load('%s/out/y.npy'); b=n.load('%s/ref/y.npy'); "
            "print(float(abs(a.astype('f8')-b).max() / max(abs(b).max(), 1e-30)))\"", python, dir, dir);
  ck_assert_msg(r.status == 0, "compare: %s", r.err);
  double e = atof(r.out);
  tr_result_free(&r);
  fprintf(stderr, "cnn (%s) with oneDNN convolutions vs onnxruntime: max abs error / max |ref| %.3g\n", passes, e);
  ck_assert_msg(e <= 1e-5, "relative error %g", e);
}
END_TEST

/* A CNN with a symbolic batch N (generated with the onnx package: a conv
 * with bias and relu, a dilated depthwise one, a 1x1 stride-2 one, a
 * grouped one), tuned at N=2 with its conv records made to win, built once:
 * the calls serve every batch (the records replayed on the symbolic
 * functions), equal to onnxruntime at N = 1, 2 and 3. */
static const char gen_convdyn[] =
  "import sys, numpy as np, onnx\n"
  "from onnx import helper, TensorProto as T, numpy_helper as nh\n"
  "rng = np.random.default_rng(5)\n"
  "def w(name, shape): return nh.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)\n"
  "inits = [w(\"w1\", [8, 3, 3, 3]), w(\"b1\", [8]), w(\"w2\", [8, 1, 3, 3]), w(\"w3\", [16, 8, 1, 1]), w(\"w4\", [16, 4, 3, 3])]\n"
  "nodes = [helper.make_node(\"Conv\", [\"x\", \"w1\", \"b1\"], [\"c1\"], pads=[1, 1, 1, 1]),\n"
  "         helper.make_node(\"Relu\", [\"c1\"], [\"r1\"]),\n"
  "         helper.make_node(\"Conv\", [\"r1\", \"w2\"], [\"c2\"], pads=[2, 2, 2, 2], dilations=[2, 2], group=8),\n"
  "         helper.make_node(\"Conv\", [\"c2\", \"w3\"], [\"c3\"], strides=[2, 2]),\n"
  "         helper.make_node(\"Conv\", [\"c3\", \"w4\"], [\"y\"], pads=[1, 1, 1, 1], group=4)]\n"
  "g = helper.make_graph(nodes, \"convdyn\", [helper.make_tensor_value_info(\"x\", T.FLOAT, [\"N\", 3, 14, 13])],\n"
  "                      [helper.make_tensor_value_info(\"y\", T.FLOAT, [\"N\", 16, 7, 7])], inits)\n"
  "m = helper.make_model(g, opset_imports=[helper.make_opsetid(\"\", 13)])\n"
  "onnx.checker.check_model(m)\n"
  "onnx.save(m, sys.argv[1])\n"
;

START_TEST(cnn_symbolic_batch) {
  char gen[400], onnx[400], log[400], so[400];
  const char *passes = "--winograd off --polyphase off --conv-layout nchw";
  snprintf(gen, sizeof gen, "%s/gen_convdyn.py", tmpdir);
  snprintf(onnx, sizeof onnx, "%s/convdyn.onnx", tmpdir);
  snprintf(log, sizeof log, "%s/convdyn.jsonl", tmpdir);
  snprintf(so, sizeof so, "%s/convdyn.so", tmpdir);
  FILE *f = fopen(gen, "w");
  ck_assert_ptr_nonnull(f);
  fputs(gen_convdyn, f);
  fclose(f);
  tr_ok(tr_sh(tmpdir, "'%s' '%s' '%s'", python, gen, onnx), "generating convdyn.onnx");
  tr_ok(tr_sh(tmpdir, "'%s' tune-model '%s' %s --sym N=2 --trials 12 --log '%s' --repeat 2 --min-repeat-ms 1 "
              "--threads 1 --no-runoff", tessel, onnx, passes, log),
        "tune-model");
  ck_assert_int_ge(conv_records(log), 3); /* the 1x1 stride 2 becomes a slice and a conv: none */
  make_library_win(log);
  tr_result r = tr_sh(tmpdir, "'%s' build '%s' %s --log '%s' --threads 1 --sym N=2 -o '%s'", tessel, onnx, passes,
                      log, so);
  ck_assert_msg(r.status == 0 && strstr(r.out, "symbolic kernels: the call serves every size"), "model build: %s %s",
                r.out, r.err);
  tr_result_free(&r);
  char *ne = needed(so);
  ck_assert_msg(strstr(ne, "libdnnl"), "the model does not link libdnnl: %s", ne);
  free(ne);
  for (int n = 1; n <= 3; n++) {
    r = tr_sh(tmpdir,
              "cd '%s' && '%s' -c \"import numpy as np; np.save('x%d.npy', np.random.default_rng(%d).standard_normal((%d, "
              "3, 14, 13)).astype(np.float32))\" && '%s' run '%s' --threads 1 --input x=x%d.npy --output-dir out%d "
              ">/dev/null && '%s' -c \"import numpy as np, onnxruntime as ort; x = np.load('x%d.npy'); "
              "ref = ort.InferenceSession('%s').run(None, {'x': x})[0]; a = np.load('out%d/y.npy'); "
              "assert a.shape == ref.shape, (a.shape, ref.shape); print(float(abs(a - ref).max() / abs(ref).max()))\"",
              tmpdir, python, n, n, n, tessel, so, n, n, python, n, onnx, n);
    ck_assert_msg(r.status == 0, "batch %d: %s %s", n, r.out, r.err);
    double e = atof(r.out);
    tr_result_free(&r);
    fprintf(stderr, "convdyn at N=%d vs onnxruntime: max abs error / max |ref| %.3g\n", n, e);
    ck_assert_msg(e <= 1e-5, "N=%d: relative error %g", n, e);
  }
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s TESSEL\n", argv[0]);
    return 2;
  }
  if (!TESSEL_HAVE_DNNL) {
    fprintf(stderr, "test_library_conv: tessel was built without oneDNN: no convolution candidates\n");
    return 77;
  }
  tessel = argv[1];
  if (!tr_model_env(&models, &root, python, ort_script)) return 1;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessel_libconv_XXXXXX");
  if (!mkdtemp(tmpdir)) return 2;
  Suite *s = suite_create("library_conv");
  TCase *tc = tcase_create("library_conv");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, conv_record_wins_and_links);
  tcase_add_test(tc, conv_shapes_verified);
  tcase_add_loop_test(tc, cnn_from_conv_records, 0, 2);
  tcase_add_test(tc, cnn_symbolic_batch);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  if (!failures) tr_rmtree(tmpdir);
  return failures ? 1 : 0;
}
