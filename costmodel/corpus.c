/* corpus.c — the workloads of the cost model's training set (`tessel
 * costmodel dataset`): the operator families real models use at the shapes
 * of ResNet-50, MobileNetV2 and BERT-base layers (batch 1, sequence 128),
 * then seeded random instances of the same families (odd and prime extents
 * included). The benchmark's held-out workloads are never in the corpus:
 * they are listed here so the sampler can skip them, and the fixed list
 * holds none of them. Specs are built-in workload specs (ir/workloads). */
#include <stdio.h>
#include <string.h>

#include "costmodel/costmodel.h"

/* conv shorthand: n=1, dilation 1, groups 1. */
#define CONV(c, h, k, r, st, pad)                                                                \
  "conv2d_nchw:n=1,c=" #c ",h=" #h ",w=" #h ",k=" #k ",r=" #r ",s=" #r ",stride=" #st ",pad=" #pad
#define DW(c, h, st) "depthwise_conv2d:n=1,c=" #c ",h=" #h ",w=" #h ",r=3,s=3,stride=" #st ",pad=1"

/* Interleaved by family so that a budget cut short still covers them. */
static const char *const fixed[] = {
    CONV(64, 56, 64, 1, 1, 0),                          /* resnet 1x1 */
    DW(32, 112, 1),                                     /* mobilenet dw */
    "dense:m=128,n=768,k=768,bias=1,act=none",          /* bert qkv/out */
    CONV(64, 56, 64, 3, 1, 1),                          /* resnet 3x3 */
    "softmax:m=1536,n=128",                             /* bert attention */
    CONV(16, 112, 96, 1, 1, 0),                         /* mobilenet pw expand */
    "batch_matmul:b=12,m=128,n=128,k=64",               /* bert q.k */
    "max_pool2d:n=1,c=64,h=112,w=112,r=3,s=3,stride=2,pad=1",
    DW(144, 56, 2),
    "layernorm:m=128,n=768",
    CONV(256, 56, 64, 1, 1, 0),
    "dense:m=128,n=3072,k=768,bias=1,act=gelu",         /* bert ffn 1 */
    CONV(128, 28, 128, 3, 1, 1),
    DW(192, 28, 1),
    "add:m=128,n=768",
    "batch_matmul:b=12,m=128,n=64,k=128",               /* bert attn.v */
    CONV(144, 56, 24, 1, 1, 0),                         /* mobilenet pw project */
    "avg_pool2d:n=1,c=1024,h=7,w=7,r=7,s=7,stride=1,pad=0",
    CONV(256, 14, 256, 3, 1, 1),
    "dense:m=128,n=768,k=3072,bias=1,act=none",         /* bert ffn 2 */
    DW(576, 14, 2),
    "gelu:m=128,n=3072",
    CONV(512, 28, 128, 1, 1, 0),
    CONV(3, 224, 32, 3, 2, 1),                          /* mobilenet stem */
    "matmul:m=128,n=768,k=768",
    CONV(128, 56, 128, 3, 2, 1),                        /* resnet strided 3x3 */
    DW(960, 7, 1),
    "relu:m=256,n=784",
    CONV(1024, 14, 256, 1, 1, 0),
    "dense:m=1,n=1000,k=2048,bias=1,act=none",          /* resnet fc */
    CONV(384, 14, 64, 1, 1, 0),
    CONV(512, 7, 512, 3, 1, 1),
    "conv2d_nhwc:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1,dilation=1,groups=1",
    "dense:m=1,n=1000,k=1280,bias=1,act=none",          /* mobilenet fc */
    CONV(2048, 7, 512, 1, 1, 0),
    CONV(3, 224, 64, 7, 2, 3),                          /* resnet stem */
    CONV(320, 7, 1280, 1, 1, 0),
    "sigmoid:m=64,n=1000",
};
#define NFIXED ((int)(sizeof fixed / sizeof fixed[0]))

/* Workloads the benchmark tunes and the corpus never holds. */
static const char *const heldout[] = {
    "matmul:m=256,n=333,k=257",
    "conv2d_nchw:n=1,c=96,h=30,w=30,k=80,r=3,s=3,stride=1,pad=1",
    "softmax:m=1000,n=250",
};
#define NHELDOUT ((int)(sizeof heldout / sizeof heldout[0]))

int cm_corpus_fixed_count(void) { return NFIXED; }
int cm_corpus_heldout_count(void) { return NHELDOUT; }
const char *cm_corpus_heldout(int i) { return i >= 0 && i < NHELDOUT ? heldout[i] : NULL; }

static int pick(ts_rng *r, const int *v, int n) { return v[ts_rng_below(r, (uint64_t)n)]; }
/* An extent in [lo, hi], odd and prime values as likely as any. */
static int between(ts_rng *r, int lo, int hi) { return lo + (int)ts_rng_below(r, (uint64_t)(hi - lo + 1)); }

/* One random instance of a family, sizes near a layer's. */
static void random_spec(ts_rng *r, char *buf, size_t n) {
  static const int ch[] = {8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256};
  static const int hw[] = {7, 13, 14, 17, 28, 31, 56};
  int c = ts_rng_below(r, 3) ? pick(r, ch, 11) : between(r, 3, 200);
  int k = ts_rng_below(r, 3) ? pick(r, ch, 11) : between(r, 3, 200);
  int h = pick(r, hw, 7), st = 1 + (int)ts_rng_below(r, 2);
  switch (ts_rng_below(r, 12)) {
  case 0: snprintf(buf, n, CONV(%d, %d, %d, 1, %d, 0), c, h, h, k, st); break;
  case 1: snprintf(buf, n, CONV(%d, %d, %d, 3, %d, 1), c, h, h, k, st); break;
  case 2: snprintf(buf, n, "conv2d_nchw:n=1,c=%d,h=%d,w=%d,k=%d,r=7,s=7,stride=2,pad=3", 1 + c % 8, 4 * h,
                   4 * h, k); break;
  case 3: snprintf(buf, n, "depthwise_conv2d:n=1,c=%d,h=%d,w=%d,r=3,s=3,stride=%d,pad=1", c, 2 * h, 2 * h, st);
    break;
  case 4: {
    static const char *act[] = {"none", "relu", "gelu"};
    snprintf(buf, n, "dense:m=%d,n=%d,k=%d,bias=1,act=%s", between(r, 1, 256), between(r, 16, 1024),
             between(r, 16, 1024), act[ts_rng_below(r, 3)]);
    break;
  }
  case 5: snprintf(buf, n, "matmul:m=%d,n=%d,k=%d", between(r, 16, 512), between(r, 16, 512),
                   between(r, 16, 512)); break;
  case 6: snprintf(buf, n, "batch_matmul:b=%d,m=%d,n=%d,k=%d", between(r, 2, 16), between(r, 16, 192),
                   between(r, 16, 192), between(r, 16, 128)); break;
  case 7: snprintf(buf, n, "%s:n=1,c=%d,h=%d,w=%d,r=3,s=3,stride=2,pad=1",
                   ts_rng_below(r, 2) ? "max_pool2d" : "avg_pool2d", c, 2 * h, 2 * h); break;
  case 8: snprintf(buf, n, "softmax:m=%d,n=%d", between(r, 16, 2048), between(r, 16, 1024)); break;
  case 9: snprintf(buf, n, "layernorm:m=%d,n=%d", between(r, 16, 512), between(r, 64, 1024)); break;
  case 10: {
    static const char *ew[] = {"add", "mul", "relu", "gelu", "sigmoid", "exp"};
    snprintf(buf, n, "%s:m=%d,n=%d", ew[ts_rng_below(r, 6)], between(r, 16, 1024), between(r, 16, 2048));
    break;
  }
  default: snprintf(buf, n, "conv2d_nhwc:n=1,c=%d,h=%d,w=%d,k=%d,r=3,s=3,stride=%d,pad=1,dilation=1,groups=1",
                    c, h, h, k, st); break;
  }
}

static bool is_heldout(const char *s) {
  for (int i = 0; i < NHELDOUT; i++)
    if (!strncmp(s, heldout[i], strlen(heldout[i])) &&
        (s[strlen(heldout[i])] == '\0' || s[strlen(heldout[i])] == ','))
      return true;
  return false;
}

void cm_corpus_spec(uint64_t seed, int i, char *buf, size_t n) {
  if (i < NFIXED) {
    snprintf(buf, n, "%s", fixed[i]);
    return;
  }
  ts_rng r;
  ts_rng_seed(&r, seed * 0x9e3779b97f4a7c15ull + (uint64_t)i);
  do random_spec(&r, buf, n);
  while (is_heldout(buf));
}
