/*
 * cmd-consume.c: consume and check.  check is the same decision as a dry
 * run, in a read transaction (rate.c).
 */
#include "throttle.h"

static void
consume_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct keywork k;
	int rc;

	keystate_init(&k, a->key, a->keylen);
	if (!a->has_wait) {
		if (rate_decide(c, a, 0, -2, &k, ans) == 0)
			rate_answer(a, &k, ans);
	} else if ((rc = rate_wait(c, a, &k, ans)) == EXIT_ALLOWED ||
	    rc == EXIT_REFUSED)
		rate_answer(a, &k, ans);
	else if (rc > 0)
		ans->rc = rc; /* a signal cut the wait short */
	keystate_free(&k);
}

static void
check_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct keywork k;

	keystate_init(&k, a->key, a->keylen);
	if (rate_decide(c, a, 1, -2, &k, ans) == 0)
		rate_answer(a, &k, ans);
	keystate_free(&k);
}

#define DECIDE_ARGS                                                            \
	"KEY --limit N/PERIOD [--limit ...] [--algorithm NAME] [--burst B] "   \
	"[--granularity G] [--cost N] [--lockout D]"
#define DECIDE_OPTS                                                            \
	(CMDOPT_LIMIT | CMDOPT_BURST | CMDOPT_ALGORITHM | CMDOPT_COST |        \
	    CMDOPT_GRANULARITY | CMDOPT_LOCKOUT)

const struct cmd_entry cmd_consume_entry = {
	.name = "consume",
	.decides = 1,
	.args = DECIDE_ARGS " [--wait [MAX]]",
	.summary = "take --cost units if the limit allows it now (exit 0), "
		   "else change nothing (exit 1)",
	.options = DECIDE_OPTS | CMDOPT_WAIT,
	.min_args = 1,
	.max_args = 1,
	.operand_is_key = 1,
	.uses_policy = 1,
	.in_batch = 1,
	.exec = consume_exec,
};

const struct cmd_entry cmd_check_entry = {
	.name = "check",
	.decides = 1,
	.args = DECIDE_ARGS,
	.summary = "answer what consume would answer now, changing nothing",
	.options = DECIDE_OPTS,
	.min_args = 1,
	.max_args = 1,
	.operand_is_key = 1,
	.uses_policy = 1,
	.in_batch = 1,
	.reads_only = 1,
	.exec = check_exec,
};
