/*
 * cmd-shed.c: the worker utilization load shedder (seed 004): exit 0 to go
 * ahead, 1 to shed this piece of work.  The ramp itself is shed.c; here the
 * key's state is loaded and saved in one transaction, the utilization is
 * measured if asked (--utilization auto), and the random draw is made.
 */
#include <string.h>

#include "throttle.h"

/* One draw in [0, SHED_ONE) from --seed, or from the kernel. */
static int64_t
draw(const struct opts *o)
{
	uint64_t z;

	if (!o->has_seed)
		return (int64_t)(host_random() % (uint64_t)SHED_ONE);
	/* splitmix64: the same seed always gives the same draw */
	z = o->seed + 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (int64_t)(z % (uint64_t)SHED_ONE);
}

/* A SHED_ONE-scaled value in millionths, rounded to the nearest. */
static int64_t
to_micro(int64_t v)
{
	int64_t unit = SHED_ONE / 1000000;

	return v >= 0 ? (v + unit / 2) / unit : -((-v + unit / 2) / unit);
}

static int
shed_exec(struct opts *o)
{
	struct store *st;
	const char *source = "given", *err;
	int64_t u = o->utilization, s, changed, chance;
	int found, rc, dropped;
	char t[32];

	if (!o->has_utilization)
		return cmd_usage(o,
		    "shed: --utilization is missing; give a number from "
		    "0 to 1, or auto");
	if (shed_params_ok(&o->shed, &err) == -1)
		return cmd_usage(o, "shed: the thresholds are off: %s", err);
	if (o->utilization_auto && host_utilization(&u, &source) == -1)
		return cmd_usage(o,
		    "--utilization: auto found neither "
		    "/proc/pressure/cpu nor /proc/loadavg; give a number");
	if ((st = cmd_open(o, &rc)) == NULL)
		return rc;
	do {
		if (store_begin(st, 1) == -1 ||
		    (found = store_shed_load(st, o->key, o->keylen, &s,
			 &changed)) == -1)
			return cmd_fail(o, st, store_error(st));
		if (!found) {
			s = shed_rest(&o->shed);
			changed = o->now;
		}
		s = shed_update(&o->shed, s, changed, o->now, u);
		if (store_shed_save(st, o->key, o->keylen, s, o->now) == -1 ||
		    (rc = store_commit(st)) == -1)
			return cmd_fail(o, st, store_error(st));
	} while (rc == STORE_RETRY);
	store_close(st);

	chance = shed_drop_chance(s, o->priority);
	dropped = chance > 0 && draw(o) < chance;
	if (o->format != FORMAT_TEXT) {
		const char *p = priority_name(o->priority);
		struct field f[] = {
			{ "key", FIELD_STR, o->key, o->keylen, 0 },
			{ "allowed", FIELD_BOOL, NULL, 0, !dropped },
			{ "priority", FIELD_STR, p, strlen(p), 0 },
			{ "utilization", FIELD_MICRO, NULL, 0, u },
			{ "utilization_source", FIELD_STR, source,
			    strlen(source), 0 },
			{ "shedding_amount", FIELD_MICRO, NULL, 0,
			    to_micro(s) },
			{ "drop_probability", FIELD_MICRO, NULL, 0,
			    to_micro(chance) },
		};
		output_fields(o, f, sizeof(f) / sizeof(f[0]));
	}
	if (dropped && !o->quiet) {
		output_micro(t, sizeof(t), to_micro(chance));
		log_key(o->key, o->keylen,
		    ": shedding %s-priority work (drop probability %s)",
		    priority_name(o->priority), t);
	}
	return dropped ? EXIT_REFUSED : EXIT_ALLOWED;
}

const struct cmd_entry cmd_shed_entry = {
	.name = "shed",
	.args = "KEY --utilization U|auto [--priority LEVEL] [--seed N] "
		"[--good-below U] [--bad-above U] [--delay D] [--ramp D]",
	.summary = "go ahead (exit 0) or shed this work (exit 1) by how long "
		   "the machine has been overloaded",
	.options = CMDOPT_SHED | CMDOPT_PRIORITY,
	.min_args = 1,
	.max_args = 1,
	.operand_is_key = 1,
	.in_batch = 1,
	.exec = shed_exec,
};
