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
draw(const struct args *a)
{
	uint64_t z;

	if (!a->has_seed)
		return (int64_t)(host_random() % (uint64_t)SHED_ONE);
	/* splitmix64: the same seed always gives the same draw */
	z = a->seed + 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (int64_t)(z % (uint64_t)SHED_ONE);
}

struct shedding {
	const struct args *a;
	int64_t u; /* the utilization, millionths */
	int64_t s; /* the shedding amount after this call */
};

static int
shed_body(struct ctx *c, void *arg, struct answer *ans)
{
	struct shedding *sh = arg;
	const struct args *a = sh->a;
	int64_t changed;
	int found;

	if (ctx_now(c, ans) == -1)
		return -1;
	if ((found = store_shed_load(c->store, a->key, a->keylen, &sh->s,
		 &changed)) == -1)
		return ctx_fail(c, ans);
	if (!found) {
		sh->s = shed_rest(&a->shed);
		changed = c->now;
	}
	sh->s = shed_update(&a->shed, sh->s, changed, c->now, sh->u);
	if (store_shed_save(c->store, a->key, a->keylen, sh->s, c->now) == -1)
		return ctx_fail(c, ans);
	return 0;
}

static void
shed_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct shedding sh = { a, a->utilization, 0 };
	const char *source = "given", *err, *p = priority_name(a->priority);
	struct record *r;
	int64_t chance;
	int dropped;
	char t[32];

	if (!a->has_utilization) {
		answer_usage(ans,
		    "shed: --utilization is missing; give how busy the "
		    "workers are, a fraction (above 1: overloaded), or auto");
		return;
	}
	if (shed_params_ok(&a->shed, &err) == -1) {
		/* the values it was given (or the defaults), by name */
		char g[32], b[32], d[40], rp[40];

		output_micro(g, sizeof(g), a->shed.good_ppm);
		output_micro(b, sizeof(b), a->shed.bad_ppm);
		output_duration(d, sizeof(d), a->shed.delay);
		output_duration(rp, sizeof(rp), a->shed.ramp);
		answer_usage(ans,
		    "shed: --good-below %s, --bad-above %s, --delay %s, "
		    "--ramp %s: %s",
		    g, b, d, rp, err);
		return;
	}
	if (a->utilization_auto && host_utilization(&sh.u, &source) == -1) {
		const char *root = host_proc_root();

		answer_usage(ans,
		    "--utilization: auto could read a load from neither "
		    "%s/pressure/cpu nor %s/loadavg (missing, or not in "
		    "their format%s); give a number",
		    root, root,
		    strcmp(root, "/proc") != 0 ? "; THROTTLE_PROC names "
						 "the folder"
					       : "");
		return;
	}
	if (txn_run(c, 1, shed_body, &sh, ans) == -1)
		return;
	chance = shed_drop_chance(sh.s, a->priority);
	dropped = chance > 0 && draw(a) < chance;
	r = answer_record(ans, TEXT_NONE);
	rec_str(ans, r, "key", a->key, a->keylen, 0);
	rec_bool(r, "allowed", !dropped, 0);
	rec_str(ans, r, "priority", p, strlen(p), 0);
	rec_micro(r, "utilization", sh.u, 0);
	rec_str(ans, r, "utilization_source", source, strlen(source), 0);
	rec_micro(r, "shedding_amount", shed_micro(sh.s), 0);
	rec_micro(r, "drop_probability", shed_micro(chance), 0);
	if (dropped) {
		char u[40];

		output_micro(t, sizeof(t), shed_micro(chance));
		output_micro(u, sizeof(u), sh.u);
		/* with auto, which load it read (json: utilization_source) */
		answer_say_key(ans, MSG_INFO, a->key, a->keylen,
		    ": shedding %s-priority work (drop probability %s%s%s%s)",
		    priority_name(a->priority), t,
		    a->utilization_auto ? "; utilization " : "",
		    a->utilization_auto ? u : "",
		    !a->utilization_auto ? ""
			: strcmp(source, "psi") == 0
			? " from PSI"
			: " from the load average");
		ans->rc = EXIT_REFUSED;
	}
}

const struct cmd_entry cmd_shed_entry = {
	.name = "shed",
	.decides = 1,
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
