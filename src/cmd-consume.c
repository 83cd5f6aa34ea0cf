/*
 * cmd-consume.c: consume and check, with compound limits, lockouts and
 * --wait.
 *
 * A decision is one transaction: begin, load every limit of the key,
 * decide each, and only if all allow, save them all (a limit that refuses
 * leaves every other uncharged); commit; print.  check is the same code as
 * a dry run in a read transaction that is rolled back.  Nothing is printed
 * until the decision is committed, so a script is never told "allowed"
 * for a decision that was not.
 *
 * --lockout: once a request is refused, the key stays refused for that
 * long from that moment (the refusal writes the lockout; nothing else).
 *
 * --wait on GCRA limits waits by reservation: in the same transaction as
 * the refusal, the request is decided again at the instant it would be
 * allowed and that state is saved, so callers queue in arrival order at
 * the limit's rate; the caller then sleeps on the monotonic clock.  If it
 * is interrupted first, the units are given back.  Other algorithms (and
 * lockouts) are polled: sleep until retry_after, then try again.
 */
#include <string.h>

#include "throttle.h"

/* Combine the limits' decisions into one: all must allow. */
static void
combine(const struct work *w, int n, struct decision *d)
{
	int i;

	memset(d, 0, sizeof(*d));
	d->allowed = 1;
	d->remaining = INT64_MAX;
	for (i = 0; i < n; i++) {
		if (!w[i].d.allowed) {
			d->allowed = 0;
			if (w[i].d.retry_after > d->retry_after)
				d->retry_after = w[i].d.retry_after;
		}
		if (w[i].d.remaining < d->remaining)
			d->remaining = w[i].d.remaining;
		if (w[i].d.reset_after > d->reset_after)
			d->reset_after = w[i].d.reset_after;
	}
}

/* Load every limit of the key, then read the decision's time. */
static int
load_all(struct opts *o, struct store *st, struct work *w, char *err,
    size_t errlen)
{
	int i;

	for (i = 0; i < o->nlimits; i++)
		if (cmd_prepare(o, st, i, &w[i], err, errlen) == -1)
			return -1;
	if (cmd_now(o, st, err, errlen) == -1)
		return -1;
	for (i = 0; i < o->nlimits; i++)
		cmd_carry(o, &w[i]);
	return 0;
}

/* Decide every limit for cost at time at. */
static void
decide_all(struct opts *o, int64_t at, int64_t cost, struct work *w)
{
	int i;

	for (i = 0; i < o->nlimits; i++) {
		w[i].next.nslots = 0;
		w[i].lim.algo->decide(&w[i].lim, &w[i].cur, at, cost, &w[i].d,
		    &w[i].next);
	}
}

static int
all_gcra(const struct opts *o)
{
	int i;

	for (i = 0; i < o->nlimits; i++)
		if (o->limits[i].algo != &algo_gcra)
			return 0;
	return 1;
}

/* 0 if the request can be decided, else the usage error's exit code. */
static int
usable(struct opts *o, int dry)
{
	int i;

	if (o->nlimits == 0)
		return cmd_usage(o,
		    "%s: no limit for this key; give one, as in --limit "
		    "5/15m, or set a policy for it (throttle policy set "
		    "NAME --limit ...)",
		    dry ? "check" : "consume");
	for (i = 0; i < o->nlimits; i++)
		if (o->cost > o->limits[i].burst)
			return cmd_usage(o,
			    "--cost: %lld is more than the %s of %lld, "
			    "so it could never be allowed; lower --cost "
			    "or raise %s",
			    (long long)o->cost,
			    o->limits[i].algo->takes_burst ? "burst" : "limit",
			    (long long)o->limits[i].burst,
			    o->limits[i].algo->takes_burst ? "--burst"
							   : "the limit");
	return 0;
}

/*
 * The key's lockout as it stands at now: one saved at a later time (the
 * clock was ahead, or stepped back) is moved back by the difference, so it
 * never lasts longer than it did when it began.  1 if moved (save it).
 */
static int
lockout_carry(struct lockout *k, int64_t now)
{
	int64_t back;

	if (k->until == 0 || k->since <= now)
		return 0;
	back = k->since - now;
	if (k->until != LOCKOUT_NEVER)
		k->until = k->until - back > now ? k->until - back : now;
	k->since = now;
	return 1;
}

/*
 * Decide on the command's key at its time (read once the transaction has
 * begun) under its limits and, unless dry, commit.  With reserve >= -1 (a
 * bound on the wait, -1 none), a refused GCRA request that would be
 * allowed within it is reserved instead: d->allowed is 1 and
 * d->retry_after says how long to sleep first.  0 with w and *d filled, or
 * -1 with the exit code of an already reported store error in *rc.
 */
int
cmd_consume_decide(struct opts *o, int dry, int64_t reserve, struct work *w,
    struct decision *d, int *rc)
{
	struct store *st;
	struct lockout lk;
	char err[STORE_ERR_MAX];
	int64_t wait, t;
	int i, r, locked, lk_moved;

	if ((*rc = usable(o, dry)) != 0)
		return -1;
	if ((st = cmd_open(o, rc)) == NULL)
		return -1;
	for (;;) {
		/* each try, after a store lost a race, decides afresh */
		memset(&lk, 0, sizeof(lk));
		if (store_begin(st, !dry) == -1 ||
		    (o->has_lockout &&
			store_lockout_get(st, o->key, o->keylen, &lk) == -1)) {
			*rc = cmd_fail(o, st, store_error(st));
			return -1;
		}
		if (load_all(o, st, w, err, sizeof(err)) == -1) {
			*rc = cmd_fail(o, st, err);
			return -1;
		}
		t = o->now;
		lk_moved = lockout_carry(&lk, t);
		locked = lk.until > t;
		/* locked out: show the key as it is, nothing charged */
		decide_all(o, t, locked ? 0 : o->cost, w);
		combine(w, o->nlimits, d);
		if (locked) {
			d->allowed = 0;
			d->retry_after = lk.until == LOCKOUT_NEVER
			    ? DURATION_MAX
			    : lk.until - t;
		} else if (!d->allowed && reserve >= -1 && all_gcra(o) &&
		    (reserve == -1 || d->retry_after <= reserve)) {
			/* the first instant every limit allows it */
			wait = d->retry_after;
			decide_all(o, t + wait, o->cost, w);
			combine(w, o->nlimits, d);
			d->retry_after = wait;
			t += wait;
		}
		if (d->reset_after < d->retry_after)
			d->reset_after = d->retry_after;
		if (dry) {
			store_rollback(st);
			break;
		}
		if (d->allowed) {
			for (i = 0; i < o->nlimits; i++)
				if (cmd_save(o, st, i, &w[i].lim, &w[i].next,
					t + w[i].d.reset_after) == -1)
					goto fail;
			/* the key had more limits than it has now */
			if (w[o->nlimits - 1].rec.more &&
			    store_trim(st, o->key, o->keylen, o->nlimits) == -1)
				goto fail;
		} else {
			/* refused: nothing is charged, but a state moved back
			 * to the clock is kept, or it would move again */
			for (i = 0; i < o->nlimits; i++)
				if (w[i].moved &&
				    cmd_save(o, st, i, &w[i].lim, &w[i].cur,
					t + w[i].d.reset_after) == -1)
					goto fail;
			if (o->has_lockout && !locked && o->lockout > 0) {
				lk.since = t;
				lk.until = t + o->lockout;
				lk_moved = 1;
				d->retry_after = d->reset_after = o->lockout;
			}
		}
		if (lk_moved &&
		    store_lockout_put(st, o->key, o->keylen, &lk) == -1)
			goto fail;
		/* one write in TIDY_EVERY forgets TIDY_ROWS rows at rest:
		 * the file stays bounded without anyone running gc, and a
		 * decision rarely pays for it (a batch tidies per group) */
		if ((!o->batch && host_random() % TIDY_EVERY == 0 &&
			store_tidy(st, o->now, TIDY_ROWS) == -1) ||
		    (r = store_commit(st)) == -1)
			goto fail;
		if (r != STORE_RETRY)
			break;
	}
	store_close(st);
	return 0;
fail:
	*rc = cmd_fail(o, st, store_error(st));
	return -1;
}

static void free_work(struct work *);

/*
 * Give back --cost on each of the key's limits: what a reservation took
 * when its wait was cut short, or what run charged for a command that
 * could not be started.  A failure is only warned about.
 */
void
cmd_consume_refund(struct opts *o)
{
	struct work w[LIMITS_MAX];
	struct store *st;
	struct kstate back;
	char err[STORE_ERR_MAX];
	int i, r, rc;

	memset(w, 0, sizeof(w));
	if ((st = cmd_open(o, &rc)) == NULL)
		return;
	do {
		if (store_begin(st, 1) == -1)
			break;
		for (i = 0; i < o->nlimits; i++) {
			if (cmd_prepare(o, st, i, &w[i], err, sizeof(err)) != 1)
				continue;
			cmd_carry(o, &w[i]);
			back = w[i].next;
			w[i].lim.algo->release(&w[i].lim, &w[i].cur, o->now,
			    o->cost, &back);
			cmd_save(o, st, i, &w[i].lim, &back, w[i].rec.rest_at);
		}
		if ((r = store_commit(st)) == -1) {
			log_msg("%s; the units were not given back",
			    store_error(st));
			break;
		}
	} while (r == STORE_RETRY);
	store_rollback(st);
	store_close(st);
	free_work(w);
}

static void
free_work(struct work *w)
{
	int i;

	for (i = 0; i < LIMITS_MAX; i++)
		cmd_unprepare(&w[i]);
}

/*
 * Decide on the command's key, waiting if --wait says so: 0 allowed (after
 * any wait), 1 refused, or another exit code.  The decision is printed.
 */
int
cmd_consume_wait(struct opts *o, int print, struct decision *out)
{
	struct work w[LIMITS_MAX];
	struct decision d;
	int64_t start = o->now, mono0 = clock_monotonic(), waited = 0, left;
	char t[32];
	int rc, sig;

	memset(w, 0, sizeof(w));
	for (;;) {
		left = o->wait_max < 0 ? -1 : o->wait_max - waited;
		if (cmd_consume_decide(o, 0, o->has_wait ? left : -2, w, &d,
			&rc) == -1) {
			free_work(w);
			return rc;
		}
		if (d.allowed && d.retry_after > 0) {
			/* a reservation: sleep to it, or give it back */
			if ((sig = clock_sleep(d.retry_after)) != 0) {
				o->now = start + clock_monotonic() - mono0;
				cmd_consume_refund(o);
				free_work(w);
				return 128 + sig;
			}
			d.retry_after = 0;
		}
		if (d.allowed || !o->has_wait)
			break;
		if (left >= 0 && d.retry_after > left) {
			output_seconds(t, sizeof(t), d.retry_after);
			if (!o->quiet)
				log_key(o->key, o->keylen,
				    " throttled: the wait would be %ss, "
				    "more than --wait allows",
				    t);
			if (print) {
				/* the line above says it: no second one */
				struct opts q = *o;

				q.quiet = 1;
				cmd_print(&q, w, o->nlimits, o->cost, &d);
			}
			*out = d;
			free_work(w);
			return EXIT_REFUSED;
		}
		if ((sig = clock_sleep(d.retry_after)) != 0) {
			free_work(w);
			return 128 + sig;
		}
		waited = clock_monotonic() - mono0;
		o->now = start + waited;
	}
	if (print)
		cmd_print(o, w, o->nlimits, o->cost, &d);
	*out = d;
	free_work(w);
	return d.allowed ? EXIT_ALLOWED : EXIT_REFUSED;
}

static int
decide_exec(struct opts *o, int dry)
{
	struct work w[LIMITS_MAX];
	struct decision d;
	int rc;

	memset(w, 0, sizeof(w));
	if (cmd_consume_decide(o, dry, -2, w, &d, &rc) == -1) {
		free_work(w);
		return rc;
	}
	cmd_print(o, w, o->nlimits, o->cost, &d);
	free_work(w);
	return d.allowed ? EXIT_ALLOWED : EXIT_REFUSED;
}

static int
consume_exec(struct opts *o)
{
	struct decision d;

	return o->has_wait ? cmd_consume_wait(o, 1, &d) : decide_exec(o, 0);
}

static int
check_exec(struct opts *o)
{
	return decide_exec(o, 1);
}

#define DECIDE_ARGS                                                            \
	"KEY --limit N/PERIOD [--limit ...] [--algorithm NAME] [--burst B] "   \
	"[--granularity G] [--cost N] [--lockout D]"
#define DECIDE_OPTS                                                            \
	(CMDOPT_LIMIT | CMDOPT_BURST | CMDOPT_ALGORITHM | CMDOPT_COST |        \
	    CMDOPT_GRANULARITY | CMDOPT_LOCKOUT)

const struct cmd_entry cmd_consume_entry = {
	.name = "consume",
	.args = DECIDE_ARGS " [--wait[=MAX]]",
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
