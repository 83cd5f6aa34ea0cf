/*
 * keystate.c: the limits of one key, inside a transaction: loaded from the
 * store, carried to the decision's time (limit_carry()), decided on
 * together, and saved.  A compound limit is several limits on one key;
 * this is the one place that combines them:
 *
 *	1. A request is allowed only if every limit allows it; then every
 *	   limit is charged, and if any refuses, none is.
 *	2. remaining is the fewest any limit has left, retry_after the
 *	   longest any refusing limit asks, reset_after the binding limit's
 *	   (each limit's own is in the answer's limits).
 *	3. The binding limit, which the answer names, is the one with the
 *	   longest wait, then the fewest units left.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

/* Start work on key (its bytes must outlive k). */
void
keystate_init(struct keywork *k, const char *key, size_t keylen)
{
	/* all but the limits' work, w[]: keystate_load() starts each one it
	 * uses (a batch starts a keywork per request, and uses one) */
	memset(k, 0, offsetof(struct keywork, w));
	memset((char *)k + offsetof(struct keywork, d), 0,
	    sizeof(*k) - offsetof(struct keywork, d));
	k->key = key;
	k->keylen = keylen;
}

/* Start a limit's work: all but its copy of the key (1 KiB, set as it is
 * read). */
static void
work_init(struct work *w)
{
	memset((char *)w + offsetof(struct work, rec.keylen), 0,
	    sizeof(*w) - offsetof(struct work, rec.keylen));
	w->rec.key[0] = '\0';
}

static void
unprepare(struct work *w)
{
	free(w->rec.state.slots);
	free(w->cur.slots);
	free(w->next.slots);
	w->rec.state.slots = w->cur.slots = w->next.slots = NULL;
	w->rec.state.nslots = w->cur.nslots = w->next.nslots = 0;
}

/* Free what keystate_load() allocated; safe to call again. */
void
keystate_free(struct keywork *k)
{
	int i;

	for (i = 0; i < k->n; i++)
		unprepare(&k->w[i]);
	k->n = 0;
}

/*
 * Which stored limit each of the n requested limits takes its state from
 * (from[i], -1 for none), and with all, the stored limits no request took
 * (from[n...]): the total in *total.  A stored limit is found by what it
 * is, not where it was saved, so a compound limit written in another
 * order keeps each limit's own state:
 *	1. the same limit, wherever it was saved;
 *	2. else the state saved in its place, if no request took it (the
 *	   limit was changed: the state is carried over);
 *	3. else a state saved elsewhere that no request took, of the same
 *	   algorithm and period (its count or burst changed, and it moved);
 *	4. else, if it is the one request left with none and one state of
 *	   its algorithm and a shorter period is the one no request took,
 *	   that state (the limit was lengthened and given in another
 *	   place: '10/1h;100/1d' to '100/1d;10/10h');
 *	5. else none: the limit starts at rest.  A state is forgotten once
 *	   its limit is at rest (gc, tidying), so a place with none is no
 *	   sign of a new limit, and a state of a longer period is never
 *	   taken from elsewhere (a day's use would refuse a minute's
 *	   limit, when the minute's own state was only forgotten).
 * Every rule takes only states not yet at rest at now: one at rest may
 * be forgotten at any time, and the answer must not depend on whether
 * it has been (it would claim a place, or a request, that once it is
 * forgotten goes to a state still in use).
 * Returns nonzero if any limit comes from another place than its own, or
 * leaves a state in use in its own place untaken (a state at rest there
 * is simply written over: no rows need moving, and no trim).
 */
static int
match(const struct keywork *k, const int *found, int m,
    const struct limit *lims, int n, int all, int64_t now, int *from,
    int *total)
{
	int used[LIMITS_MAX] = { 0 }, live[LIMITS_MAX] = { 0 }, i, j, moved = 0;
	int ni, nj, nn, nm;

	/* a state at rest is as good as forgotten (gc may have): it is
	 * taken by no request, nor a sign of a changed limit */
	for (j = 0; j < m; j++)
		live[j] = found[j] && k->w[j].rec.rest_at > now;

	for (i = 0; i < n; i++) {
		from[i] = -1;
		for (j = 0; j < m && from[i] == -1; j++)
			if (live[j] && !used[j] &&
			    limit_same(&k->w[j].rec.limit, &lims[i]))
				used[from[i] = j] = 1;
	}
	for (i = 0; i < n; i++)
		if (i < m && from[i] == -1 && live[i] && !used[i])
			used[from[i] = i] = 1;
	for (i = 0; i < n; i++)
		for (j = 0; j < m && from[i] == -1; j++)
			if (live[j] && !used[j] &&
			    k->w[j].rec.limit.algo == lims[i].algo &&
			    k->w[j].rec.limit.period == lims[i].period)
				used[from[i] = j] = 1;
	/* 4. one limit changed, period and all, and given elsewhere */
	for (i = 0, ni = -1, nn = 0; i < n; i++)
		if (from[i] == -1)
			ni = i, nn++;
	for (j = 0, nj = -1, nm = 0; j < m; j++)
		if (live[j] && !used[j])
			nj = j, nm++;
	if (nn == 1 && nm == 1 && k->w[nj].rec.limit.algo == lims[ni].algo &&
	    k->w[nj].rec.limit.period < lims[ni].period)
		used[from[ni] = nj] = 1;
	*total = n;
	/* with all, the states in use no request took (one at rest is as
	 * good as forgotten: taken along, it would be saved again beside
	 * its own limit's new state, a limit twice) */
	for (j = 0; all && j < m; j++)
		if (live[j] && !used[j])
			used[from[(*total)++] = j] = 1;
	for (i = 0; i < *total; i++)
		if (from[i] != i && (from[i] != -1 || (i < m && live[i])))
			moved = 1;
	return moved;
}

/*
 * Load the key's limits: the n in lims (each decided under its lims[i],
 * with the state match() finds for it, or none), and with all, every
 * further limit the key has stored, under its own stored limit.  Buffers
 * get room for what an algorithm writes.  The decision's time is read here,
 * after the key, into c->now: callers take it from there and read no clock
 * of their own.  0, or -1 with the store's error in the answer.
 */
int
keystate_load(struct ctx *c, struct keywork *k, const struct limit *lims, int n,
    int all, struct answer *a)
{
	int found[LIMITS_MAX], from[LIMITS_MAX], m = 0, total, reordered, i, j;
	struct work *w, *was;

	keystate_free(k);
	/* every limit stored, in the place it was saved in */
	for (j = 0; j < LIMITS_MAX; j++) {
		work_init(&k->w[j]);
		if ((found[j] = store_load(c->store, k->key, k->keylen, j,
			 &k->w[j].rec)) == -1) {
			for (i = 0; i <= j; i++)
				unprepare(&k->w[i]);
			return ctx_fail(c, a);
		}
		m = j + 1;
		if (!k->w[j].rec.more)
			break;
	}
	/* the time, read with the key (one round trip on Redis): which
	 * states are at rest (match()) */
	if (ctx_now(c, a) == -1) {
		for (j = 0; j < m; j++)
			unprepare(&k->w[j]);
		return -1;
	}
	reordered = match(k, found, m, lims, n, all, c->now, from, &total);
	k->trim = reordered;
	for (j = 0; j < m; j++)
		if (found[j] && j >= total)
			k->trim = 1; /* a limit the key no longer has */
	if (reordered) {
		was = xmalloc((size_t)m * sizeof(*was));
		memcpy(was, k->w, (size_t)m * sizeof(*was));
		for (i = 0; i < total; i++)
			if (from[i] >= 0)
				memcpy(&k->w[i], &was[from[i]], sizeof(*was));
			else
				work_init(&k->w[i]);
		for (j = 0; j < m; j++) {
			for (i = 0; i < total && from[i] != j; i++)
				;
			if (i == total)
				free(was[j].rec.state.slots); /* not taken */
		}
		free(was);
	} else {
		for (j = total; j < m; j++)
			unprepare(&k->w[j]);
		for (i = m; i < total; i++)
			work_init(&k->w[i]);
	}
	for (i = 0; i < total; i++) {
		w = &k->w[i];
		w->found = from[i] >= 0;
		w->at = from[i];
		w->lim = i < n ? lims[i] : w->rec.limit;
		w->cur.slots =
		    xcalloc(w->rec.state.nslots + 1, sizeof(struct slot));
		w->next.slots =
		    xcalloc(w->rec.state.nslots + 2, sizeof(struct slot));
	}
	k->n = total;
	return 0;
}

/* Start every limit afresh, as if the key had never been used. */
void
keystate_forget(struct keywork *k)
{
	int i;

	for (i = 0; i < k->n; i++)
		k->w[i].found = 0;
}

/* Every limit's state as it stands at now (moved back if saved later). */
void
keystate_carry(struct keywork *k, int64_t now)
{
	int i;

	for (i = 0; i < k->n; i++) {
		k->w[i].cur.nslots = 0;
		k->w[i].moved = limit_carry(&k->w[i].lim, &k->w[i].rec,
		    k->w[i].found, now, &k->w[i].cur, &k->w[i].ahead);
	}
}

/* How far the key's states were moved back with the clock: the most. */
int64_t
keystate_ahead(const struct keywork *k)
{
	int64_t most = 0;
	int i;

	for (i = 0; i < k->n; i++)
		if (k->w[i].ahead > most)
			most = k->w[i].ahead;
	return most;
}

/* Give the limits begun afresh (not found) how far the clock is back. */
void
keystate_fresh_ahead(struct keywork *k, int64_t ahead)
{
	int i;

	for (i = 0; i < k->n; i++)
		if (!k->w[i].found && k->w[i].ahead == 0)
			k->w[i].ahead = ahead;
}

/* The latest time a found limit was saved at (0 if none was found). */
int64_t
keystate_latest(const struct keywork *k)
{
	int64_t latest = 0;
	int i;

	for (i = 0; i < k->n; i++)
		if (k->w[i].found && k->w[i].rec.written_at > latest)
			latest = k->w[i].rec.written_at;
	return latest;
}

/* Decide every limit for cost units at time at; then combine. */
void
keystate_decide(struct keywork *k, int64_t at, int64_t cost)
{
	int i;

	for (i = 0; i < k->n; i++) {
		struct work *w = &k->w[i];

		w->next.nslots = 0;
		w->lim.algo->decide(&w->lim, &w->cur, at, cost, &w->d,
		    &w->next);
		/* a state converted from another limit reads as none once
		 * it is at rest under its own (limit_carry()): a refusal
		 * waits until then at the latest, and the key is at rest
		 * then (a converted window can end a whole new period
		 * later than the old one did).  Not one the clock moved:
		 * the refusal saves it converted (SAVE_MOVED), its rest
		 * from this reset_after, and the old state is gone */
		if (!w->d.allowed && w->found && !w->moved &&
		    w->rec.limit.algo == w->lim.algo &&
		    !limit_same(&w->rec.limit, &w->lim) &&
		    w->rec.rest_at > at && w->d.retry_after < DURATION_MAX) {
			int64_t rest = w->rec.rest_at - at;

			if (w->d.retry_after > rest)
				w->d.retry_after = rest;
			if (w->d.reset_after > rest)
				w->d.reset_after = rest;
		}
	}
	keystate_combine(k);
}

/*
 * Whether every limit's next state is one a load reads back: a
 * reservation far off (years of waiters stacked, a refill of millennia)
 * could put its times past what a state may hold.
 */
int
keystate_storable(const struct keywork *k)
{
	int i;

	for (i = 0; i < k->n; i++)
		if (k->w[i].lim.algo->valid(&k->w[i].lim, &k->w[i].next) == -1)
			return 0;
	return 1;
}

/*
 * A refused request charges no limit: each limit that would have allowed
 * it alone is shown as it stands (decided at cost 0), as a refused single
 * limit is, not as if charged.  Then combine again.
 */
void
keystate_refused(struct keywork *k, int64_t at)
{
	int i;

	for (i = 0; i < k->n; i++) {
		if (!k->w[i].d.allowed)
			continue;
		k->w[i].next.nslots = 0;
		k->w[i].lim.algo->decide(&k->w[i].lim, &k->w[i].cur, at, 0,
		    &k->w[i].d, &k->w[i].next);
	}
	keystate_combine(k);
}

/* The limits' decisions as one (invariant 2), and the binding limit. */
void
keystate_combine(struct keywork *k)
{
	struct decision ds[LIMITS_MAX];
	int i;

	for (i = 0; i < k->n; i++)
		ds[i] = k->w[i].d;
	k->bind = limit_combine(ds, k->n, &k->d);
}

/*
 * Save the key's limits: with SAVE_CHARGED each limit's next state (the
 * decision's, or a release's), back at rest reset_after from at; with
 * SAVE_MOVED only the states limit_carry() moved, uncharged (a refusal
 * keeps those, or they would move again), each where it was found.  A
 * key that had more limits than it has now loses the rest, and one whose
 * limits were found in other places (match()) has them all rewritten in
 * the order given.  0, or -1 with the store's error.
 */
int
keystate_save(struct ctx *c, struct keywork *k, int how, int64_t at,
    struct answer *a)
{
	struct keyrec rec;
	i128 rest;
	int i;

	for (i = 0; i < k->n; i++) {
		if (how == SAVE_MOVED && !k->w[i].moved)
			continue;
		memset(&rec, 0, sizeof(rec));
		memcpy(rec.key, k->key, k->keylen);
		rec.key[k->keylen] = '\0';
		rec.keylen = k->keylen;
		/* a refusal leaves every state in the place it was found
		 * in (a moved one was found); a charge writes them all in
		 * the order they are now given, and trims the rest */
		rec.idx = how == SAVE_MOVED ? k->w[i].at : i;
		rec.limit = k->w[i].lim;
		rec.state = how == SAVE_MOVED ? k->w[i].cur : k->w[i].next;
		/* still on a clock stepped back: by how much; and then it
		 * is kept until at rest on the clock put right (gc must not
		 * forget it while the clock is back, and a step forward
		 * then find the key afresh) */
		rec.ahead = k->w[i].ahead;
		rest = (i128)at + k->w[i].d.reset_after + rec.ahead;
		/* (a unit converted to a limit near the longest duration
		 * can rest past the last time: kept, never to be at rest) */
		rec.rest_at = rest > INT64_MAX ? INT64_MAX : (int64_t)rest;
		rec.written_at = c->now;
		if (store_save(c->store, &rec) == -1)
			return ctx_fail(c, a);
	}
	if (how == SAVE_CHARGED && k->trim &&
	    store_trim(c->store, k->key, k->keylen, k->n) == -1)
		return ctx_fail(c, a);
	return 0;
}

/*
 * Undo a decision: write back, for each limit, the state the decision in
 * ours started from (ours->w[i].cur), where k has just loaded what it
 * saved.  Each keeps the time it was to be back at rest (a later one than
 * the state now written needs, which only keeps it longer from gc).  0,
 * or -1 with the store's error.
 */
int
keystate_restore(struct ctx *c, const struct keywork *k,
    const struct keywork *ours, struct answer *a)
{
	struct keyrec rec;
	int i;

	for (i = 0; i < ours->n; i++) {
		memset(&rec, 0, sizeof(rec));
		memcpy(rec.key, ours->key, ours->keylen);
		rec.key[ours->keylen] = '\0';
		rec.keylen = ours->keylen;
		rec.idx = i;
		rec.limit = ours->w[i].lim;
		rec.state = ours->w[i].cur;
		rec.rest_at = k->w[i].rec.rest_at;
		rec.written_at = c->now;
		rec.ahead = ours->w[i].ahead;
		if (store_save(c->store, &rec) == -1)
			return ctx_fail(c, a);
	}
	return 0;
}

/*
 * Give cost units back to every limit at now, never beyond capacity: each
 * limit's next state is the key after the release, and its decision (for
 * cost 0) what the key then reads.
 */
void
keystate_release(struct keywork *k, int64_t now, int64_t cost)
{
	struct work *w;
	int i;

	for (i = 0; i < k->n; i++) {
		w = &k->w[i];
		w->next.nslots = 0;
		w->lim.algo->release(&w->lim, &w->cur, now, cost, &w->next);
		/* the key as it now stands (cur is free to be scratch) */
		w->cur.nslots = 0;
		w->lim.algo->decide(&w->lim, &w->next, now, 0, &w->d, &w->cur);
	}
	keystate_combine(k);
	k->d.allowed = 1;
	k->d.retry_after = 0;
}

/*
 * A record of one key's numbers under limit l: a decision (decision
 * nonzero: whether it was allowed, and the cost it was for) or the key as
 * it stands (inspect, shown in text as "KEY name=value ...").
 */
struct record *
keystate_numbers(struct answer *a, const char *key, size_t keylen,
    const struct limit *l, const struct decision *d, int decision, int64_t cost)
{
	struct record *r = answer_record(a, decision ? TEXT_NONE : TEXT_FIELDS);

	rec_str(a, r, "key", key, keylen, 0);
	if (decision)
		rec_bool(r, "allowed", d->allowed, SHOW_MACHINE);
	rec_str(a, r, "algorithm", l->algo->name, strlen(l->algo->name), 0);
	rec_limit(r, "limit", l->count, l->period, 0);
	rec_secs(r, "period", l->period, SHOW_MACHINE);
	rec_int(r, "burst", l->burst, 0);
	if (l->algo->takes_granularity)
		rec_dur(r, "granularity", l->granularity, 0);
	if (decision)
		rec_int(r, "cost", cost, SHOW_MACHINE);
	rec_int(r, "remaining", d->remaining, 0);
	/* a wait without end (a lockout until reset) shows as never */
	rec_secs(r, "retry_after",
	    d->retry_after >= DURATION_MAX ? -1 : d->retry_after, 0);
	rec_secs(r, "reset_after",
	    d->reset_after >= DURATION_MAX ? -1 : d->reset_after, 0);
	return r;
}

/*
 * A key's lockout, if it is locked at now: locked_until (seconds since
 * the epoch) and lockout_after (seconds left); both "never" (json null,
 * shell empty) when it lasts until reset.
 */
void
keystate_lockout(struct answer *a, struct record *r, const struct lockout *lk,
    int64_t now)
{
	if (lk->until <= now)
		return;
	(void)a;
	if (lk->until == LOCKOUT_NEVER) {
		/* as every "never" is shown: json null, text never (text
		 * shows lockout_after only, as for a lockout with an end) */
		rec_secs(r, "locked_until", -1, SHOW_MACHINE);
		rec_secs(r, "lockout_after", -1, 0);
		return;
	}
	rec_secs(r, "locked_until", lk->until, SHOW_MACHINE);
	rec_secs(r, "lockout_after", lk->until - now, 0);
}

/*
 * The key's decision as a record of the answer.  The limit named is the
 * binding one (invariant 3); a compound limit adds each of its limits as
 * a sub-record (json "limits").
 */
struct record *
keystate_record(struct answer *a, const struct keywork *k, int decision,
    int64_t cost)
{
	struct record *r, *s;
	struct decision d = k->d;
	int i, locked = k->lk.until > k->now;

	/* w[bind] must be a loaded limit: keystate_load() starts only those,
	 * and every caller loads at least one */
	if (k->bind < 0 || k->bind >= k->n) {
		fputs("throttle: internal error: an answer with no limit "
		      "loaded\n",
		    stderr);
		abort();
	}
	/* while locked out nothing can be taken: none remains */
	if (locked)
		d.remaining = 0;
	r = keystate_numbers(a, k->key, k->keylen, &k->w[k->bind].lim, &d,
	    decision, cost);
	keystate_lockout(a, r, &k->lk, k->now);
	if (k->n > 1)
		for (i = 0; i < k->n; i++) {
			s = rec_sub(r);
			rec_int(s, "limit", k->w[i].lim.count, 0);
			rec_secs(s, "period", k->w[i].lim.period, 0);
			rec_int(s, "burst", k->w[i].lim.burst, 0);
			rec_bool(s, "allowed", k->w[i].d.allowed, 0);
			rec_int(s, "remaining",
			    locked ? 0 : k->w[i].d.remaining, 0);
			rec_secs(s, "retry_after", k->w[i].d.retry_after, 0);
			rec_secs(s, "reset_after", k->w[i].d.reset_after, 0);
		}
	return r;
}
