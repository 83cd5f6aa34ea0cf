/*
 * limit.c: a key's limit, from the command line or as stored with the key,
 * checked before any algorithm sees it, and carried across a change.
 *
 * Invariants an algorithm may rely on for a limit that passed
 * limit_validate(): 1 <= count, 1 <= burst, 1 <= period <= DURATION_MAX,
 * the delay tolerance burst * period / count <= DURATION_MAX, so products
 * of these with times fit in 128 bits; burst == count for an algorithm
 * without bursts, granularity == 0 for one without sub-windows; and
 * whatever the algorithm's own limit_ok() asks.
 */
#include <string.h>

#include "throttle.h"

/* 0 if the limit is one its algorithm can work with. */
int
limit_validate(const struct limit *l, const char **errstr)
{
	if (l->algo == NULL) {
		*errstr = "has no algorithm";
		return -1;
	}
	if (l->count < 1) {
		*errstr = "allows nothing (N must be at least 1)";
		return -1;
	}
	if (l->period < 1 || l->period > DURATION_MAX) {
		*errstr = "has a period out of range";
		return -1;
	}
	if (l->burst < 1 || (!l->algo->takes_burst && l->burst != l->count)) {
		*errstr = "has a burst out of range";
		return -1;
	}
	if ((i128)l->burst * l->period / l->count > DURATION_MAX) {
		*errstr = "has a burst that would take more than 146000 years "
			  "to refill";
		return -1;
	}
	if (!l->algo->takes_granularity && l->granularity != 0) {
		*errstr = "has a granularity, which only sliding-window takes";
		return -1;
	}
	if (l->algo->limit_ok != NULL && l->algo->limit_ok(l, errstr) == -1)
		return -1;
	return 0;
}

/*
 * The longest a limit can ask a caller to wait from rest, in us: a
 * period, or the time to earn back a burst larger than N.
 */
int64_t
limit_horizon(const struct limit *l)
{
	/* burst * period / count, rounded up: <= DURATION_MAX (above) */
	int64_t tau =
	    (int64_t)(((i128)l->burst * l->period + l->count - 1) / l->count);

	return (tau > l->period ? tau : l->period) + l->granularity;
}

/* Nonzero if two limits are the same in every parameter. */
int
limit_same(const struct limit *a, const struct limit *b)
{
	return a->algo == b->algo && a->count == b->count &&
	    a->period == b->period && a->burst == b->burst &&
	    a->granularity == b->granularity;
}

/*
 * The state to decide on at now under limit l, given what a key has stored
 * (rec, if found), written into out (with room for rec's slots).  The same
 * algorithm carries the state over, converting it if the parameters
 * changed (unless it is at rest under its own: then as none); another
 * algorithm starts the key afresh.  A state saved later
 * than now by more than the limit's horizon (the clock was far ahead
 * then, or has stepped far back) is first moved back by the difference,
 * so the key reads now as it read when it was saved: never refused for
 * longer than twice its own limit allows from now.  A smaller step is
 * left to the algorithm, which waits it out: moving the state for every
 * small step back (racing callers, NTP slewing) would hand back a little
 * allowance each time the clock wobbles.
 *
 * A state moved back keeps, in *ahead (saved as rec.ahead), how far it
 * was moved, so that written_at + ahead is the clock it came from, and
 * time that passes on the clock stepped back is counted on it.  Once the
 * clock is back within the horizon of that (stepped forward again, as a
 * clock put right is), the state is moved forward by all of it, so that
 * what was charged before the step and during it still counts: a step
 * back and forward again admits no more than the limit.  A clock not
 * quite back there is then a step back smaller than the horizon, waited
 * out as any is; moving the state only as far as now would hand the gap
 * back as time that passed.  (If the clock instead runs on until it gets
 * there, the key may wait up to twice its horizon then, as after a step
 * back: it cannot tell the two apart.)
 *
 * 1 if the state was moved either way (save it even on a refusal, or the
 * next call moves it again), else 0.  A conversion is not saved by a
 * refusal: it is made again, the same, from the same record, until the
 * record is at rest under its own limit.
 */
int
limit_carry(const struct limit *l, const struct keyrec *rec, int found,
    int64_t now, struct kstate *out, int64_t *ahead)
{
	int64_t horizon = limit_horizon(l), by;
	size_t i;

	memset(out->v, 0, sizeof(out->v));
	out->nslots = 0;
	*ahead = 0;
	if (!found || rec->limit.algo != l->algo)
		return 0;
	/* a state at rest under its own limit may be forgotten at any
	 * time (gc, tidying): under another it must read as none, as a
	 * conversion from when it was saved could find units in it */
	if (!limit_same(&rec->limit, l) && rec->rest_at <= now)
		return 0;
	if (!limit_same(&rec->limit, l))
		l->algo->convert(&rec->limit, l, &rec->state,
		    rec->written_at >= 0 ? rec->written_at : now, out);
	else {
		algo_copy_fields(out, &rec->state);
		for (i = 0; i < rec->state.nslots; i++)
			out->slots[out->nslots++] = rec->state.slots[i];
	}
	if (rec->written_at > now && rec->written_at - now > horizon) {
		by = rec->written_at - now;
		l->algo->shift(l, out, -by);
		*ahead =
		    rec->ahead < TIME_MAX - by ? rec->ahead + by : TIME_MAX;
		return 1;
	}
	if (rec->ahead == 0)
		return 0;
	if (now < rec->written_at + rec->ahead - horizon) {
		*ahead = rec->ahead; /* still on the clock it stepped back to */
		return 0;
	}
	/* back where it came from: at most the horizon ahead of now */
	by = rec->ahead;
	if (by > 0) {
		l->algo->shift(l, out, by);
		/* a record no throttle wrote (its times far off the clock
		 * it says it was saved at): left where it was */
		if (l->algo->valid(l, out) == -1)
			l->algo->shift(l, out, -by);
	}
	return 1;
}

/*
 * The decisions of a key's n limits as one, in *out: allowed only if
 * every limit allows, the fewest units remaining, the longest retry, and
 * the binding limit's reset (so an answer's limit, period, retry_after
 * and reset_after are all of one limit).  Returns the binding limit: the
 * one that waits longest, of those the one with the fewest remaining, and
 * of those the one longest from rest, so that the order the limits are
 * written in matters only between limits tied on all three (0 when n is
 * 0).
 */
int
limit_combine(const struct decision *ds, int n, struct decision *out)
{
	int i, bind = 0;

	memset(out, 0, sizeof(*out));
	out->allowed = 1;
	out->remaining = n > 0 ? INT64_MAX : 0;
	for (i = 0; i < n; i++) {
		if (!ds[i].allowed) {
			out->allowed = 0;
			if (ds[i].retry_after > out->retry_after)
				out->retry_after = ds[i].retry_after;
		}
		if (ds[i].remaining < out->remaining)
			out->remaining = ds[i].remaining;
		if (ds[i].retry_after > ds[bind].retry_after ||
		    (ds[i].retry_after == ds[bind].retry_after &&
			(ds[i].remaining < ds[bind].remaining ||
			    (ds[i].remaining == ds[bind].remaining &&
				ds[i].reset_after > ds[bind].reset_after))))
			bind = i;
	}
	if (n > 0)
		out->reset_after = ds[bind].reset_after;
	return bind;
}

/* 0 if a stored record is one throttle could have written. */
int
limit_check_record(const struct keyrec *rec, const char **errstr)
{
	if (limit_validate(&rec->limit, errstr) == -1)
		return -1;
	if ((!rec->limit.algo->takes_granularity && rec->state.nslots != 0) ||
	    rec->limit.algo->valid(&rec->limit, &rec->state) == -1 ||
	    rec->rest_at < 0 || rec->written_at < -1 ||
	    rec->written_at > TIME_MAX || rec->ahead < 0 ||
	    rec->ahead > TIME_MAX) {
		*errstr = "has a state out of range";
		return -1;
	}
	return 0;
}

/*
 * Settle the limits a command line gave (ls) into out[] and *n: each takes
 * the algorithm given (default: the first of the table), --burst (one
 * limit only; else its N) and --granularity (else the algorithm's
 * default), and must validate.  cmd names the command for messages.  0,
 * or -1 with a usage message in err that names the option at fault.
 */
int
limit_settle(const struct limitspec *ls, const char *cmd, struct limit *out,
    int *n, char *err, size_t errlen)
{
	const struct algo *algo = ls->algo != NULL ? ls->algo : algo_table[0];
	const char *why, *why2;
	struct limit *l;
	char names[128];
	int i;

	*n = 0;
	if ((ls->has_burst || ls->algo != NULL || ls->has_granularity) &&
	    ls->n == 0) {
		snprintf(err, errlen,
		    "%s: %s goes with --limit; give the limit "
		    "too",
		    cmd,
		    ls->has_burst             ? "--burst"
			: ls->has_granularity ? "--granularity"
					      : "--algorithm");
		return -1;
	}
	if (ls->has_burst && ls->n > 1) {
		snprintf(err, errlen,
		    "--burst: applies to one --limit; with several, each "
		    "limit's burst is its own N");
		return -1;
	}
	for (i = 0; i < ls->n; i++) {
		l = &out[i];
		memset(l, 0, sizeof(*l));
		l->algo = algo;
		l->count = ls->count[i];
		l->period = ls->period[i];
		if (ls->has_burst && !algo->takes_burst) {
			algo_names_with(1, names, sizeof(names));
			snprintf(err, errlen,
			    "--burst: %s has no burst (only %s %s); leave "
			    "--burst out",
			    algo->name, names,
			    strchr(names, ' ') ? "do" : "does");
			return -1;
		}
		if (ls->has_granularity && !algo->takes_granularity) {
			algo_names_with(0, names, sizeof(names));
			snprintf(err, errlen,
			    "--granularity: %s has no sub-windows (only %s "
			    "%s); leave --granularity out",
			    algo->name, names,
			    strchr(names, ' ') ? "do" : "does");
			return -1;
		}
		l->burst = ls->has_burst ? ls->burst : l->count;
		l->granularity = !algo->takes_granularity ? 0
		    : ls->has_granularity
		    ? ls->granularity
		    : algo->default_granularity(l->period);
		if (limit_validate(l, &why) == -1) {
			struct limit plain = *l;

			plain.burst = l->count;
			if (ls->has_burst && limit_validate(&plain, &why2) == 0)
				/* the limit is fine with its own N */
				snprintf(err, errlen,
				    "--burst: %lld with --limit '%s': the "
				    "limit %s; give a smaller --burst",
				    (long long)ls->burst, ls->text[i], why);
			else if (ls->has_granularity)
				snprintf(err, errlen,
				    "--granularity: '%s' with --limit '%s': %s",
				    ls->granularity_text, ls->text[i], why);
			else
				snprintf(err, errlen, "--limit: '%s' %s",
				    ls->text[i], why);
			return -1;
		}
	}
	*n = ls->n;
	return 0;
}
