/*
 * algo-hybrid.c: the hybrid quota-linear limiter (seed 001).
 *
 * Two modes.  Bursty: a client may spend a whole quota of N units at once
 * within a fixed window of PERIOD that starts with its first request.
 * Spending the last unit switches to smooth mode with a negative bucket, so
 * nothing more is admitted before that window would have ended; from then
 * on the bucket earns N units per PERIOD, evenly, and the client is back in
 * bursty mode once it holds a whole quota again.  So a client sending at
 * twice the permitted rate gets at most N in its first window (a linear
 * limiter such as GCRA lets it have nearly 2N), while a quiet client still
 * gets its bursts.
 *
 * Tokens are scaled by PERIOD in microseconds, so every quantity is an
 * integer: one unit is PERIOD token-us, and the bucket earns N token-us per
 * microsecond.  The edges of the seed's examples hold exactly.
 *
 * State (struct kstate):
 *	v[0]	mode: 0 at rest (no state), 1 bursty, 2 smooth
 *	v[1]	bursty: when the window started; smooth: the last update (us)
 *	v[2]	the bucket, in units * PERIOD; whole units in bursty mode,
 *		v[2] < N * PERIOD; at least 0 in bursty mode and -N * PERIOD
 *		in smooth mode, unless a larger limit used more (invariant
 *		5) or a window that started after now left more to pay
 *		(invariant 4)
 *
 * Invariants:
 *	1. A refused request changes nothing.  (The seed also saves the smooth
 *	   bucket's growth on a refusal; growth is linear in time, so computing
 *	   it later from the older time gives the same bucket.)
 *	2. A request is allowed the instant the bucket holds its cost.
 *	3. A key whose bucket is full is saved as at rest (all zero).
 *	4. A state whose time is later than now (a clock that stepped back,
 *	   racing callers) keeps it: a bursty window keeps its start, and a
 *	   smooth bucket owes what it has not earned by now.  Taking it as
 *	   written now would end the window, or start the earning, that
 *	   much sooner once the clock is right again: a step back and
 *	   forward admitted more than the limit.  The time is taken at most
 *	   a period ahead (steps back that add up, each within the
 *	   horizon), so the next request waits at most two periods and a
 *	   little more, and the key is at rest within three; a step back
 *	   beyond the key's horizon is moved back with the clock before it
 *	   gets here (limit_carry()).
 *	5. A change of limit keeps the bucket's debt whole, even below -N *
 *	   PERIOD of a smaller limit: capped, it was paid off sooner, and a
 *	   request at cost 0, or a release, saved it so.
 */
#include "throttle.h"

enum { AT_REST, BURSTY, SMOOTH };

struct hstate {
	int mode;
	int64_t time;
	i128 bucket;
};

static i128
full(const struct limit *l)
{
	return (i128)l->count * l->period;
}

/* The state at now, before this request: seed 001's first clauses. */
static struct hstate
advance(const struct limit *l, const struct kstate *s, int64_t now)
{
	struct hstate h = { (int)s->v[0], s->v[1], s->v[2] };

	/* invariant 4, no further ahead than a period (steps back that
	 * add up, each within the horizon) */
	if (h.mode != AT_REST && h.time - now > l->period)
		h.time = now + l->period;
	if (h.mode == SMOOTH && now >= h.time) {
		h.bucket += ((i128)now - h.time) * l->count;
		h.time = now;
		if (h.bucket >= full(l))
			h.mode = AT_REST;
	} else if (h.mode == SMOOTH) {
		/* what it has not earned by now, as debt (at most a period's
		 * earnings: its time is at most a period ahead) */
		h.bucket -= ((i128)h.time - now) * l->count;
		h.time = now;
	}
	if (h.mode == AT_REST ||
	    (h.mode == BURSTY && h.time + l->period <= now)) {
		h.mode = BURSTY;
		h.time = now;
		h.bucket = full(l);
	}
	return h;
}

static i128
ceil_div(i128 a, i128 b)
{
	return a <= 0 ? 0 : (a + b - 1) / b;
}

/* A wait in us, no longer than a duration can be. */
static int64_t
wait_us(i128 w)
{
	return w > DURATION_MAX ? DURATION_MAX : (int64_t)w;
}

static void
save(const struct limit *l, const struct hstate *h, struct kstate *next)
{
	/* the deepest debt a state holds: a bursty one in whole units */
	i128 lowest = h->mode == BURSTY
	    ? -(i128)(INT64_MAX / l->period) * l->period
	    : -(i128)INT64_MAX;

	if (h->mode == BURSTY && h->bucket >= full(l)) {
		next->v[0] = next->v[1] = next->v[2] = 0;
		return;
	}
	next->v[0] = h->mode;
	next->v[1] = h->time;
	next->v[2] = (int64_t)(h->bucket < lowest ? lowest : h->bucket);
}

static void
hybrid_decide(const struct limit *l, const struct kstate *s, int64_t now,
    int64_t cost, struct decision *d, struct kstate *next)
{
	struct hstate h = advance(l, s, now);
	i128 want = (i128)cost * l->period;

	algo_copy_fields(next, s);
	d->allowed = cost == 0 || h.bucket >= want;
	if (d->allowed && cost > 0) {
		if (h.mode == BURSTY && h.bucket == want) {
			/* The last units: smooth mode, with a penalty that
			 * holds everything back until the window ends, plus
			 * one unit for the next request then. */
			h.bucket =
			    -((i128)h.time + l->period - now) * l->count +
			    l->period;
			h.time = now;
			h.mode = SMOOTH;
		} else
			h.bucket -= want;
		save(l, &h, next);
	}
	d->retry_after = 0;
	if (!d->allowed)
		d->retry_after = h.mode == BURSTY
		    ? h.time + l->period - now
		    : wait_us(ceil_div(want - h.bucket, l->count));
	d->remaining = h.bucket <= 0 ? 0 : (int64_t)(h.bucket / l->period);
	if (h.mode == BURSTY)
		d->reset_after =
		    h.bucket >= full(l) ? 0 : h.time + l->period - now;
	else
		d->reset_after =
		    wait_us(ceil_div(full(l) - h.bucket, l->count));
}

static void
hybrid_release(const struct limit *l, const struct kstate *s, int64_t now,
    int64_t cost, struct kstate *next)
{
	struct hstate h = advance(l, s, now);

	algo_copy_fields(next, s);
	h.bucket += (i128)cost * l->period;
	if (h.bucket > full(l))
		h.bucket = full(l);
	if (h.mode == SMOOTH && h.bucket >= full(l))
		h.mode = BURSTY;
	save(l, &h, next);
}

static i128
floor_div(i128 a, i128 b)
{
	return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/*
 * A smooth bucket h converted by what it owes at at (when it was saved),
 * not by time: the units it has yet to earn back then, each as long to
 * earn as a new unit, up to 2N - 1 of the new N (what a whole quota
 * taken at once owes: the quota, and the window's penalty but the unit
 * it leaves for the next request).  1 and *out set if that ends later than full_at, when
 * the bucket converted by time would be full again; else 0.
 */
static int
owe_units(const struct limit *old, const struct limit *new,
    const struct hstate *h, int64_t at, i128 full_at, struct hstate *out)
{
	int64_t t0 = h->time > at ? h->time : at;
	i128 bucket = h->bucket + ((i128)t0 - h->time) * old->count;
	i128 owed, debt;

	if (bucket >= full(old))
		return 0;
	/* owed, in old units * PERIOD: a unit is PERIOD token-us */
	owed = full(old) - bucket;
	if (owed > (2 * (i128) new->count - 1) * old->period)
		owed = (2 * (i128) new->count - 1) * old->period;
	debt = owed / old->period * new->period +
	    ceil_div(owed % old->period * new->period, old->period);
	if ((i128)t0 + ceil_div(debt, new->count) <= full_at)
		return 0;
	out->mode = SMOOTH;
	out->time = t0;
	out->bucket = full(new) - debt;
	return 1;
}

/*
 * Across a change of limit (invariant 5), a bursty window keeps its start
 * and the units it has used, so what is left may be below zero under a
 * smaller N; a smooth bucket keeps the time it has to earn before it is
 * full again, or, under a limit whose units take longer to earn (10/1h to
 * 10/10h), what it owes in units if that is more (owe_units()).  Either
 * comes back whole under the first limit, so changing a key's limit and
 * back admits no more than the first limit would have.
 */
static void
hybrid_convert(const struct limit *old, const struct limit *new,
    const struct kstate *s, int64_t at, struct kstate *next)
{
	struct hstate h = { (int)s->v[0], s->v[1], s->v[2] };
	struct hstate owed;
	i128 used, rest;

	algo_copy_fields(next, s);
	if (h.mode == AT_REST)
		return;
	if (h.mode == BURSTY) {
		used = old->count - floor_div(h.bucket, old->period);
		h.bucket = ((i128) new->count - used) * new->period;
	} else {
		rest = ceil_div(full(old) - h.bucket, old->count);
		if ((i128) new->period * old->count >
		    (i128)old->period *new->count &&owe_units(old, new, &h, at,
			h.time + rest, &owed))
			h = owed;
		else {
			h.bucket = full(new) - rest * new->count;
			if (rest == 0)
				h.mode = BURSTY; /* full: saved as at rest */
		}
	}
	if (h.bucket > full(new))
		h.bucket = full(new);
	save(new, &h, next);
}

static void
hybrid_shift(const struct limit *l, struct kstate *s, int64_t delta)
{
	(void)l;
	if (s->v[0] == AT_REST)
		return;
	s->v[1] = (i128)s->v[1] + delta < 0 ? 0 : s->v[1] + delta;
}

static int
hybrid_valid(const struct limit *l, const struct kstate *s)
{
	if (s->v[0] == AT_REST)
		return s->v[1] == 0 && s->v[2] == 0 ? 0 : -1;
	if (s->v[0] != BURSTY && s->v[0] != SMOOTH)
		return -1;
	if (s->v[1] < 0 || s->v[1] > TIME_MAX)
		return -1;
	if (s->v[2] >= full(l)) /* a debt may be as deep as a larger limit's */
		return -1;
	if (s->v[0] == BURSTY && s->v[2] % l->period != 0)
		return -1;
	return 0;
}

static int
hybrid_limit_ok(const struct limit *l, const char **errstr)
{
	if (full(l) > DURATION_MAX || l->period > DURATION_MAX / 2) {
		*errstr = "is too large for the hybrid limiter (N times the "
			  "period in microseconds must be below 2^62, as in "
			  "1000000/1w)";
		return -1;
	}
	return 0;
}

const struct algo algo_hybrid = {
	.name = "hybrid",
	.also = { "quota-linear", NULL },
	.limit_ok = hybrid_limit_ok,
	.decide = hybrid_decide,
	.release = hybrid_release,
	.convert = hybrid_convert,
	.valid = hybrid_valid,
	.shift = hybrid_shift,
};
