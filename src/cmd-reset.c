/*
 * cmd-reset.c: forget a key, so it is back at full capacity.  Forgetting a
 * key that has no state succeeds too: the result is the same.
 */
#include "throttle.h"

static int
reset_body(struct ctx *c, void *arg, struct answer *ans)
{
	const struct args *a = arg;

	if (store_delete(c->store, a->key, a->keylen) == -1)
		return ctx_fail(c, ans);
	return 0;
}

static void
reset_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	char miss[DBNAME_MAX + 128];

	if (txn_run(c, 1, reset_body, (void *)a, ans) == 0 &&
	    store_missing(c->store, miss, sizeof(miss)))
		answer_say(ans, MSG_INFO, "%s", miss); /* a typo in --db? */
}

const struct cmd_entry cmd_reset_entry = {
	.name = "reset",
	.makes_no_file = 1, /* nothing to undo in a file not there */
	.args = "KEY",
	.summary = "forget the key, back to full capacity (exit 0 even if it "
		   "had no state)",
	.options = 0,
	.min_args = 1,
	.max_args = 1,
	.operand_is_key = 1,
	.in_batch = 1,
	.exec = reset_exec,
};
