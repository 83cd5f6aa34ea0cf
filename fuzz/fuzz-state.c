/*
 * fuzz-state.c: libFuzzer harness for the decoding of a key's stored
 * state.  A state file edited by someone else must be refused, never
 * trusted into undefined behaviour: whatever the decoder and the record
 * check accept, every algorithm must then decide, release, convert and
 * shift on without a sanitizer report, and:
 *	- every state it writes passes its own valid() (abort otherwise);
 *	- a refusal hands back the state exactly as it was.
 *
 * Input: 1 byte algorithm, 4 x 8 bytes count, period, burst, granularity,
 * 3 x 8 bytes state, 8 bytes now, 8 bytes cost, then the slots blob.
 */
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define HEAD (1 + 8 * 9)

static struct slot slots[SLOTS_MAX + 2], room[SLOTS_MAX + 2];

static int64_t
get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return (int64_t)v;
}

static void
must_be_valid(const struct limit *l, const struct kstate *s)
{
	if (l->algo->valid(l, s) == -1)
		abort(); /* the algorithm wrote a state it refuses */
}

static int
same_state(const struct kstate *a, const struct kstate *b)
{
	return memcmp(a->v, b->v, sizeof(a->v)) == 0 &&
	    a->nslots == b->nslots &&
	    (a->nslots == 0 ||
		memcmp(a->slots, b->slots, a->nslots * sizeof(*a->slots)) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct keyrec rec;
	struct kstate next;
	struct decision d;
	struct limit other;
	const char *err;
	int64_t now, cost, n, ahead;
	int i, nalgo = 0;

	if (size < HEAD)
		return 0;
	while (algo_table[nalgo] != NULL)
		nalgo++;
	memset(&rec, 0, sizeof(rec));
	rec.limit.algo = algo_table[data[0] % nalgo];
	rec.limit.count = get64(data + 1);
	rec.limit.period = get64(data + 9);
	rec.limit.burst = get64(data + 17);
	rec.limit.granularity = get64(data + 25);
	for (i = 0; i < STATE_FIELDS; i++)
		rec.state.v[i] = get64(data + 33 + 8 * i);
	now = get64(data + 57);
	cost = get64(data + 65);
	n = slots_decode(data + HEAD, size - HEAD, slots, SLOTS_MAX + 1);
	if (n < 0)
		return 0;
	rec.state.slots = slots;
	rec.state.nslots = (size_t)n;
	if (limit_check_record(&rec, &err) == -1)
		return 0;
	/* what consume would do with it: a time and cost in range */
	if (now < 0 || now >= TIME_MAX || cost < 0 || cost > rec.limit.burst)
		return 0;
	memset(&next, 0, sizeof(next));
	next.slots = room;
	rec.limit.algo->decide(&rec.limit, &rec.state, now, cost, &d, &next);
	if (d.allowed)
		must_be_valid(&rec.limit, &next);
	else if (!same_state(&rec.state, &next))
		abort(); /* a refusal changed the state */
	next.nslots = 0;
	rec.limit.algo->release(&rec.limit, &rec.state, now, cost, &next);
	must_be_valid(&rec.limit, &next);
	other = rec.limit;
	other.count = rec.limit.count / 2 + 1;
	other.burst = other.count;
	if (limit_validate(&other, &err) == 0) {
		next.nslots = 0;
		rec.limit.algo->convert(&rec.limit, &other, &rec.state, now,
		    &next);
		must_be_valid(&other, &next);
	}
	/* a longer period: units may be kept, not time */
	other = rec.limit;
	other.period = rec.limit.period <= DURATION_MAX / 7
	    ? rec.limit.period * 7
	    : rec.limit.period;
	if (limit_validate(&other, &err) == 0) {
		next.nslots = 0;
		rec.limit.algo->convert(&rec.limit, &other, &rec.state, now,
		    &next);
		must_be_valid(&other, &next);
	}
	/* the same state saved later than now: moved back, still valid */
	rec.written_at =
	    now < TIME_MAX - 1 ? now + 1 + (int64_t)(cost % 1000) : now;
	next.nslots = 0;
	limit_carry(&rec.limit, &rec, 1, now, &next, &ahead);
	must_be_valid(&rec.limit, &next);
	/* saved earlier, moved back by some amount: carried forward again
	 * to where it came from, still valid */
	rec.written_at = now - (int64_t)(cost % 3600) * 1000000 > 0
	    ? now - (int64_t)(cost % 3600) * 1000000
	    : 0;
	rec.ahead = (int64_t)(cost % 7200) * 1000000;
	next.nslots = 0;
	limit_carry(&rec.limit, &rec, 1, now, &next, &ahead);
	must_be_valid(&rec.limit, &next);
	return 0;
}
