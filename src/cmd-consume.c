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

/*
 * Decide on the command's key under --limit and, unless dry, commit it.
 * The limit is checked first (exit 2).  0 with *d filled, or -1 with the
 * exit code of an already reported store error in *rc.
 */
int
cmd_consume_decide(struct opts *o, int dry, struct decision *d, int *rc)
{
	struct store *st;
	struct keyrec rec = { 0 };
	struct kstate cur = { 0 }, next = { 0 };
	struct limit lim;
	char err[STORE_ERR_MAX];
	int ret = -1, r;

	if (!o->has_limit)
		die_usage("%s: no limit for this key; give one, as in "
			  "--limit 5/15m",
		    dry ? "check" : "consume");
	if (o->cost > o->limit.burst)
		die_usage("--cost: %lld is more than the %s of %lld, so it "
			  "could never be allowed; lower --cost or raise %s",
		    (long long)o->cost,
		    o->limit.algo->takes_burst ? "burst" : "limit",
		    (long long)o->limit.burst,
		    o->limit.algo->takes_burst ? "--burst" : "the limit");
	if ((st = cmd_open(o, rc)) == NULL)
		return -1;
	for (;;) {
		if (store_begin(st, !dry) == -1) {
			*rc = cmd_fail(o, st, store_error(st));
			goto out;
		}
		if (cmd_prepare(o, st, &rec, &lim, &cur, &next, err,
			sizeof(err)) == -1) {
			*rc = cmd_fail(o, st, err);
			goto out;
		}
		lim.algo->decide(&lim, &cur, o->now, o->cost, d, &next);
		if (dry) {
			store_rollback(st);
			break;
		}
		if (d->allowed &&
		    cmd_save(o, st, &lim, &next, d->reset_after) == -1) {
			*rc = cmd_fail(o, st, store_error(st));
			goto out;
		}
		if ((r = store_commit(st)) == -1) {
			*rc = cmd_fail(o, st, store_error(st));
			goto out;
		}
		if (r != STORE_RETRY)
			break;
	}
	store_close(st);
	ret = 0;
out:
	cmd_unprepare(&rec, &cur, &next);
	return ret;
}

static int
decide_exec(struct opts *o, int dry)
{
	struct decision d;
	int rc;

	if (cmd_consume_decide(o, dry, &d, &rc) == -1)
		return rc;
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
	"KEY --limit N/PERIOD [--algorithm NAME] [--burst B] "                 \
	"[--granularity G] [--cost N]"
#define DECIDE_OPTS                                                            \
	(CMDOPT_LIMIT | CMDOPT_BURST | CMDOPT_ALGORITHM | CMDOPT_COST |        \
	    CMDOPT_GRANULARITY)

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
