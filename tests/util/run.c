/* run.c — see run.h. */
#define _GNU_SOURCE /* vasprintf */
#include "util/run.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

char *tr_slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return strdup("");
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return strdup("");
  }
  char *s = malloc((size_t)n + 1);
  ck_assert_msg(s != NULL, "out of memory reading %s (%ld bytes)", path, n);
  size_t got = fread(s, 1, (size_t)n, f);
  s[got] = '\0';
  fclose(f);
  return s;
}

/* Runs cmd with its output captured under dir. Takes ownership of cmd. */
static tr_result capture(const char *dir, char *cmd) {
  char *full = NULL, *outp = NULL, *errp = NULL;
  int ok = asprintf(&outp, "%s/out.txt", dir) >= 0 && asprintf(&errp, "%s/err.txt", dir) >= 0 &&
           asprintf(&full, "%s >'%s' 2>'%s'", cmd, outp, errp) >= 0;
  ck_assert_msg(ok, "out of memory building the command `%s`", cmd);
  int st = system(full);
  tr_result r = {WIFEXITED(st) ? WEXITSTATUS(st) : 128, tr_slurp(outp), tr_slurp(errp)};
  free(full);
  free(outp);
  free(errp);
  free(cmd);
  return r;
}

tr_result tr_vsh(const char *dir, const char *fmt, va_list ap) {
  char *cmd = NULL;
  ck_assert_msg(vasprintf(&cmd, fmt, ap) >= 0, "out of memory formatting the command `%s`", fmt);
  return capture(dir, cmd);
}

tr_result tr_sh(const char *dir, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tr_result r = tr_vsh(dir, fmt, ap);
  va_end(ap);
  return r;
}

tr_result tr_vrun(const char *dir, const char *prog, const char *fmt, va_list ap) {
  char *args = NULL, *cmd = NULL;
  ck_assert_msg(vasprintf(&args, fmt, ap) >= 0, "out of memory formatting the arguments `%s`", fmt);
  ck_assert_msg(asprintf(&cmd, "'%s' %s", prog, args) >= 0, "out of memory building the command for %s", prog);
  free(args);
  return capture(dir, cmd);
}

tr_result tr_run(const char *dir, const char *prog, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tr_result r = tr_vrun(dir, prog, fmt, ap);
  va_end(ap);
  return r;
}

void tr_result_free(tr_result *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}

int tr_count_lines(const char *path) {
  FILE *fp = fopen(path, "r");
  if (!fp) return 0;
  int n = 0, c;
  while ((c = fgetc(fp)) != EOF) n += c == '\n';
  fclose(fp);
  return n;
}

void tr_rmtree(const char *dir) {
  char *cmd = NULL;
  if (asprintf(&cmd, "rm -rf '%s'", dir) < 0 || system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  free(cmd);
}

void tr_ok(tr_result r, const char *what) {
  ck_assert_msg(r.status == 0, "%s: exit %d\nstdout: %s\nstderr: %s", what, r.status, r.out, r.err);
  tr_result_free(&r);
}

bool tr_model_env(const char **models, const char **root, char *python, char *ort_script) {
  *models = getenv("MODELS_DIR");
  *root = getenv("TESSEL_SOURCE_ROOT");
  if (!*models || !*root) {
    fprintf(stderr, "MODELS_DIR and TESSEL_SOURCE_ROOT must be set (meson test does)\n");
    return false;
  }
  snprintf(python, TR_PATH_MAX, "%s/.venv/bin/python3", *root);
  snprintf(ort_script, TR_PATH_MAX, "%s/tests/models/ort_run.py", *root);
  return true;
}
