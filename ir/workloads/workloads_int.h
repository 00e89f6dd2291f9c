/* workloads_int.h — what workloads.c and reference.c share: the signature of
 * an instance (its parameter tensors, in DSL param order: inputs first, then
 * outputs, with concrete dtypes and shapes). Not installed. */
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

/* Fills s for a parsed (hence validated) instance. */
void ir_wl_signature(const ir_wl_inst *w, wl_sig *s);

/* Output sizes shared by the DSL generator and the reference loops. */
int64_t ir_wl_conv_out(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil);
int64_t ir_wl_convt_out(int64_t in, int64_t k, int64_t stride, int64_t pad);

#endif
