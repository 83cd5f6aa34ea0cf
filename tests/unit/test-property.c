/*
 * test-property.c: properties every algorithm keeps, over random
 * sequences of calls as the commands make them (limit_carry(), then
 * decide or release, then save), with times that go forward, stay, step
 * back a little or a year, costs from 0 to past the burst, releases of
 * more than was taken, and limits that change:
 *
 *	1. Every state an algorithm writes passes its own valid(), so a key
 *	   can never be bricked by its own algorithm.
 *	2. No answer asks for a wait longer than the key's limits (any it has
 *	   had in the sequence) could ask for from rest: a clock that was a
 *	   year ahead does not lock a key for a year.
 *	3. remaining is between 0 and the burst; waits are not negative.
 *
 * Seeded, so a failure repeats: the message names the algorithm, seed and
 * step.
 */
#include <stdlib.h>
#include <string.h>

#include "throttle.h"
#include "unit.h"

#define S INT64_C(1000000)
#define YEAR (INT64_C(365) * 86400 * S)
#define ROOM (SLOTS_MAX + 2)
#define SEQUENCES 1500
#define STEPS 60

static struct slot saved[ROOM], cur_slots[ROOM], next_slots[ROOM];
static uint64_t rng;

static uint64_t
rnd(void)
{
	/* xorshift64* */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dULL;
}

static int64_t
upto(int64_t n)
{
	return n <= 0 ? 0 : (int64_t)(rnd() % (uint64_t)(n + 1));
}

static const int64_t periods[] = { 1000, 50000, S, 10 * S, 60 * S, 3600 * S,
	86400 * S };

static struct limit
rand_limit(const struct algo *a)
{
	struct limit l;
	const char *err;

	do {
		memset(&l, 0, sizeof(l));
		l.algo = a;
		l.count = 1 + upto(rnd() % 4 == 0 ? 1000 : 9);
		l.period =
		    periods[rnd() % (sizeof(periods) / sizeof(*periods))];
		l.burst = a->takes_burst && rnd() % 2 ? 1 + upto(3 * l.count)
						      : l.count;
		if (a->takes_granularity)
			l.granularity = rnd() % 3 == 0
			    ? algo_sliding.default_granularity(l.period)
			    : l.period / (1 + upto(20));
	} while (limit_validate(&l, &err) == -1);
	return l;
}

/*
 * The longest wait a key may ask for: its limit's horizon from rest, plus
 * a clock step back of up to a horizon, which limit_carry() leaves to the
 * algorithm to wait out.
 */
static int64_t
horizon(const struct limit *l)
{
	/* hybrid keeps a window a step back left starting ahead of now (a
	 * period at most), and the debt its last unit then leaves: its key
	 * may be three periods from rest, so a step back and forward admits
	 * no more than without it (algo-hybrid.c, invariant 4) */
	return (l->algo == &algo_hybrid ? 3 : 2) * limit_horizon(l) + 1;
}

static void
copy_state(struct kstate *to, const struct kstate *from, struct slot *room)
{
	memcpy(to->v, from->v, sizeof(to->v));
	memcpy(room, from->slots, from->nslots * sizeof(struct slot));
	to->slots = room;
	to->nslots = from->nslots;
}

struct seq {
	const struct algo *a;
	uint64_t seed;
	int step;
	struct keyrec rec;
	int found;
	int64_t now, longest;
	int64_t ahead; /* what limit_carry() said to save as rec.ahead */
	int failed;
};

static void
fail(struct seq *q, const char *what)
{
	static int shown;

	if (q->failed++ == 0 && shown++ < 5)
		printf("# %s, seed %llu, step %d: %s\n", q->a->name,
		    (unsigned long long)q->seed, q->step, what);
}

/* Save next as the key's state under l, as a command does. */
static void
save(struct seq *q, const struct limit *l, const struct kstate *next)
{
	const char *err;

	if (l->algo->valid(l, next) == -1)
		fail(q, "wrote a state its own valid() refuses");
	q->rec.limit = *l;
	copy_state(&q->rec.state, next, saved);
	q->rec.written_at = q->now;
	q->rec.ahead = q->ahead;
	q->found = 1;
	if (limit_check_record(&q->rec, &err) == -1)
		fail(q, "saved a record limit_check_record() refuses");
}

static void
check_decision(struct seq *q, const struct limit *l, const struct decision *d)
{
	if (d->remaining < 0 || d->remaining > l->burst)
		fail(q, "remaining out of range");
	if (d->retry_after < 0 || d->reset_after < 0)
		fail(q, "a negative wait");
	if (d->retry_after > q->longest || d->reset_after > q->longest)
		fail(q, "a wait longer than any of the key's limits asks for");
}

static void
step(struct seq *q, struct limit *l)
{
	struct kstate cur = { { 0 }, cur_slots, 0 };
	struct kstate next = { { 0 }, next_slots, 0 };
	struct decision d;
	int64_t jump, cost;
	int moved, kind = (int)(rnd() % 10);

	switch (rnd() % 8) {
	case 0:
		jump = 0;
		break;
	case 1:
		jump = -upto(l->period / 10 + 1); /* racing callers */
		break;
	case 2:
		jump = rnd() % 2 ? YEAR : -YEAR;
		break;
	case 3:
		jump = upto(4 * l->period);
		break;
	default:
		jump = upto(l->period / 2 + 1);
		break;
	}
	q->now += jump;
	if (q->now < 0)
		q->now = upto(S);
	if (q->now > TIME_MAX - 2 * YEAR)
		q->now = TIME_MAX - 2 * YEAR;
	if (kind == 0) {
		*l = rand_limit(q->a);
		if (horizon(l) > q->longest)
			q->longest = horizon(l);
	}
	moved = limit_carry(l, &q->rec, q->found, q->now, &cur, &q->ahead);
	if (l->algo->valid(l, &cur) == -1)
		fail(q, "limit_carry() gave a state valid() refuses");
	if (kind <= 6) {
		cost = upto(l->burst);
		l->algo->decide(l, &cur, q->now, cost, &d, &next);
		check_decision(q, l, &d);
		if (d.allowed)
			save(q, l, &next);
		else if (moved)
			save(q, l, &cur); /* a refusal keeps the moved state */
		else if (l->algo->valid(l, &next) == -1)
			fail(q,
			    "a refusal handed back a state valid() refuses");
	} else if (kind <= 8) {
		l->algo->release(l, &cur, q->now, upto(3 * l->burst), &next);
		save(q, l, &next);
		/* and the key answers for itself afterwards */
		cur.nslots = 0;
		l->algo->decide(l, &next, q->now, 0, &d, &cur);
		check_decision(q, l, &d);
	} else {
		l->algo->decide(l, &cur, q->now, 0, &d, &next);
		check_decision(q, l, &d);
	}
}

static void
algorithm(const struct algo *a)
{
	struct seq q;
	struct limit l;
	int n, failures = 0;

	for (n = 0; n < SEQUENCES; n++) {
		memset(&q, 0, sizeof(q));
		q.a = a;
		q.seed = rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(n + 1) ^
		    (uint64_t)(a->name[0]);
		l = rand_limit(a);
		q.longest = horizon(&l);
		q.now = 1700000000 * S + upto(S);
		for (q.step = 0; q.step < STEPS && !q.failed; q.step++)
			step(&q, &l);
		failures += q.failed != 0;
	}
	CHECK(failures == 0,
	    "%s: %d random sequences of %d calls keep every property", a->name,
	    SEQUENCES, STEPS);
}

/* The reproductions, exactly. */
static void
examples(void)
{
	struct seq q;
	struct limit l;
	int64_t times[] = { 1000, 1000, 900, 1000 };
	int i, n;

	memset(&q, 0, sizeof(q));
	q.a = algo_find("hybrid");
	l = (struct limit){ q.a, 3, 10 * S, 3, 0 };
	q.longest = horizon(&l);
	for (i = 0; i < 4; i++) {
		struct kstate cur = { { 0 }, cur_slots, 0 };
		struct kstate next = { { 0 }, next_slots, 0 };
		struct decision d;

		q.now = times[i] * S;
		limit_carry(&l, &q.rec, q.found, q.now, &cur, &q.ahead);
		l.algo->decide(&l, &cur, q.now, 1, &d, &next);
		if (d.allowed)
			save(&q, &l, &next);
	}
	CHECK(!q.failed, "hybrid 3/10s at t=1000, 1000, 900, 1000 stays valid");

	/* a year ahead, then back: waits are the limit's, not the year's */
	for (n = 0; algo_table[n] != NULL; n++) {
		struct kstate cur = { { 0 }, cur_slots, 0 };
		struct kstate next = { { 0 }, next_slots, 0 };
		struct decision d;

		memset(&q, 0, sizeof(q));
		q.a = algo_table[n];
		l = (struct limit){ q.a, 3, 60 * S, 3,
			q.a->takes_granularity ? S : 0 };
		q.now = 1000 * S + YEAR;
		limit_carry(&l, &q.rec, 0, q.now, &cur, &q.ahead);
		l.algo->decide(&l, &cur, q.now, 3, &d, &next);
		save(&q, &l, &next);
		q.now = 1001 * S;
		cur.nslots = next.nslots = 0;
		i = limit_carry(&l, &q.rec, 1, q.now, &cur, &q.ahead);
		l.algo->decide(&l, &cur, q.now, 1, &d, &next);
		CHECK(i == 1 && !d.allowed && d.retry_after <= 60 * S &&
			d.reset_after <= 2 * 60 * S,
		    "%s: a key saved a year ahead waits at most its period "
		    "(retry %lld us, reset %lld us)",
		    q.a->name, (long long)d.retry_after,
		    (long long)d.reset_after);
	}
}

int
main(void)
{
	int i;

	for (i = 0; algo_table[i] != NULL; i++)
		algorithm(algo_table[i]);
	examples();
	return unit_done();
}
