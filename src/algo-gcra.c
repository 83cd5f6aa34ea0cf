/*
 * algo-gcra.c: the generic cell rate algorithm (GCRA), seed 000's cooldown.
 *
 * Stripe's token bucket and a weighted credit pool are the same limiter
 * seen from the other side: "tokens left" is how far the theoretical arrival
 * time (TAT) is from its furthest allowed point.
 *
 * With N units per PERIOD the emission interval is I = PERIOD / N, which is
 * rarely a whole number of microseconds.  To stay exact, all arithmetic is
 * done in ticks of 1/N microsecond, where I is exactly PERIOD ticks and
 * the delay tolerance B * I is exactly B * PERIOD ticks.
 *
 * State (struct kstate):
 *	v[0]	TAT, whole microseconds since the epoch
 *	v[1]	TAT's remainder in ticks, 0 <= v[1] < N
 *	v[2]	0
 * so TAT in ticks is v[0] * N + v[1].  A new key (all zero) is at rest.
 *
 * Invariants:
 *	1. A refused request changes nothing.
 *	2. A request is allowed iff max(TAT, now) + cost * I - now <= B * I;
 *	   equality is allowed.
 *	3. retry_after is rounded up to the microsecond, so waiting exactly
 *	   that long succeeds; remaining is rounded down.
 *	4. A clock that steps back only makes TAT look further away: it can
 *	   refuse more, never admit more.  shift() (called by limit_carry()
 *	   when a key was saved at a later time than now) moves TAT back by
 *	   the step, so the wait is never longer than it was when saved.
 */
#include "throttle.h"

static i128
ceil_div(i128 a, i128 b)
{
	return a <= 0 ? 0 : (a + b - 1) / b;
}

static i128
tat_ticks(const struct limit *l, const struct kstate *s)
{
	return (i128)s->v[0] * l->count + s->v[1];
}

static void
set_tat(const struct limit *l, i128 ticks, struct kstate *s)
{
	s->v[0] = (int64_t)(ticks / l->count);
	s->v[1] = (int64_t)(ticks % l->count);
}

static void
gcra_decide(const struct limit *l, const struct kstate *s, int64_t now,
    int64_t cost, struct decision *d, struct kstate *next)
{
	i128 n = (i128)now * l->count;
	i128 tau = (i128)l->burst * l->period;
	i128 tat = tat_ticks(l, s);
	i128 t = tat > n ? tat : n;
	i128 want = t + (i128)cost * l->period;
	i128 left;

	algo_copy_fields(next, s);
	if (cost == 0 || want - n <= tau) { /* cost 0 takes nothing */
		d->allowed = 1;
		d->retry_after = 0;
		set_tat(l, want, next);
		t = want;
	} else {
		d->allowed = 0;
		d->retry_after = (int64_t)ceil_div(want - tau - n, l->count);
	}
	left = n + tau - t;
	d->remaining = left <= 0 ? 0 : (int64_t)(left / l->period);
	d->reset_after = (int64_t)ceil_div(t - n, l->count);
}

static void
gcra_release(const struct limit *l, const struct kstate *s, int64_t now,
    int64_t cost, struct kstate *next)
{
	i128 n = (i128)now * l->count;
	i128 tat = tat_ticks(l, s) - (i128)cost * l->period;

	algo_copy_fields(next, s);
	set_tat(l, tat > n ? tat : n, next);
}

/*
 * Across a change of limit the key keeps the time it comes back to rest
 * (only the sub-microsecond remainder, whose unit depends on N, is rounded
 * up), or, under a limit whose units are longer (10/1h to 10/10h, 5/15m to
 * 5/1h), the units it held when saved (at), up to the new burst, each as
 * long as a new unit, from then: kept as time, 10 units of 10/1h would be an hour of 10/10h,
 * and 9 more would be admitted at once.  Neither is undone by changing
 * back; the later of the two is never less strict than either.
 */
static void
gcra_convert(const struct limit *old, const struct limit *new,
    const struct kstate *s, int64_t at, struct kstate *next)
{
	i128 held, tat, most;

	algo_copy_fields(next, s);
	if (old->count != new->count) {
		/* rounded up, but never past the latest time a state may
		 * hold (a key at it would be refused as corrupt forever) */
		next->v[0] = s->v[0] +
		    (s->v[1] > 0 && s->v[0] < TIME_MAX + DURATION_MAX);
		next->v[1] = 0;
	}
	/* a new unit is longer: PERIOD' / N' > PERIOD / N */
	if ((i128) new->period * old->count <= (i128)old->period *new->count)
		return;
	/* what the key held at at, in old ticks (a unit is PERIOD) */
	held = tat_ticks(old, s) - (i128)at * old->count;
	if (held <= 0)
		return;
	if (held > (i128) new->burst * old->period)
		held = (i128) new->burst * old->period;
	/* as many new units, in new ticks: each is PERIOD' */
	tat = (i128)at * new->count + held / old->period *new->period +
	    ceil_div(held % old->period * new->period, old->period);
	most = (i128)(TIME_MAX + DURATION_MAX) * new->count;
	if (tat > most)
		tat = most;
	if (tat > tat_ticks(new, next))
		set_tat(new, tat, next);
}

static void
gcra_shift(const struct limit *l, struct kstate *s, int64_t delta)
{
	i128 tat = tat_ticks(l, s) + (i128)delta * l->count;

	set_tat(l, tat < 0 ? 0 : tat, s);
}

static int
gcra_valid(const struct limit *l, const struct kstate *s)
{
	if (s->v[0] < 0 || s->v[0] > TIME_MAX + DURATION_MAX)
		return -1;
	if (s->v[1] < 0 || s->v[1] >= l->count || s->v[2] != 0)
		return -1;
	return 0;
}

const struct algo algo_gcra = {
	.name = "gcra",
	.aliases = { "token-bucket", NULL },
	.takes_burst = 1,
	.reserves = 1,
	.decide = gcra_decide,
	.release = gcra_release,
	.convert = gcra_convert,
	.valid = gcra_valid,
	.shift = gcra_shift,
};
