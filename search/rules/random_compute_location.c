/* search/rules/random_compute_location.c — placeholder until its author lands it. */
typedef int placeholder_t;
