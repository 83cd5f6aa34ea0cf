/*
 * rate.c: rate limits on a store: the decision behind consume, check,
 * run --limit and batch, with compound limits (keystate.c), lockouts and
 * --wait.
 *
 *	1. A decision is one transaction: load every limit of the key and its
 *	   lockout, read the time, decide each limit, and only if all allow,
 *	   save them all; a refusal saves only states moved back to the
 *	   clock.  check is the same decision in a read transaction.
 *	2. Nothing is printed until the decision is committed: a script is
 *	   never told "allowed" for a decision that was not kept.
 *	3. --lockout: once a request is refused, the key stays refused for
 *	   that long from that moment (the refusal writes the lockout), or
 *	   until reset (--lockout never).  A lockout belongs to the key:
 *	   every request on a locked key is refused, whatever its options,
 *	   and when the lockout ends the key starts afresh with its whole
 *	   allowance, as pam_faillock clears its record on unlock.
 *	4. --wait on an algorithm that reserves (the algorithm table says
 *	   which: GCRA) waits by reservation: in the same transaction as the
 *	   refusal, the request is decided again at the instant it would be
 *	   allowed and that state is saved, so callers queue in arrival order
 *	   at the limit's rate; the caller then sleeps on the monotonic clock,
 *	   and gives the units back if it is interrupted first.  Other
 *	   algorithms, and lockouts, are polled: sleep until retry_after, then
 *	   decide again.
 */
#include <string.h>

#include "throttle.h"

/* 0 if the request can be decided, else -1 with a usage error. */
int
rate_usable(const struct args *a, struct answer *ans)
{
	int i;

	if (a->nlimits == 0)
		return answer_usage(ans,
		    "%s: no limit for this key; give one, as in --limit "
		    "5/15m, or set a policy for it (throttle policy set "
		    "NAME --limit ...)",
		    a->cmd->name);
	for (i = 0; i < a->nlimits; i++) {
		const struct limit *l = &a->limits[i];
		char per[64];

		if (a->cost <= l->burst)
			continue;
		if (a->nlimits > 1) {
			/* --burst is refused beside several limits: name
			 * the one at fault, and what would make room */
			output_duration(per, sizeof(per), l->period);
			return answer_usage(ans,
			    "--cost: %lld is more than --limit %lld/%s "
			    "allows at once (%lld), so it could never be "
			    "allowed; lower --cost or raise that limit's "
			    "count",
			    (long long)a->cost, (long long)l->count, per,
			    (long long)l->burst);
		}
		return answer_usage(ans,
		    "--cost: %lld is more than the %s of %lld, "
		    "so it could never be allowed; lower --cost "
		    "or raise %s",
		    (long long)a->cost,
		    l->algo->takes_burst ? "burst" : "limit",
		    (long long)l->burst,
		    l->algo->takes_burst ? "--burst" : "the limit");
	}
	return 0;
}

/*
 * The key's lockout as it stands at now: one begun later than now by more
 * than its own length (the clock was far ahead, or stepped far back) is
 * moved back by the difference, so it never lasts longer than twice its
 * length; a smaller step is waited out (see limit_carry()).  As a limit's
 * state does, a lockout moved back keeps how far (ahead), and is moved
 * forward again, all the way, once the clock is back within its length of
 * where it began: a step back and forward again does not cut it short.  1
 * if moved either way (save it).
 */
int
lockout_carry(struct lockout *k, int64_t now)
{
	int64_t by, len;

	if (k->until == 0 || k->until == LOCKOUT_NEVER)
		return 0;
	len = k->until - k->since;
	if (k->since > now && k->since - now > len) {
		by = k->since - now;
		k->ahead = k->ahead < TIME_MAX - by ? k->ahead + by : TIME_MAX;
		k->until = k->until - by > now ? k->until - by : now;
		k->since = now;
		return 1;
	}
	if (k->ahead == 0 || now < k->since + k->ahead - len)
		return 0;
	/* back where it began (limit_carry()) */
	if ((by = k->ahead) > 0 && k->until <= TIME_MAX + DURATION_MAX - by) {
		k->until += by;
		k->since += by;
	}
	k->ahead = 0;
	return 1;
}

/* us until a lockout ends (DURATION_MAX for one until reset). */
int64_t
lockout_left(const struct lockout *k, int64_t now)
{
	if (k->until == LOCKOUT_NEVER)
		return DURATION_MAX;
	return k->until > now ? k->until - now : 0;
}

/* Nonzero if every limit's algorithm waits by reservation. */
static int
all_reserve(const struct args *a)
{
	int i;

	for (i = 0; i < a->nlimits; i++)
		if (!a->limits[i].algo->reserves)
			return 0;
	return 1;
}

struct decide {
	const struct args *a;
	struct keywork *k;
	int dry;
	int64_t reserve; /* a bound on a reservation's wait; -1 none, -2 no */
};

/* The decision's transaction (invariant 1). */
static int
decide_body(struct ctx *c, void *arg, struct answer *ans)
{
	struct decide *x = arg;
	const struct args *a = x->a;
	struct keywork *k = x->k;
	struct decision *d = &k->d;
	struct lockout *lk = &k->lk;
	int64_t wait, t, back;
	int locked, lk_moved, ended, starts, waits;

	if (store_lockout_get(c->store, a->key, a->keylen, lk) == -1)
		return ctx_fail(c, ans);
	/* the decision's time is the one keystate_load() read, with the key */
	if (keystate_load(c, k, a->limits, a->nlimits, 0, ans) == -1)
		return -1;
	t = k->now = c->now;
	k->lk_started = 0;
	lk_moved = lockout_carry(lk, t);
	back = lk->ahead; /* on a clock stepped back, by so much */
	/* a lockout that has ended gives the whole allowance back */
	if ((ended = lk->until != 0 && lk->until <= t)) {
		keystate_forget(k);
		memset(lk, 0, sizeof(*lk));
	}
	keystate_carry(k, t);
	/* a state begun afresh while the clock is back (a limit new to the
	 * key, or the whole allowance an ended lockout gave back) is on the
	 * same stepped clock as the key's others: it keeps as far, to be
	 * moved forward with them when the clock is put right */
	if (keystate_ahead(k) > back)
		back = keystate_ahead(k);
	keystate_fresh_ahead(k, back);
	locked = lk->until > t;
	/* locked out: show the key as it is, nothing charged */
	keystate_decide(k, t, locked ? 0 : a->cost);
	if (locked) {
		/* its end gives the whole allowance back: at rest then */
		d->allowed = 0;
		d->retry_after = d->reset_after = lockout_left(lk, t);
	} else if (!d->allowed && x->reserve >= -1 && all_reserve(a) &&
	    (x->reserve == -1 || d->retry_after <= x->reserve)) {
		/* the first instant every limit allows it */
		wait = d->retry_after;
		keystate_decide(k, t + wait, a->cost);
		if (keystate_storable(k)) {
			d->retry_after = wait;
			t += wait;
		} else /* too far off for a state to hold: refused now */
			keystate_decide(k, t, a->cost);
	}
	if (!d->allowed && !locked && k->n > 1)
		keystate_refused(k, t); /* nothing was charged */
	/* a refusal is at rest no sooner than it may retry; a reservation's
	 * times are from the instant it wakes at, when it is printed */
	if (!d->allowed && d->reset_after < d->retry_after)
		d->reset_after = d->retry_after;
	/* a --wait that will sleep and try again is not refused (yet): it
	 * starts no lockout, as a reservation does not */
	waits = !d->allowed && !locked && x->reserve >= -1 &&
	    (x->reserve == -1 || d->retry_after <= x->reserve);
	if ((starts = !d->allowed && a->has_lockout && !locked &&
		    a->lockout != 0 && !waits)) {
		/* this refusal starts a lockout (check answers so too, and
		 * rolls it back with the rest) */
		k->lk_started = d->retry_after > 0 ? d->retry_after : 1;
		/* begun on a clock stepped back (the limits' states were
		 * moved back to it): as far from where they came from, so
		 * that the clock put right finds it as long as it is; on a
		 * clock a little back (a step the limits wait out), from the
		 * latest time the key has seen, and moved back at once if
		 * that is further ahead than its length */
		lk->since = t;
		lk->ahead = keystate_ahead(k);
		if (lk->ahead == 0 && keystate_latest(k) > t)
			lk->since = keystate_latest(k);
		lk->until = a->lockout == LOCKOUT_FOREVER
		    ? LOCKOUT_NEVER
		    : lk->since + a->lockout;
		lockout_carry(lk, t);
		lk_moved = 1;
		d->retry_after = d->reset_after = lockout_left(lk, t);
	}
	if (x->dry)
		return TXN_ROLLBACK;
	if (d->allowed) {
		if (keystate_save(c, k, SAVE_CHARGED, t, ans) == -1)
			return -1;
	} else {
		/* refused: nothing is charged, but a state moved back to
		 * the clock is kept, or it would move again */
		if (keystate_save(c, k, SAVE_MOVED, t, ans) == -1)
			return -1;
		/* a lockout's end gives the whole allowance back: forget
		 * the limits' states now, so that an ended lockout that gc
		 * or tidying forgets leaves nothing charged */
		if (starts && store_trim(c->store, a->key, a->keylen, 0) == -1)
			return ctx_fail(c, ans);
	}
	if (lk->until != 0
		? lk_moved &&
		    store_lockout_put(c->store, a->key, a->keylen, lk) == -1
		: ended && store_lockout_del(c->store, a->key, a->keylen) == -1)
		return ctx_fail(c, ans);
	/* one write in TIDY_EVERY forgets TIDY_ROWS rows at rest: the file
	 * stays bounded without anyone running gc, and a decision rarely
	 * pays for it (a batch tidies per group) */
	if (!c->batch && host_random() % TIDY_EVERY == 0 &&
	    store_tidy(c->store, c->now, TIDY_ROWS) == -1)
		return ctx_fail(c, ans);
	return 0;
}

/*
 * Decide on a's key under its limits and, unless dry, commit.  With
 * reserve >= -1 (a bound on the wait, -1 none), a refused request on
 * algorithms that reserve, which would be allowed within it, is reserved
 * instead: k->d.allowed is 1 and k->d.retry_after says how long to sleep
 * first.  0 with k filled, or -1 with the answer set.
 */
int
rate_decide(struct ctx *c, const struct args *a, int dry, int64_t reserve,
    struct keywork *k, struct answer *ans)
{
	struct decide x = { a, k, dry, reserve };

	if (rate_usable(a, ans) == -1)
		return -1;
	return txn_run(c, !dry, decide_body, &x, ans);
}

struct refund {
	const struct args *a;
	struct keywork *k;
	const struct keywork *ours; /* the decision that charged, or NULL */
	int reserved; /* it was a reservation, its time still to come */
};

/* Does every limit of k hold, as stored, what ours saved? */
static int
as_saved(const struct keywork *k, const struct keywork *ours)
{
	const struct kstate *now, *then;
	int i;

	if (k->n != ours->n)
		return 0;
	for (i = 0; i < k->n; i++) {
		now = &k->w[i].rec.state;
		then = &ours->w[i].next;
		if (!k->w[i].found ||
		    memcmp(now->v, then->v, sizeof(now->v)) != 0 ||
		    now->nslots != then->nslots ||
		    (now->nslots > 0 &&
			memcmp(now->slots, then->slots,
			    now->nslots * sizeof(*now->slots)) != 0))
			return 0;
	}
	return 1;
}

static int
refund_body(struct ctx *c, void *arg, struct answer *ans)
{
	struct refund *r = arg;

	/* keystate_load() reads the time, after the key */
	if (keystate_load(c, r->k, r->a->limits, r->a->nlimits, 0, ans) == -1)
		return -1;
	/* no one has written the key since: it goes back to what it was
	 * before the charge, exactly (a release alone left a hybrid key
	 * that spent its last unit in smooth mode, owing most of it) */
	if (r->ours != NULL && as_saved(r->k, r->ours))
		return keystate_restore(c, r->k, r->ours, ans);
	/* a reservation's time is in the future, and those who reserved
	 * after it sleep to times of their own: giving its units back
	 * would let the next caller have a time one of them has (twice
	 * the rate).  Its place stays empty. */
	if (r->reserved)
		return TXN_ROLLBACK;
	keystate_carry(r->k, c->now);
	keystate_release(r->k, c->now, r->a->cost);
	return keystate_save(c, r->k, SAVE_CHARGED, c->now, ans);
}

/*
 * Give back --cost on each of the key's limits, taken by the decision in
 * ours (NULL: not known): what run charged for a command that could not
 * be started, or, reserved, what a reservation took when its wait was cut
 * short.  A failure is only warned about.
 */
static void
refund(struct ctx *c, const struct args *a, const struct keywork *ours,
    int reserved)
{
	struct keywork k;
	struct refund r = { a, &k, ours, reserved };
	struct answer ans;

	keystate_init(&k, a->key, a->keylen);
	answer_init(&ans);
	if (txn_run(c, 1, refund_body, &r, &ans) == -1)
		log_msg("%s; the units were not given back", ans.msg);
	keystate_free(&k);
	answer_free(&ans);
}

/* What run charged (in charged, if known) for a command that could not be
 * started, back. */
void
rate_refund(struct ctx *c, const struct args *a, const struct keywork *charged)
{
	refund(c, a, charged, 0);
}

/*
 * --wait says once on stderr (unless -q) what it waits for, how long, and
 * at most how long: a CI log that sits still says why.
 */
static void
say_waiting(const struct ctx *c, const struct args *a, const struct keywork *k,
    int *said)
{
	char t[32], m[32];

	if (c->quiet || *said)
		return;
	*said = 1;
	output_human(t, sizeof(t), k->d.retry_after);
	if (a->wait_max >= 0)
		output_bound(m, sizeof(m), a->wait_max);
	log_key(a->key, a->keylen, " %s, waiting %s for it%s%s%s",
	    k->lk.until > k->now ? "locked out" : "throttled", t,
	    a->wait_max >= 0 ? " (--wait at most " : "",
	    a->wait_max >= 0 ? m : "", a->wait_max >= 0 ? ")" : "");
}

/*
 * Decide on a's key, waiting if --wait says so.  The exit status: 0
 * allowed (after any wait), 1 refused, 128 + N if signal N cut a wait
 * short; or -1 with the answer set.  k->d is the decision.
 */
int
rate_wait(struct ctx *c, const struct args *a, struct keywork *k,
    struct answer *ans)
{
	int64_t start = c->now, mono0 = clock_monotonic(), waited = 0, left;
	char t[32], m[32];
	int sig, said = 0;

	for (;;) {
		left = a->wait_max < 0 ? -1 : a->wait_max - waited;
		if (rate_decide(c, a, 0, a->has_wait ? left : -2, k, ans) == -1)
			return -1;
		if (k->d.allowed && k->d.retry_after > 0) {
			/* a reservation: sleep to it, or give it back */
			say_waiting(c, a, k, &said);
			if ((sig = ctx_sleep(c, k->d.retry_after)) != 0) {
				c->now = start + clock_monotonic() - mono0;
				refund(c, a, k, 1);
				return 128 + sig;
			}
			k->d.retry_after = 0;
		}
		if (k->d.allowed || !a->has_wait)
			return k->d.allowed ? EXIT_ALLOWED : EXIT_REFUSED;
		if (k->d.retry_after >= DURATION_MAX) {
			/* no wait ends it: a lockout until reset, or a limit
			 * near the longest duration */
			if (k->lk.until == LOCKOUT_NEVER)
				answer_say_key(ans, MSG_INFO, a->key, a->keylen,
				    " " LOCKED_FOR_GOOD "; not waiting");
			else
				answer_say_key(ans, MSG_INFO, a->key, a->keylen,
				    " throttled, retry never; not "
				    "waiting");
			return EXIT_REFUSED;
		}
		if (k->lk_started) {
			/* refused for a wait past --wait, which started the
			 * lockout: final, not a wait through the lockout to
			 * the allowance its end gives back */
			char l[32];

			output_human(t, sizeof(t), k->lk_started);
			output_bound(m, sizeof(m), a->wait_max);
			output_human(l, sizeof(l), k->d.retry_after);
			/* (one shape: "KEY locked out, retry in T") */
			answer_say_key(ans, MSG_INFO, a->key, a->keylen,
			    " locked out, retry in %s: the wait of %s was "
			    "more than --wait %s allows",
			    l, t, m);
			return EXIT_REFUSED;
		}
		if (left >= 0 && k->d.retry_after > left) {
			output_human(t, sizeof(t), k->d.retry_after);
			output_bound(m, sizeof(m), a->wait_max);
			answer_say_key(ans, MSG_INFO, a->key, a->keylen,
			    " %s, retry in %s: more than --wait %s allows",
			    k->lk.until > k->now ? "locked out" : "throttled",
			    t, m);
			return EXIT_REFUSED;
		}
		say_waiting(c, a, k, &said);
		if ((sig = ctx_sleep(c, k->d.retry_after)) != 0)
			return 128 + sig;
		waited = clock_monotonic() - mono0;
		c->now = start + waited;
	}
}

/*
 * The answer to a decision: its record, exit 0 or 1, and when refused
 * (and nothing has said so yet) the throttled line.
 */
void
rate_answer(const struct args *a, const struct keywork *k, struct answer *ans)
{
	char t[48];

	keystate_record(ans, k, 1, a->cost);
	if (ans->rc == 0)
		ans->rc = k->d.allowed ? EXIT_ALLOWED : EXIT_REFUSED;
	if (!k->d.allowed && ans->msg_kind == MSG_NONE) {
		if (k->lk.until == LOCKOUT_NEVER)
			answer_say_key(ans, MSG_INFO, a->key, a->keylen,
			    " " LOCKED_FOR_GOOD);
		else {
			output_retry(t, sizeof(t), k->d.retry_after);
			answer_say_key(ans, MSG_INFO, a->key, a->keylen,
			    " %s, %s",
			    k->lk.until > k->now ? "locked out" : "throttled",
			    t);
		}
	}
}
