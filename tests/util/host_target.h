/* host_target.h — the llvm target of this host, resolved (its triple, CPU and
 * features filled in), for the tuner tests that build and measure kernels
 * here; fails the test when it cannot be made. Header-only: the tests that
 * use it link codegen already. */
#ifndef TESSEL_TESTS_UTIL_HOST_TARGET_H
#define TESSEL_TESTS_UTIL_HOST_TARGET_H

#include <check.h>

#include "codegen/llvm.h"
#include "codegen/codegen.h"

static inline cg_target tu_host_target(void) {
  cg_target t;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(cg_target_parse("llvm", &t, &d) == TS_OK, "%s", d.msg);
  ck_assert_msg(cg_llvm_resolve_target(&t, &d) == TS_OK, "%s", d.msg);
  return t;
}

#endif
