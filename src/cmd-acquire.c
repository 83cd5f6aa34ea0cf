/*
 * cmd-acquire.c: take one of N slots of a concurrency limit, with
 * priorities and a reserve for critical work (concurrency.c).
 */
#include <string.h>

#include "throttle.h"

static void
acquire_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct lease l, who;
	struct slots_seen seen;
	struct record *r;
	int64_t start;
	int taken;

	if (concurrency_check(a, "acquire", ans) == -1)
		return;
	if (a->has_ttl && a->ttl == 0 && !a->has_owner) {
		answer_usage(ans,
		    "--ttl: 0 (no expiry) needs --owner, or a slot could be "
		    "held forever");
		return;
	}
	if (a->has_owner && host_pid_start(a->owner, &start) == -1) {
		answer_usage(ans, "--owner: no process %lld on this host",
		    (long long)a->owner);
		return;
	}
	memset(&who, 0, sizeof(who));
	who.pid = a->has_owner ? a->owner : 0;
	taken = concurrency_wait(c, a, &who, a->ttl, &l, &seen, ans);
	if (taken < 0)
		return;
	if (taken > 1) {
		ans->rc = taken; /* a signal cut the wait short */
		return;
	}
	r = answer_record(ans, taken ? TEXT_VALUE : TEXT_NONE);
	rec_str(ans, r, "key", a->key, a->keylen, 0);
	rec_bool(r, "allowed", taken, 0);
	if (taken) {
		r->text_field = r->nf;
		rec_str(ans, r, "lease", l.id, strlen(l.id), 0);
	}
	rec_int(r, "active", seen.active, 0);
	rec_int(r, "limit", a->concurrency, 0);
	if (taken)
		rec_secs(r, "expires_after", lease_expires_after(&l, c->now),
		    0);
	else {
		if (concurrency_locked(&seen)) {
			rec_secs(r, "retry_after",
			    seen.lk.until == LOCKOUT_NEVER
				? -1
				: seen.lk.until - c->now,
			    0);
			keystate_lockout(ans, r, &seen.lk, c->now);
		} else
			rec_secs(r, "retry_after",
			    seen.soonest && concurrency_possible(a)
				? seen.soonest - c->now
				: -1,
			    0);
		concurrency_refused(a, &seen, NULL, ans);
		ans->rc = EXIT_REFUSED;
	}
}

const struct cmd_entry cmd_acquire_entry = {
	.name = "acquire",
	.decides = 1,
	.args = "KEY --concurrency N [--ttl DURATION] [--owner PID] "
		"[--priority LEVEL] [--reserve R] [--wait [MAX]]",
	.summary = "take one of N slots and print its lease id (exit 0), or "
		   "exit 1 when all are held",
	.options = CMDOPT_CONCURRENCY | CMDOPT_OWNER | CMDOPT_TTL |
	    CMDOPT_PRIORITY | CMDOPT_WAIT,
	.uses_policy = 1,
	.min_args = 1,
	.max_args = 1,
	.operand_is_key = 1,
	.in_batch = 1,
	.exec = acquire_exec,
};
