/* pretrained.c — which cost model a tuning run starts from (`--cost-model
 * FILE|default|none`): the committed pre-trained model
 * (costmodel/pretrained/default.json, made by costmodel/pretrained/make.sh),
 * a file the user names, or none (a fresh model trained online only), which
 * is also what a run without the option gets: the committed model does not
 * yet rank unseen workloads well enough to be on by default (docs/COSTMODEL.md,
 * "Defaults and why"). */
#include <stdio.h>
#include <string.h>

#include "costmodel/costmodel.h"
#include "tessel_config.h"

const char *cm_pretrained_default_path(void) { return TESSEL_PRETRAINED_MODEL; }

ts_status cm_pretrained_open(const char *spec, const cg_target *t, uint64_t seed, FILE *warn, cm_model **out,
                             ts_diag *d) {
  *out = NULL;
  if (!spec || !spec[0] || !strcmp(spec, "none")) return TS_OK;
  const char *path = !strcmp(spec, "default") ? cm_pretrained_default_path() : spec;
  char fam[96];
  cm_target_family(t, fam, sizeof fam);
  ts_diag ld;
  ts_diag_clear(&ld);
  cm_pretrained_info info;
  cm_model *m = cm_xgb_load_pretrained(path, 0, seed, &info, &ld);
  if (!m) {
    if (d) *d = ld;
    return ld.code ? ld.code : TS_EINVAL;
  }
  if (strcmp(info.family, fam) && warn)
    fprintf(warn, "warning: cost model %s was trained for '%s', this target is '%s'; using it anyway\n", path,
            info.family[0] ? info.family : "an unknown target", fam);
  *out = m;
  return TS_OK;
}
