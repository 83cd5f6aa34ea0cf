/*
 * cmd-renew.c: extend a lease that a long job still holds.  Only a live
 * lease can be renewed: one that expired, or whose owner is gone, may
 * already have been replaced by another holder.
 */
#include <string.h>

#include "throttle.h"

struct renewal {
	const struct args *a;
	struct slots_seen seen;
	int forever; /* --ttl 0 on a lease without an owner */
};

static int
renew_body(struct ctx *c, void *arg, struct answer *ans)
{
	struct renewal *rn = arg;
	const struct args *a = rn->a;
	struct lease *l = &rn->seen.found;

	if (ctx_now(c, ans) == -1)
		return -1;
	if (concurrency_scan(c, a->key, a->keylen, 1, a->lease, &rn->seen) ==
	    -1)
		return ctx_fail(c, ans);
	if (!rn->seen.has_found)
		return 0; /* the dead leases the scan found are still freed */
	if (a->has_ttl)
		l->ttl = a->ttl;
	if (l->ttl == 0 && l->pid == 0) {
		rn->forever = 1;
		return TXN_ROLLBACK;
	}
	l->expires = l->ttl > 0 ? c->now + l->ttl : 0;
	if (store_lease_put(c->store, a->key, a->keylen, l) == -1)
		return ctx_fail(c, ans);
	return 0;
}

static void
renew_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct renewal rn;
	struct record *r;

	if (a->lease == NULL) {
		answer_usage(ans,
		    "renew: --lease is missing; give the id acquire printed");
		return;
	}
	memset(&rn, 0, sizeof(rn));
	rn.a = a;
	if (txn_run(c, 1, renew_body, &rn, ans) == -1)
		return;
	if (rn.forever) {
		answer_usage(ans,
		    "--ttl: 0 (no expiry) needs a lease with an owner");
		return;
	}
	if (!rn.seen.has_found) {
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
	rec_secs(r, "expires_after",
	    lease_expires_after(&rn.seen.found, c->now), 0);
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
