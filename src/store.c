/*
 * store.c: the store interface.  A store (store-sqlite.c, store-redis.c,
 * chosen by the scheme of --db from schemes[]) keeps records by key, kind
 * and id, with their bytes and an expiry (struct store_ops: a dozen
 * operations); this file turns them into what the commands use (a key's
 * limits, its lockout, leases, shedder, the policies), through record.c,
 * and checks every record read from any store in one place, the same way:
 * a record throttle could not have written is an error, never decided on.
 *
 *	1. A command runs one transaction at a time: begin, reads and
 *	   writes, commit.  store_commit() may return STORE_RETRY when a store
 *	   that works by compare-and-set lost a race; the command then runs
 *	   its transaction again (txn.c).
 *	2. The records of the last key read are kept for the transaction
 *	   (one read fetches a key's limits and lockout together); a write to
 *	   the key forgets them.
 *	3. Every function returns -1 on failure and leaves a message that
 *	   names the store in store_error(); nothing here prints or exits.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "throttle.h"

extern const struct store_ops store_sqlite_ops;
#ifdef THROTTLE_REDIS
extern const struct store_ops store_redis_ops;
#define REDIS_OPS (&store_redis_ops)
#else
#define REDIS_OPS NULL
#endif

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
	{ "redis://", REDIS_OPS },
	{ "redis+cluster://", REDIS_OPS },
	{ "redis+sentinel://", REDIS_OPS },
	{ "rediss://", REDIS_OPS },
	{ "unix://", REDIS_OPS },
};
#define NSCHEMES (sizeof(schemes) / sizeof(schemes[0]))

/* One record of the key kept for the transaction (promise 2). */
struct cached {
	int kind;
	char id[LEASE_ID_LEN + 1];
	char *data;
	size_t len;
};

struct store {
	const struct store_ops *ops;
	void *impl;
	char name[DBNAME_MAX]; /* as messages show it */
	char err[STORE_ERR_MAX];
	/* promise 2: the records of one key */
	char key[KEY_MAX];
	size_t keylen;
	unsigned mask; /* the kinds read; 0: nothing kept */
	struct cached *rec;
	int nrec, caprec;
	int64_t tidied_lockouts; /* by the last store_tidy() */
	int64_t tidied_sheds;
	/* in a group (batch), every policy, read once a second at most */
	int in_group, pol_loaded;
	int64_t pol_read; /* monotonic */
	struct pol {
		char *name, *opts;
		size_t namelen, optslen;
	} * pol; /* sorted by name (pol_cmp()) */
	int npol, cappol;
};

static void forget_policies(struct store *);

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

/* Nonzero if spec, a path, names a folder: it ends in '/', "/." or "/..",
 * or is "." or "..". */
int
store_spec_folder(const char *spec)
{
	size_t n = strlen(spec);

	return (n > 0 && spec[n - 1] == '/') || strcmp(spec, ".") == 0 ||
	    strcmp(spec, "..") == 0 ||
	    (n >= 2 && strcmp(spec + n - 2, "/.") == 0) ||
	    (n >= 3 && strcmp(spec + n - 3, "/..") == 0);
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

	const char *t = spec + strspn(spec, " \t");
	const struct scheme *sc = find_scheme(spec);

	if (sc != NULL && sc->ops == NULL) {
		*why = "is a Redis URL, and this throttle was built without "
		       "Redis support; rebuild it with make REDIS=1 (needs "
		       "libhiredis-dev), or give a file path";
		return -1;
	}
	if (sc != NULL)
		return 0;
	/* names SQLite itself gives a meaning: a database in memory,
	 * which forgets every decision when throttle exits, and a URI,
	 * whose options can turn locking off or open another file than
	 * the one checked */
	if (strcmp(spec, ":memory:") == 0) {
		*why = "is SQLite's database in memory, which forgets every "
		       "decision as throttle exits; give a state file's path "
		       "(a file of that name: ./:memory:)";
		return -1;
	}
	if (strncasecmp(spec, "file:", 5) == 0) {
		*why = "is a SQLite URI, which throttle does not take; give "
		       "the state file's path (a file whose name starts "
		       "so: ./NAME)";
		return -1;
	}
	/* redis:pw@host, redis//h, redis+cluster//host, " redis://",
	 * unix:/path: a Redis URL mistyped, which as a file would quietly
	 * limit this one host (with the password in a file name); a file so
	 * named is ./NAME */
	if ((strncasecmp(t, "redis", 5) == 0 ||
		strncasecmp(t, "unix", 4) == 0) &&
	    (strpbrk(t, ":@") != NULL || strstr(t, "//") != NULL ||
		t[5] == '+')) {
		*why = "looks like a Redis URL but is not one; write "
		       "redis://, unix://, redis+cluster:// or "
		       "redis+sentinel://, in lower case (a file whose name "
		       "starts so: give it as ./NAME)";
		return -1;
	}
	/* SCHEME://..., or a name with :// in it that is not given as a
	 * path (./NAME, /NAME): no file is made of it */
	if ((n == 0 || strncmp(spec + n, "://", 3) != 0) &&
	    (strstr(spec, "://") == NULL || spec[0] == '/' ||
		strncmp(spec, "./", 2) == 0 || strncmp(spec, "../", 3) == 0)) {
		/* a path that names a folder: refused before any folder on
		 * the way is made for it */
		if (!store_spec_folder(spec))
			return 0;
		*why = "names a folder (it ends in /, /. or /..); give the "
		       "path of the state file itself (such as DIR/state.db)";
		return -1;
	}
	*why = "is a URL of a kind throttle does not know; use redis://, "
	       "unix:// (a Redis server), redis+cluster:// (a Redis "
	       "Cluster), redis+sentinel:// (a master Sentinel names), or a "
	       "file path (a file whose name has :// in it: give it as "
	       "./NAME)";
	return -1;
}

/* Is spec a server's URL, not a file? */
int
store_is_remote(const char *spec)
{
	return find_scheme(spec) != NULL;
}

/*
 * Nonzero if a store may be there to read: a Redis URL, or a file path
 * that exists (or cannot be looked at: opening it says why).  A missing
 * file holds no policy, so a decision need not look for one.
 */
int
store_may_exist(const char *spec)
{
	return store_is_remote(spec) || access(spec, F_OK) == 0 ||
	    errno != ENOENT;
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
	/* the login ends at the last '@' before the query: a password
	 * may hold '@' and '/' as they are, and is never shown (a socket's
	 * path has no login: its '@' is the path's) */
	end = p + strcspn(p, "?");
	at = NULL;
	if (strncmp(spec, "unix://", 7) != 0)
		for (; end > p && at == NULL; end--)
			if (end[-1] == '@')
				at = end - 1;
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
    size_t errlen, int *unavailable)
{
	const struct scheme *sc = find_scheme(spec);
	struct store *st;

	if (sc != NULL && sc->ops == NULL) {
		char name[DBNAME_MAX];

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
	*unavailable = 0;
	st->impl = st->ops->open(spec, lock_timeout, flags, st->err,
	    sizeof(st->err), unavailable);
	if (st->impl == NULL) {
		snprintf(err, errlen, "%s", st->err);
		free(st);
		return NULL;
	}
	return st;
}

/*
 * For a reader that found no state file at its path (a typo in --db reads
 * as a store with no keys): 1 and a message naming it in buf; 0 if the
 * store is there.
 */
int
store_missing(const struct store *st, char *buf, size_t len)
{
	int missing;

	if (st->ops->missing == NULL ||
	    (missing = st->ops->missing(st->impl)) == 0)
		return 0;
	snprintf(buf, len,
	    "%s: %s: no decision has been stored in it yet "
	    "(check --db or THROTTLE_DB)",
	    st->name, missing == 2 ? "is empty" : "does not exist");
	return 1;
}

/* Nonzero if the store's last error was its being out of reach. */
int
store_unavailable(const struct store *st)
{
	return st->ops->unavailable(st->impl);
}

/* Forget the records kept of a key. */
static void
forget(struct store *st)
{
	int i;

	for (i = 0; i < st->nrec; i++)
		free(st->rec[i].data);
	st->nrec = 0;
	st->mask = 0;
}

/* Close the store; NULL is ignored. */
void
store_close(struct store *st)
{
	if (st == NULL)
		return;
	forget(st);
	forget_policies(st);
	free(st->pol);
	free(st->rec);
	st->ops->close(st->impl);
	free(st);
}

/* The message left by the last failure. */
const char *
store_error(const struct store *st)
{
	return st->err;
}

/*
 * A record that failed its check: "NAME: the key 'KEY' WHY, which this
 * throttle cannot use; ..." in st->err.  Not "edited by something else":
 * nothing says who wrote it.
 */
static int
bad_record(struct store *st, const char *key, size_t keylen, const char *why)
{
	FILE *fp;

	if ((fp = fmemopen(st->err, sizeof(st->err), "w")) == NULL) {
		snprintf(st->err, sizeof(st->err), "%s: a key %s", st->name,
		    why);
		return -1;
	}
	fprintf(fp, "%s: the key '", st->name);
	escape_text(fp, key, keylen);
	fprintf(fp,
	    "' %s, which this throttle cannot use (throttle reset the key "
	    "to start it afresh)",
	    why);
	fclose(fp);
	return -1;
}

/* A lease's record that failed its check, as bad_record() says it, but
 * with the way to remove that lease alone (reset leaves leases be). */
static int
bad_lease(struct store *st, const char *key, size_t keylen, const char *id,
    size_t idlen, const char *why)
{
	FILE *fp;
	size_t i;

	if ((fp = fmemopen(st->err, sizeof(st->err), "w")) == NULL)
		return bad_record(st, key, keylen, why);
	fprintf(fp, "%s: the key '", st->name);
	escape_text(fp, key, keylen);
	if (!lease_id_ok(id, idlen)) {
		/* no id release --lease takes: no throttle wrote it */
		fprintf(fp, "' %s, under the id '", why);
		escape_text(fp, id, idlen);
		fputs("', which is no lease id throttle writes: another "
		      "program wrote it there; remove that record with the "
		      "store's own tools",
		    fp);
		fclose(fp);
		return -1;
	}
	fprintf(fp, "' %s; throttle release --lease ", why);
	escape_text(fp, id, idlen);
	fputs(" -- ", fp); /* a key may begin with a dash */
	for (i = 0; i < keylen &&
	     (isalnum((unsigned char)key[i]) ||
		 strchr(":._-/@", key[i]) != NULL);
	     i++)
		;
	if (i == keylen)
		fwrite(key, 1, keylen, fp);
	else if (text_plain(key, keylen)) /* quoted, as a shell takes it */
		escape_shell(fp, key, keylen);
	else /* no control character on a terminal */
		escape_text(fp, key, keylen);
	fputs(" (with this --db) removes it", fp);
	fclose(fp);
	return -1;
}

/* Start a transaction; write is nonzero if it may change anything. */
/* Drop the policies a group read. */
static void
forget_policies(struct store *st)
{
	int i;

	for (i = 0; i < st->npol; i++) {
		free(st->pol[i].name);
		free(st->pol[i].opts);
	}
	st->npol = 0;
	st->pol_loaded = 0;
}

int
store_begin(struct store *st, int write)
{
	forget(st);
	return st->ops->begin(st->impl, write);
}

/* Commit: 0 done, STORE_RETRY run the transaction again, -1 error. */
int
store_commit(struct store *st)
{
	forget(st);
	return st->ops->commit(st->impl);
}

/* Abandon the transaction, if one is open. */
void
store_rollback(struct store *st)
{
	forget(st);
	st->ops->rollback(st->impl);
}

/*
 * Start a group transaction (throttle batch): until store_group_end(),
 * each begin and commit is one request inside it.  A group that will only
 * read (write 0: check, inspect) need not wait for a writer's lock.
 */
int
store_group_begin(struct store *st, int write)
{
	forget(st);
	st->in_group = 1;
	return st->ops->group_begin(st->impl, write);
}

/*
 * Commit (commit nonzero) or roll back the group: 0, -1, or STORE_RETRY
 * (a store that checks at commit lost a race: decide the group again).
 */
int
store_group_end(struct store *st, int commit)
{
	forget(st);
	st->in_group = 0;
	return st->ops->group_end(st->impl, commit);
}

/*
 * In a group: 1 if another process waits for the lock the group holds, 0
 * if none does, -1 if the store cannot tell.
 */
int
store_waiting(struct store *st)
{
	return st->ops->waiting != NULL ? st->ops->waiting(st->impl) : -1;
}

/* Nonzero if the file the store has open is no longer at its path. */
int
store_replaced(struct store *st)
{
	return st->ops->replaced != NULL && st->ops->replaced(st->impl);
}

/* Nonzero if the last commit failed after it was sent: it may be kept. */
int
store_unsure(const struct store *st)
{
	return st->ops->unsure != NULL && st->ops->unsure(st->impl);
}

/* Nonzero if the store reads a group's keys faster all at once. */
int
store_can_prefetch(const struct store *st)
{
	return st->ops->prefetch != NULL;
}

/*
 * In a group, read the n keys its requests will read, all at once: an
 * optimisation (a key a request reads is read then if not before).  The
 * number of keys, from the first, that may share the group (n but in a
 * Redis Cluster, whose group is the requests on one node), or -1.
 */
int
store_prefetch(struct store *st, char *const *keys, const size_t *lens, int n)
{
	return st->ops->prefetch != NULL
	    ? st->ops->prefetch(st->impl, keys, lens, n)
	    : n;
}

/* Nonzero if a transaction outside a group may write one key only. */
int
store_one_key(const struct store *st)
{
	return st->ops->one_key != NULL && st->ops->one_key(st->impl);
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
 * Check every page of the store, inside a transaction: 0, or -1 with what
 * is wrong.  A store with nothing of the kind to check passes.
 */
int
store_verify(struct store *st, int quick)
{
	return st->ops->verify != NULL ? st->ops->verify(st->impl, quick) : 0;
}

static int
keep(void *arg, int kind, const char *id, size_t idlen, const char *data,
    size_t len)
{
	struct store *st = arg;
	struct cached *c;

	if (idlen > LEASE_ID_LEN) {
		snprintf(st->err, sizeof(st->err),
		    "%s: holds a record with an id of %zu bytes, which this "
		    "throttle cannot use",
		    st->name, idlen);
		return -1;
	}
	if (st->nrec == st->caprec) {
		st->caprec = st->caprec ? st->caprec * 2 : 8;
		st->rec = xrealloc(st->rec, (size_t)st->caprec * sizeof(*c));
	}
	c = &st->rec[st->nrec++];
	c->kind = kind;
	memcpy(c->id, id, idlen);
	c->id[idlen] = '\0';
	c->data = xmalloc(len + 1);
	memcpy(c->data, data, len);
	c->data[len] = '\0';
	c->len = len;
	return 0;
}

/*
 * Make sure the records of the kinds in mask of key are kept (promise 2):
 * a key's limits and lockout are read together.  0 or -1.
 */
static int
fetch(struct store *st, const char *key, size_t keylen, unsigned mask)
{
	if (mask & (REC_MASK(REC_LIMIT) | REC_MASK(REC_LOCKOUT)))
		mask |= REC_MASK(REC_LIMIT) | REC_MASK(REC_LOCKOUT);
	if (st->mask != 0 &&
	    (st->keylen != keylen || memcmp(st->key, key, keylen) != 0))
		forget(st);
	mask &= ~st->mask;
	if (mask == 0)
		return 0;
	memcpy(st->key, key, keylen);
	st->keylen = keylen;
	if (st->ops->get(st->impl, key, keylen, mask, keep, st) == -1) {
		forget(st);
		return -1;
	}
	st->mask |= mask;
	return 0;
}

/* The kept record of kind with id, or NULL. */
static const struct cached *
kept(const struct store *st, int kind, const char *id)
{
	int i;

	for (i = 0; i < st->nrec; i++)
		if (st->rec[i].kind == kind && strcmp(st->rec[i].id, id) == 0)
			return &st->rec[i];
	return NULL;
}

/* Forget what is kept of key: it is about to change. */
static void
changed(struct store *st, const char *key, size_t keylen)
{
	if (st->mask != 0 && st->keylen == keylen &&
	    memcmp(st->key, key, keylen) == 0)
		forget(st);
}

/* A limit's record from its bytes, sub-windows and all: 0 or -1. */
static int
decode_limit(struct store *st, const char *key, size_t keylen, const char *p,
    size_t len, struct keyrec *rec)
{
	const unsigned char *slots;
	size_t nslots;
	int64_t n;
	int r;

	rec->state.slots = NULL;
	rec->state.nslots = 0;
	if ((r = record_limit_decode(p, len, rec, &slots, &nslots)) == -2) {
		char why[96], name[33];
		size_t i;

		/* the name as stored, up to its first space, shown safely */
		for (i = 0; i < len && i < sizeof(name) - 1 && p[i] != ' '; i++)
			name[i] = (char)(p[i] > ' ' && p[i] < 127 ? p[i] : '?');
		name[i] = '\0';
		snprintf(why, sizeof(why),
		    "has an unknown algorithm '%s' (written by a newer "
		    "throttle?)",
		    name);
		return bad_record(st, key, keylen, why);
	}
	if (r == -1)
		return bad_record(st, key, keylen,
		    "has a state not in throttle's encoding");
	if (nslots > 0) {
		/* one pass: a sub-window takes at least two bytes */
		rec->state.slots = xcalloc(nslots / 2 + 1, sizeof(struct slot));
		if ((n = slots_decode(slots, nslots, rec->state.slots,
			 nslots / 2 + 1)) < 0) {
			free(rec->state.slots);
			rec->state.slots = NULL;
			return bad_record(st, key, keylen,
			    "has a state whose sub-windows are not in "
			    "throttle's "
			    "encoding");
		}
		rec->state.nslots = (size_t)n;
	}
	memcpy(rec->key, key, keylen);
	rec->key[keylen] = '\0';
	rec->keylen = keylen;
	return 0;
}

/* A limit's record checked as throttle would have written it: 0 or -1. */
static int
checked_limit(struct store *st, struct keyrec *rec)
{
	const char *why;

	if (limit_check_record(rec, &why) == 0)
		return 0;
	free(rec->state.slots);
	rec->state.slots = NULL;
	rec->state.nslots = 0;
	return bad_record(st, rec->key, rec->keylen, why);
}

/*
 * Load limit idx of a key: 1 if found, 0 if it has no state, -1 error
 * (with a record throttle could not have written).  rec->more says
 * whether the key has limits past idx.
 */
int
store_load(struct store *st, const char *key, size_t keylen, int idx,
    struct keyrec *rec)
{
	const struct cached *c = NULL;
	char id[2] = { (char)('0' + idx), '\0' };
	int i;

	rec->more = 0;
	rec->state.slots = NULL;
	rec->state.nslots = 0;
	if (fetch(st, key, keylen, REC_MASK(REC_LIMIT)) == -1)
		return -1;
	for (i = 0; i < st->nrec; i++) {
		if (st->rec[i].kind != REC_LIMIT)
			continue;
		if (strlen(st->rec[i].id) != 1 || st->rec[i].id[0] < '0' ||
		    st->rec[i].id[0] >= '0' + LIMITS_MAX)
			return bad_record(st, key, keylen,
			    "has a limit index not in throttle's encoding");
		if (st->rec[i].id[0] == id[0])
			c = &st->rec[i];
		else if (st->rec[i].id[0] > id[0])
			rec->more = 1;
	}
	if (c == NULL)
		return 0;
	if (decode_limit(st, key, keylen, c->data, c->len, rec) == -1)
		return -1;
	rec->idx = idx;
	return checked_limit(st, rec) == -1 ? -1 : 1;
}

/* Save a key's limit, replacing any earlier one. */
int
store_save(struct store *st, const struct keyrec *rec)
{
	char id[2] = { (char)('0' + rec->idx), '\0' };
	char small[512]; /* a limit without sub-windows needs about 250 */
	size_t size = record_limit_size(rec), n;
	char *buf = size <= sizeof(small) ? small : xmalloc(size);
	int r;

	n = record_limit_encode(rec, buf);
	changed(st, rec->key, rec->keylen);
	r = st->ops->put(st->impl, rec->key, rec->keylen, REC_LIMIT, id, 1, buf,
	    n, rec->rest_at);
	if (buf != small)
		free(buf);
	return r;
}

/* Forget a key's limits from index n on (a compound limit shrank). */
int
store_trim(struct store *st, const char *key, size_t keylen, int n)
{
	char id[2] = { 0, 0 };

	changed(st, key, keylen);
	for (; n < LIMITS_MAX; n++) {
		id[0] = (char)('0' + n);
		if (st->ops->del(st->impl, key, keylen, REC_MASK(REC_LIMIT), id,
			1) == -1)
			return -1;
	}
	return 0;
}

/* Forget a key's limits, lockout and shedder; a key with none is fine. */
int
store_delete(struct store *st, const char *key, size_t keylen)
{
	changed(st, key, keylen);
	return st->ops->del(st->impl, key, keylen,
		   REC_MASK(REC_LIMIT) | REC_MASK(REC_LOCKOUT) |
		       REC_MASK(REC_SHED),
		   NULL, 0) == -1
	    ? -1
	    : 0;
}

/* The key's lockout into *k (k->until 0: none); checked as store_load(). */
int
store_lockout_get(struct store *st, const char *key, size_t keylen,
    struct lockout *k)
{
	const struct cached *c;
	const char *why;

	memset(k, 0, sizeof(*k));
	if (fetch(st, key, keylen, REC_MASK(REC_LOCKOUT)) == -1)
		return -1;
	if ((c = kept(st, REC_LOCKOUT, "")) == NULL)
		return 0;
	if (record_lockout_decode(c->data, c->len, k) == -1)
		return bad_record(st, key, keylen,
		    "has a lockout not in throttle's encoding");
	if (lockout_check(k, &why) == -1)
		return bad_record(st, key, keylen, why);
	return 0;
}

/* Lock the key out as k says. */
int
store_lockout_put(struct store *st, const char *key, size_t keylen,
    const struct lockout *k)
{
	char buf[72];
	size_t n = record_lockout_encode(k, buf);

	changed(st, key, keylen);
	return st->ops->put(st->impl, key, keylen, REC_LOCKOUT, "", 0, buf, n,
	    record_lockout_expiry(k));
}

/* Lift the key's lockout. */
int
store_lockout_del(struct store *st, const char *key, size_t keylen)
{
	changed(st, key, keylen);
	return st->ops->del(st->impl, key, keylen, REC_MASK(REC_LOCKOUT), NULL,
		   0) == -1
	    ? -1
	    : 0;
}

struct lockout_walk {
	struct store *st;
	int (*fn)(const char *, size_t, const struct lockout *, void *);
	void *arg;
	int bad;
};

static int
lockout_each(void *arg, const char *key, size_t keylen, int kind,
    const char *id, size_t idlen, const char *data, size_t len)
{
	struct lockout_walk *w = arg;
	struct lockout k;
	const char *why;

	(void)kind;
	(void)id;
	(void)idlen;
	if (keylen == 0 || keylen > KEY_MAX ||
	    record_lockout_decode(data, len, &k) == -1) {
		w->bad = 1;
		return bad_record(w->st, key,
		    keylen > KEY_MAX ? KEY_MAX : keylen,
		    "has a lockout not in throttle's encoding");
	}
	if (lockout_check(&k, &why) == -1) {
		w->bad = 1;
		return bad_record(w->st, key, keylen, why);
	}
	return w->fn != NULL ? w->fn(key, keylen, &k, w->arg) : 0;
}

/*
 * Every lockout in the store, ended ones too: fn(key, keylen, k, arg); fn
 * NULL: only read and check them.
 */
int
store_lockout_list(struct store *st,
    int (*fn)(const char *, size_t, const struct lockout *, void *), void *arg)
{
	struct lockout_walk w = { st, fn, arg, 0 };
	int r =
	    st->ops->scan(st->impl, REC_MASK(REC_LOCKOUT), lockout_each, &w);

	return w.bad ? -1 : r;
}

/* A lease's record decoded and checked: 0 or -1. */
static int
decode_lease(struct store *st, const char *key, size_t keylen, const char *id,
    size_t idlen, const char *p, size_t len, struct lease *l)
{
	const char *why;

	if (record_lease_decode(id, idlen, p, len, l) == -1)
		return bad_lease(st, key, keylen, id, idlen,
		    "has a lease not in throttle's encoding");
	if (lease_check(l, &why) == -1)
		return bad_lease(st, key, keylen, id, idlen, why);
	return 0;
}

struct lease_walk {
	struct store *st;
	int (*fn)(const char *, size_t, const struct lease *, void *);
	void *arg;
	int bad;
	/* leases of one key, sorted by when they were taken */
	struct lease *v;
	size_t n, cap;
	char key[KEY_MAX];
	size_t keylen;
};

static int
cmp_lease(const void *x, const void *y)
{
	const struct lease *a = x, *b = y;

	if (a->acquired != b->acquired)
		return a->acquired < b->acquired ? -1 : 1;
	return strcmp(a->id, b->id);
}

/* Hand the leases gathered of one key to fn, oldest first. */
static int
walk_flush(struct lease_walk *w)
{
	size_t i;
	int r = 0;

	if (w->n > 1)
		qsort(w->v, w->n, sizeof(*w->v), cmp_lease);
	for (i = 0; i < w->n && r == 0; i++)
		r = w->fn(w->key, w->keylen, &w->v[i], w->arg);
	w->n = 0;
	return r;
}

static int
walk_one(void *arg, const char *key, size_t keylen, int kind, const char *id,
    size_t idlen, const char *data, size_t len)
{
	struct lease_walk *w = arg;
	int r;

	(void)kind;
	if (w->n > 0 &&
	    (keylen != w->keylen || memcmp(key, w->key, keylen) != 0) &&
	    (r = walk_flush(w)) != 0)
		return r;
	if (keylen > KEY_MAX) {
		w->bad = 1;
		return bad_record(w->st, key, KEY_MAX, "is too long");
	}
	memcpy(w->key, key, keylen);
	w->keylen = keylen;
	if (w->n == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 8;
		w->v = xrealloc(w->v, w->cap * sizeof(*w->v));
	}
	if (decode_lease(w->st, key, keylen, id, idlen, data, len,
		&w->v[w->n]) == -1) {
		w->bad = 1;
		return -1;
	}
	w->n++;
	return 0;
}

static int
walk_rec(void *arg, int kind, const char *id, size_t idlen, const char *data,
    size_t len)
{
	struct lease_walk *w = arg;

	return walk_one(arg, w->key, w->keylen, kind, id, idlen, data, len);
}

/*
 * Call fn for each lease of key (every key's, if key is NULL), oldest
 * first, each checked as store_load() checks a key's limits.
 */
int
store_lease_list(struct store *st, const char *key, size_t keylen,
    int (*fn)(const char *, size_t, const struct lease *, void *), void *arg)
{
	struct lease_walk w;
	int r;

	memset(&w, 0, sizeof(w));
	w.st = st;
	w.fn = fn;
	w.arg = arg;
	if (key != NULL) {
		memcpy(w.key, key, keylen);
		w.keylen = keylen;
		r = st->ops->get(st->impl, key, keylen, REC_MASK(REC_LEASE),
		    walk_rec, &w);
	} else
		r = st->ops->scan(st->impl, REC_MASK(REC_LEASE), walk_one, &w);
	if (r == 0 && !w.bad)
		r = walk_flush(&w);
	free(w.v);
	return w.bad ? -1 : r;
}

/* Save a lease, replacing one with the same id. */
int
store_lease_put(struct store *st, const char *key, size_t keylen,
    const struct lease *l)
{
	char buf[RECORD_LEASE_MAX];
	size_t n = record_lease_encode(l, buf);

	changed(st, key, keylen);
	return st->ops->put(st->impl, key, keylen, REC_LEASE, l->id,
	    strlen(l->id), buf, n,
	    l->expires == 0 ? RECORD_FOREVER : l->expires);
}

/* Free a lease: 1 if it was held, 0 if there was no such lease. */
int
store_lease_del(struct store *st, const char *key, size_t keylen,
    const char *id)
{
	changed(st, key, keylen);
	return st->ops->del(st->impl, key, keylen, REC_MASK(REC_LEASE), id,
	    strlen(id));
}

/* Load a shedder's amount and when it changed: 1 found, 0 none. */
int
store_shed_load(struct store *st, const char *key, size_t keylen,
    int64_t *amount, int64_t *changed_at)
{
	const struct cached *c;
	const char *why;

	if (fetch(st, key, keylen, REC_MASK(REC_SHED)) == -1)
		return -1;
	if ((c = kept(st, REC_SHED, "")) == NULL)
		return 0;
	if (record_shed_decode(c->data, c->len, amount, changed_at) == -1)
		return bad_record(st, key, keylen,
		    "has a shedder not in throttle's encoding");
	if (shed_check(*amount, *changed_at, &why) == -1)
		return bad_record(st, key, keylen, why);
	return 1;
}

struct shed_walk {
	struct store *st;
	int (*fn)(const char *, size_t, int64_t, int64_t, void *);
	void *arg;
	int bad;
};

static int
shed_each(void *arg, const char *key, size_t keylen, int kind, const char *id,
    size_t idlen, const char *data, size_t len)
{
	struct shed_walk *w = arg;
	int64_t amount, changed_at;
	const char *why;

	(void)kind;
	(void)id;
	(void)idlen;
	if (keylen == 0 || keylen > KEY_MAX ||
	    record_shed_decode(data, len, &amount, &changed_at) == -1) {
		w->bad = 1;
		return bad_record(w->st, key,
		    keylen > KEY_MAX ? KEY_MAX : keylen,
		    "has a shedder not in throttle's encoding");
	}
	if (shed_check(amount, changed_at, &why) == -1) {
		w->bad = 1;
		return bad_record(w->st, key, keylen, why);
	}
	return w->fn != NULL ? w->fn(key, keylen, amount, changed_at, w->arg)
			     : 0;
}

/*
 * Every shedder in the store, in key order: fn(key, keylen, amount,
 * changed_at, arg); fn NULL: only read and check them.
 */
int
store_shed_list(struct store *st,
    int (*fn)(const char *, size_t, int64_t, int64_t, void *), void *arg)
{
	struct shed_walk w = { st, fn, arg, 0 };
	int r = st->ops->scan(st->impl, REC_MASK(REC_SHED), shed_each, &w);

	return w.bad ? -1 : r;
}

/* Save a shedder's amount and when it changed. */
int
store_shed_save(struct store *st, const char *key, size_t keylen,
    int64_t amount, int64_t changed_at)
{
	char buf[64];
	size_t n = record_shed_encode(amount, changed_at, buf);

	changed(st, key, keylen);
	return st->ops->put(st->impl, key, keylen, REC_SHED, "", 0, buf, n,
	    record_expiry(REC_SHED, buf, n));
}

struct policy_get {
	char *buf;
	size_t len;
	int found, bad;
};

static int
policy_one(void *arg, int kind, const char *id, size_t idlen, const char *data,
    size_t len)
{
	struct policy_get *g = arg;

	(void)kind;
	(void)id;
	(void)idlen;
	if (len >= g->len || memchr(data, '\0', len) != NULL) {
		g->bad = 1;
		return -1;
	}
	memcpy(g->buf, data, len);
	g->buf[len] = '\0';
	g->found = 1;
	return 0;
}

static int
bad_policy(struct store *st)
{
	snprintf(st->err, sizeof(st->err),
	    "%s: holds a policy this throttle cannot read (set it afresh "
	    "with throttle policy set)",
	    st->name);
	return -1;
}

/* A policy's options into buf: 1 found, 0 none, -1 error. */
int
store_policy_get(struct store *st, const char *name, char *buf, size_t len)
{
	struct policy_get g = { buf, len, 0, 0 };

	if (st->ops->get(st->impl, name, strlen(name), REC_MASK(REC_POLICY),
		policy_one, &g) == -1)
		return g.bad ? bad_policy(st) : -1;
	return g.found;
}

struct policy_first {
	struct policy_get g;
	char *name; /* KEY_MAX + 1 bytes */
};

static int
policy_named(void *arg, int kind, const char *id, size_t idlen,
    const char *data, size_t len)
{
	struct policy_first *f = arg;

	memcpy(f->name, id, idlen);
	f->name[idlen] = '\0';
	return policy_one(&f->g, kind, id, idlen, data, len);
}

static int
keep_policy(void *arg, const char *key, size_t keylen, int kind, const char *id,
    size_t idlen, const char *data, size_t len)
{
	struct store *st = arg;

	(void)kind;
	(void)id;
	(void)idlen;
	if (st->npol == st->cappol) {
		st->cappol = st->cappol ? st->cappol * 2 : 8;
		st->pol =
		    xrealloc(st->pol, (size_t)st->cappol * sizeof(*st->pol));
	}
	st->pol[st->npol].name = xmalloc(keylen + 1);
	memcpy(st->pol[st->npol].name, key, keylen);
	st->pol[st->npol].name[keylen] = '\0';
	st->pol[st->npol].namelen = keylen;
	st->pol[st->npol].opts = xmalloc(len + 1);
	memcpy(st->pol[st->npol].opts, data, len);
	st->pol[st->npol].opts[len] = '\0';
	st->pol[st->npol].optslen = len;
	/* a NUL inside is caught when the policy is used (policy_one()) */
	st->npol++;
	return 0;
}

/* Policies in the order of their names' bytes, a shorter name first. */
static int
pol_cmp_names(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c != 0 ? c : (alen > blen) - (alen < blen);
}

static int
pol_cmp(const void *a, const void *b)
{
	const struct pol *x = a, *y = b;

	return pol_cmp_names(x->name, x->namelen, y->name, y->namelen);
}

/* The policy named name[0..len), or NULL: a binary search of st->pol. */
static const struct pol *
pol_find(const struct store *st, const char *name, size_t len)
{
	int lo = 0, hi = st->npol - 1, mid, c;

	while (lo <= hi) {
		mid = lo + (hi - lo) / 2;
		c = pol_cmp_names(name, len, st->pol[mid].name,
		    st->pol[mid].namelen);
		if (c == 0)
			return &st->pol[mid];
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return NULL;
}

/*
 * In a group: the policies, read once a second at most (one query, one
 * round trip) for every group of a batch, then the first of names[] among
 * them, as store_policy_find() answers: a binary search for each, so
 * that thousands of policies cost a batch no more than a few.
 */
static int
group_policy(struct store *st, char *const *names, const size_t *lens, int n,
    char *name, struct policy_get *g)
{
	const struct pol *p;
	int i;

	/* a policy set while a batch runs applies within a second */
	if (!st->pol_loaded || clock_monotonic() - st->pol_read > US_PER_SEC) {
		forget_policies(st);
		if (st->ops->scan(st->impl, REC_MASK(REC_POLICY), keep_policy,
			st) == -1) {
			forget_policies(st);
			return -1;
		}
		if (st->npol > 1)
			qsort(st->pol, (size_t)st->npol, sizeof(*st->pol),
			    pol_cmp);
		st->pol_loaded = 1;
		st->pol_read = clock_monotonic();
	}
	for (i = 0; i < n; i++) {
		if ((p = pol_find(st, names[i], lens[i])) == NULL)
			continue;
		if (policy_one(g, REC_POLICY, "", 0, p->opts, p->optslen) == -1)
			return bad_policy(st);
		memcpy(name, names[i], lens[i]);
		name[lens[i]] = '\0';
		return 1;
	}
	return 0;
}

/*
 * The policy that governs key: the one named like it, else like its
 * longest prefix before a ':' ("login" governs "login:alice").  Its name
 * into name (KEY_MAX + 1 bytes) and options into buf: 1 found, 0 none, -1
 * error.  A store that can asks for every name in one round trip.
 */
int
store_policy_find(struct store *st, const char *key, size_t keylen, char *name,
    char *buf, size_t len)
{
	struct policy_first f = { { buf, len, 0, 0 }, name };
	char *names[KEY_MAX + 1];
	size_t lens[KEY_MAX + 1], n = keylen;
	int nn = 0, i, r;

	for (;;) {
		if (nn == KEY_MAX + 1)
			break;
		names[nn] = (char *)key;
		lens[nn++] = n;
		while (n > 0 && key[n - 1] != ':')
			n--;
		if (n <= 1)
			break;
		n--; /* drop the ':' */
	}
	if (st->in_group)
		return group_policy(st, names, lens, nn, name, &f.g);
	if (st->ops->policy_first != NULL) {
		r = st->ops->policy_first(st->impl, names, lens, nn,
		    policy_named, &f);
		if (r == -1)
			return f.g.bad ? bad_policy(st) : -1;
		return f.g.found;
	}
	for (i = 0; i < nn; i++) {
		if (st->ops->get(st->impl, key, lens[i], REC_MASK(REC_POLICY),
			policy_one, &f.g) == -1)
			return f.g.bad ? bad_policy(st) : -1;
		if (f.g.found) {
			memcpy(name, key, lens[i]);
			name[lens[i]] = '\0';
			return 1;
		}
	}
	return 0;
}

/* Save a policy's options, replacing any earlier ones. */
int
store_policy_put(struct store *st, const char *name, const char *options)
{
	return st->ops->put(st->impl, name, strlen(name), REC_POLICY, "", 0,
	    options, strlen(options), RECORD_FOREVER);
}

/* Delete a policy: 1 if there was one, 0 if not. */
int
store_policy_del(struct store *st, const char *name)
{
	return st->ops->del(st->impl, name, strlen(name), REC_MASK(REC_POLICY),
	    NULL, 0);
}

struct policy_walk {
	struct store *st;
	int (*fn)(const char *, const char *, void *);
	void *arg;
	int bad;
};

static int
policy_each(void *arg, const char *key, size_t keylen, int kind, const char *id,
    size_t idlen, const char *data, size_t len)
{
	struct policy_walk *w = arg;
	char name[KEY_MAX + 1], spec[POLICY_MAX];

	(void)kind;
	(void)id;
	(void)idlen;
	if (keylen == 0 || keylen > KEY_MAX || len >= sizeof(spec) ||
	    memchr(key, '\0', keylen) != NULL ||
	    memchr(data, '\0', len) != NULL) {
		w->bad = 1;
		return bad_policy(w->st);
	}
	memcpy(name, key, keylen);
	name[keylen] = '\0';
	memcpy(spec, data, len);
	spec[len] = '\0';
	return w->fn(name, spec, w->arg);
}

/* Call fn for every policy, by name. */
int
store_policy_list(struct store *st,
    int (*fn)(const char *, const char *, void *), void *arg)
{
	struct policy_walk w = { st, fn, arg, 0 };
	int r = st->ops->scan(st->impl, REC_MASK(REC_POLICY), policy_each, &w);

	return w.bad ? -1 : r;
}

struct name_walk {
	int (*fn)(const char *, size_t, void *);
	void *arg;
	char last[KEY_MAX];
	size_t lastlen;
	int any;
};

static int
name_each(void *arg, const char *key, size_t keylen, int kind, const char *id,
    size_t idlen, const char *data, size_t len)
{
	struct name_walk *w = arg;

	(void)kind;
	(void)id;
	(void)idlen;
	(void)data;
	(void)len;
	if (keylen > KEY_MAX ||
	    (w->any && keylen == w->lastlen &&
		memcmp(key, w->last, keylen) == 0))
		return 0;
	memcpy(w->last, key, keylen);
	w->lastlen = keylen;
	w->any = 1;
	return w->fn(key, keylen, w->arg);
}

/*
 * Call fn for every key with rate state, a lockout, leases or a shedder,
 * once each, in order.
 */
int
store_names(struct store *st, int (*fn)(const char *, size_t, void *),
    void *arg)
{
	struct name_walk w;

	memset(&w, 0, sizeof(w));
	w.fn = fn;
	w.arg = arg;
	return st->ops->scan(st->impl,
	    REC_MASK(REC_LIMIT) | REC_MASK(REC_LEASE) | REC_MASK(REC_LOCKOUT) |
		REC_MASK(REC_SHED),
	    name_each, &w);
}

struct rec_walk {
	struct store *st;
	int (*fn)(const struct keyrec *, void *);
	void *arg;
	int bad;
};

static int
rec_each(void *arg, const char *key, size_t keylen, int kind, const char *id,
    size_t idlen, const char *data, size_t len)
{
	struct rec_walk *w = arg;
	struct keyrec *rec = xmalloc(sizeof(*rec));
	int r;

	(void)kind;
	memset(rec, 0, sizeof(*rec));
	if (keylen == 0 || keylen > KEY_MAX)
		r = bad_record(w->st, key, keylen > KEY_MAX ? KEY_MAX : keylen,
		    "has a name of a length throttle never writes");
	else if (idlen != 1 || id[0] < '0' || id[0] >= '0' + LIMITS_MAX)
		r = bad_record(w->st, key, keylen,
		    "has a limit index not in throttle's encoding");
	else if ((r = decode_limit(w->st, key, keylen, data, len, rec)) == 0) {
		rec->idx = id[0] - '0';
		if ((r = checked_limit(w->st, rec)) == 0) {
			r = w->fn != NULL ? w->fn(rec, w->arg) : 0;
			free(rec->state.slots);
			free(rec);
			return r;
		}
	}
	free(rec->state.slots);
	free(rec);
	w->bad = 1;
	return r;
}

/*
 * Call fn for every key's limits in key order, each checked as
 * store_load() checks it; stop early if fn returns nonzero.  fn NULL:
 * only read and check them.
 */
int
store_list(struct store *st, int (*fn)(const struct keyrec *, void *),
    void *arg)
{
	struct rec_walk w = { st, fn, arg, 0 };
	int r = st->ops->scan(st->impl, REC_MASK(REC_LIMIT), rec_each, &w);

	return w.bad ? -1 : r;
}

/*
 * Forget rate state at rest, ended lockouts and shedders long idle:
 * everything (limit 0) or a few records from a random place near the key
 * last read (where keys are being used, so anywhere in the file over
 * time); the number of limits forgotten, or -1.
 */
int64_t
store_tidy(struct store *st, int64_t now, int64_t limit)
{
	int64_t counts[REC_KINDS] = { 0 };

	st->mask = 0;
	forget(st);
	if (st->ops->tidy(st->impl,
		REC_MASK(REC_LIMIT) | REC_MASK(REC_LOCKOUT) |
		    REC_MASK(REC_SHED),
		now, limit, st->key, limit > 0 ? st->keylen : 0, counts) == -1)
		return -1;
	st->tidied_lockouts = counts[REC_LOCKOUT];
	st->tidied_sheds = counts[REC_SHED];
	return counts[REC_LIMIT];
}

/* The ended lockouts the last store_tidy() forgot. */
int64_t
store_tidied_lockouts(const struct store *st)
{
	return st->tidied_lockouts;
}

/* The idle shedders the last store_tidy() forgot. */
int64_t
store_tidied_sheds(const struct store *st)
{
	return st->tidied_sheds;
}

/*
 * The password database's entry for uid.  A throttle linked statically
 * with glibc (THROTTLE_NO_NSS) reads /etc/passwd itself: its getpwuid()
 * would load the NSS modules of /etc/nsswitch.conf, built for the shared
 * glibc, and libnss_systemd crashed it for a user not in /etc/passwd.
 * Linked with musl or dynamically, getpwuid() is safe.
 */
static struct passwd *
user_entry(uid_t uid)
{
#ifdef THROTTLE_NO_NSS
	struct passwd *pw;
	FILE *f;

	if ((f = fopen("/etc/passwd", "re")) == NULL)
		return NULL;
	while ((pw = fgetpwent(f)) != NULL && pw->pw_uid != uid)
		;
	fclose(f); /* pw is fgetpwent()'s own, not the file's */
	return pw;
#else
	return getpwuid(uid);
#endif
}

/* The length of folder s without its trailing slashes (so no "//"). */
static int
folder_len(const char *s)
{
	size_t b = strlen(s);

	while (b > 0 && s[b - 1] == '/')
		b--;
	return b > INT_MAX ? INT_MAX : (int)b;
}

#define TOO_LONG(under)                                                        \
	"the default state file under " under " would have too long a "        \
	"path; give --db or set THROTTLE_DB"

/*
 * The default state file: /var/lib/throttle/state.db for root, otherwise
 * $XDG_STATE_HOME/throttle/state.db or ~/.local/state/throttle/state.db.
 */
int
store_default_path(char *buf, size_t len, const char **errstr)
{
	const char *base, *home, *toolong = TOO_LONG("HOME");
	struct passwd *pw;
	int n;

	if (geteuid() == 0)
		n = snprintf(buf, len, "/var/lib/throttle/state.db");
	else if ((base = getenv("XDG_STATE_HOME")) != NULL && base[0] == '/') {
		toolong = TOO_LONG("XDG_STATE_HOME");
		n = snprintf(buf, len, "%.*s/throttle/state.db",
		    folder_len(base), base);
	} else {
		home = getenv("HOME");
		if ((home == NULL || home[0] != '/') &&
		    (pw = user_entry(geteuid())) != NULL) {
			home = pw->pw_dir;
			toolong = TOO_LONG("the home folder");
		}
		if (home == NULL || home[0] != '/') {
			*errstr = "no home folder to keep state in; give --db "
				  "or set THROTTLE_DB";
			return -1;
		}
		n = snprintf(buf, len, "%.*s/.local/state/throttle/state.db",
		    folder_len(home), home);
	}
	if (n < 0 || (size_t)n >= len) {
		*errstr = toolong;
		return -1;
	}
	return 0;
}
