/*
 * test-gcra.c: the GCRA arithmetic, through the algorithm table as the
 * commands call it: the seeds' examples, exact edges, rounding, clock
 * steps, release, conversion, validation and the extremes of the ranges.
 */
#include <string.h>

#include "throttle.h"
#include "unit.h"

#define S INT64_C(1000000)

static struct limit
mk(int64_t count, int64_t period, int64_t burst)
{
	struct limit l;

	l.algo = algo_find("gcra");
	l.count = count;
	l.period = period;
	l.burst = burst;
	return l;
}

/* Consume at now; keep the new state if allowed, as consume does. */
static struct decision
take(const struct limit *l, struct kstate *s, int64_t now, int64_t cost)
{
	struct decision d;
	struct kstate next;

	l->algo->decide(l, s, now, cost, &d, &next);
	if (d.allowed)
		*s = next;
	return d;
}

static void
seed000(void)
{
	struct limit l = mk(3, 60 * S, 3);
	struct kstate s, copy;
	struct decision d;
	int64_t t[] = { 1005, 1010, 1015 }, ra[] = { 55, 50, 45 };
	int i;

	memset(&s, 0, sizeof(s));
	for (i = 1; i <= 3; i++) {
		d = take(&l, &s, 1000 * S, 1);
		CHECK(d.allowed && d.reset_after == 20 * i * S &&
			d.remaining == 3 - i,
		    "seed 000: consume %d at t=1000", i);
	}
	d = take(&l, &s, 1001 * S, 1);
	CHECK(!d.allowed && d.reset_after == 59 * S && d.retry_after == 19 * S,
	    "seed 000: t=1001 throttled, 19s");
	for (i = 0; i < 3; i++) {
		d = take(&l, &s, t[i] * S, 1);
		CHECK(!d.allowed && d.reset_after == ra[i] * S,
		    "seed 000: t=%lld throttled", (long long)t[i]);
	}
	copy = s;
	d = take(&l, &s, 1020 * S - 1, 1);
	CHECK(!d.allowed && d.retry_after == 1, "one microsecond early");
	d = take(&l, &s, 1020 * S, 1);
	CHECK(d.allowed && d.remaining == 0, "seed 000: t=1020 allowed");
	d = take(&l, &copy, 1021 * S, 1);
	CHECK(d.allowed && d.reset_after == 59 * S, "seed 000: t=1021 59s");
}

static void
seed002(void)
{
	struct limit l = mk(1, 60 * S, 100);
	struct kstate s;
	struct decision d;
	int i;

	memset(&s, 0, sizeof(s));
	d = take(&l, &s, 0, 0);
	CHECK(d.allowed && d.remaining == 100, "seed 002: full pool");
	for (i = 1; i <= 3; i++) {
		d = take(&l, &s, 600 * S, 20);
		CHECK(d.allowed && d.remaining == 100 - 20 * i,
		    "seed 002: cost 20 leaves %d", 100 - 20 * i);
	}
	d = take(&l, &s, 1200 * S, 0);
	CHECK(d.remaining == 50, "seed 002: 50 at t=1200");
	d = take(&l, &s, 1200 * S, 2);
	CHECK(d.allowed && d.remaining == 48, "seed 002: cost 2 leaves 48");
}

static void
seed004(void)
{
	struct limit l = mk(100, S, 500);
	struct kstate s;
	int i, n;

	memset(&s, 0, sizeof(s));
	for (n = 0, i = 0; i < 501; i++)
		n += take(&l, &s, 7 * S, 1).allowed;
	CHECK(n == 500, "seed 004: 500 of 501 at once");
	for (n = 0, i = 0; i < 101; i++)
		n += take(&l, &s, 8 * S, 1).allowed;
	CHECK(n == 100, "seed 004: 100 one second later");
}

/* 7/1s: I is 142857.142857...us; no drift over a long run. */
static void
no_drift(void)
{
	struct limit l = mk(7, S, 70000);
	struct kstate s;
	struct decision d;
	int64_t k, t, bad = 0;
	int n, i;

	memset(&s, 0, sizeof(s));
	for (n = 0, i = 0; i < 70000; i++)
		n += take(&l, &s, 0, 1).allowed;
	CHECK(n == 70000 && s.v[0] == 10000 * S && s.v[1] == 0,
	    "7/1s: 70000 single units put TAT at exactly 10000s");
	d = take(&l, &s, 0, 1);
	CHECK(!d.allowed && d.retry_after == 142858,
	    "and the next waits "
	    "ceil(I)");

	/* Burst 2 keeps TAT ahead of the clock, so units chain exactly. */
	l = mk(7, S, 2);
	memset(&s, 0, sizeof(s));
	take(&l, &s, 0, 2);
	for (k = 1; k <= 70000; k++) {
		t = (k * S + 6) / 7; /* ceil(k * I) */
		d = take(&l, &s, t - 1, 1);
		if (d.allowed || d.retry_after != 1)
			bad++;
		d = take(&l, &s, t, 1);
		if (!d.allowed)
			bad++;
	}
	CHECK(bad == 0,
	    "7/1s: the k-th unit is allowed at ceil(k*I) and "
	    "refused 1us before, k to 70000 (%lld wrong)",
	    (long long)bad);
	CHECK((i128)s.v[0] * 7 + s.v[1] == (i128)70002 * S,
	    "7/1s: TAT is exactly 70002 intervals");
}

static void
rounding(void)
{
	struct limit l = mk(3, S, 3);
	struct kstate s;
	struct decision d;

	memset(&s, 0, sizeof(s));
	take(&l, &s, 0, 3);
	d = take(&l, &s, 0, 1);
	CHECK(!d.allowed && d.retry_after == 333334,
	    "3/1s: retry_after rounds up to 333334us");
	CHECK(d.reset_after == S, "3/1s: reset_after 1s");
	d = take(&l, &s, 333334, 1);
	CHECK(d.allowed, "3/1s: allowed after waiting retry_after");
	CHECK(d.remaining == 0, "3/1s: remaining rounds down");
}

static void
clock_steps(void)
{
	struct limit l = mk(3, 60 * S, 3);
	struct kstate s;
	struct decision d;
	int i, n;

	memset(&s, 0, sizeof(s));
	take(&l, &s, 100000 * S, 3);
	for (n = 0, i = 0; i < 100; i++)
		n += take(&l, &s, (100000 - 86400) * S + i * S, 1).allowed;
	CHECK(n == 0, "a clock a day behind admits nothing more");
	d = take(&l, &s, 100060 * S, 3);
	CHECK(d.allowed,
	    "once the clock is right, the key is at rest after "
	    "its own period");
}

static void
release(void)
{
	struct limit l = mk(5, 50 * S, 5);
	struct kstate s, next;
	struct decision d;

	memset(&s, 0, sizeof(s));
	take(&l, &s, 1000 * S, 3);
	l.algo->release(&l, &s, 1000 * S, 2, &next);
	d = take(&l, &next, 1000 * S, 0);
	CHECK(d.remaining == 4, "release 2 of 3 leaves 4");
	l.algo->release(&l, &next, 1000 * S, 100, &s);
	d = take(&l, &s, 1000 * S, 0);
	CHECK(d.remaining == 5 && d.reset_after == 0,
	    "release never goes beyond capacity");
}

static void
convert(void)
{
	struct limit a = mk(3, S, 3), b = mk(2, S, 2);
	struct kstate s, next;

	memset(&s, 0, sizeof(s));
	take(&a, &s, 0, 1); /* TAT = 1/3 s: 333333 us + 1 tick */
	CHECK(s.v[0] == 333333 && s.v[1] == 1, "TAT kept in ticks");
	/* at 1/3 s the key holds nothing: its rest is kept as time */
	a.algo->convert(&a, &b, &s, 333333, &next);
	CHECK(next.v[0] == 333334 && next.v[1] == 0,
	    "a new N rounds the TAT up to the microsecond");
	CHECK(b.algo->valid(&b, &next) == 0, "converted state is valid");
	/* at 0 it holds a unit, which is 1/2 s of 2/1s */
	a.algo->convert(&a, &b, &s, 0, &next);
	CHECK(next.v[0] == 500000 && next.v[1] == 0,
	    "a longer unit: the units held are kept (%lld)",
	    (long long)next.v[0]);
	CHECK(b.algo->valid(&b, &next) == 0, "converted state is valid");
	/* back to 3/1s: kept as time, not undone */
	b.algo->convert(&b, &a, &next, 0, &s);
	CHECK(s.v[0] == 500000 && s.v[1] == 0,
	    "a shorter unit: the time of rest is kept");
	/* 10/1h to 10/10h at once: 10 units held are the whole of it */
	a = mk(10, 3600 * S, 10);
	b = mk(10, 36000 * S, 10);
	memset(&s, 0, sizeof(s));
	take(&a, &s, 1000 * S, 10);
	a.algo->convert(&a, &b, &s, 1000 * S, &next);
	CHECK(next.v[0] == 37000 * S && next.v[1] == 0,
	    "10/1h to 10/10h: nothing left for 10 hours");
	/* a part of a unit is rounded up, never down: 1999997 ticks of
	 * 3/2s (a third of a us each) held at 1 us are 2999995.5 ticks
	 * of 2/3s (a half us each) */
	a = mk(3, 2 * S, 3);
	b = mk(2, 3 * S, 2);
	memset(&s, 0, sizeof(s));
	take(&a, &s, 0, 1);
	a.algo->convert(&a, &b, &s, 1, &next);
	CHECK(next.v[0] == 1499999 && next.v[1] == 0,
	    "a part of a unit held is rounded up (%lld %lld)",
	    (long long)next.v[0], (long long)next.v[1]);
	/* a burst below the units held: the burst's worth */
	a = mk(10, 3600 * S, 10);
	memset(&s, 0, sizeof(s));
	take(&a, &s, 1000 * S, 10);
	b = mk(1, 36000 * S, 5);
	a.algo->convert(&a, &b, &s, 1000 * S, &next);
	CHECK(next.v[0] == (1000 + 5 * 36000) * S,
	    "held units are capped at the new burst");
}

static void
extremes(void)
{
	struct limit l = mk(INT64_MAX, 1000, INT64_MAX);
	struct kstate s;
	struct decision d;
	const char *err;

	memset(&s, 0, sizeof(s));
	CHECK(limit_validate(&l, &err) == 0, "INT64_MAX/1ms is valid");
	d = take(&l, &s, TIME_MAX - 1, INT64_MAX);
	CHECK(d.allowed && d.remaining == 0,
	    "a cost of INT64_MAX at the end "
	    "of time");
	d = take(&l, &s, TIME_MAX - 1, 1);
	CHECK(!d.allowed && d.retry_after == 1, "then 1 more waits 1us");

	l = mk(1, DURATION_MAX, 1);
	CHECK(limit_validate(&l, &err) == 0, "1 per the longest duration");
	memset(&s, 0, sizeof(s));
	d = take(&l, &s, TIME_MAX - 1, 1);
	CHECK(d.allowed && d.reset_after == DURATION_MAX,
	    "the longest wait fits");
	d = take(&l, &s, 0, 1);
	CHECK(!d.allowed && d.retry_after == TIME_MAX - 1 + DURATION_MAX,
	    "a clock stepped back to 0 waits for the TAT");

	l = mk(1, DURATION_MAX, 2);
	CHECK(limit_validate(&l, &err) == -1,
	    "a burst past 146000 years is "
	    "refused");
	l = mk(1, S, 0);
	CHECK(limit_validate(&l, &err) == -1, "burst 0 is refused");
	s.v[0] = -1;
	s.v[1] = 0;
	l = mk(3, S, 3);
	CHECK(l.algo->valid(&l, &s) == -1, "a negative TAT is not valid");
	s.v[0] = 0;
	s.v[1] = 3;
	CHECK(l.algo->valid(&l, &s) == -1, "a remainder of N is not valid");
	CHECK(algo_find("token-bucket") == algo_find("gcra"),
	    "token-bucket names gcra");
	CHECK(algo_find("leaky") == NULL, "unknown names are not found");
}

int
main(void)
{
	seed000();
	seed002();
	seed004();
	no_drift();
	rounding();
	clock_steps();
	release();
	convert();
	extremes();
	return unit_done();
}
