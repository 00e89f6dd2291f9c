/* search/rules/multi_level_tiling.c — placeholder until its author lands it. */
typedef int placeholder_t;
