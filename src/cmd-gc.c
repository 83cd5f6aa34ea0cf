/*
 * cmd-gc.c: forget what nothing is lost by forgetting: every key's limit
 * that is back at rest, every ended lockout, every lease that has ended
 * (TTL passed, or owner on this host gone), and every shedder idle for a
 * day (its load long out of date).  consume tidies a few
 * rows on every write as well, so a busy state file stays bounded without
 * anyone running gc.  gc changes rows all over the file, so it checks the
 * whole file first, and leaves a corrupt one as it is: every page and
 * the order of the keys (integrity_check: a changed byte inside a key
 * leaves each page well-formed, which quick_check passes), and every
 * record read as a command would read it, so a record no command would
 * trust (edited, damaged, or a newer throttle's) is never forgotten on
 * the strength of its expiry alone.
 */
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

struct dead {
	struct host me;
	int64_t now;
	struct {
		char *key; /* its own copy: a key may be 1024 bytes */
		size_t keylen;
		char id[LEASE_ID_LEN + 1];
	} * v;
	size_t n, cap;
	int64_t keys, lockouts, sheds;
	size_t gone; /* ended leases forgotten */
	size_t at, key_gone; /* gc_key_body(): the key, and its leases gone */
};

/*
 * The ended leases one transaction a key (gc_key_body()): on a Redis
 * Cluster, whose transactions write one key, and on any Redis store,
 * where a lease is read from its key's hash (one round trip each).
 */
static int
per_key(const struct ctx *c)
{
	return store_one_key(c->store) || store_is_remote(c->db);
}

static int
collect(const char *key, size_t keylen, const struct lease *l, void *arg)
{
	struct dead *d = arg;

	if (lease_live(l, d->now, host_owner_state(&d->me, l)))
		return 0;
	if (d->n == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 16;
		d->v = xrealloc(d->v, d->cap * sizeof(*d->v));
	}
	d->v[d->n].key = xmalloc(keylen + 1);
	memcpy(d->v[d->n].key, key, keylen);
	d->v[d->n].keylen = keylen;
	memcpy(d->v[d->n].id, l->id, sizeof(d->v[d->n].id));
	d->n++;
	return 0;
}

/* Forget the ended leases collected so far. */
static void
dead_clear(struct dead *d)
{
	size_t i;

	for (i = 0; i < d->n; i++)
		free(d->v[i].key);
	d->n = 0;
}

/*
 * Forget the leases of d that are still held, each as found: 0 or -1;
 * *gone counts those forgotten (another process may have freed some).
 */
static int
forget_leases(struct ctx *c, const struct dead *d, size_t *gone)
{
	size_t i;
	int r;

	for (i = 0; i < d->n; i++) {
		if ((r = store_lease_del(c->store, d->v[i].key, d->v[i].keylen,
			 d->v[i].id)) == -1)
			return -1;
		*gone += (size_t)r;
	}
	return 0;
}

static int
gc_body(struct ctx *c, void *arg, struct answer *ans)
{
	struct dead *d = arg;

	dead_clear(d);
	d->gone = 0;
	if (ctx_now(c, ans) == -1)
		return -1;
	d->now = c->now;
	if (store_missing(c->store, NULL, 0))
		return 0; /* no file (none is made): nothing to forget */
	if (store_verify(c->store, 0) == -1 ||
	    /* every record read and checked, none kept */
	    store_list(c->store, NULL, NULL) == -1 ||
	    store_lockout_list(c->store, NULL, NULL) == -1 ||
	    store_shed_list(c->store, NULL, NULL) == -1 ||
	    store_lease_list(c->store, NULL, 0, collect, d) == -1 ||
	    (d->keys = store_tidy(c->store, c->now, 0)) == -1)
		return ctx_fail(c, ans);
	d->lockouts = store_tidied_lockouts(c->store);
	d->sheds = store_tidied_sheds(c->store);
	if (per_key(c))
		return 0; /* one transaction a key: gc_key_body() */
	if (forget_leases(c, d, &d->gone) == -1)
		return ctx_fail(c, ans);
	return 0;
}

/*
 * On the Redis store: the ended leases of one key, d->v[d->at], found
 * again and forgotten in a transaction of the key's own, so that one
 * renewed meanwhile is kept, and so that a store with many ended leases
 * is not one transaction that must read them all within --lock-timeout
 * (and, if any of their keys is written meanwhile, be done again).
 */
static int
gc_key_body(struct ctx *c, void *arg, struct answer *ans)
{
	struct dead *d = arg, one;
	int r = 0;

	if (ctx_now(c, ans) == -1)
		return -1;
	memset(&one, 0, sizeof(one));
	one.me = d->me;
	one.now = c->now;
	d->key_gone = 0;
	if (store_lease_list(c->store, d->v[d->at].key, d->v[d->at].keylen,
		collect, &one) == -1 ||
	    forget_leases(c, &one, &d->key_gone) == -1)
		r = ctx_fail(c, ans);
	dead_clear(&one);
	free(one.v);
	return r;
}

static void
gc_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct dead d;
	struct record *r;
	char miss[STORE_ERR_MAX];
	int ok;

	(void)a;
	memset(&d, 0, sizeof(d));
	host_self(&d.me);
	ok = txn_run(c, 1, gc_body, &d, ans) == 0;
	if (ok && per_key(c))
		for (d.at = 0; d.at < d.n && ok; d.at++) {
			/* the leases of a key are listed together: once */
			if (d.at > 0 &&
			    d.v[d.at].keylen == d.v[d.at - 1].keylen &&
			    memcmp(d.v[d.at].key, d.v[d.at - 1].key,
				d.v[d.at].keylen) == 0)
				continue;
			d.key_gone = 0;
			ok = txn_run(c, 1, gc_key_body, &d, ans) == 0;
			d.gone += d.key_gone;
		}
	if (ok && c->store != NULL &&
	    store_missing(c->store, miss, sizeof(miss)))
		/* a typo in --db: say so (unless -q: a cron job on a host
		 * that has not decided anything yet mails nothing) */
		answer_say(ans, MSG_INFO, "%s", miss);
	if (ok) {
		r = answer_record(ans, TEXT_LINE);
		rec_line(ans, r,
		    "removed %lld key%s at rest, %zu ended lease%s, "
		    "%lld ended lockout%s and %lld idle shedder%s",
		    (long long)d.keys, d.keys == 1 ? "" : "s", d.gone,
		    d.gone == 1 ? "" : "s", (long long)d.lockouts,
		    d.lockouts == 1 ? "" : "s", (long long)d.sheds,
		    d.sheds == 1 ? "" : "s");
		/* -q: a nightly cron job mails nothing (json and shell still
		 * print the counts they were asked for) */
		if (c->quiet)
			r->text = TEXT_NONE;
		rec_int(r, "keys", d.keys, 0);
		rec_int(r, "leases", (int64_t)d.gone, 0);
		rec_int(r, "lockouts", d.lockouts, 0);
		rec_int(r, "shedders", d.sheds, 0);
	}
	dead_clear(&d);
	free(d.v);
}

const struct cmd_entry cmd_gc_entry = {
	.name = "gc",
	.args = "",
	.summary = "forget keys at rest, ended leases and lockouts, idle "
		   "shedders; print how many",
	.options = 0,
	.min_args = 0,
	.max_args = 0,
	.makes_no_file = 1,
	.runs_long = 1,
	.exec = gc_exec,
};
