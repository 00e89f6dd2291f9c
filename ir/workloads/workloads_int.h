/* workloads_int.h — what the workload files share: the table entry of a
 * workload (its keys' kinds and its check, DSL-body and FLOP functions), the
 * signature of an instance (its parameter tensors, in DSL param order: inputs
 * first, then outputs, with concrete dtypes and shapes), and the second table
 * (workloads_tvm.c: MetaSchedule's single-operator suite in TVM's layouts).
 * Not installed. */
#ifndef TESSEL_IR_WORKLOADS_INT_H
#define TESSEL_IR_WORKLOADS_INT_H

#include "workloads.h"

#define WL_MAX_TENSORS 8

typedef struct wl_tensor_sig {
  const char *name;
  ir_dtype_code dt;
  int ndim;
  int64_t shape[6];
} wl_tensor_sig;

typedef struct wl_sig {
  int nin, nout;
  wl_tensor_sig t[WL_MAX_TENSORS]; /* nin inputs, then nout outputs */
} wl_sig;

typedef enum { K_POS, K_NONNEG, K_BOOL, K_ACT } key_kind;

typedef struct wl_def {
  ir_workload pub; /* first: ir_workload pointers are wl_def pointers */
  key_kind kinds[IR_WL_MAX_PARAMS];
  ts_status (*check)(const ir_wl_inst *w, ts_diag *d);
  void (*body)(const ir_wl_inst *w, ts_strbuf *sb);
  double (*flops)(const ir_wl_inst *w);
} wl_def;

/* Appends one tensor to s (count is the field it adds to: nin or nout). */
void ir_wl_sig_add(wl_sig *s, const char *name, ir_dtype_code dt, int ndim, const int64_t *shape);
#define SIG_ADD(s, count, name, dt, ...)                                           \
  do {                                                                             \
    const int64_t shp_[] = {__VA_ARGS__};                                          \
    ir_wl_sig_add(s, name, dt, (int)(sizeof shp_ / sizeof shp_[0]), shp_);         \
    (s)->count++;                                                                  \
  } while (0)
#define SIG_IN(s, name, dt, ...) SIG_ADD(s, nin, name, dt, __VA_ARGS__)
#define SIG_OUT(s, name, dt, ...) SIG_ADD(s, nout, name, dt, __VA_ARGS__)

/* Fills s for a parsed (hence validated) instance. */
void ir_wl_signature(const ir_wl_inst *w, wl_sig *s);

/* Output sizes shared by the DSL generator and the reference loops. */
int64_t ir_wl_conv_out(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil);
int64_t ir_wl_convt_out(int64_t in, int64_t k, int64_t stride, int64_t pad);

/* The message for an output that would be empty (p or q <= 0), else TS_OK. */
ts_status ir_wl_check_out(const ir_wl_inst *w, int64_t p, int64_t q, ts_diag *d);

/* workloads_tvm.c: its table, and the signature of one of its instances
 * (false when w is not one of them). */
extern const wl_def ir_wl_tvm_defs[];
extern const int ir_wl_tvm_ndefs;
bool ir_wl_tvm_signature(const ir_wl_inst *w, wl_sig *s);

/* reference_tvm.c: the C loop of one of its workloads, or NULL. */
typedef void (*ir_wl_ref_fn)(const ir_wl_inst *w, ir_tensor *a);
ir_wl_ref_fn ir_wl_tvm_reference(const char *name);
/* reference.c: the transposed convolution, NCHW or (nhwc) TVM's NHWC form. */
void ir_wl_ref_conv2d_transpose(const ir_wl_inst *w, ir_tensor *a, bool nhwc);

#endif
