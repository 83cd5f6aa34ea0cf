/*
 * cmd-consume.c: consume and check.
 *
 * consume takes --cost units if the limit allows it now; check answers what
 * consume would answer, as a dry run of the same code in a read
 * transaction that is rolled back.  The order is fixed: begin, load,
 * decide, save (only if allowed and not a dry run), commit, print, exit
 * code.  Nothing is printed until the decision is committed, so a script
 * is never told "allowed" for a decision that was not.
 */
#include <string.h>

#include "throttle.h"

static int
decide_exec(struct opts *o, int dry)
{
	struct store *st;
	struct keyrec rec;
	struct kstate cur, next;
	struct decision d;
	char err[STORE_ERR_MAX];
	int found, rc;

	if (!o->has_limit)
		die_usage("%s: no limit for this key; give one, as in "
			  "--limit 5/15m",
		    dry ? "check" : "consume");
	if (o->cost > o->limit.burst)
		die_usage("--cost: %lld is more than the burst of %lld, so it "
			  "could never be allowed; lower --cost or raise "
			  "--burst",
		    (long long)o->cost, (long long)o->limit.burst);
	if ((st = cmd_open(o, &rc)) == NULL)
		return rc;
	for (;;) {
		if (store_begin(st, !dry) == -1)
			return cmd_fail(o, st, store_error(st));
		if ((found = cmd_load(o, st, &rec, err, sizeof(err))) == -1)
			return cmd_fail(o, st, err);
		limit_carry(&o->limit, &rec, found, &cur);
		o->limit.algo->decide(&o->limit, &cur, o->now, o->cost, &d,
		    &next);
		if (dry) {
			store_rollback(st);
			break;
		}
		if (d.allowed &&
		    cmd_save(o, st, &o->limit, &next, d.reset_after) == -1)
			return cmd_fail(o, st, store_error(st));
		if ((rc = store_commit(st)) == -1)
			return cmd_fail(o, st, store_error(st));
		if (rc != STORE_RETRY)
			break;
	}
	store_close(st);

	cmd_print(o, &o->limit, o->cost, &d);
	return d.allowed ? EXIT_ALLOWED : EXIT_REFUSED;
}

static int
consume_exec(struct opts *o)
{
	return decide_exec(o, 0);
}

static int
check_exec(struct opts *o)
{
	return decide_exec(o, 1);
}

#define DECIDE_ARGS                                                            \
	"KEY --limit N/PERIOD [--burst B] [--algorithm NAME] "                 \
	"[--cost N]"
#define DECIDE_OPTS                                                            \
	(CMDOPT_LIMIT | CMDOPT_BURST | CMDOPT_ALGORITHM | CMDOPT_COST)

const struct cmd_entry cmd_consume_entry = {
	.name = "consume",
	.args = DECIDE_ARGS,
	.summary = "take --cost units if the limit allows it now (exit 0), "
		   "else change nothing (exit 1)",
	.options = DECIDE_OPTS,
	.min_args = 1,
	.max_args = 1,
	.operand_is_key = 1,
	.exec = consume_exec,
};

const struct cmd_entry cmd_check_entry = {
	.name = "check",
	.args = DECIDE_ARGS,
	.summary = "answer what consume would answer now, changing nothing",
	.options = DECIDE_OPTS,
	.min_args = 1,
	.max_args = 1,
	.operand_is_key = 1,
	.exec = check_exec,
};
