/*
 * store-redis.c: the store in a Redis server, for limits that must hold
 * across machines.  The same C code decides; Redis only keeps the records
 * (record.c's bytes, as every store keeps them).
 *
 *	1. Layout, under the prefix P (?prefix=, default "throttle:"): every
 *	   record of a key is a field of one hash, P{KEY}, so all of a key is
 *	   one Redis key (one hash slot): "k0".."k7" its limits, "o" its
 *	   lockout, "l" + id its leases, "s" its shedder.  Policies are the
 *	   fields of P + "policies".  Throttle 0.1 kept a key in four keys
 *	   (P k:KEY, P o:KEY, P l:KEY, P s:KEY): those are still read, merged,
 *	   and moved, as they are, into P{KEY} by the first write transaction
 *	   on the key (even one that is refused), or by gc, which moves
 *	   every one it finds.
 *	2. A write transaction is optimistic (compare-and-set): the keys it
 *	   reads are WATCHed first, in the same round trip as the read and the
 *	   server's TIME; its writes go at commit as one MULTI ... EXEC, which
 *	   Redis refuses if a watched key changed meanwhile; the command then
 *	   runs again (STORE_RETRY), for at most --lock-timeout.  So any number
 *	   of hosts never admit more than the limit, in two round trips a
 *	   decision.
 *	3. A key's hash expires on its own when the last of its records may be
 *	   forgotten (record_expiry()), plus MARGIN_MS; one with a record kept
 *	   forever (a lease without a TTL) does not expire.
 *	4. Time is the server's (TIME, read after the key, so decisions on a
 *	   key happen in the order of their times), so hosts with skewed
 *	   clocks agree; THROTTLE_NOW still pins it for tests.
 *	5. Messages name the server as redis://HOST:PORT/DB or the socket,
 *	   never the password.  A value of another type under the prefix is
 *	   refused, never decided on.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "throttle.h"

#define MARGIN_MS 60000 /* keys outlive their records by this much */
#define PREFIX_MAX 128
#define TRIES 10 /* gc's compare-and-set on one key, at most */
#define BATCH 256 /* keys read in one round trip by a scan or gc */

/* A field of a key's hash: one record. */
struct hfield {
	char *name;
	size_t nlen;
	char *val;
	size_t vlen;
};

/* One key's hash, as this transaction read it, with its writes applied. */
struct khash {
	char *key; /* the throttle key */
	size_t keylen;
	char *rkey; /* P{KEY} */
	size_t rlen;
	struct hfield *f;
	int n, cap;
	int touched; /* written: rewritten at commit */
	int old; /* read from throttle 0.1's keys: those go at commit */
};

/* A queued write of a policy: one Redis command. */
struct qcmd {
	int argc;
	char *argv[4];
	size_t len[4];
};

struct rs {
	redisContext *c;
	char where[300]; /* the server, for messages */
	char prefix[PREFIX_MAX + 1];
	char *err;
	size_t errlen;
	int64_t lock_timeout;
	int write, watched;
	int64_t first_try; /* monotonic, when this decision began */
	struct khash *h;
	int nh, caph;
	struct qcmd *q;
	int nq, capq;
	int64_t time; /* the server's TIME, read with the last key */
	int has_time;
	int unavailable; /* the last error: the server out of reach */
	int64_t timeout; /* ?timeout=: a reply waited for this long, at most */
	int64_t deadline; /* monotonic: this decision's --lock-timeout ends */
	int scanning; /* inspect, gc, policy list: not one decision */
	int group; /* in a group (batch): one transaction for many requests */
	int carry; /* the policy lookup read the decision's key: keep it */
	int broken; /* a request of the group failed after it wrote */
	int req_writes; /* writes by the group's current request */
	int retries; /* this decision's lost races, for the backoff */
};

static void
set_err(struct rs *, const char *, ...) __attribute__((format(printf, 2, 3)));

static void
set_err(struct rs *rs, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(rs->err, rs->errlen, "%s: ", rs->where);
	if (n < 0 || (size_t)n >= rs->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(rs->err + n, rs->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

/* The message for a failed call: the connection's, or the reply's. */
static void
reply_err(struct rs *rs, const redisReply *r, const char *what)
{
	/* out of reach: the connection failed or timed out, or the server
	 * cannot answer yet (loading, failing over); anything else it says
	 * is a misconfiguration that --on-error allow must not hide */
	rs->unavailable = rs->c->err != 0 ||
	    (r != NULL && r->type == REDIS_REPLY_ERROR &&
		(strncmp(r->str, "LOADING", 7) == 0 ||
		    strncmp(r->str, "MASTERDOWN", 10) == 0 ||
		    strncmp(r->str, "TRYAGAIN", 8) == 0 ||
		    strncmp(r->str, "CLUSTERDOWN", 11) == 0 ||
		    strncmp(r->str, "BUSY ", 5) == 0));
	if (rs->c->err == REDIS_ERR_IO &&
	    (errno == EAGAIN || errno == ETIMEDOUT))
		set_err(rs,
		    "%s: no reply in time (--lock-timeout, or ?timeout=); is "
		    "the server overloaded or stuck?",
		    what);
	else if (rs->c->err)
		set_err(rs, "%s: %s (is the server up and reachable?)", what,
		    rs->c->errstr[0] ? rs->c->errstr : strerror(errno));
	else if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "WRONGTYPE", 9) == 0)
		set_err(rs,
		    "%s: a key under the prefix '%s' holds something "
		    "throttle did not write; use another ?prefix= or remove "
		    "it",
		    what, rs->prefix);
	else if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    (strncmp(r->str, "MOVED ", 6) == 0 ||
		strncmp(r->str, "ASK ", 4) == 0 ||
		strncmp(r->str, "CROSSSLOT", 9) == 0))
		set_err(rs,
		    "%s: %.100s: the server is a Redis Cluster node, and the "
		    "Redis store speaks to one server; give --db a standalone "
		    "server (a cluster is not supported yet)",
		    what, r->str);
	else if (r != NULL && r->type == REDIS_REPLY_ERROR)
		set_err(rs, "%s: %.200s", what, r->str);
	else
		set_err(rs, "%s: an unexpected reply", what);
}

/* A reply that is an error, or none: the message set, nonzero. */
static int
bad_reply(struct rs *rs, const redisReply *r, const char *what)
{
	if (r != NULL && r->type != REDIS_REPLY_ERROR)
		return 0;
	reply_err(rs, r, what);
	return 1;
}

/*
 * Wait for replies no longer than the decision has left of --lock-timeout
 * (nor than ?timeout=): a slow or stuck server costs a call its lock
 * timeout, not a timeout per round trip.
 */
static void
bound_time(struct rs *rs, int decision)
{
	int64_t t = rs->timeout, left = rs->deadline - clock_monotonic();
	struct timeval tv;

	/* no one reply waits longer than --lock-timeout either */
	if (rs->lock_timeout > 0 && rs->lock_timeout < t)
		t = rs->lock_timeout;
	if (decision && rs->deadline != 0 && left < t)
		t = left > 1000 ? left : 1000;
	tv.tv_sec = (time_t)(t / US_PER_SEC);
	tv.tv_usec = (suseconds_t)(t % US_PER_SEC);
	redisSetTimeout(rs->c, tv);
}

/*
 * Run one command now: its reply, or NULL with the error set.  Within a
 * decision's transaction (a policy, the clock) the reply counts against
 * the decision's --lock-timeout; scans and gc wait for each reply at most
 * ?timeout= and --lock-timeout.
 */
static redisReply *
run(struct rs *rs, const char *what, int argc, const char **argv,
    const size_t *len)
{
	redisReply *r;

	bound_time(rs, rs->first_try != 0 && !rs->scanning);
	r = redisCommandArgv(rs->c, argc, argv, len);
	if (bad_reply(rs, r, what)) {
		if (r != NULL)
			freeReplyObject(r);
		return NULL;
	}
	return r;
}

/* A new buffer holding the n bytes of a, then of b, then of c. */
static char *
cat3(const char *a, size_t an, const char *b, size_t bn, const char *c,
    size_t cn, size_t *len)
{
	char *p = xmalloc(an + bn + cn + 1);

	memcpy(p, a, an);
	memcpy(p + an, b, bn);
	memcpy(p + an + bn, c, cn);
	p[an + bn + cn] = '\0';
	*len = an + bn + cn;
	return p;
}

/* The hash of key: P{KEY}. */
static char *
hash_key(const struct rs *rs, const char *key, size_t keylen, size_t *len)
{
	char *a, *b;
	size_t alen;

	a = cat3(rs->prefix, strlen(rs->prefix), "{", 1, key, keylen, &alen);
	b = cat3(a, alen, "}", 1, "", 0, len);
	free(a);
	return b;
}

/* Throttle 0.1's key of one kind of key's records: P + tag + ":" + KEY. */
static char *
old_key(const struct rs *rs, char tag, const char *key, size_t keylen,
    size_t *len)
{
	char t[2] = { tag, ':' };

	return cat3(rs->prefix, strlen(rs->prefix), t, 2, key, keylen, len);
}

static const char old_tags[] = "kols"; /* limits, lockout, leases, shed */

/* The record kind and id of a hash field, or 0 if it is none. */
static int
field_kind(const char *name, size_t nlen, const char **id, size_t *idlen)
{
	*id = name + 1;
	*idlen = nlen > 0 ? nlen - 1 : 0;
	if (nlen == 0)
		return 0;
	switch (name[0]) {
	case 'k':
		return nlen == 2 ? REC_LIMIT : 0;
	case 'o':
		return nlen == 1 ? REC_LOCKOUT : 0;
	case 'l':
		return nlen == 1 + LEASE_ID_LEN ? REC_LEASE : 0;
	case 's':
		return nlen == 1 ? REC_SHED : 0;
	}
	return 0;
}

/* The hash field of a record. */
static size_t
field_name(int kind, const char *id, size_t idlen, char *buf)
{
	static const char tag[] = "?kols";

	buf[0] = tag[kind >= REC_LIMIT && kind <= REC_SHED ? kind : REC_SHED];
	memcpy(buf + 1, id, idlen);
	return idlen + 1;
}

static void
free_hash(struct khash *h)
{
	int i;

	for (i = 0; i < h->n; i++) {
		free(h->f[i].name);
		free(h->f[i].val);
	}
	free(h->f);
	free(h->key);
	free(h->rkey);
	memset(h, 0, sizeof(*h));
}

/* Set field name to val in h (a copy of each). */
static void
hash_set(struct khash *h, const char *name, size_t nlen, const char *val,
    size_t vlen)
{
	int i;

	for (i = 0; i < h->n; i++)
		if (h->f[i].nlen == nlen &&
		    memcmp(h->f[i].name, name, nlen) == 0)
			break;
	if (i == h->n) {
		if (h->n == h->cap) {
			h->cap = h->cap ? h->cap * 2 : 8;
			h->f = xrealloc(h->f, (size_t)h->cap * sizeof(*h->f));
		}
		h->f[i].name = cat3(name, nlen, "", 0, "", 0, &h->f[i].nlen);
		h->n++;
	} else
		free(h->f[i].val);
	h->f[i].val = cat3(val, vlen, "", 0, "", 0, &h->f[i].vlen);
}

static void
hash_del(struct khash *h, int i)
{
	free(h->f[i].name);
	free(h->f[i].val);
	h->f[i] = h->f[--h->n];
}

static int
has_field(const struct khash *h, const char *name, size_t nlen)
{
	int i;

	for (i = 0; i < h->n; i++)
		if (h->f[i].nlen == nlen &&
		    memcmp(h->f[i].name, name, nlen) == 0)
			return 1;
	return 0;
}

static int
cmp_field(const void *x, const void *y)
{
	const struct hfield *a = x, *b = y;
	const char *ai, *bi;
	size_t al, bl;
	int ka = field_kind(a->name, a->nlen, &ai, &al);
	int kb = field_kind(b->name, b->nlen, &bi, &bl);
	int c;

	if (ka != kb)
		return ka < kb ? -1 : 1;
	c = memcmp(ai, bi, al < bl ? al : bl);
	return c != 0 ? c : al < bl ? -1 : al > bl;
}

/* Add the fields of an HGETALL reply (prefixed with tag if not 0). */
static int
add_fields(struct rs *rs, struct khash *h, const redisReply *r, char tag,
    int only_missing)
{
	char name[2 + LEASE_ID_LEN + 64];
	size_t i, n;

	if (r->type == REDIS_REPLY_NIL)
		return 0;
	if (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0) {
		reply_err(rs, NULL, "reading a key");
		return -1;
	}
	for (i = 0; i < r->elements; i += 2) {
		const redisReply *k = r->element[i], *v = r->element[i + 1];

		if (k->type != REDIS_REPLY_STRING ||
		    v->type != REDIS_REPLY_STRING || k->len > 64) {
			reply_err(rs, NULL, "reading a key");
			return -1;
		}
		n = 0;
		if (tag != 0)
			name[n++] = tag;
		memcpy(name + n, k->str, k->len);
		n += k->len;
		if (only_missing && has_field(h, name, n))
			continue;
		hash_set(h, name, n, v->str, v->len);
	}
	return 0;
}

/* Add a GET reply as field tag (only if the hash has none). */
static int
add_string(struct rs *rs, struct khash *h, const redisReply *r, char tag)
{
	if (r->type == REDIS_REPLY_NIL || has_field(h, &tag, 1))
		return 0;
	if (r->type != REDIS_REPLY_STRING) {
		set_err(rs,
		    "holds a value under the prefix '%s' that this throttle "
		    "cannot read",
		    rs->prefix);
		return -1;
	}
	hash_set(h, &tag, 1, r->str, r->len);
	return 1;
}

/* The server's TIME, from its reply. */
static void
take_time(struct rs *rs, const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_STRING)
		return;
	rs->time = strtoll(r->element[0]->str, NULL, 10) * US_PER_SEC +
	    strtoll(r->element[1]->str, NULL, 10);
	rs->has_time = 1;
}

/*
 * Reply j of a key's read into h: 0 the key's hash, 1.. the keys of
 * throttle 0.1's layout (merged, h->old set if any held something).  0,
 * or -1 with the error set.
 */
static int
take_reply(struct rs *rs, struct khash *h, const redisReply *r, int j)
{
	int got;

	if (j == 0)
		return add_fields(rs, h, r, 0, 0);
	if (j == 1 || j == 3)
		got = add_fields(rs, h, r, old_tags[j - 1], 1) == -1
		    ? -1
		    : r->type == REDIS_REPLY_ARRAY && r->elements > 0;
	else
		got = add_string(rs, h, r, old_tags[j - 1]);
	if (got == -1)
		return -1;
	if (got > 0)
		h->old = 1;
	return 0;
}

/* Where a key's records may be: bit 0 its hash P{KEY}, bit 1 + i throttle
 * 0.1's key of old_tags[i]. */
#define IN_HASH 1u
#define IN_OLD(i) (2u << (i))
#define IN_ALL 0x1fu

/* The Redis key of where bit i (0 the hash, 1.. the old keys) of h. */
static char *
where_key(const struct rs *rs, const struct khash *h, int i, size_t *len)
{
	if (i == 0)
		return cat3(h->rkey, h->rlen, "", 0, "", 0, len);
	return old_key(rs, old_tags[i - 1], h->key, h->keylen, len);
}

/*
 * Start h as key's hash and queue the reads of the places in where (one
 * command each), the hash WATCHed first if watch; the replies are taken
 * by take_read().  Only the hash is watched: every write of a key
 * rewrites its hash (and deletes its old keys in the same EXEC), so the
 * hash changes whenever the key does, and a WATCH costs the server a
 * search of what the connection watches already (a group of 2,000 keys
 * watched in both layouts spent a second in WATCH).
 */
static void
queue_read(struct rs *rs, struct khash *h, const char *key, size_t keylen,
    unsigned where, int watch)
{
	const char *argv[2 + 4];
	size_t len[2 + 4];
	char *k[5];
	int i, n = 1;

	memset(h, 0, sizeof(*h));
	h->key = cat3(key, keylen, "", 0, "", 0, &h->keylen);
	h->rkey = hash_key(rs, key, keylen, &h->rlen);
	argv[0] = "WATCH";
	len[0] = 5;
	argv[1] = h->rkey;
	len[1] = h->rlen;
	if (watch)
		redisAppendCommandArgv(rs->c, 2, argv, len);
	for (i = 0; i < 5; i++) {
		k[i] = NULL;
		if (where & (1u << i)) {
			k[i] = where_key(rs, h, i, &len[n]);
			argv[n++] = k[i];
		}
	}
	for (i = 0, n = 1; i < 5; i++) {
		if (k[i] == NULL)
			continue;
		/* the hash, and 0.1's limits and leases, are hashes */
		argv[0] = i == 0 || i == 1 || i == 3 ? "HGETALL" : "GET";
		len[0] = strlen(argv[0]);
		argv[1] = k[i];
		len[1] = len[n++];
		redisAppendCommandArgv(rs->c, 2, argv, len);
		free(k[i]);
	}
}

/* The next reply: 0, or -1 if the connection failed (the error set). */
static int
next_reply(struct rs *rs, redisReply **r, const char *what)
{
	*r = NULL;
	if (redisGetReply(rs->c, (void **)r) == REDIS_OK && *r != NULL)
		return 0;
	reply_err(rs, NULL, what);
	*r = NULL;
	return -1;
}

/*
 * Take the replies of queue_read() into h, merging throttle 0.1's keys
 * (h->old set if any held something).  -1 if the connection failed (no
 * more replies will come); otherwise 0, with *ok set to -1 (and the error
 * set) if a reply was bad.
 */
static int
take_read(struct rs *rs, struct khash *h, unsigned where, int watch, int *ok)
{
	redisReply *r;
	int i;

	if (watch) {
		if (next_reply(rs, &r, "reading a key") == -1)
			return -1;
		if (*ok == 0 && bad_reply(rs, r, "reading a key"))
			*ok = -1;
		else
			rs->watched = 1;
		freeReplyObject(r);
	}
	for (i = 0; i < 5; i++) {
		if (!(where & (1u << i)))
			continue;
		if (next_reply(rs, &r, "reading a key") == -1)
			return -1;
		if (*ok == 0 && bad_reply(rs, r, "reading a key"))
			*ok = -1;
		else if (*ok == 0)
			*ok = take_reply(rs, h, r, i);
		freeReplyObject(r);
	}
	return 0;
}

/*
 * Read key's hash into h, with throttle 0.1's keys merged into it (h->old
 * set if there were any), WATCHing them all first when watch; and the
 * server's TIME after them, into rs->time.  One round trip.  0 or -1.
 */
static int
read_key(struct rs *rs, const char *key, size_t keylen, int watch, int decision,
    struct khash *h)
{
	redisReply *r;
	int ok = 0;

	queue_read(rs, h, key, keylen, IN_ALL, watch);
	redisAppendCommand(rs->c, "TIME");
	bound_time(rs, decision);
	if (take_read(rs, h, IN_ALL, watch, &ok) == -1 ||
	    next_reply(rs, &r, "reading a key") == -1)
		ok = -1;
	else {
		if (ok == 0 && bad_reply(rs, r, "reading a key"))
			ok = -1;
		else if (ok == 0)
			take_time(rs, r);
		freeReplyObject(r);
	}
	if (ok == -1)
		free_hash(h);
	return ok;
}

/* The hash of a key, read once per transaction. */
static struct khash *
load(struct rs *rs, const char *key, size_t keylen)
{
	int i;

	for (i = 0; i < rs->nh; i++)
		if (rs->h[i].keylen == keylen &&
		    memcmp(rs->h[i].key, key, keylen) == 0)
			return &rs->h[i];
	if (rs->nh == rs->caph) {
		rs->caph = rs->caph ? rs->caph * 2 : 4;
		rs->h = xrealloc(rs->h, (size_t)rs->caph * sizeof(*rs->h));
	}
	if (read_key(rs, key, keylen, rs->write || rs->group, 1,
		&rs->h[rs->nh]) == -1)
		return NULL;
	if (rs->h[rs->nh].old && rs->write)
		rs->h[rs->nh].touched = 1; /* moved into P{KEY} at commit */
	return &rs->h[rs->nh++];
}

/* Call fn for the fields of h of the kinds in mask, in kind and id order. */
static int
each_field(struct khash *h, unsigned mask, store_rec_fn fn, void *arg)
{
	const char *id;
	size_t idlen;
	int i, kind, r;

	if (h->n > 1)
		qsort(h->f, (size_t)h->n, sizeof(*h->f), cmp_field);
	for (i = 0; i < h->n; i++) {
		kind = field_kind(h->f[i].name, h->f[i].nlen, &id, &idlen);
		if (kind == 0 || !(mask & REC_MASK(kind)))
			continue;
		if ((r = fn(arg, kind, id, idlen, h->f[i].val, h->f[i].vlen)) !=
		    0)
			return r;
	}
	return 0;
}

/* Queue a write of the policies' hash for the commit. */
static void
queue(struct rs *rs, int argc, const char *const *argv, const size_t *len)
{
	struct qcmd *q;
	int i;

	if (rs->nq == rs->capq) {
		rs->capq = rs->capq ? rs->capq * 2 : 4;
		rs->q = xrealloc(rs->q, (size_t)rs->capq * sizeof(*rs->q));
	}
	q = &rs->q[rs->nq++];
	q->argc = argc;
	for (i = 0; i < argc; i++)
		q->argv[i] = cat3(argv[i], len[i], "", 0, "", 0, &q->len[i]);
}

/* Forget what this transaction read and queued. */
static void
forget(struct rs *rs)
{
	int i, j;

	for (i = 0; i < rs->nh; i++)
		free_hash(&rs->h[i]);
	rs->nh = 0;
	for (i = 0; i < rs->nq; i++)
		for (j = 0; j < rs->q[i].argc; j++)
			free(rs->q[i].argv[j]);
	rs->nq = 0;
	rs->has_time = 0;
}

/* The policies' hash key. */
static char *
policies_key(const struct rs *rs, size_t *len)
{
	return cat3(rs->prefix, strlen(rs->prefix), "policies", 8, "", 0, len);
}

/* A policy (REC_POLICY records have the policy's name for key). */
static int
get_policy(struct rs *rs, const char *name, size_t nlen, store_rec_fn fn,
    void *arg)
{
	size_t klen;
	char *k = policies_key(rs, &klen);
	const char *argv[3] = { "WATCH", k, name };
	size_t len[3] = { 5, klen, nlen };
	redisReply *r;
	int ret = -1;

	if (rs->write) {
		if ((r = run(rs, "reading a policy", 2, argv, len)) == NULL) {
			free(k);
			return -1;
		}
		freeReplyObject(r);
		rs->watched = 1;
	}
	argv[0] = "HGET";
	len[0] = 4;
	if ((r = run(rs, "reading a policy", 3, argv, len)) != NULL) {
		if (r->type == REDIS_REPLY_NIL)
			ret = 0;
		else if (r->type == REDIS_REPLY_STRING)
			ret = fn(arg, REC_POLICY, "", 0, r->str, r->len);
		else
			reply_err(rs, NULL, "reading a policy");
		freeReplyObject(r);
	}
	free(k);
	return ret;
}

/*
 * The first of n policies there is, in one HMGET (store_policy_find()): a
 * decision that may use a policy asks once, not once per prefix.
 */
static int
rs_policy_first(void *p, char *const *names, const size_t *lens, int n,
    store_rec_fn fn, void *arg)
{
	struct rs *rs = p;
	size_t klen, *len = xmalloc((size_t)(n + 2) * sizeof(*len));
	const char **argv = xmalloc((size_t)(n + 2) * sizeof(*argv));
	char *k = policies_key(rs, &klen);
	redisReply *r = NULL, *e;
	int i, ret = -1;

	argv[0] = "WATCH";
	len[0] = 5;
	argv[1] = k;
	len[1] = klen;
	if (rs->write) {
		if ((r = run(rs, "reading a policy", 2, argv, len)) == NULL)
			goto out;
		freeReplyObject(r);
		rs->watched = 1;
	}
	argv[0] = "HMGET";
	len[0] = 5;
	for (i = 0; i < n; i++) {
		argv[i + 2] = names[i];
		len[i + 2] = lens[i];
	}
	if (!rs->write && !rs->group && rs->nh == 0) {
		/* a decision on names[0] follows: read its key (WATCHed)
		 * and the server's TIME in this same round trip */
		int ok = 0;

		if (rs->caph == 0) {
			rs->caph = 4;
			rs->h =
			    xrealloc(rs->h, (size_t)rs->caph * sizeof(*rs->h));
		}
		queue_read(rs, &rs->h[0], names[0], lens[0], IN_ALL, 1);
		redisAppendCommand(rs->c, "TIME");
		redisAppendCommandArgv(rs->c, n + 2, argv, len);
		bound_time(rs, 1);
		if (take_read(rs, &rs->h[0], IN_ALL, 1, &ok) == -1 ||
		    next_reply(rs, &r, "reading a key") == -1) {
			free_hash(&rs->h[0]);
			goto out;
		}
		if (ok == 0 && bad_reply(rs, r, "reading a key"))
			ok = -1;
		else if (ok == 0)
			take_time(rs, r);
		freeReplyObject(r);
		r = NULL;
		if (next_reply(rs, &r, "reading a policy") == -1) {
			free_hash(&rs->h[0]);
			goto out;
		}
		if (ok == -1 || bad_reply(rs, r, "reading a policy")) {
			free_hash(&rs->h[0]);
			goto out;
		}
		rs->nh = 1;
		rs->carry = 1;
	} else if ((r = run(rs, "reading a policy", n + 2, argv, len)) == NULL)
		goto out;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != (size_t)n) {
		reply_err(rs, NULL, "reading a policy");
		goto out;
	}
	ret = 0;
	for (i = 0; i < n && ret == 0; i++) {
		e = r->element[i];
		if (e->type == REDIS_REPLY_NIL)
			continue;
		if (e->type != REDIS_REPLY_STRING) {
			reply_err(rs, NULL, "reading a policy");
			ret = -1;
		} else if (fn(arg, REC_POLICY, names[i], lens[i], e->str,
			       e->len) == -1)
			ret = -1;
		else
			ret = 1;
	}
out:
	if (ret == -1)
		rs->carry = 0; /* a failed lookup's read is not kept */
	if (r != NULL)
		freeReplyObject(r);
	free(k);
	free(argv);
	free(len);
	return ret;
}

static int
rs_get(void *p, const char *key, size_t keylen, unsigned mask, store_rec_fn fn,
    void *arg)
{
	struct rs *rs = p;
	struct khash *h;

	if (mask & REC_MASK(REC_POLICY))
		return get_policy(rs, key, keylen, fn, arg);
	if ((h = load(rs, key, keylen)) == NULL)
		return -1;
	return each_field(h, mask, fn, arg);
}

static int
rs_put(void *p, const char *key, size_t keylen, int kind, const char *id,
    size_t idlen, const char *data, size_t len, int64_t expires)
{
	struct rs *rs = p;
	struct khash *h;
	char name[1 + LEASE_ID_LEN];
	size_t klen;
	char *k;

	(void)expires; /* worked out again at commit, for the whole hash */
	if (kind == REC_POLICY) {
		const char *argv[4] = { "HSET", NULL, key, data };
		size_t l[4] = { 4, 0, keylen, len };

		k = policies_key(rs, &klen);
		argv[1] = k;
		l[1] = klen;
		queue(rs, 4, argv, l);
		free(k);
		rs->req_writes++;
		return 0;
	}
	if (idlen > LEASE_ID_LEN || (h = load(rs, key, keylen)) == NULL)
		return -1;
	hash_set(h, name, field_name(kind, id, idlen, name), data, len);
	h->touched = 1;
	rs->req_writes++;
	return 0;
}

static int
rs_del(void *p, const char *key, size_t keylen, unsigned mask, const char *id,
    size_t idlen)
{
	struct rs *rs = p;
	struct khash *h;
	const char *fid;
	size_t fidlen;
	int i, kind, found = 0;

	if (mask & REC_MASK(REC_POLICY)) {
		size_t klen;
		char *k = policies_key(rs, &klen);
		const char *argv[3] = { "WATCH", k, key };
		size_t len[3] = { 5, klen, keylen };
		redisReply *r;

		if ((r = run(rs, "reading a policy", 2, argv, len)) != NULL) {
			freeReplyObject(r);
			rs->watched = 1;
			argv[0] = "HEXISTS";
			len[0] = 7;
			if ((r = run(rs, "reading a policy", 3, argv, len)) !=
			    NULL) {
				found = r->type == REDIS_REPLY_INTEGER &&
				    r->integer == 1;
				freeReplyObject(r);
				argv[0] = "HDEL";
				len[0] = 4;
				if (found) {
					queue(rs, 3, argv, len);
					rs->req_writes++;
				}
			} else
				found = -1;
		} else
			found = -1;
		free(k);
		return found;
	}
	if ((h = load(rs, key, keylen)) == NULL)
		return -1;
	for (i = h->n - 1; i >= 0; i--) {
		kind = field_kind(h->f[i].name, h->f[i].nlen, &fid, &fidlen);
		if (kind == 0 || !(mask & REC_MASK(kind)) ||
		    (id != NULL &&
			(fidlen != idlen || memcmp(fid, id, idlen) != 0)))
			continue;
		hash_del(h, i);
		h->touched = 1;
		found = 1;
		rs->req_writes++;
	}
	return found;
}

/* Milliseconds from now until at, plus the margin. */
static long long
ttl_ms(int64_t now, int64_t at)
{
	int64_t ms = (at - now) / 1000 + MARGIN_MS;

	return ms < MARGIN_MS ? MARGIN_MS : (long long)ms;
}

/* When the last record of h may be forgotten (RECORD_FOREVER: never). */
static int64_t
hash_expiry(const struct khash *h)
{
	const char *id;
	size_t idlen;
	int64_t until = 0, e;
	int i, kind;

	for (i = 0; i < h->n; i++) {
		kind = field_kind(h->f[i].name, h->f[i].nlen, &id, &idlen);
		e = kind == 0 ? RECORD_FOREVER
			      : record_expiry(kind, h->f[i].val, h->f[i].vlen);
		if (e > until)
			until = e;
	}
	return until;
}

/*
 * Append, for the MULTI being built, the writes that make the server's
 * copy of h what h is now: the hash rewritten whole with its expiry, and
 * throttle 0.1's keys gone.  The number of commands appended.
 */
static int
append_hash(struct rs *rs, const struct khash *h, int64_t now)
{
	const char **argv;
	size_t *len, olen;
	char *old, t[24];
	int64_t until;
	int i, n = 0;

	argv = xcalloc((size_t)h->n * 2 + 2, sizeof(*argv));
	len = xcalloc((size_t)h->n * 2 + 2, sizeof(*len));
	argv[0] = "DEL";
	len[0] = 3;
	argv[1] = h->rkey;
	len[1] = h->rlen;
	redisAppendCommandArgv(rs->c, 2, argv, len);
	n++;
	if (h->n > 0) {
		argv[0] = "HSET";
		len[0] = 4;
		for (i = 0; i < h->n; i++) {
			argv[2 + 2 * i] = h->f[i].name;
			len[2 + 2 * i] = h->f[i].nlen;
			argv[3 + 2 * i] = h->f[i].val;
			len[3 + 2 * i] = h->f[i].vlen;
		}
		redisAppendCommandArgv(rs->c, 2 + 2 * h->n, argv, len);
		n++;
		if ((until = hash_expiry(h)) != RECORD_FOREVER) {
			snprintf(t, sizeof(t), "%lld", ttl_ms(now, until));
			argv[0] = "PEXPIRE";
			len[0] = 7;
			argv[2] = t;
			len[2] = strlen(t);
			redisAppendCommandArgv(rs->c, 3, argv, len);
			n++;
		}
	}
	for (i = 0; h->old && i < 4; i++) {
		old = old_key(rs, old_tags[i], h->key, h->keylen, &olen);
		argv[0] = "DEL";
		len[0] = 3;
		argv[1] = old;
		len[1] = olen;
		redisAppendCommandArgv(rs->c, 2, argv, len);
		free(old);
		n++;
	}
	free(argv);
	free(len);
	return n;
}

static void
unwatch(struct rs *rs)
{
	redisReply *r;

	if (!rs->watched)
		return;
	rs->watched = 0;
	if ((r = redisCommand(rs->c, "UNWATCH")) != NULL)
		freeReplyObject(r);
}

/*
 * Send the writes: MULTI, each hash rewritten, each policy write, EXEC.
 * 0 done, 1 the EXEC was refused (a watched key changed), -1 error.
 */
static int
exec_writes(struct rs *rs, const struct khash *h, int nh, int64_t now)
{
	redisReply *r = NULL;
	int i, n = 0, ret = 0, conflict = 0;

	redisAppendCommand(rs->c, "MULTI");
	for (i = 0; i < nh; i++)
		if (h[i].touched)
			n += append_hash(rs, &h[i], now);
	for (i = 0; i < rs->nq; i++)
		redisAppendCommandArgv(rs->c, rs->q[i].argc,
		    (const char **)rs->q[i].argv, rs->q[i].len);
	n += rs->nq;
	redisAppendCommand(rs->c, "EXEC");
	bound_time(rs, !rs->scanning);
	for (i = 0; i < n + 2; i++) {
		if (redisGetReply(rs->c, (void **)&r) != REDIS_OK ||
		    r == NULL) {
			reply_err(rs, NULL, "saving");
			return -1;
		}
		if (i == n + 1) {
			if (r->type == REDIS_REPLY_NIL)
				conflict = 1;
			else if (r->type != REDIS_REPLY_ARRAY) {
				if (ret == 0)
					reply_err(rs, r, "saving");
				ret = -1;
			} else {
				size_t k;

				for (k = 0; k < r->elements && ret == 0; k++)
					if (bad_reply(rs, r->element[k],
						"saving"))
						ret = -1;
			}
		} else if (r->type == REDIS_REPLY_ERROR && ret == 0) {
			/* refused while queueing: EXEC will abort */
			reply_err(rs, r, "saving");
			ret = -1;
		}
		freeReplyObject(r);
		r = NULL;
	}
	rs->watched = 0; /* EXEC unwatches */
	return ret == -1 ? -1 : conflict;
}

static int rs_now(void *, int64_t *);

/*
 * After a lost race, wait a while before the next try: a random time up to
 * 100 us doubled with each try, at most 10 ms (and within --lock-timeout),
 * so that 32 hosts retrying on one key spread out instead of colliding
 * again in step.
 */
static void
backoff(struct rs *rs)
{
	int64_t cap = 100 << (rs->retries < 7 ? rs->retries : 7), nap;
	int64_t left = rs->deadline - clock_monotonic();

	rs->retries++;
	nap = (int64_t)(host_random() % (uint64_t)cap) + 1;
	if (nap > left)
		nap = left > 0 ? left : 0;
	if (nap > 0)
		clock_sleep(nap);
}

/*
 * The decision is over: its --lock-timeout starts again with the next.  A
 * read (the policy a decision looks up first) is not one: its time counts
 * against the decision that follows, so a whole call stays within it.
 */
static void
done(struct rs *rs)
{
	if (!rs->write && !rs->group)
		return;
	rs->first_try = 0;
	rs->retries = 0;
}

/*
 * Commit: 0 done, STORE_RETRY if a watched key changed (run the
 * transaction again, after a backoff), -1 error (or the race lost for
 * --lock-timeout).  In a group, a request's writes wait for the group's
 * end.
 */
static int
rs_commit(void *p)
{
	struct rs *rs = p;
	int64_t now;
	char t[32];
	int i, any = rs->nq > 0, r;

	if (rs->group)
		return 0;
	for (i = 0; i < rs->nh; i++)
		any |= rs->h[i].touched;
	if (!any && rs->carry && !rs->write)
		return 0; /* the decision that follows uses what was read */
	rs->carry = 0;
	if (!any) {
		unwatch(rs);
		forget(rs);
		done(rs);
		return 0;
	}
	if (rs_now(rs, &now) == -1) {
		forget(rs);
		done(rs);
		return -1;
	}
	r = exec_writes(rs, rs->h, rs->nh, now);
	forget(rs);
	if (r == -1) {
		done(rs);
		return -1;
	}
	if (r == 1) {
		if (clock_monotonic() - rs->first_try > rs->lock_timeout) {
			output_human(t, sizeof(t), rs->lock_timeout);
			set_err(rs,
			    "other writers kept changing the key for %s "
			    "(--lock-timeout); try again",
			    t);
			rs->unavailable = 1; /* contention, as a timeout */
			done(rs);
			return -1;
		}
		backoff(rs);
		return STORE_RETRY;
	}
	done(rs);
	return 0;
}

static void
rs_rollback(void *p)
{
	struct rs *rs = p;

	if (rs->group) {
		/* a request that wrote cannot be undone alone: its group is
		 * lost; one that wrote nothing fails alone */
		if (rs->req_writes > 0)
			rs->broken = 1;
		return;
	}
	if (rs->carry && !rs->write)
		return; /* a read's end: the decision that follows uses it */
	rs->carry = 0;
	if (rs->c != NULL && !rs->c->err)
		unwatch(rs);
	forget(rs);
	done(rs);
}

static int
rs_begin(void *p, int write)
{
	struct rs *rs = p;
	int i;

	rs->req_writes = 0;
	rs->unavailable = 0;
	if (rs->group)
		return 0; /* what the group read stays read */
	if (rs->carry) {
		/* the key the policy lookup read (WATCHed, with the server's
		 * TIME) is this decision's: no round trip to read it again */
		rs->carry = 0;
		rs->write = write;
		for (i = 0; write && i < rs->nh; i++)
			if (rs->h[i].old)
				rs->h[i].touched = 1; /* moved into P{KEY} */
		return 0;
	}
	forget(rs);
	rs->write = write;
	if (rs->first_try == 0) {
		rs->first_try = clock_monotonic();
		rs->deadline = rs->first_try + rs->lock_timeout;
	}
	return 0;
}

/*
 * A group (throttle batch) is one optimistic transaction: every key its
 * requests read is WATCHed (the batch reads them all ahead, in one round
 * trip: rs_prefetch()), every request decides on what the group read and
 * wrote before it, and the group's writes go as one MULTI ... EXEC at its
 * end.  If a watched key changed meanwhile, the end says STORE_RETRY and
 * the batch decides the group again.
 */
static int
rs_group_begin(void *p)
{
	struct rs *rs = p;

	if (rs_begin(rs, 1) == -1)
		return -1;
	rs->group = 1;
	rs->broken = 0;
	return 0;
}

static int
rs_group_end(void *p, int commit)
{
	struct rs *rs = p;
	int broken = rs->broken;

	rs->group = rs->broken = 0;
	if (!commit || broken) {
		rs_rollback(rs);
		return broken ? -1 : 0;
	}
	return rs_commit(rs);
}

/*
 * Read, in one round trip, the keys of a group's requests that it has not
 * read yet (WATCHed, with the server's TIME): each request then decides
 * without a round trip of its own.  0 or -1.
 */
static int
rs_prefetch(void *p, char *const *keys, const size_t *lens, int n)
{
	struct rs *rs = p;
	redisReply *r;
	int i, j, first = rs->nh, ok = 0;

	for (i = 0; i < n; i++) {
		for (j = 0; j < rs->nh; j++)
			if (rs->h[j].keylen == lens[i] &&
			    memcmp(rs->h[j].key, keys[i], lens[i]) == 0)
				break;
		if (j < rs->nh)
			continue;
		if (rs->nh == rs->caph) {
			rs->caph = rs->caph ? rs->caph * 2 : 4;
			rs->h =
			    xrealloc(rs->h, (size_t)rs->caph * sizeof(*rs->h));
		}
		queue_read(rs, &rs->h[rs->nh++], keys[i], lens[i], IN_ALL, 1);
	}
	if (rs->nh == first)
		return 0;
	redisAppendCommand(rs->c, "TIME");
	bound_time(rs, 1);
	for (i = first; i < rs->nh && ok == 0; i++)
		if (take_read(rs, &rs->h[i], IN_ALL, 1, &ok) == -1)
			ok = -1;
	if (ok == 0 && next_reply(rs, &r, "reading a key") == 0) {
		if (bad_reply(rs, r, "reading a key"))
			ok = -1;
		else
			take_time(rs, r);
		freeReplyObject(r);
	} else
		ok = -1;
	for (i = first; i < rs->nh; i++) {
		if (ok == -1)
			free_hash(&rs->h[i]); /* each request reads its own */
		else if (rs->h[i].old)
			rs->h[i].touched = 1; /* moved into P{KEY} at commit */
	}
	if (ok == -1)
		rs->nh = first;
	return ok;
}

/* The server's time (or THROTTLE_NOW's), in microseconds. */
static int
rs_now(void *p, int64_t *now)
{
	struct rs *rs = p;
	const char *argv[1] = { "TIME" };
	size_t len[1] = { 4 };
	redisReply *r;
	const char *err;

	if (clock_pinned()) {
		if (clock_now(now, &err) == -1) {
			set_err(rs, "THROTTLE_NOW: %s", err);
			return -1;
		}
		return 0;
	}
	if (rs->has_time) {
		*now = rs->time; /* read with the key, in its round trip */
		return 0;
	}
	if ((r = run(rs, "reading the server's clock", 1, argv, len)) == NULL)
		return -1;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_STRING) {
		reply_err(rs, NULL, "reading the server's clock");
		freeReplyObject(r);
		return -1;
	}
	*now = strtoll(r->element[0]->str, NULL, 10) * US_PER_SEC +
	    strtoll(r->element[1]->str, NULL, 10);
	freeReplyObject(r);
	rs->time = *now;
	rs->has_time = 1;
	return 0;
}

/* Byte order of two strings. */
static int
bytes_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c != 0 ? c : alen < blen ? -1 : alen > blen;
}

struct name {
	const char *s;
	uint32_t n;
	uint32_t where; /* IN_HASH, IN_OLD(i): where it was found */
};

static int
cmp_name(const void *x, const void *y)
{
	const struct name *a = x, *b = y;

	return bytes_cmp(a->s, a->n, b->s, b->n);
}

/*
 * Names, their bytes kept in chunks that never move, so that listing
 * 100,000 keys costs a few bytes more than their names, not a malloc
 * each.
 */
#define CHUNK 65536
struct names {
	struct name *v;
	size_t n, cap;
	char **chunk;
	size_t nchunk, used; /* bytes used of the last chunk */
};

static void
add_name(struct names *ns, const char *s, size_t len, unsigned where)
{
	char *p;

	if (ns->nchunk == 0 || ns->used + len > CHUNK) {
		ns->chunk =
		    xrealloc(ns->chunk, (ns->nchunk + 1) * sizeof(*ns->chunk));
		ns->chunk[ns->nchunk++] = xmalloc(CHUNK);
		ns->used = 0;
	}
	p = ns->chunk[ns->nchunk - 1] + ns->used;
	memcpy(p, s, len);
	ns->used += len;
	if (ns->n == ns->cap) {
		ns->cap = ns->cap ? ns->cap * 2 : 64;
		ns->v = xrealloc(ns->v, ns->cap * sizeof(*ns->v));
	}
	ns->v[ns->n].s = p;
	ns->v[ns->n].n = (uint32_t)len;
	ns->v[ns->n++].where = where;
}

static void
free_names(struct names *ns)
{
	size_t i;

	for (i = 0; i < ns->nchunk; i++)
		free(ns->chunk[i]);
	free(ns->chunk);
	free(ns->v);
	memset(ns, 0, sizeof(*ns));
}

/*
 * Add to ns the throttle keys of the Redis keys matching the prefix, then
 * pat ("{*" or "k:*"), with skip bytes (the tag) after the prefix and
 * drop bytes (the closing brace) at the end.  SCAN, so it never blocks
 * the server.  0 or -1.
 */
static int
scan_keys(struct rs *rs, const char *pat, size_t skip, size_t drop,
    unsigned where, struct names *ns)
{
	char cursor[32] = "0", pattern[PREFIX_MAX * 2 + 8];
	const char *argv[6] = { "SCAN", cursor, "MATCH", pattern, "COUNT",
		"1000" };
	size_t len[6], i, plen = strlen(rs->prefix), j, n = 0;
	redisReply *r;

	/* the prefix literally: escape glob characters */
	for (j = 0; j < plen; j++) {
		if (strchr("*?[]\\", rs->prefix[j]) != NULL)
			pattern[n++] = '\\';
		pattern[n++] = rs->prefix[j];
	}
	if (strcmp(pat, "{*") == 0)
		pattern[n++] = '\\'; /* a brace is no glob, but be plain */
	snprintf(pattern + n, sizeof(pattern) - n, "%s", pat);
	do {
		for (i = 0; i < 6; i++)
			len[i] = strlen(argv[i]);
		if ((r = run(rs, "listing keys", 6, argv, len)) == NULL)
			return -1;
		if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
		    r->element[0]->type != REDIS_REPLY_STRING ||
		    r->element[1]->type != REDIS_REPLY_ARRAY ||
		    r->element[0]->len >= sizeof(cursor)) {
			reply_err(rs, NULL, "listing keys");
			freeReplyObject(r);
			return -1;
		}
		memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
		for (i = 0; i < r->element[1]->elements; i++) {
			const redisReply *e = r->element[1]->element[i];

			if (e->type != REDIS_REPLY_STRING ||
			    e->len < plen + skip + drop + 1 ||
			    e->len - plen - skip - drop > KEY_MAX)
				continue;
			add_name(ns, e->str + plen + skip,
			    e->len - plen - skip - drop, where);
		}
		freeReplyObject(r);
	} while (strcmp(cursor, "0") != 0);
	return 0;
}

/* Every throttle key under the prefix, in either layout: sorted, once. */
static int
all_keys(struct rs *rs, struct names *ns)
{
	static const char *const old[] = { "k:*", "o:*", "l:*", "s:*" };
	size_t i, j;

	memset(ns, 0, sizeof(*ns));
	if (scan_keys(rs, "{*", 1, 1, IN_HASH, ns) == -1)
		return -1;
	for (i = 0; i < 4; i++)
		if (scan_keys(rs, old[i], 2, 0, IN_OLD(i), ns) == -1)
			return -1;
	if (ns->n > 1)
		qsort(ns->v, ns->n, sizeof(*ns->v), cmp_name);
	for (i = j = 0; i < ns->n; i++) {
		if (j > 0 && cmp_name(&ns->v[j - 1], &ns->v[i]) == 0) {
			ns->v[j - 1].where |= ns->v[i].where;
			continue;
		}
		ns->v[j++] = ns->v[i];
	}
	ns->n = j;
	return 0;
}

struct scan_each {
	store_scan_fn fn;
	void *arg;
	const char *key;
	size_t keylen;
};

static int
scan_one(void *p, int kind, const char *id, size_t idlen, const char *data,
    size_t len)
{
	struct scan_each *e = p;

	return e->fn(e->arg, e->key, e->keylen, kind, id, idlen, data, len);
}

/* Every policy, in name order. */
static int
scan_policies(struct rs *rs, store_scan_fn fn, void *arg)
{
	struct khash h;
	size_t klen;
	char *k = policies_key(rs, &klen);
	const char *argv[2] = { "HGETALL", k };
	size_t len[2] = { 7, klen };
	struct name *v;
	redisReply *r;
	int i, ret = 0;

	memset(&h, 0, sizeof(h));
	r = run(rs, "listing policies", 2, argv, len);
	free(k);
	if (r == NULL)
		return -1;
	if (add_fields(rs, &h, r, 0, 0) == -1) {
		freeReplyObject(r);
		free_hash(&h);
		return -1;
	}
	freeReplyObject(r);
	v = xcalloc((size_t)h.n + 1, sizeof(*v));
	for (i = 0; i < h.n; i++) {
		v[i].s = h.f[i].name;
		v[i].n = (uint32_t)h.f[i].nlen;
		v[i].where = (uint32_t)i; /* here: the field it names */
	}
	qsort(v, (size_t)h.n, sizeof(*v), cmp_name);
	for (i = 0; i < h.n && ret == 0; i++)
		ret = fn(arg, v[i].s, v[i].n, REC_POLICY, "", 0,
		    h.f[v[i].where].val, h.f[v[i].where].vlen);
	free(v);
	free_hash(&h);
	return ret;
}

/*
 * Read the hashes of the n names of v, each from where it was found, into
 * h[0..n), in one round trip (WATCHed if watch).  0, or -1 with every h
 * freed.
 */
static int
read_names(struct rs *rs, const struct name *v, size_t n, int watch,
    struct khash *h)
{
	size_t i;
	int ok = 0;

	for (i = 0; i < n; i++)
		queue_read(rs, &h[i], v[i].s, v[i].n, v[i].where, watch);
	bound_time(rs, 0);
	for (i = 0; i < n && ok == 0; i++)
		if (take_read(rs, &h[i], v[i].where, watch, &ok) == -1)
			ok = -1;
	if (ok == -1)
		for (i = 0; i < n; i++)
			free_hash(&h[i]);
	return ok;
}

/*
 * Every record of the kinds in mask, in key order: the keys are listed
 * (names only), then read BATCH keys a round trip, so memory stays bounded
 * by the names, not the records.
 */
static int
scan_all(void *p, unsigned mask, store_scan_fn fn, void *arg)
{
	struct rs *rs = p;
	struct scan_each e = { fn, arg, NULL, 0 };
	struct names ns;
	struct khash *h;
	size_t i, j, m;
	int ret = 0;

	if (mask & REC_MASK(REC_POLICY))
		return scan_policies(rs, fn, arg);
	if (all_keys(rs, &ns) == -1) {
		free_names(&ns);
		return -1;
	}
	h = xcalloc(BATCH, sizeof(*h));
	for (i = 0; i < ns.n && ret == 0; i += m) {
		m = ns.n - i < BATCH ? ns.n - i : BATCH;
		if (read_names(rs, ns.v + i, m, 0, h) == -1) {
			ret = -1;
			break;
		}
		for (j = 0; j < m; j++) {
			e.key = h[j].key;
			e.keylen = h[j].keylen;
			if (ret == 0)
				ret = each_field(&h[j], mask, scan_one, &e);
			free_hash(&h[j]);
		}
	}
	free(h);
	free_names(&ns);
	return ret;
}

/*
 * Drop from h the records of the kinds in mask whose expiry has passed,
 * counting them by kind into dropped: the number dropped.
 */
static int
drop_ended(struct khash *h, unsigned mask, int64_t now, int64_t *dropped)
{
	const char *id;
	size_t idlen;
	int j, kind, n = 0;

	for (j = h->n - 1; j >= 0; j--) {
		kind = field_kind(h->f[j].name, h->f[j].nlen, &id, &idlen);
		if (kind != 0 && (mask & REC_MASK(kind)) &&
		    record_expiry(kind, h->f[j].val, h->f[j].vlen) <= now) {
			hash_del(h, j);
			dropped[kind]++;
			n++;
		}
	}
	return n;
}

/*
 * gc of one key that needs it: its ended records forgotten, and throttle
 * 0.1's keys moved into P{KEY}, by a compare-and-set of its own, tried
 * TRIES times.  0 or -1.
 */
static int
tidy_key(struct rs *rs, const struct name *v, unsigned mask, int64_t now,
    int64_t *counts)
{
	int64_t dropped[REC_KINDS];
	struct khash h;
	int tries, j, r = 0;

	for (tries = 0; tries < TRIES; tries++) {
		memset(dropped, 0, sizeof(dropped));
		if (read_key(rs, v->s, v->n, 1, 0, &h) == -1)
			return -1;
		if (drop_ended(&h, mask, now, dropped) == 0 && !h.old) {
			unwatch(rs);
			free_hash(&h);
			return 0;
		}
		h.touched = 1;
		r = exec_writes(rs, &h, 1, now);
		free_hash(&h);
		if (r == 0)
			for (j = 0; j < REC_KINDS; j++)
				counts[j] += dropped[j];
		if (r != 1)
			return r;
	}
	return 0;
}

/*
 * gc: forget the records of the kinds in mask whose expiry has passed,
 * and move every key still in throttle 0.1's layout into P{KEY}.  The
 * keys are read BATCH a round trip; only those with something to do get
 * a compare-and-set of their own.  It must not run inside a transaction
 * that has read or written anything (its EXECs would drop that
 * transaction's WATCHes): gc calls it first.  Keys expire on their own,
 * so the tidying of single decisions (limit > 0) does nothing here.
 */
static int
tidy_all(void *p, unsigned mask, int64_t now, int64_t limit, int64_t *counts)
{
	struct rs *rs = p;
	struct names ns;
	struct khash *h;
	int64_t dropped[REC_KINDS];
	size_t i, j, m;
	int r = 0;

	if (limit > 0)
		return 0;
	if (rs->watched || rs->nh > 0 || rs->nq > 0) {
		set_err(rs,
		    "internal error: gc's tidying inside a transaction");
		return -1;
	}
	if (all_keys(rs, &ns) == -1) {
		free_names(&ns);
		return -1;
	}
	h = xcalloc(BATCH, sizeof(*h));
	for (i = 0; i < ns.n && r != -1; i += m) {
		m = ns.n - i < BATCH ? ns.n - i : BATCH;
		if ((r = read_names(rs, ns.v + i, m, 0, h)) == -1)
			break;
		for (j = 0; j < m; j++) {
			/* a key with nothing to do is left alone */
			if (r != -1 &&
			    (h[j].old ||
				drop_ended(&h[j], mask, now, dropped) > 0))
				r = tidy_key(rs, &ns.v[i + j], mask, now,
				    counts);
			free_hash(&h[j]);
		}
	}
	free(h);
	free_names(&ns);
	rs->has_time = 0;
	return r == -1 ? -1 : 0;
}

/* A %XX-decoded copy of n bytes of s into buf (len > n); -1 if bad. */
static int
unescape(const char *s, size_t n, char *buf, size_t len)
{
	size_t i, j = 0;
	int hi, lo;

	if (n >= len)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] != '%') {
			buf[j++] = s[i];
			continue;
		}
		if (i + 2 >= n)
			return -1;
		hi = (unsigned char)s[i + 1];
		lo = (unsigned char)s[i + 2];
		hi = hi >= '0' && hi <= '9'  ? hi - '0'
		    : hi >= 'a' && hi <= 'f' ? hi - 'a' + 10
		    : hi >= 'A' && hi <= 'F' ? hi - 'A' + 10
					     : -1;
		lo = lo >= '0' && lo <= '9'  ? lo - '0'
		    : lo >= 'a' && lo <= 'f' ? lo - 'a' + 10
		    : lo >= 'A' && lo <= 'F' ? lo - 'A' + 10
					     : -1;
		if (hi < 0 || lo < 0)
			return -1;
		buf[j++] = (char)(hi * 16 + lo);
		i += 2;
	}
	buf[j] = '\0';
	return 0;
}

static int
rs_unavailable(void *p)
{
	return ((struct rs *)p)->unavailable;
}

static void *
rs_open(const char *spec, int64_t lock_timeout, int flags, char *err,
    size_t errlen, int *unavailable)
{
	struct rs *rs;
	struct redis_url u;
	struct timeval tv;
	redisReply *r;
	const char *why;
	(void)flags; /* reading never writes on a server either */
	if (store_redis_parse(spec, &u, &why) == -1) {
		snprintf(err, errlen,
		    "%.64s: %s; write redis://[user:password@]host[:port][/db]"
		    "[?prefix=P&timeout=DUR] or unix:///path/to/redis.sock",
		    u.where, why);
		return NULL;
	}
	rs = xcalloc(1, sizeof(*rs));
	rs->err = err;
	rs->errlen = errlen;
	rs->lock_timeout = lock_timeout;
	snprintf(rs->where, sizeof(rs->where), "%s", u.where);
	snprintf(rs->prefix, sizeof(rs->prefix), "%s", u.prefix);
	/* connecting, too, takes no longer than --lock-timeout: connect,
	 * AUTH and SELECT count against the first decision's */
	rs->first_try = clock_monotonic();
	rs->deadline = rs->first_try + lock_timeout;
	rs->timeout = u.timeout;
	if (lock_timeout > 0 && lock_timeout < u.timeout)
		u.timeout = lock_timeout;
	tv.tv_sec = (time_t)(u.timeout / US_PER_SEC);
	tv.tv_usec = (suseconds_t)(u.timeout % US_PER_SEC);
	rs->c = u.socket[0] != '\0'
	    ? redisConnectUnixWithTimeout(u.socket, tv)
	    : redisConnectWithTimeout(u.host, u.port, tv);
	if (rs->c == NULL) {
		set_err(rs, "cannot connect: out of memory");
		free(rs);
		return NULL;
	}
	if (rs->c->err) {
		set_err(rs,
		    "cannot connect: %s (is the server up and reachable?)",
		    rs->c->errstr);
		*unavailable = 1;
		goto fail;
	}
	/* a command that run starts must not inherit the connection */
	fcntl(rs->c->fd, F_SETFD, FD_CLOEXEC);
	bound_time(rs, lock_timeout > 0);
	if (u.password[0] != '\0') {
		r = u.user[0] != '\0'
		    ? redisCommand(rs->c, "AUTH %s %s", u.user, u.password)
		    : redisCommand(rs->c, "AUTH %s", u.password);
		if (r == NULL || r->type == REDIS_REPLY_ERROR) {
			if (rs->c->err) {
				reply_err(rs, r, "logging in");
				*unavailable = 1;
			} else
				set_err(rs,
				    "the server refused the user name or "
				    "password; check the URL");
			if (r != NULL)
				freeReplyObject(r);
			goto fail;
		}
		freeReplyObject(r);
	}
	if (u.db != 0) {
		if ((r = redisCommand(rs->c, "SELECT %d", u.db)) == NULL ||
		    r->type == REDIS_REPLY_ERROR) {
			reply_err(rs, r, "choosing the database");
			*unavailable = rs->unavailable;
			if (r != NULL)
				freeReplyObject(r);
			goto fail;
		}
		freeReplyObject(r);
	}
	return rs;
fail:
	redisFree(rs->c);
	free(rs);
	return NULL;
}

static void
rs_close(void *p)
{
	struct rs *rs = p;

	if (rs == NULL)
		return;
	forget(rs);
	free(rs->h);
	free(rs->q);
	redisFree(rs->c);
	free(rs);
}

/* The port in [p, end): 1..65535. */
static int
parse_port(const char *p, size_t n, int *port)
{
	char opt[16];
	const char *err;
	int64_t v;

	if (n == 0 || n >= sizeof(opt))
		return -1;
	memcpy(opt, p, n);
	opt[n] = '\0';
	if (parse_count(opt, 65535, &v, &err) == -1 || v == 0)
		return -1;
	*port = (int)v;
	return 0;
}

/* A number in [p, p + n) up to max: 0 or -1. */
static int
parse_small(const char *p, size_t n, int64_t max, int *out)
{
	char opt[32];
	const char *err;
	int64_t v;

	if (n >= sizeof(opt))
		return -1;
	memcpy(opt, p, n);
	opt[n] = '\0';
	if (parse_count(opt, max, &v, &err) == -1)
		return -1;
	*out = (int)v;
	return 0;
}

/* unix:///path/to/redis.sock: the socket; *q the query, if any. */
static int
parse_unix(const char *p, struct redis_url *u, const char **q, const char **why)
{
	size_t n;

	*q = strchr(p, '?');
	n = *q ? (size_t)(*q - p) : strlen(p);
	if (n == 0 || p[0] != '/' ||
	    unescape(p, n, u->socket, sizeof(u->socket)) == -1) {
		*why = "the socket path is missing or too long";
		return -1;
	}
	snprintf(u->where, sizeof(u->where), "unix://%.250s", u->socket);
	return 0;
}

/* user:password@ or password@ in [p, at). */
static int
parse_login(const char *p, const char *at, struct redis_url *u,
    const char **why)
{
	const char *colon = memchr(p, ':', (size_t)(at - p));

	if (colon == NULL) {
		/* redis://password@host, as redis-cli takes */
		if (unescape(p, (size_t)(at - p), u->password,
			sizeof(u->password)) == -1) {
			*why = "the password is too long";
			return -1;
		}
		return 0;
	}
	if (unescape(p, (size_t)(colon - p), u->user, sizeof(u->user)) == -1 ||
	    unescape(colon + 1, (size_t)(at - colon - 1), u->password,
		sizeof(u->password)) == -1) {
		*why = "the user or password is too long";
		return -1;
	}
	return 0;
}

/* redis://[login@]host[:port][/db]: *q the query, if any. */
static int
parse_tcp(const char *p, struct redis_url *u, const char **q, const char **why)
{
	const char *at, *end, *colon;
	size_t n;

	*q = strchr(p, '?');
	end = strchr(p, '/');
	if (end == NULL || (*q != NULL && end > *q))
		end = *q != NULL ? *q : p + strlen(p);
	if ((at = memchr(p, '@', (size_t)(end - p))) != NULL) {
		if (parse_login(p, at, u, why) == -1)
			return -1;
		p = at + 1;
	}
	colon = memchr(p, ':', (size_t)(end - p));
	n = (size_t)((colon ? colon : end) - p);
	if (n == 0 || n >= sizeof(u->host)) {
		*why = "the host is missing or too long";
		return -1;
	}
	memcpy(u->host, p, n);
	u->host[n] = '\0';
	if (colon != NULL &&
	    parse_port(colon + 1, (size_t)(end - colon - 1), &u->port) == -1) {
		*why = "the port is not a number from 1 to 65535";
		return -1;
	}
	if (*end == '/') {
		const char *d = end + 1;
		size_t dn = *q != NULL ? (size_t)(*q - d) : strlen(d);

		if (dn > 0 && parse_small(d, dn, INT_MAX, &u->db) == -1) {
			*why = "the database is not a number";
			return -1;
		}
	}
	snprintf(u->where, sizeof(u->where), "redis://%.200s:%d/%d", u->host,
	    u->port, u->db);
	return 0;
}

/* One name=value of the query: 0 or -1. */
static int
parse_option(const char *p, size_t n, struct redis_url *u, const char **why)
{
	char opt[PREFIX_MAX + 1];
	const char *err;

	if (strncmp(p, "prefix=", 7) == 0) {
		if (unescape(p + 7, n - 7, u->prefix, sizeof(u->prefix)) ==
		    -1) {
			*why = "the prefix is too long";
			return -1;
		}
		return 0;
	}
	if (strncmp(p, "password=", 9) == 0 || strncmp(p, "user=", 5) == 0) {
		int pw = p[0] == 'p';
		size_t skip = pw ? 9 : 5;

		if (unescape(p + skip, n - skip, pw ? u->password : u->user,
			pw ? sizeof(u->password) : sizeof(u->user)) == -1) {
			*why = "the user or password is too long";
			return -1;
		}
		return 0;
	}
	if (strncmp(p, "db=", 3) == 0) {
		if (parse_small(p + 3, n - 3, INT_MAX, &u->db) == -1) {
			*why = "db= is not a number";
			return -1;
		}
		return 0;
	}
	if (strncmp(p, "timeout=", 8) == 0) {
		if (n - 8 >= sizeof(opt)) {
			*why = "an option's value is too long";
			return -1;
		}
		memcpy(opt, p + 8, n - 8);
		opt[n - 8] = '\0';
		if (parse_duration(opt, &u->timeout, &err) == -1 ||
		    u->timeout == 0) {
			*why = "timeout= is not a duration above 0";
			return -1;
		}
		return 0;
	}
	*why = "has an option other than prefix=, timeout=, db=, user= or "
	       "password=";
	return -1;
}

/*
 * A Redis URL: redis://[user:password@]host[:port][/db] or
 * unix:///path/to/redis.sock, each with ?prefix=P&timeout=DUR (and db=,
 * user=, password=).  0, or -1 with *why.  Pure: no I/O.
 */
int
store_redis_parse(const char *spec, struct redis_url *u, const char **why)
{
	const char *p, *q = NULL;
	size_t n;

	memset(u, 0, sizeof(*u));
	u->port = 6379;
	u->timeout = 5 * US_PER_SEC;
	snprintf(u->prefix, sizeof(u->prefix), "throttle:");
	snprintf(u->where, sizeof(u->where), "redis");
	if (strncmp(spec, "rediss://", 9) == 0) {
		*why =
		    "TLS (rediss://) needs hiredis 1.0 with TLS; this build's "
		    "hiredis has none, so connect through a TLS tunnel "
		    "(stunnel) with redis://";
		return -1;
	}
	if (strncmp(spec, "unix://", 7) == 0) {
		if (parse_unix(spec + 7, u, &q, why) == -1)
			return -1;
	} else if (strncmp(spec, "redis://", 8) == 0) {
		if (parse_tcp(spec + 8, u, &q, why) == -1)
			return -1;
	} else {
		*why = "is not a redis:// or unix:// URL";
		return -1;
	}
	for (p = q ? q + 1 : NULL; p != NULL && *p != '\0';
	     p = q ? q + 1 : NULL) {
		q = strchr(p, '&');
		n = q ? (size_t)(q - p) : strlen(p);
		if (parse_option(p, n, u, why) == -1)
			return -1;
	}
	return 0;
}

/* hiredis's version, for --version. */
const char *
store_redis_version(void)
{
	static char v[32];

	snprintf(v, sizeof(v), "%d.%d.%d", HIREDIS_MAJOR, HIREDIS_MINOR,
	    HIREDIS_PATCH);
	return v;
}

/*
 * A scan is no one decision: each reply waits its own time (run()), and
 * what the same transaction does after it (gc deletes ended leases and
 * commits) gets a --lock-timeout of its own, not what the scan left.
 */
static void
rescan_done(struct rs *rs)
{
	rs->scanning = 0;
	if (rs->first_try != 0) {
		rs->first_try = clock_monotonic();
		rs->deadline = rs->first_try + rs->lock_timeout;
	}
}

/* A scan is no one decision: each reply waits its own time (run()). */
static int
rs_scan(void *p, unsigned mask, store_scan_fn fn, void *arg)
{
	struct rs *rs = p;
	int r;

	rs->scanning = 1;
	r = scan_all(p, mask, fn, arg);
	rescan_done(rs);
	return r;
}

static int
rs_tidy(void *p, unsigned mask, int64_t now, int64_t limit, int64_t *counts)
{
	struct rs *rs = p;
	int r;

	rs->scanning = 1;
	r = tidy_all(p, mask, now, limit, counts);
	rescan_done(rs);
	return r;
}

const struct store_ops store_redis_ops = {
	.open = rs_open,
	.unavailable = rs_unavailable,
	.close = rs_close,
	.begin = rs_begin,
	.commit = rs_commit,
	.rollback = rs_rollback,
	.group_begin = rs_group_begin,
	.group_end = rs_group_end,
	.prefetch = rs_prefetch,
	.get = rs_get,
	.put = rs_put,
	.del = rs_del,
	.scan = rs_scan,
	.tidy = rs_tidy,
	.now = rs_now,
	.policy_first = rs_policy_first,
};
