/* library_conv.h — the convolution library candidate: a task whose
 * reduction block is a plain f32 2-d convolution (NCHW input, OIHW weights,
 * groups and depthwise, or channel-blocked by 8 or 16 as the nchwc pass
 * writes it; zero padding by a pad stage the kernel drops) gets
 * oneDNN's convolution, through the runtime's tsrt_dnnl_conv2d_f32
 * (runtime/dnnl_conv.c), as one more candidate; its epilogue stays,
 * default-scheduled. tuner/library.c asks these functions beside its
 * matrix products; its record is a library record like theirs ("call":
 * "tsrt_dnnl_conv2d_f32", docs/LOG.md). docs/TUNING.md, "Library
 * candidates". */
#ifndef TESSEL_TUNER_LIBRARY_CONV_H
#define TESSEL_TUNER_LIBRARY_CONV_H

#include "tuner/library.h"

/* The convolution call that computes f (0 or 1 of them into out; 0 when f
 * is no such convolution or tessel was built without oneDNN). The caller
 * has checked the target (tun_library_target_ok). */
int tun_conv_candidates(const ir_func *f, tun_lib_cand *out, int max);
/* True when c is a convolution candidate (tun_conv_schedule builds it). */
bool tun_conv_is_cand(const tun_lib_cand *c);
/* The kernel of convolution candidate c for f on t (the convolution's
 * statement replaced by the call, the pad stage dropped, the other blocks
 * default-scheduled). NULL with d set when f does not match c. */
sch_traced *tun_conv_schedule(const ir_func *f, const cg_target *t, const tun_lib_cand *c, ts_diag *d);
/* True when two convolution candidates' parameters differ at most in the
 * batch (what a record measured at one batch replays on a symbolic one). */
bool tun_conv_same_structure(const char *pa, const char *pb);
/* The index in the root block's body (a sequence, or one statement: 0) of
 * the statement holding blk alone, or -1 (tuner/library.c). */
int tun_library_root_slot(const ir_block *root, const ir_block *blk);

#endif
