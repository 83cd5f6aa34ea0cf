/*
 * test-windows.c: fixed window, sliding window and hybrid, through the
 * algorithm table as the commands call them; the sub-window codec.
 */
#include <stdlib.h>
#include <string.h>

#include "throttle.h"
#include "unit.h"

#define S INT64_C(1000000)
#define ROOM 4096

static struct slot buf_a[ROOM], buf_b[ROOM];

static struct limit
mk(const char *algo, int64_t count, int64_t period, int64_t granularity)
{
	struct limit l;

	memset(&l, 0, sizeof(l));
	l.algo = algo_find(algo);
	l.count = count;
	l.period = period;
	l.burst = count;
	l.granularity = granularity;
	return l;
}

static void
fresh(struct kstate *s)
{
	memset(s, 0, sizeof(*s));
	s->slots = buf_a;
}

/* Consume at now; keep the new state if allowed, as consume does. */
static struct decision
take(const struct limit *l, struct kstate *s, int64_t now, int64_t cost)
{
	struct decision d;
	struct kstate next;

	memset(&next, 0, sizeof(next));
	next.slots = s->slots == buf_a ? buf_b : buf_a;
	l->algo->decide(l, s, now, cost, &d, &next);
	if (d.allowed)
		*s = next;
	return d;
}

/* Release cost units at now, as release does. */
static void
give(const struct limit *l, struct kstate *s, int64_t now, int64_t cost)
{
	struct kstate next;

	memset(&next, 0, sizeof(next));
	next.slots = s->slots == buf_a ? buf_b : buf_a;
	l->algo->release(l, s, now, cost, &next);
	*s = next;
}

static void
fixed(void)
{
	struct limit l = mk("fixed-window", 3, 60 * S, 0);
	struct kstate s;
	struct decision d;
	int i;

	fresh(&s);
	for (i = 0; i < 3; i++) {
		d = take(&l, &s, (100 + 10 * i) * S, 1);
		CHECK(d.allowed && d.remaining == 2 - i &&
			d.reset_after == (60 - 10 * i) * S,
		    "fixed: t=%d allowed", 100 + 10 * i);
	}
	d = take(&l, &s, 130 * S, 1);
	CHECK(!d.allowed && d.retry_after == 30 * S, "fixed: t=130 waits 30s");
	d = take(&l, &s, 159 * S + S / 2, 1);
	CHECK(!d.allowed && d.retry_after == S / 2,
	    "fixed: t=159.5 waits 0.5s");
	d = take(&l, &s, 160 * S - 1, 1);
	CHECK(!d.allowed && d.retry_after == 1, "fixed: 1us before the end");
	d = take(&l, &s, 160 * S, 1);
	CHECK(d.allowed && d.remaining == 2 && d.reset_after == 60 * S,
	    "fixed: t=160 starts a new window");
	d = take(&l, &s, 160 * S, 2);
	CHECK(d.allowed && d.remaining == 0, "fixed: cost 2");
	give(&l, &s, 170 * S, 2);
	d = take(&l, &s, 170 * S, 0);
	CHECK(d.remaining == 2 && d.reset_after == 50 * S,
	    "fixed: release within the window");
	give(&l, &s, 170 * S, 9);
	CHECK(s.v[0] == 0 && s.v[1] == 0, "fixed: release of all is at rest");
	d = take(&l, &s, 5 * S, 3);
	CHECK(d.allowed, "fixed: a clock far behind starts a window");
	d = take(&l, &s, 1 * S, 1);
	CHECK(!d.allowed, "fixed: and a clock stepped back keeps it");
	fresh(&s);
	d = take(&l, &s, 7 * S, 0);
	CHECK(d.allowed && d.remaining == 3 && d.reset_after == 0 &&
		s.v[0] == 0,
	    "fixed: cost 0 on a new key starts nothing");
}

static void
sliding_example(void)
{
	struct limit l = mk("sliding-window", 3, 60 * S, S);
	struct kstate s;
	struct decision d;

	fresh(&s);
	CHECK(take(&l, &s, 0, 1).allowed, "sliding: t=0");
	CHECK(take(&l, &s, 10 * S, 1).allowed, "sliding: t=10");
	CHECK(take(&l, &s, 20 * S, 1).allowed, "sliding: t=20");
	d = take(&l, &s, 30 * S, 1);
	CHECK(!d.allowed && d.retry_after == 30 * S, "sliding: t=30 waits 30s");
	d = take(&l, &s, 59 * S, 1);
	CHECK(!d.allowed && d.retry_after == S, "sliding: t=59 waits 1s");
	d = take(&l, &s, 60 * S, 1);
	CHECK(d.allowed && d.remaining == 0, "sliding: t=60 allowed");
	CHECK(s.nslots == 3 && s.slots[0].index == 10,
	    "sliding: the t=0 sub-window is dropped once it slides out");
	d = take(&l, &s, 61 * S, 1);
	CHECK(!d.allowed && d.retry_after == 9 * S, "sliding: t=61 waits 9s");
	CHECK(take(&l, &s, 70 * S, 1).allowed, "sliding: t=70 allowed");
	d = take(&l, &s, 70 * S, 0);
	CHECK(d.reset_after == 60 * S, "sliding: empty 60s after the last");
}

static void
sliding_more(void)
{
	struct limit l = mk("sliding-window", 10, 10 * S, S);
	struct kstate s;
	struct decision d;

	fresh(&s);
	take(&l, &s, 0, 4);
	take(&l, &s, 3 * S, 4);
	d = take(&l, &s, 5 * S, 5);
	CHECK(!d.allowed && d.retry_after == 5 * S,
	    "sliding: cost 5 waits for the first 4 to slide out");
	d = take(&l, &s, 5 * S, 2);
	CHECK(d.allowed && d.remaining == 0, "sliding: cost 2 fits");
	give(&l, &s, 5 * S, 3);
	d = take(&l, &s, 5 * S, 0);
	CHECK(d.remaining == 3 && s.nslots == 2 && s.slots[1].count == 3,
	    "sliding: release takes back the newest units first");
	/* a clock stepped back adds to the newest sub-window */
	take(&l, &s, 2 * S, 1);
	CHECK(s.nslots == 2 && s.slots[1].index == 3 && s.slots[1].count == 4,
	    "sliding: a stepped-back clock adds to the newest sub-window");
	d = take(&l, &s, 2 * S, 2);
	CHECK(d.allowed, "sliding: within the limit still");
	d = take(&l, &s, 2 * S, 1);
	CHECK(!d.allowed, "sliding: and never beyond it");
}

/* A small deterministic generator for the property tests. */
static uint64_t rng = 88172645463325252ULL;

static uint64_t
next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/*
 * No run of W consecutive sub-windows ever holds more than N admitted
 * units; with arrivals on sub-window boundaries, that is no span of
 * PERIOD.  Checked over random arrival times and costs.
 */
static void
sliding_property(void)
{
	static int64_t at[20000], units[20000];
	struct limit l;
	struct kstate s;
	int64_t now, sum, w;
	int round, n, i, j, bad = 0, aligned;

	for (round = 0; round < 40; round++) {
		aligned = round % 2;
		l = mk("sliding-window", 1 + (int64_t)(next_rand() % 20),
		    (1 + (int64_t)(next_rand() % 120)) * S, 0);
		l.granularity = l.period / (1 + (int64_t)(next_rand() % 60));
		w = (l.period + l.granularity - 1) / l.granularity;
		fresh(&s);
		now = 1000 * S;
		for (n = 0, i = 0; i < 2000; i++) {
			now += (int64_t)(next_rand() %
			    (uint64_t)(l.period / 8 + 1));
			if (aligned)
				now -= now % l.granularity;
			int64_t cost = 1 + (int64_t)(next_rand() % 3);
			if (take(&l, &s, now, cost).allowed) {
				at[n] = now / l.granularity;
				units[n++] = cost;
			}
		}
		for (i = 0; i < n; i++) {
			for (sum = 0, j = i; j < n && at[j] - at[i] < w; j++)
				sum += units[j];
			if (sum > l.count)
				bad++;
			if (aligned) {
				int64_t t0 = at[i] * l.granularity;

				for (sum = 0, j = i; j < n &&
				     at[j] * l.granularity < t0 + l.period;
				     j++)
					sum += units[j];
				if (sum > l.count)
					bad++;
			}
		}
	}
	CHECK(bad == 0,
	    "sliding: 40 random runs, no window over its limit "
	    "(%d found)",
	    bad);
}

static void
hybrid_example(void)
{
	struct limit l = mk("hybrid", 4, 60 * S, 0);
	struct kstate s;
	struct decision d;
	int64_t allowed[] = { 0, 1, 2, 3 };
	int i, n;

	fresh(&s);
	for (i = 0; i < 4; i++)
		CHECK(take(&l, &s, allowed[i] * S, 1).allowed,
		    "hybrid: t=%lld allowed", (long long)allowed[i]);
	d = take(&l, &s, 4 * S, 1);
	CHECK(!d.allowed && d.retry_after == 56 * S, "hybrid: t=4 waits 56s");
	CHECK(!take(&l, &s, 30 * S, 1).allowed, "hybrid: t=30 throttled");
	CHECK(!take(&l, &s, 60 * S - 1, 1).allowed, "hybrid: 1us before 60");
	CHECK(take(&l, &s, 60 * S, 1).allowed, "hybrid: t=60 allowed");
	d = take(&l, &s, 61 * S, 1);
	CHECK(!d.allowed && d.retry_after == 14 * S, "hybrid: t=61 waits 14s");
	CHECK(!take(&l, &s, 75 * S - 1, 1).allowed, "hybrid: 1us before 75");
	CHECK(take(&l, &s, 75 * S, 1).allowed, "hybrid: t=75 allowed");
	CHECK(!take(&l, &s, 76 * S, 1).allowed, "hybrid: t=76 throttled");
	for (n = 0, i = 0; i < 5; i++)
		n += take(&l, &s, 200 * S, 1).allowed;
	CHECK(n == 4, "hybrid: after a quiet spell, 4 of 5 at once");
}

static void
hybrid_more(void)
{
	struct limit l = mk("hybrid", 4, 60 * S, 0);
	struct kstate s, next;
	struct decision d;

	fresh(&s);
	d = take(&l, &s, 0, 0);
	CHECK(d.allowed && d.remaining == 4 && d.reset_after == 0 &&
		s.v[0] == 0,
	    "hybrid: cost 0 on a new key: full, at rest");
	d = take(&l, &s, 0, 4);
	CHECK(d.allowed && d.remaining == 0, "hybrid: cost 4 takes the quota");
	d = take(&l, &s, 30 * S, 1);
	CHECK(!d.allowed && d.retry_after == 30 * S,
	    "hybrid: then smooth, with nothing before the window ends");
	memset(&next, 0, sizeof(next));
	l.algo->release(&l, &s, 30 * S, 2, &next);
	s = next;
	d = take(&l, &s, 30 * S, 1);
	CHECK(d.allowed, "hybrid: release puts units back in the bucket");
	CHECK(l.algo->valid(&l, &s) == 0, "hybrid: released state is valid");
	s.v[0] = 7;
	CHECK(l.algo->valid(&l, &s) == -1,
	    "hybrid: an unknown mode is refused");
	l = mk("hybrid", INT64_C(1) << 40, INT64_C(1) << 30, 0);
	{
		const char *err;

		CHECK(l.algo->limit_ok(&l, &err) == -1,
		    "hybrid: N * PERIOD past 2^62 is refused");
	}
}

/*
 * seed 001: a client sending at twice the permitted rate gets at most N
 * in its first window from hybrid; GCRA with the same numbers gives more.
 */
static void
twice_the_rate(void)
{
	struct limit h = mk("hybrid", 10, 60 * S, 0);
	struct limit g = mk("gcra", 10, 60 * S, 0);
	struct kstate hs, gs;
	int64_t t;
	int nh = 0, ng = 0;

	fresh(&hs);
	fresh(&gs);
	for (t = 0; t < 60 * S; t += 3 * S) {
		nh += take(&h, &hs, t, 1).allowed;
		ng += take(&g, &gs, t, 1).allowed;
	}
	CHECK(nh == 10,
	    "twice the rate: hybrid admits N=10 in the first "
	    "window (%d)",
	    nh);
	CHECK(ng > 10, "twice the rate: gcra admits more (%d)", ng);
}

static void
convert(void)
{
	struct limit a = mk("sliding-window", 10, 60 * S, S);
	struct limit b = mk("sliding-window", 10, 60 * S, 10 * S);
	struct kstate s, next;

	fresh(&s);
	take(&a, &s, 1 * S, 1);
	take(&a, &s, 5 * S, 1);
	take(&a, &s, 12 * S, 1);
	memset(&next, 0, sizeof(next));
	next.slots = buf_b;
	a.algo->convert(&a, &b, &s, 0, &next);
	CHECK(next.nslots == 2 && next.slots[0].index == 0 &&
		next.slots[0].count == 2 && next.slots[1].index == 1,
	    "sliding: a coarser granularity merges sub-windows");
	CHECK(b.algo->valid(&b, &next) == 0, "sliding: converted is valid");
}

/* regression (found by fuzz-state): the longest period and granularity */
static void
sliding_extremes(void)
{
	struct limit l = mk("sliding-window", 3, DURATION_MAX, DURATION_MAX);
	struct kstate s;
	struct decision d;
	const char *err;

	CHECK(limit_validate(&l, &err) == 0,
	    "sliding: 3 per the longest "
	    "period, one sub-window");
	fresh(&s);
	d = take(&l, &s, TIME_MAX - 1, 3);
	CHECK(d.allowed && d.remaining == 0,
	    "sliding: takes all at the end "
	    "of time");
	d = take(&l, &s, TIME_MAX - 1, 1);
	CHECK(!d.allowed && d.retry_after > 0, "sliding: then waits");
}

static void
codec(void)
{
	struct slot in[4] = { { 5, 1 }, { 6, 300 }, { 1000000, 2 },
		{ INT64_C(1700000000000), INT64_MAX } };
	struct slot out[4];
	unsigned char buf[128], bad[8];
	size_t len;

	len = slots_encode(in, 4, buf);
	CHECK(slots_decode(buf, len, NULL, 0) == 4, "codec: counts 4");
	CHECK(slots_decode(buf, len, out, 4) == 4 &&
		memcmp(in, out, sizeof(in)) == 0,
	    "codec: round trip");
	CHECK(slots_decode(buf, len, out, 3) == -1, "codec: too little room");
	CHECK(slots_decode(buf, len - 1, NULL, 0) == -1, "codec: truncated");
	bad[0] = 5, bad[1] = 1, bad[2] = 0, bad[3] = 1;
	CHECK(slots_decode(bad, 4, NULL, 0) == -1, "codec: a zero gap");
	bad[0] = 5, bad[1] = 0;
	CHECK(slots_decode(bad, 2, NULL, 0) == -1, "codec: a zero count");
	bad[0] = 0x85, bad[1] = 0x00, bad[2] = 1;
	CHECK(slots_decode(bad, 3, NULL, 0) == -1, "codec: overlong varint");
	memset(bad, 0xff, sizeof(bad));
	CHECK(slots_decode(bad, sizeof(bad), NULL, 0) == -1,
	    "codec: a varint that never ends");
	CHECK(slots_decode(buf, 0, NULL, 0) == 0, "codec: empty is none");
}

int
main(void)
{
	fixed();
	sliding_example();
	sliding_more();
	sliding_property();
	hybrid_example();
	hybrid_more();
	twice_the_rate();
	convert();
	sliding_extremes();
	codec();
	return unit_done();
}
