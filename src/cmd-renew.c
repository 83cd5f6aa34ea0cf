/*
 * cmd-renew.c: extend a lease that a long job still holds.  Only a live
 * lease can be renewed: one that expired, or whose owner is gone, may
 * already have been replaced by another holder.
 */
#include <string.h>

#include "throttle.h"

static void
renew_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct slots_seen seen = { 0 };
	struct record *r;
	int renewed;

	if (a->lease == NULL) {
		answer_usage(ans,
		    "renew: --lease is missing; give the id acquire printed");
		return;
	}
	if (a->lease_bad) {
		lease_bad(a, ans);
		return;
	}
	renewed = concurrency_renew(c, a->key, a->keylen, a->lease,
	    a->has_ttl ? a->ttl : -1, &seen, ans);
	if (renewed == -1)
		return;
	if (renewed == 2) {
		answer_usage(ans,
		    "--ttl: 0 (no expiry) needs a lease with an owner");
		return;
	}
	if (renewed == 0) {
		answer_say_key(ans, MSG_NOTICE, a->key, a->keylen,
		    ": no live lease %s (released, expired, or its owner is "
		    "gone); acquire a new one",
		    a->lease);
		ans->rc = EXIT_REFUSED;
		return;
	}
	r = answer_record(ans, TEXT_NONE);
	rec_str(ans, r, "key", a->key, a->keylen, 0);
	rec_str(ans, r, "lease", a->lease, strlen(a->lease), 0);
	rec_secs(r, "expires_after", lease_expires_after(&seen.found, c->now),
	    0);
}

const struct cmd_entry cmd_renew_entry = {
	.name = "renew",
	.makes_no_file = 1, /* nothing to undo in a file not there */
	.decides = 1,
	.args = "KEY --lease ID [--ttl DURATION]",
	.summary = "extend a live lease by --ttl (default: its own TTL) from "
		   "now; exit 1 if it is gone",
	.options = CMDOPT_LEASE | CMDOPT_TTL,
	.min_args = 1,
	.max_args = 1,
	.operand_is_key = 1,
	.in_batch = 1,
	.exec = renew_exec,
};
