/*
 * algo-sliding.c: the sliding window (seed 003).
 *
 * At most N units in any window of PERIOD, counted per sub-window of
 * granularity G.  A unit taken at time t counts while
 *	(floor(now / G) - floor(t / G)) * G < PERIOD,
 * that is for the W = ceil(PERIOD / G) sub-windows starting with its own,
 * so the window slides in steps of G.  (The seed's pseudocode compares with
 * ">" and lets N + 1 through; here exactly N are admitted.)
 *
 * State (struct kstate): v[] all zero; slots[] are the non-empty
 * sub-windows, oldest first, index = floor(t / G).  Sub-windows that have
 * slid out are dropped whenever the key is written, so a key never keeps
 * more than W of them, whatever the traffic.
 *
 * Invariants:
 *	1. A refused request changes nothing.
 *	2. retry_after is the time until enough of the oldest units have slid
 *	   out for this request; reset_after the time until none are left.
 *	3. A clock that steps back finds every unit still counting, and new
 *	   units are added to the newest sub-window rather than an older one,
 *	   so they slide out no sooner than they should: it can only refuse
 *	   more.  shift() moves the sub-windows back with the clock (rounding
 *	   so that none slides out sooner than it would have).
 *	4. A smaller limit keeps every unit: the total may exceed the new N
 *	   until enough have slid out.
 */
#include "throttle.h"

/* Sub-windows a unit counts for: W = ceil(PERIOD / G). */
static int64_t
width(const struct limit *l)
{
	/* not (period + g - 1) / g: that overflows near DURATION_MAX */
	return l->period / l->granularity + (l->period % l->granularity != 0);
}

/* How long after now the units of sub-window index stop counting. */
static int64_t
expiry(const struct limit *l, int64_t index, int64_t now)
{
	i128 t = ((i128)index + width(l)) * l->granularity - now;

	/* (past INT64_MAX only for a unit converted near the last time) */
	return t < 0 ? 0 : t > INT64_MAX ? INT64_MAX : (int64_t)t;
}

/* Copy the sub-windows still counting at now into next; their total. */
static i128
live(const struct limit *l, const struct kstate *s, int64_t now,
    struct kstate *next)
{
	int64_t first = now / l->granularity - width(l) + 1;
	i128 total = 0;
	size_t i;

	algo_copy_fields(next, s);
	for (i = 0; i < s->nslots; i++) {
		if (s->slots[i].index < first)
			continue;
		next->slots[next->nslots++] = s->slots[i];
		total += s->slots[i].count;
	}
	return total;
}

static void
sliding_decide(const struct limit *l, const struct kstate *s, int64_t now,
    int64_t cost, struct decision *d, struct kstate *next)
{
	int64_t cur = now / l->granularity;
	i128 total = live(l, s, now, next), need, freed = 0;
	struct slot *last;
	size_t i;

	d->allowed = cost == 0 || total + cost <= l->count; /* 0: nothing */
	d->retry_after = 0;
	if (d->allowed && cost > 0) {
		last = next->nslots ? &next->slots[next->nslots - 1] : NULL;
		if (last != NULL && last->index >= cur)
			last->count +=
			    cost; /* this one, or a clock stepped back */
		else {
			next->slots[next->nslots].index = cur;
			next->slots[next->nslots++].count = cost;
		}
		total += cost;
	} else if (!d->allowed) {
		need = total + cost - l->count;
		for (i = 0; i < next->nslots; i++) {
			freed += next->slots[i].count;
			if (freed >= need) {
				d->retry_after =
				    expiry(l, next->slots[i].index, now);
				break;
			}
		}
	}
	d->remaining = total >= l->count ? 0 : (int64_t)(l->count - total);
	d->reset_after = next->nslots == 0
	    ? 0
	    : expiry(l, next->slots[next->nslots - 1].index, now);
	if (!d->allowed) {
		/* nothing changes: hand back the state as it was */
		algo_copy_fields(next, s);
		for (i = 0; i < s->nslots; i++)
			next->slots[next->nslots++] = s->slots[i];
	}
}

/* Give back the most recent units first. */
static void
sliding_release(const struct limit *l, const struct kstate *s, int64_t now,
    int64_t cost, struct kstate *next)
{
	struct slot *last;

	live(l, s, now, next);
	while (cost > 0 && next->nslots > 0) {
		last = &next->slots[next->nslots - 1];
		if (last->count > cost) {
			last->count -= cost;
			break;
		}
		cost -= last->count;
		next->nslots--;
	}
}

/*
 * A new granularity moves each sub-window's units to the new sub-window
 * that holds the last instant of the old one, so none slides out sooner.
 */
static void
sliding_convert(const struct limit *old, const struct limit *new,
    const struct kstate *s, int64_t at, struct kstate *next)
{
	struct slot *last;
	int64_t index;
	size_t i;

	(void)at;
	algo_copy_fields(next, s);
	for (i = 0; i < s->nslots; i++) {
		if (old->granularity == new->granularity)
			index = s->slots[i].index;
		else
			index = (int64_t)((((i128)s->slots[i].index + 1) *
						  old->granularity -
					      1) /
			    new->granularity);
		if (index > (TIME_MAX + DURATION_MAX) / new->granularity)
			/* past the last time a state may hold (valid()) */
			index = (TIME_MAX + DURATION_MAX) / new->granularity;
		last = next->nslots ? &next->slots[next->nslots - 1] : NULL;
		if (last != NULL && last->index >= index)
			last->count += s->slots[i].count;
		else
			next->slots[next->nslots++] =
			    (struct slot){ index, s->slots[i].count };
	}
}

static void
sliding_shift(const struct limit *l, struct kstate *s, int64_t delta)
{
	/* ceil(delta / G): sub-windows move back by no more than delta */
	i128 q = delta >= 0
	    ? ((i128)delta + l->granularity - 1) / l->granularity
	    : -((-(i128)delta) / l->granularity);
	/* the last sub-window a state may hold (sliding_valid()) */
	i128 last = (i128)(TIME_MAX + DURATION_MAX) / l->granularity, to;
	size_t i, n = 0;

	for (i = 0; i < s->nslots; i++) {
		if ((to = (i128)s->slots[i].index + q) < 0)
			continue; /* slid out before the epoch */
		if (to > last)
			to = last; /* past the last time a state may hold */
		if (n > 0 && s->slots[n - 1].index == (int64_t)to) {
			/* (kept within INT64_MAX in all: sliding_valid()) */
			s->slots[n - 1].count += s->slots[i].count;
			continue;
		}
		s->slots[n].index = (int64_t)to;
		s->slots[n++].count = s->slots[i].count;
	}
	s->nslots = n;
}

static int
sliding_valid(const struct limit *l, const struct kstate *s)
{
	int64_t prev = -1;
	i128 total = 0;
	size_t i;

	if (s->v[0] != 0 || s->v[1] != 0 || s->v[2] != 0 ||
	    s->nslots > SLOTS_MAX)
		return -1;
	for (i = 0; i < s->nslots; i++) {
		if (s->slots[i].index <= prev || s->slots[i].count < 1 ||
		    s->slots[i].index >
			(TIME_MAX + DURATION_MAX) / l->granularity)
			return -1;
		prev = s->slots[i].index;
		total += s->slots[i].count;
	}
	return total <= INT64_MAX ? 0 : -1;
}

static int
sliding_limit_ok(const struct limit *l, const char **errstr)
{
	if (l->granularity < 1) {
		*errstr = "the granularity is zero; give a positive duration";
		return -1;
	}
	if (l->granularity > l->period) {
		*errstr = "the granularity is longer than the period; give at "
			  "most the period";
		return -1;
	}
	if ((i128)width(l) * l->granularity > DURATION_MAX) {
		*errstr =
		    "the period is too long for a sliding window (the most "
		    "is about 146000 years)";
		return -1;
	}
	if (width(l) > SLOTS_MAX) {
		*errstr = "the granularity is so fine that the period holds "
			  "more than 100000 sub-windows; give a coarser one";
		return -1;
	}
	return 0;
}

/* The default sub-window: PERIOD / 60, but at least 1 ms (or PERIOD). */
static int64_t
sliding_default_granularity(int64_t period)
{
	int64_t g = period / 60;

	if (g < 1000)
		g = 1000;
	return g > period ? period : g;
}

const struct algo algo_sliding = {
	.name = "sliding-window",
	.also = { "sliding", NULL },
	.takes_granularity = 1,
	.default_granularity = sliding_default_granularity,
	.limit_ok = sliding_limit_ok,
	.decide = sliding_decide,
	.release = sliding_release,
	.convert = sliding_convert,
	.valid = sliding_valid,
	.shift = sliding_shift,
};
