/*
 * test-layers.c: the pure modules beside the algorithms: leases and
 * lockouts (lease.c), the load shedder (shed.c), settling a command
 * line's limits (limit_settle()), the compound decision
 * (limit_combine()), the clock-step horizon, and the bytes every store
 * keeps (record.c), each against numbers worked by hand, and the
 * integers those bytes are written with, against printf.
 */
#include <string.h>

#include "throttle.h"
#include "unit.h"

#define S INT64_C(1000000)

static void
leases(void)
{
	struct lease l;
	struct lockout k;
	const char *why;

	/* 2 of 10 slots kept for critical work: normal work gets 8 */
	CHECK(lease_reserve(10, 2, 0) == 2, "a reserve of 2 slots is 2");
	CHECK(lease_reserve(10, 15, 1) == 2, "15%% of 10 slots rounds up to 2");
	CHECK(lease_reserve(3, 200, 1) == 3, "a reserve is at most N");
	CHECK(lease_admit(7, 10, 2, PRIO_NORMAL) &&
		!lease_admit(8, 10, 2, PRIO_NORMAL),
	    "normal work takes slots up to N - reserve, no more");
	CHECK(lease_admit(9, 10, 2, PRIO_CRITICAL) &&
		!lease_admit(10, 10, 2, PRIO_CRITICAL),
	    "critical work may take the reserve, never more than N");

	memset(&l, 0, sizeof(l));
	memcpy(l.id, "0123456789abcdef", LEASE_ID_LEN + 1);
	l.priority = PRIO_NORMAL;
	l.acquired = 1000 * S;
	l.ttl = 60 * S;
	l.expires = 1060 * S;
	strcpy(l.host, "web1");
	CHECK(lease_check(&l, &why) == 0, "a lease throttle writes passes");
	CHECK(lease_id_ok("0123456789abcdef", LEASE_ID_LEN) &&
		!lease_id_ok("0123456789abcdeF", LEASE_ID_LEN) &&
		!lease_id_ok("0123456789abcdeg", LEASE_ID_LEN) &&
		!lease_id_ok("0123456789abcde", LEASE_ID_LEN - 1) &&
		!lease_id_ok("0123456789abcdef0", LEASE_ID_LEN + 1) &&
		!lease_id_ok("0123456789abcde\0", LEASE_ID_LEN),
	    "a lease id is 16 lower-case hex digits, no NUL among them");
	CHECK(lease_expires_after(&l, 1000 * S) == 60 * S &&
		lease_expires_after(&l, 2000 * S) == 0,
	    "a lease expires its TTL after it was taken, never below 0");
	CHECK(lease_live(&l, 1059 * S, OWNER_UNKNOWN) &&
		!lease_live(&l, 1060 * S, OWNER_UNKNOWN),
	    "a lease holds until the instant it expires");
	CHECK(!lease_live(&l, 1000 * S, OWNER_DEAD),
	    "a lease whose owner is gone holds nothing");
	l.host[0] = '\0';
	CHECK(lease_check(&l, &why) == 0, "a lease of 0.1 with no host passes");
	l.priority = 9;
	CHECK(lease_check(&l, &why) == -1,
	    "a priority out of range is refused");
	l.priority = PRIO_LOW;
	l.ttl = 0;
	CHECK(lease_check(&l, &why) == -1,
	    "a lease with no TTL and no owner is refused (it would never end)");

	k.since = 100 * S;
	k.ahead = 0;
	k.until = 700 * S;
	CHECK(lockout_check(&k, &why) == 0, "a lockout throttle writes passes");
	k.until = 50 * S;
	CHECK(lockout_check(&k, &why) == -1,
	    "a lockout ending before it began");
	k.until = LOCKOUT_NEVER;
	CHECK(lockout_check(&k, &why) == 0, "a lockout until reset passes");
}

static void
shedder(void)
{
	struct shed_params p;
	const char *why;
	int64_t s;

	shed_default_params(&p);
	CHECK(shed_params_ok(&p, &why) == 0, "seed 004's constants are usable");
	/* at rest the amount is -delay/ramp: 28s of overload before any */
	CHECK(shed_rest(&p) == -(SHED_ONE * 28 + 119) / 120,
	    "the resting amount is -delay/ramp, rounded down");
	/* fully overloaded (utilization 1) for 28s: back to 0, within the
	 * rounding of the resting amount */
	s = shed_update(&p, shed_rest(&p), 0, 28 * S, 1000000);
	CHECK(s == -1, "28s at utilization 1 brings the amount to 0 (got %lld)",
	    (long long)s);
	/* then 60s more: half of everything (clamped by delay per step) */
	s = shed_update(&p, 0, 0, 28 * S, 1000000);
	CHECK(s == SHED_ONE * 28 / 120, "each step counts at most delay");
	CHECK(shed_update(&p, SHED_ONE, 0, 1000 * S, 1000000) == SHED_ONE,
	    "the amount never passes 1");
	CHECK(shed_update(&p, 0, 0, 10 * S, 750000) == 0,
	    "between good-below and bad-above nothing changes");
	CHECK(shed_update(&p, 0, 10 * S, 0, 0) == 0,
	    "a clock stepped back counts as no time");
	CHECK(shed_drop_chance(SHED_ONE, PRIO_CRITICAL) == 0,
	    "critical work is never shed");
	/* Stripe's tiers: low work from 0 to a third of the way, normal
	 * from a third to two thirds, high from two thirds to all */
	CHECK(shed_drop_chance(SHED_ONE / 10, PRIO_LOW) == SHED_ONE / 10 * 3 &&
		shed_drop_chance(SHED_ONE / 2, PRIO_LOW) == SHED_ONE,
	    "low work is shed first, all of it a third of the way");
	CHECK(shed_drop_chance(SHED_ONE / 2, PRIO_NORMAL) == SHED_ONE / 2 &&
		shed_drop_chance(SHED_ONE / 2, PRIO_HIGH) == 0,
	    "half way: half of normal work, none of high");
	CHECK(shed_drop_chance(SHED_ONE, PRIO_HIGH) == SHED_ONE,
	    "all the way: all but critical work");
	p.good_ppm = 900000;
	CHECK(shed_params_ok(&p, &why) == -1,
	    "good-below above bad-above is refused");
}

static void
settle(void)
{
	struct limitspec ls;
	struct limit out[LIMITS_MAX];
	char err[256];
	int n;

	memset(&ls, 0, sizeof(ls));
	ls.n = 2;
	ls.count[0] = 10;
	ls.period[0] = S;
	ls.count[1] = 1000;
	ls.period[1] = 86400 * S;
	ls.text[0] = "10/1s";
	ls.text[1] = "1000/1d";
	CHECK(limit_settle(&ls, "consume", out, &n, err, sizeof(err)) == 0 &&
		n == 2 && out[0].algo == algo_table[0] && out[0].burst == 10 &&
		out[1].burst == 1000,
	    "two limits settle with the default algorithm, burst N each");
	ls.has_burst = 1;
	ls.burst = 5;
	CHECK(limit_settle(&ls, "consume", out, &n, err, sizeof(err)) == -1 &&
		strstr(err, "--burst") != NULL,
	    "--burst with two limits names --burst: %s", err);
	ls.n = 1;
	ls.algo = algo_find("sliding-window");
	CHECK(limit_settle(&ls, "consume", out, &n, err, sizeof(err)) == -1 &&
		strstr(err, "only gcra does") != NULL,
	    "--burst on a window says which algorithms take it: %s", err);
	ls.has_burst = 0;
	CHECK(limit_settle(&ls, "consume", out, &n, err, sizeof(err)) == 0 &&
		out[0].granularity == out[0].algo->default_granularity(S),
	    "a sliding window takes its algorithm's default granularity");
	ls.n = 0;
	ls.has_granularity = 1;
	CHECK(limit_settle(&ls, "consume", out, &n, err, sizeof(err)) == -1 &&
		strstr(err, "--granularity") != NULL,
	    "--granularity without --limit is a usage error: %s", err);
}

static void
combine(void)
{
	struct decision ds[3] = {
		{ 1, 4, 0, 2 * S },
		{ 0, 0, 30 * S, 60 * S },
		{ 1, 9, 0, 3600 * S },
	};
	struct decision d;
	int bind;

	bind = limit_combine(ds, 3, &d);
	CHECK(!d.allowed && d.remaining == 0 && d.retry_after == 30 * S &&
		d.reset_after == 60 * S && bind == 1,
	    "a compound decision: refused by any, the longest wait binds, "
	    "and its reset is the answer's");
	ds[1].allowed = 1;
	ds[1].retry_after = 0;
	ds[1].remaining = 2;
	bind = limit_combine(ds, 3, &d);
	CHECK(d.allowed && d.remaining == 2 && bind == 1,
	    "allowed by all: the fewest remaining binds");
	CHECK(limit_combine(ds, 0, &d) == 0 && d.allowed && d.remaining == 0,
	    "no limits: allowed, nothing remaining");
	/* 1/1m;1/1d after one unit: both wait 0 with 0 left, in either
	 * order the day's (later at rest) binds */
	{
		struct decision two[2] = {
			{ 1, 0, 0, 60 * S },
			{ 1, 0, 0, 86400 * S },
		};

		CHECK(limit_combine(two, 2, &d) == 1 &&
			d.reset_after == 86400 * S,
		    "a tie on wait and remaining: the later rest binds");
		two[0].reset_after = 86400 * S;
		two[1].reset_after = 60 * S;
		CHECK(limit_combine(two, 2, &d) == 0 &&
			d.reset_after == 86400 * S,
		    "and so in the other order");
	}
}

static void
horizon(void)
{
	struct limit g = { algo_find("gcra"), 5, 60 * S, 20, 0 };
	struct limit w = { algo_find("sliding-window"), 5, 60 * S, 5, S };

	CHECK(limit_horizon(&g) == 240 * S,
	    "a burst of 20 at 5/60s takes 240s to earn back");
	CHECK(limit_horizon(&w) == 61 * S,
	    "a window's horizon is its period and a sub-window");
}

static void
records(void)
{
	struct keyrec in, out;
	struct slot slots[4];
	struct lockout k = { 5 * S, 600 * S, 0 }, k2;
	const char *neg = "gcra 3 60000000 3 0 1020000000 0 0 1020000000 -1";
	struct lease l, l2;
	char buf[4096];
	const unsigned char *sl;
	size_t n, nsl;
	int64_t a, c;

	memset(&in, 0, sizeof(in));
	in.limit = (struct limit){ algo_find("gcra"), 3, 60 * S, 3, 0 };
	in.state.v[0] = 1020 * S;
	in.state.slots = slots;
	in.rest_at = 1020 * S;
	in.written_at = 1000 * S;
	CHECK(record_limit_size(&in) < sizeof(buf), "a limit fits its size");
	n = record_limit_encode(&in, buf);
	memset(&out, 0, sizeof(out));
	CHECK(n > 0 && record_limit_decode(buf, n, &out, &sl, &nsl) == 0 &&
		out.limit.algo == in.limit.algo && out.limit.count == 3 &&
		out.state.v[0] == in.state.v[0] &&
		out.written_at == in.written_at && nsl == 0,
	    "a limit's record reads back as written: %.*s", (int)n, buf);
	in.ahead = 5000 * S; /* moved back with the clock */
	n = record_limit_encode(&in, buf);
	CHECK(record_limit_decode(buf, n, &out, &sl, &nsl) == 0 &&
		out.written_at == in.written_at && out.ahead == in.ahead &&
		limit_check_record(&out, &(const char *){ NULL }) == 0,
	    "a moved limit's record keeps how far it was moved: %.*s", (int)n,
	    buf);
	in.ahead = 0;
	n = record_limit_encode(&in, buf);
	CHECK(record_limit_decode(buf, n, &out, &sl, &nsl) == 0 &&
		out.ahead == 0,
	    "an unmoved one writes none");
	in.written_at = 0; /* saved at the epoch: a time, not "not known" */
	n = record_limit_encode(&in, buf);
	CHECK(record_limit_decode(buf, n, &out, &sl, &nsl) == 0 &&
		out.written_at == 0,
	    "a save at the epoch reads back as one: %.*s", (int)n, buf);
	in.written_at = -1; /* not known: written as none, read as none */
	n = record_limit_encode(&in, buf);
	CHECK(record_limit_decode(buf, n, &out, &sl, &nsl) == 0 &&
		out.written_at == -1 &&
		limit_check_record(&out, &(const char *){ NULL }) == 0 &&
		buf[n - 1] != '1',
	    "a save time not known stays not known: %.*s", (int)n, buf);
	CHECK(record_limit_decode(neg, strlen(neg), &out, &sl, &nsl) == -1,
	    "a negative save time is refused");
	in.written_at = 1000 * S;
	memcpy(buf, "quantum", 7);
	CHECK(record_limit_decode(buf, n, &out, &sl, &nsl) == -2,
	    "an unknown algorithm is told apart from damage");
	CHECK(record_limit_decode("gcra 1 2", 8, &out, &sl, &nsl) == -1,
	    "a short record is refused");

	n = record_lockout_encode(&k, buf);
	CHECK(record_lockout_decode(buf, n, &k2) == 0 && k2.since == k.since &&
		k2.until == k.until,
	    "a lockout reads back as written");
	k.ahead = 900 * S;
	n = record_lockout_encode(&k, buf);
	CHECK(record_lockout_decode(buf, n, &k2) == 0 && k2.ahead == k.ahead &&
		k2.since == k.since &&
		lockout_check(&k2, &(const char *){ NULL }) == 0,
	    "a moved lockout keeps how far it was moved: %.*s", (int)n, buf);
	k.ahead = 0;
	CHECK(record_lockout_decode("600000000", 9, &k2) == 0 &&
		k2.until == 600 * S && k2.since == 0,
	    "a lockout of 0.1 (no since) still reads");

	memset(&l, 0, sizeof(l));
	memcpy(l.id, "0123456789abcdef", LEASE_ID_LEN + 1);
	l.priority = PRIO_HIGH;
	l.acquired = 7 * S;
	l.pid = 42;
	l.pid_start = 99;
	strcpy(l.host, "a host");
	n = record_lease_encode(&l, buf);
	memset(&l2, 0, sizeof(l2));
	CHECK(record_lease_decode(l.id, LEASE_ID_LEN, buf, n, &l2) == 0 &&
		memcmp(&l, &l2, sizeof(l)) == 0,
	    "a lease reads back as written, spaces in its host and all");

	n = record_shed_encode(-SHED_ONE / 4, 3 * S, buf);
	CHECK(record_shed_decode(buf, n, &a, &c) == 0 && a == -SHED_ONE / 4 &&
		c == 3 * S,
	    "a shedder reads back as written");
	CHECK(record_shed_decode("1 2 3", 5, &a, &c) == -1,
	    "a shedder with a field too many is refused");
}

/* record_int() writes what printf's %lld does, at every length and sign. */
static void
integers(void)
{
	static const int64_t v[] = { 0, 7, 9, 10, 42, 99, 100, 101, 999, 1000,
		-1, -9, -10, -99, -100, 1764115200123456, -1764115200123456,
		INT64_MAX, INT64_MIN, INT64_MIN + 1 };
	char want[32], got[32];
	size_t i, n;
	int64_t p;
	int bad = 0;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		snprintf(want, sizeof(want), "%lld", (long long)v[i]);
		n = record_int(got, v[i]);
		if (n != strlen(want) || strcmp(got, want) != 0) {
			CHECK(0, "record_int(%s) wrote '%s'", want, got);
			bad = 1;
		}
	}
	/* every power of ten and its neighbours, both signs */
	for (p = 1; p <= INT64_MAX / 10; p *= 10)
		for (i = 0; i < 6; i++) {
			int64_t x = (i < 3 ? p : -p) + (int64_t)(i % 3) - 1;

			snprintf(want, sizeof(want), "%lld", (long long)x);
			n = record_int(got, x);
			if (n != strlen(want) || strcmp(got, want) != 0) {
				CHECK(0, "record_int(%s) wrote '%s'", want,
				    got);
				bad = 1;
			}
		}
	CHECK(!bad, "record_int() writes each number as printf does");

	/* and the records read them back, up to the limits and no further */
	{
		static const struct {
			const char *s;
			int ok;
			int64_t a, c;
		} in[] = {
			{ "9223372036854775807 -9223372036854775808", 1,
			    INT64_MAX, INT64_MIN },
			{ "1844674407370955161 0", 1, 1844674407370955161, 0 },
			{ "9223372036854775808 0", 0, 0, 0 },
			{ "0 -9223372036854775809", 0, 0, 0 },
			{ "18446744073709551615 0", 0, 0, 0 },
			{ "18446744073709551616 0", 0, 0, 0 },
			{ "99999999999999999999 0", 0, 0, 0 },
		};
		int64_t a, c;

		for (i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
			int r = record_shed_decode(in[i].s, strlen(in[i].s), &a,
			    &c);

			CHECK(in[i].ok ? r == 0 && a == in[i].a && c == in[i].c
				       : r == -1,
			    "'%s' reads %s", in[i].s,
			    in[i].ok ? "back exactly" : "as damage");
		}
	}
}

int
main(void)
{
	leases();
	shedder();
	settle();
	combine();
	horizon();
	records();
	integers();
	return unit_done();
}
