/*
 * shed.c: the worker utilization load shedder (seed 004), pure.
 *
 * A key keeps a shedding amount s and when it last changed.  Each call
 * brings the utilization u measured now, which sets s's rate of change for
 * the interval since the previous call: below good (0.7) s falls, faster
 * the lower u is; from good to bad (0.8) nothing changes; above bad s
 * rises, at most 1 per ramp (120 s).  The interval counted per call is
 * capped at delay (28 s), and a new key starts at rest at s = -delay/ramp,
 * so u must stay high for delay before anything is shed.  s never leaves
 * [-delay/ramp, 1].
 *
 * Priorities shed in tiers over s in [0, 1]: low with probability 3s,
 * normal 3s - 1, high 3s - 2, each clamped to [0, 1]; critical never.
 *
 * s is an integer in units of 1e-12 (SHED_ONE is 1) and u in millionths,
 * so updates are exact integer arithmetic, rounded down at 1e-12.
 */
#include "throttle.h"

#define PPM INT64_C(1000000)
#define SHED_REST_MAX INT64_C(1000000) /* delay / ramp, at most */

/* Seed 004's constants. */
void
shed_default_params(struct shed_params *p)
{
	p->good_ppm = 700000;
	p->bad_ppm = 800000;
	p->delay = 28 * US_PER_SEC;
	p->ramp = 120 * US_PER_SEC;
}

/* 0 if the parameters make sense, else -1 and why. */
int
shed_params_ok(const struct shed_params *p, const char **errstr)
{
	if (p->good_ppm <= 0 || p->good_ppm > p->bad_ppm || p->bad_ppm >= PPM) {
		*errstr = "needs 0 < --good-below <= --bad-above < 1";
		return -1;
	}
	if (p->ramp <= 0) {
		*errstr = "needs a --ramp longer than zero";
		return -1;
	}
	/* delay is also the most time counted per call: 0 would count
	 * none, and nothing would ever be shed */
	if (p->delay <= 0) {
		*errstr =
		    "needs a --delay longer than zero (it is also the most "
		    "time counted per call, so 0 would never shed)";
		return -1;
	}
	if (p->delay / p->ramp >= SHED_REST_MAX) {
		*errstr = "needs a --delay less than a million times --ramp";
		return -1;
	}
	return 0;
}

/*
 * 0 if a shedder's stored amount and time are ones throttle could have
 * written, else -1 and why.  Every store's shed state passes through here.
 */
int
shed_check(int64_t amount, int64_t changed, const char **errstr)
{
	if (amount > SHED_ONE || amount < -SHED_ONE * SHED_REST_MAX ||
	    changed < 0 || changed > TIME_MAX) {
		*errstr = "has a shedder state out of range";
		return -1;
	}
	return 0;
}

static i128
floor_div(i128 a, i128 b)
{
	return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* The resting amount, -delay/ramp. */
int64_t
shed_rest(const struct shed_params *p)
{
	return (int64_t)floor_div(-(i128)p->delay * SHED_ONE, p->ramp);
}

/* s after a call at now with utilization u_ppm; it last changed at then. */
int64_t
shed_update(const struct shed_params *p, int64_t s, int64_t then, int64_t now,
    int64_t u_ppm)
{
	int64_t elapsed = now - then;
	i128 num, den, next;

	if (elapsed < 0)
		elapsed = 0; /* a clock stepped back: no time passed */
	if (elapsed > p->delay)
		elapsed = p->delay;
	if (u_ppm < p->good_ppm) {
		num = u_ppm - p->good_ppm; /* u/good - 1, in (-1, 0) */
		den = p->good_ppm;
	} else if (u_ppm < p->bad_ppm) {
		num = 0;
		den = 1;
	} else {
		num = u_ppm - p->bad_ppm;
		den = PPM - p->bad_ppm;
		if (num > den)
			num = den; /* clamp to 1 */
	}
	next =
	    s + floor_div((i128)elapsed * num * SHED_ONE, (i128)p->ramp * den);
	if (next < shed_rest(p))
		next = shed_rest(p);
	if (next > SHED_ONE)
		next = SHED_ONE;
	return (int64_t)next;
}

/* The chance, in units of SHED_ONE, that a call of priority p is shed. */
int64_t
shed_drop_chance(int64_t s, int priority)
{
	i128 q;

	if (priority == PRIO_CRITICAL)
		return 0;
	q = (i128)3 * s - (i128)(PRIO_LOW - priority) * SHED_ONE;
	if (q < 0)
		return 0;
	return q > SHED_ONE ? SHED_ONE : (int64_t)q;
}

/* A SHED_ONE-scaled value in millionths, rounded to the nearest: as shed
 * and inspect both show it. */
int64_t
shed_micro(int64_t v)
{
	int64_t unit = SHED_ONE / 1000000;

	return v >= 0 ? (v + unit / 2) / unit : -((-v + unit / 2) / unit);
}
