/* run.h — helpers shared by the tests that drive programs through the
 * shell (the tessel binary, python, examples): run a command with its
 * stdout and stderr captured in files under a scratch directory, read them
 * back, and tidy up. No tessel library is needed to link it. */
#ifndef TESSEL_TESTS_UTIL_RUN_H
#define TESSEL_TESTS_UTIL_RUN_H

#include <stdarg.h>

/* A finished command: its exit status (128 when it did not exit normally,
 * e.g. killed by a signal) and everything it wrote, NUL-terminated. */
typedef struct tr_result {
  int status;
  char *out, *err;
} tr_result;

/* The whole of a file as a heap string (caller frees); "" (heap) when it
 * cannot be read. */
char *tr_slurp(const char *path);

/* Runs the shell command fmt... with stdout and stderr redirected to
 * dir/out.txt and dir/err.txt (each overwritten by the next call) and
 * returns both with the exit status. The command is shell text: callers
 * quote what they substitute. */
tr_result tr_sh(const char *dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
tr_result tr_vsh(const char *dir, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Runs `'prog' ARGS` (ARGS from fmt..., shell text) the same way. */
tr_result tr_run(const char *dir, const char *prog, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
tr_result tr_vrun(const char *dir, const char *prog, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

void tr_result_free(tr_result *r);
/* Check-asserts that r exited 0 (naming what, with its output), then frees it. */
void tr_ok(tr_result r, const char *what);

/* Newline characters in a file; 0 when it cannot be opened. */
int tr_count_lines(const char *path);

/* rm -rf dir; a failure is reported on stderr (best effort, for cleanup). */
void tr_rmtree(const char *dir);

/* The model tests' environment, set by meson test: MODELS_DIR (the generated
 * ONNX models) and TESSEL_SOURCE_ROOT, and from the root the venv's python3
 * and tests/models/ort_run.py (each buffer TR_PATH_MAX bytes). False, after
 * saying so on stderr, when either variable is missing. */
#define TR_PATH_MAX 512
#include <stdbool.h>
bool tr_model_env(const char **models, const char **root, char *python, char *ort_script);

#endif
