/* test_workloads.c — every built-in workload, at its defaults and at odd /
 * prime sizes (strides, padding, dilation, groups where they apply), built
 * from its DSL text, run by the interpreter on seeded random inputs and
 * compared with its hand-written C reference; spec parsing and validation
 * errors; canonical specs; FLOP counts. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "ir/interp.h"
#include "ir/workloads/workloads.h"

static const char *const specs[] = {
    "matmul", "matmul:m=7,n=13,k=5", "matmul:m=1,n=3,k=17",
    "batch_matmul", "batch_matmul:b=3,m=5,n=7,k=11", "batch_matmul:b=1,m=13,n=1,k=3",
    "dense", "dense:m=7,n=5,k=13,bias=0,act=none", "dense:m=3,n=11,k=7,bias=1,act=gelu",
    "dense:m=5,n=3,k=2,bias=0,act=relu", "dense:bias=1,act=none", "dense:bias=0,act=gelu",
    "matmul_int8", "matmul_int8:m=7,n=13,k=5", "matmul_int8:m=3,n=2,k=31",
    "matmul_u8s8", "matmul_u8s8:m=7,n=13,k=5", "matmul_u8s8:m=3,n=2,k=31", "matmul_u8s8:m=1,n=17,k=19",
    "matmul_f16", "matmul_f16:m=7,n=13,k=5", "matmul_f16:m=3,n=2,k=31",
    "conv2d_nchw", "conv2d_nchw:n=1,c=4,h=7,w=11,k=6,r=3,s=3,stride=2,pad=1,dilation=1,groups=2",
    "conv2d_nchw:n=2,c=6,h=13,w=11,k=4,r=3,s=2,stride=2,pad=1,dilation=2,groups=2",
    "conv2d_nchw:n=1,c=3,h=5,w=7,k=5,r=1,s=1,stride=1,pad=0,dilation=1,groups=1",
    "conv2d_nchw:n=1,c=4,h=9,w=9,k=4,r=3,s=3,stride=3,pad=2,dilation=1,groups=4",
    "conv2d_nhwc", "conv2d_nhwc:n=1,c=4,h=7,w=11,k=6,r=3,s=3,stride=2,pad=1,dilation=1,groups=2",
    "conv2d_nhwc:n=2,c=6,h=13,w=11,k=4,r=3,s=2,stride=2,pad=1,dilation=2,groups=2",
    "conv2d_nhwc:n=1,c=3,h=5,w=7,k=5,r=1,s=1,stride=1,pad=0,dilation=1,groups=1",
    "conv2d_nhwc_u8s8", "conv2d_nhwc_u8s8:n=1,c=5,h=7,w=11,k=17,r=3,s=3,stride=2,pad=1,dilation=1,groups=1",
    "conv2d_nhwc_u8s8:n=2,c=6,h=13,w=11,k=4,r=3,s=2,stride=2,pad=1,dilation=2,groups=2",
    "conv2d_nhwc_u8s8:n=1,c=3,h=5,w=7,k=13,r=1,s=1,stride=1,pad=0,dilation=1,groups=1",
    "depthwise_conv2d", "depthwise_conv2d:n=2,c=3,h=7,w=5,r=3,s=3,stride=2,pad=1,dilation=1",
    "depthwise_conv2d:n=1,c=5,h=11,w=13,r=5,s=3,stride=1,pad=2,dilation=2",
    "conv2d_transpose", "conv2d_transpose:n=1,c=3,h=5,w=7,k=2,r=3,s=3,stride=1,pad=0",
    "conv2d_transpose:n=2,c=2,h=5,w=3,k=3,r=4,s=5,stride=3,pad=2",
    "max_pool2d", "max_pool2d:n=1,c=3,h=9,w=7,r=3,s=3,stride=2,pad=1",
    "max_pool2d:n=2,c=2,h=11,w=13,r=2,s=3,stride=3,pad=0",
    "avg_pool2d", "avg_pool2d:n=1,c=3,h=9,w=7,r=3,s=3,stride=2,pad=1",
    "avg_pool2d:n=2,c=2,h=11,w=13,r=2,s=3,stride=3,pad=0",
    "softmax", "softmax:m=3,n=17", "softmax:m=1,n=1",
    "layernorm", "layernorm:m=3,n=17", "layernorm:m=5,n=2",
    "add", "add:m=3,n=17", "add:m=7,n=1",
    "mul", "mul:m=3,n=17", "mul:m=7,n=1",
    "relu", "relu:m=3,n=17", "relu:m=7,n=1",
    "gelu", "gelu:m=3,n=17", "gelu:m=7,n=1",
    "sigmoid", "sigmoid:m=3,n=17", "sigmoid:m=7,n=1",
    "exp", "exp:m=3,n=17", "exp:m=7,n=1",
    "transpose", "transpose:m=3,n=17", "transpose:m=13,n=5",
    "reduce_sum", "reduce_sum:m=3,n=17", "reduce_sum:m=1,n=29",
    "reduce_mean", "reduce_mean:m=3,n=17", "reduce_mean:m=1,n=29",
    /* channel-blocked: odd sizes, stride 2, plain input (cb=1), 7x7, dilation */
    "conv2d_nchwc", "conv2d_nchwc:n=1,c=3,h=11,w=13,k=10,r=7,s=7,stride=2,pad=3,dilation=1,cb=1,kb=5",
    "conv2d_nchwc:n=2,c=6,h=7,w=9,k=6,r=3,s=3,stride=2,pad=1,dilation=1,cb=3,kb=2",
    "conv2d_nchwc:n=1,c=4,h=9,w=5,k=7,r=1,s=1,stride=2,pad=0,dilation=1,cb=4,kb=7",
    "conv2d_nchwc:n=1,c=4,h=9,w=11,k=4,r=3,s=2,stride=1,pad=2,dilation=2,cb=2,kb=4",
    "depthwise_conv2d_nchwc", "depthwise_conv2d_nchwc:n=2,c=6,h=7,w=5,r=3,s=3,stride=2,pad=1,dilation=1,cb=3",
    "depthwise_conv2d_nchwc:n=1,c=5,h=11,w=13,r=5,s=3,stride=1,pad=2,dilation=2,cb=5",
    /* MetaSchedule's suite in TVM's layouts (workloads_tvm.c) */
    "conv1d_nlc", "conv1d_nlc:n=1,l=13,c=6,k=4,r=3,stride=2,pad=1,dilation=1,groups=2",
    "conv1d_nlc:n=2,l=17,c=5,k=7,r=5,stride=1,pad=2,dilation=2,groups=1",
    "conv3d_ndhwc", "conv3d_ndhwc:n=1,d=5,h=7,w=6,c=3,k=5,t=3,r=3,s=3,stride=2,pad=1,dilation=1,groups=1",
    "conv3d_ndhwc:n=1,d=4,h=5,w=5,c=4,k=6,t=1,r=3,s=2,stride=1,pad=0,dilation=2,groups=2",
    "conv2d_capsule", "conv2d_capsule:n=1,h=7,w=5,c=3,k=5,r=3,s=3,cap=3,stride=2,pad=1",
    "conv2d_capsule:n=2,h=5,w=5,c=2,k=3,r=1,s=3,cap=2,stride=1,pad=0",
    "depthwise_conv2d_nhwc", "depthwise_conv2d_nhwc:n=1,h=11,w=9,c=7,r=3,s=3,stride=2,pad=1,dilation=1",
    "depthwise_conv2d_nhwc:n=2,h=9,w=13,c=5,r=5,s=3,stride=1,pad=2,dilation=2",
    "conv2d_transpose_nhwc", "conv2d_transpose_nhwc:n=1,h=4,w=5,c=3,k=2,r=3,s=5,stride=3,pad=2",
    "conv2d_transpose_nhwc:n=2,h=3,w=3,c=2,k=3,r=3,s=3,stride=1,pad=0",
    "conv2d_transpose_nhwc:n=1,h=5,w=4,c=3,k=2,r=2,s=3,stride=3,pad=2", /* pad > r-1: the gather form */
    "conv2d_nhwc_bn_relu", "conv2d_nhwc_bn_relu:n=1,h=11,w=9,c=5,k=7,r=3,s=3,stride=2,pad=1,dilation=1",
    "conv2d_nhwc_bn_relu:n=1,h=9,w=9,c=3,k=4,r=3,s=3,stride=1,pad=2,dilation=2",
    "transpose_batch_matmul", "transpose_batch_matmul:b=2,l=13,heads=3,d=7",
    "transpose_batch_matmul:b=1,l=5,heads=1,d=17",
    "norm", "norm:b=3,m=7,n=13", "norm:b=1,m=1,n=31",
};
#define NSPECS ((int)(sizeof specs / sizeof specs[0]))

/* Builds the spec via the DSL, runs the interpreter and the reference on the
 * same seeded inputs (outputs pre-filled with NaN on both sides, so every
 * element must be written), and compares. */
static void check_spec(const char *spec) {
  ts_diag d;
  ts_diag_clear(&d);
  ir_wl_inst w;
  ck_assert_msg(ir_wl_parse(spec, &w, &d) == TS_OK, "%s: %s", spec, d.msg);
  ts_arena *a = ts_arena_new();
  ir_func *f = NULL;
  ck_assert_msg(ir_wl_build(a, &w, &f, &d) == TS_OK, "%s: build: %s", spec, d.msg);
  ck_assert_int_eq(f->nsyms, 0);
  ir_tensor got[IR_WL_MAX_PARAMS], ref[IR_WL_MAX_PARAMS];
  ck_assert_msg(ir_tensors_for_func(f, NULL, got, &d) == TS_OK, "%s: %s", spec, d.msg);
  ck_assert_msg(ir_tensors_for_func(f, NULL, ref, &d) == TS_OK, "%s: %s", spec, d.msg);
  for (int i = 0; i < f->nparams; i++) {
    if (i < f->ninputs) {
      ir_tensor_fill_random(&got[i], 1234 + (uint64_t)i);
      ir_tensor_fill_random(&ref[i], 1234 + (uint64_t)i);
    } else if (ir_dtype_is_float(got[i].dtype)) {
      for (int64_t k = 0; k < ir_tensor_numel(&got[i]); k++) {
        ir_tensor_set(&got[i], k, NAN);
        ir_tensor_set(&ref[i], k, NAN);
      }
    } else {
      memset(got[i].data, 0x5A, (size_t)ir_tensor_numel(&got[i]) * (size_t)ir_dtype_bytes(got[i].dtype));
      memset(ref[i].data, 0x5A, (size_t)ir_tensor_numel(&ref[i]) * (size_t)ir_dtype_bytes(ref[i].dtype));
    }
  }
  ck_assert_msg(ir_interp_run(f, got, &d) == TS_OK, "%s: interp: %s", spec, d.msg);
  ck_assert_msg(ir_wl_reference(&w, ref, &d) == TS_OK, "%s: reference: %s", spec, d.msg);
  for (int i = f->ninputs; i < f->nparams; i++) {
    double err = 0;
    bool ok = ir_tensor_allclose(&got[i], &ref[i], 1e-4, 1e-5, &err);
    ck_assert_msg(ok, "%s: output %s differs (max abs err %g)", spec, f->params[i]->name, err);
    /* not trivially zero */
    double s = 0;
    for (int64_t k = 0; k < ir_tensor_numel(&ref[i]); k++) s += fabs(ir_tensor_get(&ref[i], k));
    ck_assert_msg(s > 0, "%s: output all zero", spec);
  }
  for (int i = 0; i < f->nparams; i++) {
    ir_tensor_free(&got[i]);
    ir_tensor_free(&ref[i]);
  }
  ts_arena_free(a);
}

START_TEST(test_each_spec) { check_spec(specs[_i]); }
END_TEST

START_TEST(test_every_workload_covered) {
  /* defaults plus at least two other parameter sets for every workload */
  for (int i = 0; i < ir_workload_count(); i++) {
    const char *name = ir_workload_at(i)->name;
    int n = 0;
    size_t len = strlen(name);
    for (int k = 0; k < NSPECS; k++)
      if (!strncmp(specs[k], name, len) && (specs[k][len] == 0 || specs[k][len] == ':')) n++;
    ck_assert_msg(n >= 3, "workload %s has %d test specs", name, n);
  }
  ck_assert_int_ge(ir_workload_count(), 19);
}
END_TEST

START_TEST(test_required_names_and_keys) {
  static const struct {
    const char *name, *keys;
  } req[] = {
      {"matmul", "m,n,k"}, {"batch_matmul", "b,m,n,k"}, {"dense", "m,n,k,bias,act"}, {"matmul_int8", "m,n,k"},
      {"matmul_u8s8", "m,n,k"}, {"conv2d_nchw", "n,c,h,w,k,r,s,stride,pad,dilation,groups"},
      {"conv2d_nhwc", "n,c,h,w,k,r,s,stride,pad,dilation,groups"},
      {"conv2d_nhwc_u8s8", "n,c,h,w,k,r,s,stride,pad,dilation,groups"},
      {"depthwise_conv2d", "n,c,h,w,r,s,stride,pad,dilation"}, {"conv2d_transpose", "n,c,h,w,k,r,s,stride,pad"},
      {"max_pool2d", "n,c,h,w,r,s,stride,pad"}, {"avg_pool2d", "n,c,h,w,r,s,stride,pad"}, {"softmax", "m,n"},
      {"layernorm", "m,n"}, {"add", "m,n"}, {"mul", "m,n"}, {"relu", "m,n"}, {"gelu", "m,n"},
      {"transpose", "m,n"}, {"reduce_sum", "m,n"}, {"reduce_mean", "m,n"},
      {"conv1d_nlc", "n,l,c,k,r,stride,pad,dilation,groups"},
      {"conv3d_ndhwc", "n,d,h,w,c,k,t,r,s,stride,pad,dilation,groups"},
      {"conv2d_capsule", "n,h,w,c,k,r,s,cap,stride,pad"},
      {"depthwise_conv2d_nhwc", "n,h,w,c,r,s,stride,pad,dilation"},
      {"conv2d_transpose_nhwc", "n,h,w,c,k,r,s,stride,pad"},
      {"conv2d_nhwc_bn_relu", "n,h,w,c,k,r,s,stride,pad,dilation"},
      {"transpose_batch_matmul", "b,l,heads,d"}, {"norm", "b,m,n"},
  };
  for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) {
    const ir_workload *w = ir_workload_find(req[i].name);
    ck_assert_msg(w, "missing %s", req[i].name);
    char keys[256] = "";
    for (int k = 0; k < w->nparams; k++) {
      strcat(keys, k ? "," : "");
      strcat(keys, w->params[k].key);
      ck_assert_ptr_nonnull(w->params[k].def);
    }
    ck_assert_str_eq(keys, req[i].keys);
  }
}
END_TEST

static void expect_err(const char *spec, ts_status code, const char *const *needles) {
  ts_diag d;
  ts_diag_clear(&d);
  ir_wl_inst w;
  ts_status s = ir_wl_parse(spec, &w, &d);
  ck_assert_msg(s == code, "%s: status %s (%s), want %s", spec, ts_strerror(s), d.msg, ts_strerror(code));
  for (int i = 0; needles[i]; i++) ck_assert_msg(strstr(d.msg, needles[i]), "%s: '%s' lacks '%s'", spec, d.msg, needles[i]);
}

START_TEST(test_spec_errors) {
  expect_err("nosuch", TS_ENOTFOUND,
             (const char *[]){"nosuch", "matmul", "softmax", "conv2d_nchw", "reduce_mean", NULL});
  expect_err("nosuch:m=3", TS_ENOTFOUND, (const char *[]){"nosuch", "matmul", NULL});
  expect_err("", TS_ENOTFOUND, (const char *[]){"matmul", NULL});
  expect_err("matmul:q=3", TS_ENOTFOUND, (const char *[]){"'q'", "m, n, k", NULL});
  expect_err("conv2d_nchw:stirde=2", TS_ENOTFOUND, (const char *[]){"stirde", "stride", "dilation", "groups", NULL});
  expect_err("matmul:m=-4", TS_EINVAL, (const char *[]){"m", "positive", "-4", NULL});
  expect_err("matmul:m=0", TS_EINVAL, (const char *[]){"positive", NULL});
  expect_err("matmul:m=abc", TS_EINVAL, (const char *[]){"positive", "abc", NULL});
  expect_err("matmul:m=", TS_EINVAL, (const char *[]){"m", NULL});
  expect_err("matmul:m=3x", TS_EINVAL, (const char *[]){"3x", NULL});
  expect_err("matmul:m=99999999999999999999", TS_EINVAL, (const char *[]){"m", NULL});
  expect_err("matmul:m=2,m=3", TS_EINVAL, (const char *[]){"twice", NULL});
  expect_err("matmul:m", TS_EINVAL, (const char *[]){"key=value", NULL});
  expect_err("matmul:m=2,", TS_EINVAL, (const char *[]){"trailing", NULL});
  expect_err("conv2d_nchw:stride=0", TS_EINVAL, (const char *[]){"stride", "positive", NULL});
  expect_err("conv2d_nchw:pad=-1", TS_EINVAL, (const char *[]){"pad", "non-negative", NULL});
  expect_err("conv2d_nchw:c=4,k=8,groups=3", TS_EINVAL, (const char *[]){"groups=3", "c=4", "k=8", NULL});
  expect_err("conv2d_nhwc:c=6,k=4,groups=4", TS_EINVAL, (const char *[]){"groups", NULL});
  expect_err("conv2d_nchw:h=2,w=2,r=5,s=5,pad=0", TS_EINVAL, (const char *[]){"output", NULL});
  expect_err("depthwise_conv2d:h=3,r=3,dilation=3,pad=0", TS_EINVAL, (const char *[]){"output", NULL});
  expect_err("conv2d_transpose:h=1,w=1,r=1,s=1,pad=1", TS_EINVAL, (const char *[]){"output", NULL});
  expect_err("max_pool2d:r=2,pad=2", TS_EINVAL, (const char *[]){"pad", "smaller", NULL});
  expect_err("avg_pool2d:h=2,w=2,r=3,s=3,pad=0", TS_EINVAL, (const char *[]){"output", NULL});
  expect_err("dense:act=tanh", TS_EINVAL, (const char *[]){"act", "none", "relu", "gelu", "tanh", NULL});
  expect_err("dense:bias=2", TS_EINVAL, (const char *[]){"bias", "0 or 1", NULL});
  expect_err("conv1d_nlc:c=6,k=4,groups=4", TS_EINVAL, (const char *[]){"groups=4", "c=6", NULL});
  expect_err("conv1d_nlc:l=2,r=5,pad=0", TS_EINVAL, (const char *[]){"output", NULL});
  expect_err("conv3d_ndhwc:d=2,t=3,pad=0", TS_EINVAL, (const char *[]){"depth", NULL});
  expect_err("conv2d_capsule:cap=0", TS_EINVAL, (const char *[]){"cap", "positive", NULL});
  expect_err("conv2d_transpose_nhwc:h=1,w=1,r=1,s=1,pad=1", TS_EINVAL, (const char *[]){"output", NULL});
  expect_err("norm:heads=2", TS_ENOTFOUND, (const char *[]){"heads", "b, m, n", NULL});
  /* ir_workload_from_spec passes the error through */
  ts_arena *a = ts_arena_new();
  ir_func *f = (ir_func *)1;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(ir_workload_from_spec(a, "matmul:z=1", &f, &d), TS_ENOTFOUND);
  ck_assert_ptr_null(f);
  ck_assert_int_eq(ir_workload_from_spec(a, "softmax:m=3,n=5", &f, &d), TS_OK);
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(f->nparams, 2);
  ts_arena_free(a);
}
END_TEST

START_TEST(test_canonical_and_values) {
  ir_wl_inst w;
  char buf[256];
  ck_assert_int_eq(ir_wl_parse("matmul:k=005,m=7", &w, NULL), TS_OK);
  ir_wl_canonical(&w, buf, sizeof buf);
  ck_assert_str_eq(buf, "matmul:m=7,n=16,k=5");
  ck_assert_int_eq(ir_wl_int(&w, "k"), 5);
  ck_assert_int_eq(ir_wl_parse(buf, &w, NULL), TS_OK); /* canonical text parses back */
  ir_wl_canonical(&w, buf, sizeof buf);
  ck_assert_str_eq(buf, "matmul:m=7,n=16,k=5");
  ck_assert_int_eq(ir_wl_parse("dense:act=gelu", &w, NULL), TS_OK);
  ck_assert_str_eq(ir_wl_str(&w, "act"), "gelu");
  ir_wl_canonical(&w, buf, sizeof buf);
  ck_assert_str_eq(buf, "dense:m=16,n=16,k=16,bias=1,act=gelu");
  ts_diag wd = {0};
  ck_assert_int_eq(ir_wl_parse("matmul:", &w, &wd), TS_EINVAL); /* a colon promises keys: refused, naming them */
  ck_assert_msg(strstr(wd.msg, "m, n, k"), "%s", wd.msg);
  ck_assert_int_eq(ir_wl_parse("matmul", &w, NULL), TS_OK); /* the bare name: defaults */
  /* truncation is safe */
  char small[8];
  ir_wl_canonical(&w, small, sizeof small);
  ck_assert_int_eq(strlen(small), 7);
  char *src = ir_wl_source(&w);
  ck_assert_ptr_nonnull(strstr(src, "kernel matmul(A: f32[16, 16], B: f32[16, 16]) -> C: f32[16, 16]"));
  ts_free(src);
}
END_TEST

static double flops_of(const char *spec) {
  ir_wl_inst w;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ir_wl_parse(spec, &w, &d) == TS_OK, "%s", d.msg);
  return ir_wl_flops(&w);
}

START_TEST(test_flops) {
  ck_assert(flops_of("matmul:m=1024,n=1024,k=1024") == 2.0 * 1024 * 1024 * 1024);
  ck_assert(flops_of("matmul_int8:m=64,n=32,k=16") == 2.0 * 64 * 32 * 16);
  ck_assert(flops_of("batch_matmul:b=4,m=8,n=8,k=8") == 4 * 2.0 * 512);
  ck_assert(flops_of("dense:m=2,n=3,k=4,bias=0,act=none") == 2.0 * 24);
  ck_assert(flops_of("dense:m=2,n=3,k=4,bias=1,act=relu") == 2.0 * 24 + 6 + 6);
  /* conv: 2 * N*K*P*Q * (C/G)*R*S; default 1*8*10*10 outputs, 4*3*3 taps */
  ck_assert(flops_of("conv2d_nchw") == 2.0 * 800 * 36);
  ck_assert(flops_of("conv2d_nhwc:groups=2") == 2.0 * 800 * 18);
  ck_assert(flops_of("depthwise_conv2d") == 2.0 * 400 * 9);
  ck_assert(flops_of("conv2d_transpose") == 2.0 * 4 * 36 * 4 * 9);
  ck_assert(flops_of("max_pool2d") == 4.0 * 25 * 9);
  ck_assert(flops_of("avg_pool2d") == 4.0 * 25 * 10);
  ck_assert(flops_of("softmax:m=2,n=3") == 30);
  ck_assert(flops_of("add:m=2,n=3") == 6);
  ck_assert(flops_of("gelu:m=2,n=3") == 30);
  ck_assert(flops_of("reduce_mean:m=2,n=3") == 8);
  /* TVM's suite: 2 * outputs * taps * channels per group */
  ck_assert(flops_of("conv1d_nlc:n=1,l=13,c=6,k=4,r=3,stride=2,pad=1,dilation=1,groups=2") == 2.0 * 7 * 4 * 3 * 3);
  ck_assert(flops_of("conv3d_ndhwc") == 2.0 * (5 * 6 * 6 * 6) * 27 * 4);
  ck_assert(flops_of("conv2d_capsule") == 2.0 * (6 * 6 * 16 * 5) * 9 * 4 * 3);
  ck_assert(flops_of("depthwise_conv2d_nhwc") == 2.0 * 400 * 9);
  ck_assert(flops_of("conv2d_transpose_nhwc") == 2.0 * 16 * 4 * 6 * 16);
  ck_assert(flops_of("conv2d_nhwc_bn_relu") == 64 * 6 * (2.0 * 36 + 4));
  ck_assert(flops_of("transpose_batch_matmul") == 2.0 * 2 * 16 * 16 * 8);
  ck_assert(flops_of("norm") == 2 * (2.0 * 256 + 1));
  for (int i = 0; i < ir_workload_count(); i++)
    ck_assert_msg(flops_of(ir_workload_at(i)->name) > 0, "%s", ir_workload_at(i)->name);
}
END_TEST

START_TEST(test_reference_checks_arguments) {
  ir_wl_inst w;
  ck_assert_int_eq(ir_wl_parse("matmul:m=2,n=3,k=4", &w, NULL), TS_OK);
  ir_tensor t[3];
  int64_t s0[2] = {2, 4}, s1[2] = {4, 3}, s2[2] = {2, 5};
  ir_tensor_alloc(&t[0], ir_dt(IR_F32), 2, s0);
  ir_tensor_alloc(&t[1], ir_dt(IR_F32), 2, s1);
  ir_tensor_alloc(&t[2], ir_dt(IR_F32), 2, s2);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(ir_wl_reference(&w, t, &d), TS_ESHAPE);
  ck_assert_msg(strstr(d.msg, "C") && strstr(d.msg, "5") && strstr(d.msg, "3"), "%s", d.msg);
  ir_tensor_free(&t[2]);
  s2[1] = 3;
  ir_tensor_alloc(&t[2], ir_dt(IR_I32), 2, s2);
  ts_diag_clear(&d);
  ck_assert_int_eq(ir_wl_reference(&w, t, &d), TS_ETYPE);
  ir_tensor_free(&t[2]);
  ir_tensor_alloc(&t[2], ir_dt(IR_F32), 2, s2);
  ck_assert_int_eq(ir_wl_reference(&w, t, NULL), TS_OK);
  for (int i = 0; i < 3; i++) ir_tensor_free(&t[i]);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("workloads");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_each_spec, 0, NSPECS);
  tcase_add_test(tc, test_every_workload_covered);
  tcase_add_test(tc, test_required_names_and_keys);
  tcase_add_test(tc, test_spec_errors);
  tcase_add_test(tc, test_canonical_and_values);
  tcase_add_test(tc, test_flops);
  tcase_add_test(tc, test_reference_checks_arguments);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
