/*
 * limit.c: a key's limit, from the command line or as stored with the key,
 * checked before any algorithm sees it, and carried across a change.
 *
 * Invariants an algorithm may rely on for a limit that passed
 * limit_validate(): 1 <= count, 1 <= burst, 1 <= period <= DURATION_MAX,
 * and the delay tolerance burst * period / count <= DURATION_MAX, so
 * products of these with times fit in 128 bits.
 */
#include <string.h>

#include "throttle.h"

/* 0 if the limit is one an algorithm can work with. */
int
limit_validate(const struct limit *l, const char **errstr)
{
	if (l->algo == NULL) {
		*errstr = "has no algorithm";
		return -1;
	}
	if (l->count < 1) {
		*errstr = "allows nothing (N must be at least 1)";
		return -1;
	}
	if (l->period < 1 || l->period > DURATION_MAX) {
		*errstr = "has a period out of range";
		return -1;
	}
	if (l->burst < 1) {
		*errstr = "has a burst below 1";
		return -1;
	}
	if ((i128)l->burst * l->period / l->count > DURATION_MAX) {
		*errstr = "has a burst that would take more than 146000 years "
			  "to refill";
		return -1;
	}
	return 0;
}

/* Nonzero if two limits are the same in every parameter. */
int
limit_same(const struct limit *a, const struct limit *b)
{
	return a->algo == b->algo && a->count == b->count &&
	    a->period == b->period && a->burst == b->burst;
}

/*
 * The state to decide on under limit l, given what a key has stored (rec,
 * if found).  The same algorithm carries the state over, converting it if
 * the parameters changed; another algorithm starts the key afresh.
 */
void
limit_carry(const struct limit *l, const struct keyrec *rec, int found,
    struct kstate *out)
{
	memset(out, 0, sizeof(*out));
	if (!found || rec->limit.algo != l->algo)
		return;
	if (limit_same(&rec->limit, l))
		*out = rec->state;
	else
		l->algo->convert(&rec->limit, l, &rec->state, out);
}

/* 0 if a stored record is one throttle could have written. */
int
limit_check_record(const struct keyrec *rec, const char **errstr)
{
	if (limit_validate(&rec->limit, errstr) == -1)
		return -1;
	if (rec->limit.algo->valid(&rec->limit, &rec->state) == -1) {
		*errstr = "has a state out of range";
		return -1;
	}
	return 0;
}
