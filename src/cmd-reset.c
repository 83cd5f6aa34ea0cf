/*
 * cmd-reset.c: forget a key, so it is back at full capacity.  Forgetting a
 * key that has no state succeeds too: the result is the same.
 */
#include "throttle.h"

static int
reset_exec(struct opts *o)
{
	struct store *st;
	int rc;

	if ((st = cmd_open(o, &rc)) == NULL)
		return rc;
	do {
		if (store_begin(st, 1) == -1 ||
		    store_delete(st, o->key, o->keylen) == -1 ||
		    (rc = store_commit(st)) == -1)
			return cmd_fail(o, st, store_error(st));
	} while (rc == STORE_RETRY);
	store_close(st);
	return EXIT_ALLOWED;
}

const struct cmd_entry cmd_reset_entry = {
	.name = "reset",
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
