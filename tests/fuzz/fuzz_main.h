/* fuzz_main.h — the file-driven main of the file-reader harnesses (fuzz_*.c):
 * each argument is an input file, or a directory whose every regular file is
 * one (a committed seed corpus, replayed by the default test suite). The
 * harness's LLVMFuzzerTestOneInput runs on each; a crash or a sanitizer
 * report fails the run. Built with -DTESSEL_LIBFUZZER, libFuzzer's own main
 * drives the same function instead (the build lines are in each harness). */
#ifndef TESSEL_TESTS_FUZZ_MAIN_H
#define TESSEL_TESTS_FUZZ_MAIN_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The record lists of fuzz_handshake.c and fuzz_tracker_msg.c: a selector
 * byte, a length byte, then that many bytes (fewer at the input's end).
 * Returns false when no record is left; else the record, *i past it. */
static inline bool fuzz_next_record(const uint8_t *data, size_t size, size_t *i, uint8_t *sel, const uint8_t **p,
                                    size_t *n) {
  if (*i + 2 > size) return false;
  *sel = data[*i];
  size_t len = data[*i + 1];
  *i += 2;
  *n = size - *i < len ? size - *i : len;
  *p = data + *i;
  *i += *n;
  return true;
}

#ifndef TESSEL_LIBFUZZER
static int fuzz_run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  size_t cap = 1 << 16, n = 0, r;
  uint8_t *buf = malloc(cap);
  while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n == cap) {
      uint8_t *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        buf = NULL;
      } else {
        buf = nb;
      }
    }
  }
  fclose(f);
  if (!buf) {
    fprintf(stderr, "%s: out of memory\n", path);
    return 1;
  }
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  int files = 0;
  for (int i = 1; i < argc; i++) {
    struct stat sb;
    if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode)) {
      DIR *dir = opendir(argv[i]);
      struct dirent *e;
      while (dir && (e = readdir(dir))) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
        if (fuzz_run_file(p)) return 1;
        files++;
      }
      if (dir) closedir(dir);
    } else {
      if (fuzz_run_file(argv[i])) return 1;
      files++;
    }
  }
  printf("%d inputs replayed\n", files);
  return files ? 0 : 1; /* an empty corpus is a mistake, not a pass */
}
#endif

#endif
