/*
 * store.c: the store interface, in front of store-sqlite.c (and later other
 * stores).  A command runs one transaction: begin, load, save or delete,
 * commit.  Every function returns -1 on failure and leaves a message that
 * names the store in store_error(); nothing here prints or exits.
 *
 * store_commit() may return STORE_RETRY when a store that works by
 * compare-and-set lost a race; the command then runs its transaction again.
 */
#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "throttle.h"

struct store {
	const struct store_ops *ops;
	void *impl;
	int held; /* store_close() leaves it open: store_free() closes it */
	int group; /* in a group transaction */
	char name[300]; /* as messages show it */
	char err[STORE_ERR_MAX];
};

/*
 * A record that failed its check: "NAME: the key 'KEY' WHY, which this
 * throttle cannot use; ..." in st->err.  Not "edited by something else":
 * nothing says who wrote it.
 */
static void
bad_record(struct store *st, const char *key, size_t keylen, const char *why)
{
	FILE *fp;

	if ((fp = fmemopen(st->err, sizeof(st->err), "w")) == NULL) {
		snprintf(st->err, sizeof(st->err), "%s: a key %s", st->name,
		    why);
		return;
	}
	fprintf(fp, "%s: the key '", st->name);
	escape_text(fp, key, keylen);
	fprintf(fp,
	    "' %s, which this throttle cannot use (throttle reset the key "
	    "to start it afresh)",
	    why);
	fclose(fp);
}

/*
 * The stores, by the scheme of --db: anything else that looks like
 * SCHEME://... is refused, so a URL throttle does not understand never
 * becomes a file of that name (a file whose name has "://" in it can be
 * given as ./NAME or by its absolute path).  A path is the SQLite store.
 */
static const struct scheme {
	const char *prefix;
	const struct store_ops *ops; /* NULL: this build has no such store */
} schemes[] = {
#ifdef THROTTLE_REDIS
	{ "redis://", &store_redis_ops },
	{ "rediss://", &store_redis_ops },
	{ "unix://", &store_redis_ops },
#else
	{ "redis://", NULL },
	{ "rediss://", NULL },
	{ "unix://", NULL },
#endif
};
#define NSCHEMES (sizeof(schemes) / sizeof(schemes[0]))

/* The scheme spec names, or NULL for a file path (or an unknown scheme). */
static const struct scheme *
find_scheme(const char *spec)
{
	size_t i;

	for (i = 0; i < NSCHEMES; i++)
		if (strncmp(spec, schemes[i].prefix,
			strlen(schemes[i].prefix)) == 0)
			return &schemes[i];
	return NULL;
}

/*
 * 0 if throttle knows what kind of store spec names, else -1 and why: a
 * SCHEME:// it does not support.
 */
int
store_check_spec(const char *spec, const char **why)
{
	size_t n = strspn(spec,
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+."
	    "-");

	if (find_scheme(spec) != NULL || n == 0 ||
	    strncmp(spec + n, "://", 3) != 0)
		return 0;
	*why = "is a URL of a kind throttle does not know; use redis://, "
	       "rediss:// or unix:// (a Redis server), or a file path (a "
	       "file whose name has :// in it: give it as ./NAME)";
	return -1;
}

/* Is spec a server's URL, not a file? */
int
store_is_remote(const char *spec)
{
	return find_scheme(spec) != NULL;
}

/*
 * spec as messages may show it: a Redis URL without its user and
 * password (and query), a file path as it is.
 */
void
store_display(const char *spec, char *buf, size_t len)
{
	const char *p, *at, *end;

	if (!store_is_remote(spec)) {
		snprintf(buf, len, "%s", spec);
		return;
	}
	p = strstr(spec, "://") + 3;
	end = p + strcspn(p, "/?");
	at = memchr(p, '@', (size_t)(end - p));
	snprintf(buf, len, "%.*s%.*s", (int)(p - spec), spec,
	    (int)strcspn(at != NULL ? at + 1 : p, "?"),
	    at != NULL ? at + 1 : p);
}

/*
 * Open the store named by spec: a file path, or a server's URL.  With
 * STORE_READ in flags the store is only read: nothing is created (a
 * missing file is a store with no keys) and nothing can be written.
 */
struct store *
store_open(const char *spec, int64_t lock_timeout, int flags, char *err,
    size_t errlen)
{
	const struct scheme *sc = find_scheme(spec);
	struct store *st;

	if (sc != NULL && sc->ops == NULL) {
		char name[300];

		store_display(spec, name, sizeof(name));
		snprintf(err, errlen,
		    "%s: this throttle was built without Redis support; "
		    "rebuild it with make REDIS=1 (needs libhiredis-dev)",
		    name);
		return NULL;
	}
	st = xcalloc(1, sizeof(*st));
	store_display(spec, st->name, sizeof(st->name));
	st->ops = sc != NULL ? sc->ops : &store_sqlite_ops;
	st->impl =
	    st->ops->open(spec, lock_timeout, flags, st->err, sizeof(st->err));
	if (st->impl == NULL) {
		snprintf(err, errlen, "%s", st->err);
		free(st);
		return NULL;
	}
	return st;
}

/* Start a transaction; write is nonzero if it may change anything. */
int
store_begin(struct store *st, int write)
{
	return st->ops->begin(st->impl, write);
}

/*
 * Start a group transaction: until store_group_end(), each begin and
 * commit is one request inside it, and store_close() leaves the store
 * open for the next.
 */
int
store_group_begin(struct store *st)
{
	if (st->ops->group_begin(st->impl) == -1)
		return -1;
	st->group = 1;
	return 0;
}

/* Commit (commit nonzero) or roll back the group: 0 or -1. */
int
store_group_end(struct store *st, int commit)
{
	st->group = 0;
	return st->ops->group_end(st->impl, commit);
}

/*
 * Load limit idx of a key: 1 if found, 0 if it has no state, -1 error.  A
 * record that throttle could not have written is an error, never decided
 * on: every store's records are checked here, the same way.
 */
int
store_load(struct store *st, const char *key, size_t keylen, int idx,
    struct keyrec *rec)
{
	const char *why;
	int found = st->ops->load(st->impl, key, keylen, idx, rec);

	if (found == 1 && limit_check_record(rec, &why) == -1) {
		bad_record(st, key, keylen, why);
		free(rec->state.slots);
		rec->state.slots = NULL;
		rec->state.nslots = 0;
		return -1;
	}
	return found;
}

/* Forget a key's limits from index n on. */
int
store_trim(struct store *st, const char *key, size_t keylen, int n)
{
	return st->ops->trim(st->impl, key, keylen, n);
}

/* The key's lockout into *k (k->until 0: none); checked as store_load(). */
int
store_lockout_get(struct store *st, const char *key, size_t keylen,
    struct lockout *k)
{
	const char *why;

	memset(k, 0, sizeof(*k));
	if (st->ops->lockout_get(st->impl, key, keylen, k) == -1)
		return -1;
	if (lockout_check(k, &why) == -1) {
		bad_record(st, key, keylen, why);
		return -1;
	}
	return 0;
}

/* Lock the key out as k says. */
int
store_lockout_put(struct store *st, const char *key, size_t keylen,
    const struct lockout *k)
{
	return st->ops->lockout_put(st->impl, key, keylen, k);
}

/* A policy's options into buf: 1 found, 0 none, -1 error. */
int
store_policy_get(struct store *st, const char *name, char *buf, size_t len)
{
	return st->ops->policy_get(st->impl, name, buf, len);
}

/* Save a policy's options, replacing any earlier ones. */
int
store_policy_put(struct store *st, const char *name, const char *options)
{
	return st->ops->policy_put(st->impl, name, options);
}

/* Delete a policy: 1 if there was one, 0 if not. */
int
store_policy_del(struct store *st, const char *name)
{
	return st->ops->policy_del(st->impl, name);
}

/* Call fn for every policy, by name. */
int
store_policy_list(struct store *st,
    int (*fn)(const char *, const char *, void *), void *arg)
{
	return st->ops->policy_list(st->impl, fn, arg);
}

/* Call fn for every key with rate state or leases, once each. */
int
store_names(struct store *st, int (*fn)(const char *, size_t, void *),
    void *arg)
{
	return st->ops->names(st->impl, fn, arg);
}

/*
 * Forget rate state at rest and ended lockouts: everything (limit 0) or a
 * few rows from a random place; the number of keys' limits forgotten.
 */
int64_t
store_tidy(struct store *st, int64_t now, int64_t limit)
{
	return st->ops->tidy(st->impl, now, limit);
}

/* Save a key's record, replacing any earlier one. */
int
store_save(struct store *st, const struct keyrec *rec)
{
	return st->ops->save(st->impl, rec);
}

/* Forget a key; forgetting a key that has no state is not an error. */
int
store_delete(struct store *st, const char *key, size_t keylen)
{
	return st->ops->del(st->impl, key, keylen);
}

struct rec_walk {
	struct store *st;
	int (*fn)(const struct keyrec *, void *);
	void *arg;
	int bad;
};

static int
checked_rec(const struct keyrec *rec, void *p)
{
	struct rec_walk *w = p;
	const char *why;

	if (limit_check_record(rec, &why) == -1) {
		bad_record(w->st, rec->key, rec->keylen, why);
		w->bad = 1;
		return -1;
	}
	return w->fn(rec, w->arg);
}

/*
 * Call fn for every key's limits in key order, each checked as store_load()
 * checks it; stop early if fn returns nonzero.
 */
int
store_list(struct store *st, int (*fn)(const struct keyrec *, void *),
    void *arg)
{
	struct rec_walk w = { st, fn, arg, 0 };
	int rc = st->ops->list(st->impl, checked_rec, &w);

	return w.bad ? -1 : rc;
}

struct lease_walk {
	struct store *st;
	int (*fn)(const char *, size_t, const struct lease *, void *);
	void *arg;
	int bad;
};

static int
checked_lease(const char *key, size_t keylen, const struct lease *l, void *p)
{
	struct lease_walk *w = p;
	const char *why;

	if (lease_check(l, &why) == -1) {
		bad_record(w->st, key, keylen, why);
		w->bad = 1;
		return -1;
	}
	return w->fn(key, keylen, l, w->arg);
}

/*
 * Call fn for each lease of key (every key's, if key is NULL), each checked
 * as store_load() checks a key's limits.
 */
int
store_lease_list(struct store *st, const char *key, size_t keylen,
    int (*fn)(const char *, size_t, const struct lease *, void *), void *arg)
{
	struct lease_walk w = { st, fn, arg, 0 };
	int rc = st->ops->lease_list(st->impl, key, keylen, checked_lease, &w);

	return w.bad ? -1 : rc;
}

/* Save a lease, replacing one with the same id. */
int
store_lease_put(struct store *st, const char *key, size_t keylen,
    const struct lease *l)
{
	return st->ops->lease_put(st->impl, key, keylen, l);
}

/* Free a lease: 1 if it was held, 0 if there was no such lease. */
int
store_lease_del(struct store *st, const char *key, size_t keylen,
    const char *id)
{
	return st->ops->lease_del(st->impl, key, keylen, id);
}

/* Load a shedder's amount and when it changed: 1 found, 0 none. */
int
store_shed_load(struct store *st, const char *key, size_t keylen,
    int64_t *amount, int64_t *changed)
{
	const char *why;
	int found = st->ops->shed_load(st->impl, key, keylen, amount, changed);

	if (found == 1 && shed_check(*amount, *changed, &why) == -1) {
		bad_record(st, key, keylen, why);
		return -1;
	}
	return found;
}

/* Save a shedder's amount and when it changed. */
int
store_shed_save(struct store *st, const char *key, size_t keylen,
    int64_t amount, int64_t changed)
{
	return st->ops->shed_save(st->impl, key, keylen, amount, changed);
}

/*
 * Check every page of the store, inside a transaction: 0, or -1 with what
 * is wrong.  A store with nothing of the kind to check passes.
 */
int
store_verify(struct store *st, int quick)
{
	return st->ops->verify != NULL ? st->ops->verify(st->impl, quick) : 0;
}

/* Commit: 0 done, STORE_RETRY run the transaction again, -1 error. */
int
store_commit(struct store *st)
{
	return st->ops->commit(st->impl);
}

/* Abandon the transaction, if one is open. */
void
store_rollback(struct store *st)
{
	st->ops->rollback(st->impl);
}

/* The message left by the last failure. */
const char *
store_error(const struct store *st)
{
	return st->err;
}

/* Close the store; NULL is ignored, and so is a held one. */
void
store_close(struct store *st)
{
	if (st == NULL || st->group || st->held)
		return; /* its owner closes it */
	st->ops->close(st->impl);
	free(st);
}

/* Keep the store open through store_close(), for store_free(). */
void
store_hold(struct store *st)
{
	st->held = 1;
}

/* Close a held store. */
void
store_free(struct store *st)
{
	if (st == NULL)
		return;
	st->held = st->group = 0;
	store_close(st);
}

/* The store's clock (a Redis server's TIME): 0, or -1 if it has none. */
int
store_now(struct store *st, int64_t *now)
{
	if (st->ops->now == NULL)
		return -1;
	return st->ops->now(st->impl, now);
}

/* Nonzero if the store keeps time (store_now() failing is then an error). */
int
store_has_clock(const struct store *st)
{
	return st->ops->now != NULL;
}

/*
 * The default state file: /var/lib/throttle/state.db for root, otherwise
 * $XDG_STATE_HOME/throttle/state.db or ~/.local/state/throttle/state.db.
 */
int
store_default_path(char *buf, size_t len, const char **errstr)
{
	const char *base, *home;
	struct passwd *pw;
	int n;

	if (geteuid() == 0)
		n = snprintf(buf, len, "/var/lib/throttle/state.db");
	else if ((base = getenv("XDG_STATE_HOME")) != NULL && base[0] == '/')
		n = snprintf(buf, len, "%s/throttle/state.db", base);
	else {
		home = getenv("HOME");
		if ((home == NULL || home[0] != '/') &&
		    (pw = getpwuid(geteuid())) != NULL)
			home = pw->pw_dir;
		if (home == NULL || home[0] != '/') {
			*errstr = "no home folder to keep state in; give --db "
				  "or set THROTTLE_DB";
			return -1;
		}
		n = snprintf(buf, len, "%s/.local/state/throttle/state.db",
		    home);
	}
	if (n < 0 || (size_t)n >= len) {
		*errstr = "the default state file path is too long; give --db";
		return -1;
	}
	return 0;
}
