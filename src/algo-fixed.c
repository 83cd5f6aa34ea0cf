/*
 * algo-fixed.c: the fixed window with quota resets (seed 001).
 *
 * At most N units per window of PERIOD.  A window is not aligned to the
 * clock: it starts with the first request after the previous one ended,
 * and its count starts again from zero.  Cheap and easy to explain, but a
 * careless client may send a burst at the end of one window and another at
 * the start of the next: up to 2N in a short span.
 *
 * State (struct kstate):
 *	v[0]	when the current window ends, us since the epoch (0: none)
 *	v[1]	units used in it, 1 <= v[1] (0 when there is no window); at
 *		most N, unless a larger limit counted more (invariant 4)
 *	v[2]	0
 *
 * Invariants:
 *	1. A refused request changes nothing; a window that has ended is
 *	   replaced only by an allowed request.
 *	2. retry_after and reset_after are the time until the window ends:
 *	   at that instant a request starts a new window and is allowed.
 *	3. A clock that steps back keeps the window running (now < end), so
 *	   it can only refuse more; shift() moves the window's end back with
 *	   the clock, so it never runs longer than PERIOD from now.
 *	4. A change of limit keeps the window and its whole count, even
 *	   above a smaller N: capped, a request at cost 0 or a release
 *	   saved it so, and a larger limit again admitted more than N in
 *	   the window.  A longer period makes the window as long.
 *	5. A cost of 0 is allowed: it takes nothing.
 */
#include "throttle.h"

static void
fixed_decide(const struct limit *l, const struct kstate *s, int64_t now,
    int64_t cost, struct decision *d, struct kstate *next)
{
	int64_t end = s->v[0], used = s->v[1];

	algo_copy_fields(next, s);
	if (used == 0 || now >= end) {
		end = now + l->period; /* a new window would start now */
		used = 0;
	}
	if (cost == 0 || cost <= l->count - used) {
		d->allowed = 1;
		d->retry_after = 0;
		used += cost;
		next->v[0] = used > 0 ? end : 0;
		next->v[1] = used;
		next->v[2] = 0;
	} else {
		d->allowed = 0;
		d->retry_after = end - now;
	}
	d->remaining = used >= l->count ? 0 : l->count - used;
	d->reset_after = used > 0 ? end - now : 0;
}

static void
fixed_release(const struct limit *l, const struct kstate *s, int64_t now,
    int64_t cost, struct kstate *next)
{
	(void)l;
	algo_copy_fields(next, s);
	if (s->v[1] == 0 || now >= s->v[0] || cost >= s->v[1]) {
		next->v[0] = next->v[1] = 0;
		return;
	}
	next->v[1] = s->v[1] - cost;
}

/*
 * The window keeps its count across a change (invariant 4), and its end,
 * or under a longer period the end the window has under it: 5 units of a
 * window of 5/15m are 5 of 5/1h's until an hour after it began, not until
 * 15 minutes after.  (No later than the new period from when the state
 * was saved, at: after changes back and forth, the end less the old
 * period may not be where the window began.)
 */
static void
fixed_convert(const struct limit *old, const struct limit *new,
    const struct kstate *s, int64_t at, struct kstate *next)
{
	i128 end;

	algo_copy_fields(next, s);
	if (s->v[1] == 0 || new->period <= old->period)
		return;
	end = (i128)s->v[0] - old->period + new->period;
	if (end > (i128)at + new->period)
		end = (i128)at + new->period;
	if (end > TIME_MAX + DURATION_MAX)
		end = TIME_MAX + DURATION_MAX;
	if (end > s->v[0])
		next->v[0] = (int64_t)end;
}

static void
fixed_shift(const struct limit *l, struct kstate *s, int64_t delta)
{
	(void)l;
	if (s->v[1] == 0)
		return;
	if ((i128)s->v[0] + delta <= 0) {
		s->v[0] = s->v[1] = 0; /* it ended before the epoch */
		return;
	}
	s->v[0] += delta;
}

static int
fixed_valid(const struct limit *l, const struct kstate *s)
{
	if (s->v[1] == 0)
		return s->v[0] == 0 && s->v[2] == 0 ? 0 : -1;
	(void)l; /* a count may be a larger limit's (invariant 4) */
	if (s->v[1] < 0 || s->v[2] != 0)
		return -1;
	if (s->v[0] <= 0 || s->v[0] > TIME_MAX + DURATION_MAX)
		return -1;
	return 0;
}

const struct algo algo_fixed = {
	.name = "fixed-window",
	.also = { "fixed", NULL },
	.decide = fixed_decide,
	.release = fixed_release,
	.convert = fixed_convert,
	.valid = fixed_valid,
	.shift = fixed_shift,
};
