/*
 * store-redis.c: the store in a Redis server, for limits that must hold
 * across machines.  The same C code decides; Redis only keeps the state.
 *
 *	1. Layout, under the prefix P (?prefix=, default "throttle:"):
 *		P k:KEY		hash: limit index -> the limit's record
 *		P o:KEY		string: when the key's lockout ends (us)
 *		P l:KEY		hash: lease id -> the lease
 *		P s:KEY		string: a shedder's "amount changed"
 *		P policies	hash: policy name -> its options
 *	   Records are text ("gcra 5 900000000 5 0 s1 s2 s3 rest_at
 *	   written_at"), a sliding window's sub-windows after a newline in
 *	   throttle's varint encoding; a lease is its fields one per line; a
 *	   lockout "until since".  A value that does not parse, or a key of
 *	   the wrong type, is refused, never decided on; store.c checks the
 *	   values of what does parse, as it does for every store.
 *	2. A write transaction is optimistic (compare-and-set): every Redis
 *	   key it reads is WATCHed first, its writes are queued here and sent
 *	   at commit as one MULTI ... EXEC, which Redis refuses if a watched
 *	   key changed meanwhile; the command then runs again (STORE_RETRY),
 *	   for at most --lock-timeout.  So any number of hosts never admit
 *	   more than the limit.
 *	3. Every key but the policies expires on its own: a limit's hash
 *	   when all its limits are back at rest, a lockout when it ends, a
 *	   lease hash when its last lease would end, plus MARGIN_MS.
 *	4. Time is the server's (TIME), so hosts with skewed clocks agree;
 *	   THROTTLE_NOW still pins it for tests.
 *	5. Messages name the server as redis://HOST:PORT/DB or the socket,
 *	   never the password.
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

#define MARGIN_MS 60000 /* keys outlive their state by this much */
#define SHED_TTL_MS (24LL * 3600 * 1000)
#define PREFIX_MAX 128
#define QUEUE_MAX 64 /* writes in one transaction */

/* A Redis hash read in this transaction: fields and values. */
struct hash {
	char *rkey; /* the Redis key */
	size_t rlen;
	int kind; /* 'k' limits, 'l' leases */
	int n, cap;
	char **name, **val;
	size_t *nlen, *vlen;
	int touched; /* written: set its expiry at commit */
};

/* A queued write: one Redis command. */
struct qcmd {
	int argc;
	char *argv[5];
	size_t len[5];
};

struct rs {
	redisContext *c;
	char where[300]; /* the server, for messages */
	char prefix[PREFIX_MAX + 1];
	char *err;
	size_t errlen;
	int64_t lock_timeout;
	int64_t now; /* the command's time, for expiries */
	int write, watched;
	int64_t first_try; /* monotonic, when this decision began */
	struct hash *h;
	int nh, caph;
	struct qcmd q[QUEUE_MAX];
	int nq;
};

static void
set_err(struct rs *, const char *, ...) __attribute__((format(printf, 2, 3)));
static int rs_commit(void *);

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
	if (rs->c->err)
		set_err(rs, "%s: %s (is the server up and reachable?)", what,
		    rs->c->errstr[0] ? rs->c->errstr : strerror(errno));
	else if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "WRONGTYPE", 9) == 0)
		set_err(rs,
		    "%s: a key under the prefix '%s' holds something "
		    "throttle did not write; use another ?prefix= or remove "
		    "it",
		    what, rs->prefix);
	else if (r != NULL && r->type == REDIS_REPLY_ERROR)
		set_err(rs, "%s: %.200s", what, r->str);
	else
		set_err(rs, "%s: an unexpected reply", what);
}

/* The Redis key P + tag + key, in a new buffer. */
static char *
rkey(const struct rs *rs, char tag, const char *key, size_t keylen, size_t *len)
{
	size_t p = strlen(rs->prefix);
	char *k = xmalloc(p + 2 + keylen + 1);

	memcpy(k, rs->prefix, p);
	k[p] = tag;
	k[p + 1] = ':';
	memcpy(k + p + 2, key, keylen);
	k[p + 2 + keylen] = '\0';
	*len = p + 2 + keylen;
	return k;
}

/* Run one command now: its reply, or NULL with the error set. */
static redisReply *
run(struct rs *rs, const char *what, int argc, const char **argv,
    const size_t *len)
{
	redisReply *r = redisCommandArgv(rs->c, argc, argv, len);

	if (r == NULL || r->type == REDIS_REPLY_ERROR) {
		reply_err(rs, r, what);
		if (r != NULL)
			freeReplyObject(r);
		return NULL;
	}
	return r;
}

/* WATCH a key before reading it, in a write transaction. */
static int
watch(struct rs *rs, const char *k, size_t klen)
{
	const char *argv[2] = { "WATCH", k };
	size_t len[2] = { 5, klen };
	redisReply *r;

	if (!rs->write)
		return 0;
	if ((r = run(rs, "watching a key", 2, argv, len)) == NULL)
		return -1;
	freeReplyObject(r);
	rs->watched = 1;
	return 0;
}

/* Queue a write for the commit. */
static int
queue(struct rs *rs, int argc, const char *const *argv, const size_t *len)
{
	struct qcmd *q;
	int i;

	if (rs->nq == QUEUE_MAX) {
		set_err(rs, "too many writes in one transaction");
		return -1;
	}
	q = &rs->q[rs->nq++];
	q->argc = argc;
	for (i = 0; i < argc; i++) {
		q->argv[i] = xmalloc(len[i] + 1);
		memcpy(q->argv[i], argv[i], len[i]);
		q->argv[i][len[i]] = '\0';
		q->len[i] = len[i];
	}
	return 0;
}

static void
free_hash(struct hash *h)
{
	int i;

	for (i = 0; i < h->n; i++) {
		free(h->name[i]);
		free(h->val[i]);
	}
	free(h->name);
	free(h->val);
	free(h->nlen);
	free(h->vlen);
	free(h->rkey);
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
}

static void
hash_set(struct hash *h, const char *name, size_t nlen, const char *val,
    size_t vlen)
{
	int i;

	for (i = 0; i < h->n; i++)
		if (h->nlen[i] == nlen && memcmp(h->name[i], name, nlen) == 0)
			break;
	if (i == h->n) {
		if (h->n == h->cap) {
			h->cap = h->cap ? h->cap * 2 : 8;
			h->name =
			    xrealloc(h->name, (size_t)h->cap * sizeof(char *));
			h->val =
			    xrealloc(h->val, (size_t)h->cap * sizeof(char *));
			h->nlen =
			    xrealloc(h->nlen, (size_t)h->cap * sizeof(size_t));
			h->vlen =
			    xrealloc(h->vlen, (size_t)h->cap * sizeof(size_t));
		}
		h->name[i] = xmalloc(nlen + 1);
		memcpy(h->name[i], name, nlen);
		h->name[i][nlen] = '\0';
		h->nlen[i] = nlen;
		h->n++;
	} else
		free(h->val[i]);
	h->val[i] = xmalloc(vlen + 1);
	memcpy(h->val[i], val, vlen);
	h->val[i][vlen] = '\0';
	h->vlen[i] = vlen;
}

static void
hash_del(struct hash *h, int i)
{
	free(h->name[i]);
	free(h->val[i]);
	h->n--;
	h->name[i] = h->name[h->n];
	h->val[i] = h->val[h->n];
	h->nlen[i] = h->nlen[h->n];
	h->vlen[i] = h->vlen[h->n];
}

/* Read a hash into h (HGETALL; WATCHed in a write transaction). */
static int
read_hash(struct rs *rs, struct hash *h)
{
	const char *argv[2] = { "HGETALL", h->rkey };
	size_t len[2] = { 7, h->rlen }, i;
	redisReply *r;

	if (watch(rs, h->rkey, h->rlen) == -1 ||
	    (r = run(rs, "reading a key", 2, argv, len)) == NULL)
		return -1;
	if (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0) {
		reply_err(rs, NULL, "reading a key");
		freeReplyObject(r);
		return -1;
	}
	for (i = 0; i < r->elements; i += 2)
		if (r->element[i]->type == REDIS_REPLY_STRING &&
		    r->element[i + 1]->type == REDIS_REPLY_STRING)
			hash_set(h, r->element[i]->str, r->element[i]->len,
			    r->element[i + 1]->str, r->element[i + 1]->len);
	freeReplyObject(r);
	return 0;
}

/* The hash of a key (kind 'k' or 'l'), read once per transaction. */
static struct hash *
get_hash(struct rs *rs, int kind, const char *key, size_t keylen)
{
	struct hash *h;
	size_t rlen;
	char *k = rkey(rs, (char)kind, key, keylen, &rlen);
	int i;

	for (i = 0; i < rs->nh; i++)
		if (rs->h[i].rlen == rlen &&
		    memcmp(rs->h[i].rkey, k, rlen) == 0) {
			free(k);
			return &rs->h[i];
		}
	if (rs->nh == rs->caph) {
		rs->caph = rs->caph ? rs->caph * 2 : 4;
		rs->h = xrealloc(rs->h, (size_t)rs->caph * sizeof(*rs->h));
	}
	h = &rs->h[rs->nh];
	memset(h, 0, sizeof(*h));
	h->rkey = k;
	h->rlen = rlen;
	h->kind = kind;
	if (read_hash(rs, h) == -1) {
		free_hash(h);
		return NULL;
	}
	rs->nh++;
	return h;
}

/* Parse n space-separated integers from s; the rest in *end.  0 or -1. */
static int
ints(const char *s, int64_t *v, int n, const char **end)
{
	char *e;
	int i;

	for (i = 0; i < n; i++) {
		if (*s != ' ' && i > 0)
			return -1;
		if (i > 0)
			s++;
		errno = 0;
		v[i] = strtoll(s, &e, 10);
		if (e == s || errno != 0)
			return -1;
		s = e;
	}
	*end = s;
	return 0;
}

/* A limit's record from its text; 0, or -1 with the error set. */
static int
decode(struct rs *rs, const char *val, size_t vlen, struct keyrec *rec)
{
	char name[32];
	const char *sp = memchr(val, ' ', vlen), *end, *nl;
	int64_t v[4 + STATE_FIELDS + 1], n;
	size_t i;

	rec->state.slots = NULL;
	rec->state.nslots = 0;
	if (sp == NULL || (size_t)(sp - val) >= sizeof(name))
		goto bad;
	memcpy(name, val, (size_t)(sp - val));
	name[sp - val] = '\0';
	if ((rec->limit.algo = algo_find(name)) == NULL ||
	    strcmp(rec->limit.algo->name, name) != 0) {
		set_err(rs,
		    "holds a key with an unknown algorithm '%.32s' (written by "
		    "a newer throttle?)",
		    name);
		return -1;
	}
	if (ints(sp + 1, v, 4 + STATE_FIELDS + 1, &end) == -1)
		goto bad;
	rec->limit.count = v[0];
	rec->limit.period = v[1];
	rec->limit.burst = v[2];
	rec->limit.granularity = v[3];
	for (i = 0; i < STATE_FIELDS; i++)
		rec->state.v[i] = v[4 + i];
	rec->rest_at = v[4 + STATE_FIELDS];
	rec->written_at = 0; /* records of throttle 0.1 have none */
	if (*end == ' ' && ints(end + 1, &rec->written_at, 1, &end) == -1)
		goto bad;
	nl = end;
	if (nl == val + vlen)
		return 0;
	if (*nl != '\n')
		goto bad;
	nl++;
	vlen = (size_t)(val + vlen - nl); /* the sub-windows' bytes */
	rec->state.slots = xcalloc(vlen / 2 + 1, sizeof(struct slot));
	if ((n = slots_decode((const unsigned char *)nl, vlen, rec->state.slots,
		 vlen / 2 + 1)) < 0) {
		free(rec->state.slots);
		rec->state.slots = NULL;
		goto bad;
	}
	rec->state.nslots = (size_t)n;
	return 0;
bad:
	set_err(rs,
	    "holds a key whose state this throttle cannot read (throttle "
	    "reset the key to start it afresh)");
	return -1;
}

/* An index field name ("0".."7"): its value, or -1. */
static int
field_idx(const char *name, size_t len)
{
	if (len != 1 || name[0] < '0' || name[0] >= '0' + LIMITS_MAX)
		return -1;
	return name[0] - '0';
}

/* Milliseconds from the command's time until at, plus the margin. */
static long long
ttl_ms(const struct rs *rs, int64_t at)
{
	int64_t ms = (at - rs->now) / 1000 + MARGIN_MS;

	return ms < MARGIN_MS ? MARGIN_MS : (long long)ms;
}

static int
rs_begin(void *p, int write)
{
	struct rs *rs = p;

	forget(rs);
	rs->write = write;
	if (rs->first_try == 0)
		rs->first_try = clock_monotonic();
	return 0;
}

static int
rs_load(void *p, const char *key, size_t keylen, int idx, struct keyrec *rec)
{
	struct rs *rs = p;
	struct hash *h;
	int i, found = -1, f;

	rec->more = 0;
	if ((h = get_hash(rs, 'k', key, keylen)) == NULL)
		return -1;
	for (i = 0; i < h->n; i++) {
		if ((f = field_idx(h->name[i], h->nlen[i])) == -1) {
			set_err(rs,
			    "holds a key with a limit index this throttle "
			    "cannot read");
			return -1;
		}
		if (f == idx)
			found = i;
		else if (f > idx)
			rec->more = 1;
	}
	if (found < 0)
		return 0;
	if (decode(rs, h->val[found], h->vlen[found], rec) == -1)
		return -1;
	memcpy(rec->key, key, keylen);
	rec->key[keylen] = '\0';
	rec->keylen = keylen;
	rec->idx = idx;
	return 1;
}

static int
rs_save(void *p, const struct keyrec *rec)
{
	struct rs *rs = p;
	struct hash *h;
	unsigned char *blob = NULL;
	size_t n = 0, blen = 0;
	char *val, field[2] = { (char)('0' + rec->idx), '\0' };
	const char *argv[4];
	size_t len[4];
	int rc, i;

	if ((h = get_hash(rs, 'k', rec->key, rec->keylen)) == NULL)
		return -1;
	if (rec->state.nslots > 0) {
		blob = xmalloc(slots_encoded_max(rec->state.nslots));
		blen = slots_encode(rec->state.slots, rec->state.nslots, blob);
	}
	val = xmalloc(64 + 21 * 10 + blen);
	n = (size_t)sprintf(val, "%s", rec->limit.algo->name);
	n += (size_t)sprintf(val + n, " %lld %lld %lld %lld",
	    (long long)rec->limit.count, (long long)rec->limit.period,
	    (long long)rec->limit.burst, (long long)rec->limit.granularity);
	for (i = 0; i < STATE_FIELDS; i++)
		n += (size_t)sprintf(val + n, " %lld",
		    (long long)rec->state.v[i]);
	n += (size_t)sprintf(val + n, " %lld %lld", (long long)rec->rest_at,
	    (long long)rec->written_at);
	if (blen > 0) {
		val[n++] = '\n';
		memcpy(val + n, blob, blen);
		n += blen;
	}
	argv[0] = "HSET";
	argv[1] = h->rkey;
	argv[2] = field;
	argv[3] = val;
	len[0] = 4;
	len[1] = h->rlen;
	len[2] = 1;
	len[3] = n;
	rc = queue(rs, 4, argv, len);
	hash_set(h, field, 1, val, n);
	h->touched = 1;
	free(val);
	free(blob);
	return rc;
}

static int
rs_del(void *p, const char *key, size_t keylen)
{
	struct rs *rs = p;
	char *k, *o;
	size_t klen, olen;
	const char *argv[3] = { "DEL" };
	size_t len[3] = { 3 };
	int rc;

	k = rkey(rs, 'k', key, keylen, &klen);
	o = rkey(rs, 'o', key, keylen, &olen);
	argv[1] = k;
	argv[2] = o;
	len[1] = klen;
	len[2] = olen;
	rc = queue(rs, 3, argv, len);
	free(k);
	free(o);
	return rc;
}

static int
rs_trim(void *p, const char *key, size_t keylen, int n)
{
	struct rs *rs = p;
	struct hash *h;
	const char *argv[3] = { "HDEL" };
	size_t len[3] = { 4 };
	int i;

	if ((h = get_hash(rs, 'k', key, keylen)) == NULL)
		return -1;
	for (i = h->n - 1; i >= 0; i--)
		if (field_idx(h->name[i], h->nlen[i]) >= n) {
			argv[1] = h->rkey;
			argv[2] = h->name[i];
			len[1] = h->rlen;
			len[2] = h->nlen[i];
			if (queue(rs, 3, argv, len) == -1)
				return -1;
			hash_del(h, i);
			h->touched = 1;
		}
	return 0;
}

/* GET a string key (WATCHed in a write transaction): 1, 0 none, -1. */
static int
get_string(struct rs *rs, char tag, const char *key, size_t keylen, char *buf,
    size_t buflen)
{
	size_t klen;
	char *k = rkey(rs, tag, key, keylen, &klen);
	const char *argv[2] = { "GET", k };
	size_t len[2] = { 3, klen };
	redisReply *r;
	int ret = -1;

	if (watch(rs, k, klen) == 0 &&
	    (r = run(rs, "reading a key", 2, argv, len)) != NULL) {
		if (r->type == REDIS_REPLY_NIL)
			ret = 0;
		else if (r->type == REDIS_REPLY_STRING && r->len < buflen) {
			memcpy(buf, r->str, r->len);
			buf[r->len] = '\0';
			ret = 1;
		} else
			set_err(rs,
			    "holds a value under the prefix '%s' that this "
			    "throttle cannot read",
			    rs->prefix);
		freeReplyObject(r);
	}
	free(k);
	return ret;
}

/* SET a string key with an expiry, at commit. */
static int
put_string(struct rs *rs, char tag, const char *key, size_t keylen,
    const char *val, long long ms)
{
	size_t klen;
	char *k = rkey(rs, tag, key, keylen, &klen), t[24];
	const char *argv[5] = { "SET", k, val, "PX", t };
	size_t len[5];
	int rc;

	snprintf(t, sizeof(t), "%lld", ms);
	len[0] = 3;
	len[1] = klen;
	len[2] = strlen(val);
	len[3] = 2;
	len[4] = strlen(t);
	rc = queue(rs, ms < 0 ? 3 : 5, argv, len); /* < 0: no expiry */
	free(k);
	return rc;
}

static int
rs_lockout_get(void *p, const char *key, size_t keylen, struct lockout *k)
{
	struct rs *rs = p;
	char buf[64];
	const char *end;
	int found;

	k->since = k->until = 0;
	if ((found = get_string(rs, 'o', key, keylen, buf, sizeof(buf))) <= 0)
		return found;
	/* "until since"; throttle 0.1 wrote "until" alone */
	if (ints(buf, &k->until, 1, &end) == -1 ||
	    (*end == ' ' && ints(end + 1, &k->since, 1, &end) == -1) ||
	    *end != '\0') {
		set_err(rs, "holds a lockout this throttle cannot read");
		return -1;
	}
	return 0;
}

static int
rs_lockout_put(void *p, const char *key, size_t keylen, const struct lockout *k)
{
	struct rs *rs = p;
	char v[48];

	snprintf(v, sizeof(v), "%lld %lld", (long long)k->until,
	    (long long)k->since);
	return put_string(rs, 'o', key, keylen, v,
	    k->until == LOCKOUT_NEVER ? -1 : ttl_ms(rs, k->until));
}

static int
rs_shed_load(void *p, const char *key, size_t keylen, int64_t *amount,
    int64_t *changed)
{
	struct rs *rs = p;
	char buf[64];
	const char *end;
	int64_t v[2];
	int found;

	if ((found = get_string(rs, 's', key, keylen, buf, sizeof(buf))) <= 0)
		return found;
	if (ints(buf, v, 2, &end) == -1 || *end != '\0') {
		set_err(rs, "holds a shedder this throttle cannot read");
		return -1;
	}
	*amount = v[0];
	*changed = v[1];
	return 1;
}

static int
rs_shed_save(void *p, const char *key, size_t keylen, int64_t amount,
    int64_t changed)
{
	struct rs *rs = p;
	char v[48];

	snprintf(v, sizeof(v), "%lld %lld", (long long)amount,
	    (long long)changed);
	return put_string(rs, 's', key, keylen, v, SHED_TTL_MS);
}

/* The policies' hash key. */
static char *
policies_key(const struct rs *rs, size_t *len)
{
	size_t p = strlen(rs->prefix);
	char *k = xmalloc(p + 9);

	memcpy(k, rs->prefix, p);
	memcpy(k + p, "policies", 9);
	*len = p + 8;
	return k;
}

static int
rs_policy_get(void *p, const char *name, char *buf, size_t buflen)
{
	struct rs *rs = p;
	size_t klen;
	char *k = policies_key(rs, &klen);
	const char *argv[3] = { "HGET", k, name };
	size_t len[3] = { 4, klen, strlen(name) };
	redisReply *r;
	int ret = -1;

	if (watch(rs, k, klen) == 0 &&
	    (r = run(rs, "reading a policy", 3, argv, len)) != NULL) {
		if (r->type == REDIS_REPLY_NIL)
			ret = 0;
		else if (r->type == REDIS_REPLY_STRING && r->len < buflen &&
		    memchr(r->str, '\0', r->len) == NULL) {
			memcpy(buf, r->str, r->len + 1);
			ret = 1;
		} else
			set_err(rs,
			    "holds a policy this throttle cannot read (set it "
			    "afresh with throttle policy set)");
		freeReplyObject(r);
	}
	free(k);
	return ret;
}

static int
rs_policy_put(void *p, const char *name, const char *options)
{
	struct rs *rs = p;
	size_t klen;
	char *k = policies_key(rs, &klen);
	const char *argv[4] = { "HSET", k, name, options };
	size_t len[4] = { 4, klen, strlen(name), strlen(options) };
	int rc = queue(rs, 4, argv, len);

	free(k);
	return rc;
}

static int
rs_policy_del(void *p, const char *name)
{
	struct rs *rs = p;
	size_t klen;
	char *k = policies_key(rs, &klen);
	const char *argv[3] = { "HEXISTS", k, name };
	size_t len[3] = { 7, klen, strlen(name) };
	redisReply *r;
	int ret = -1;

	if (watch(rs, k, klen) == 0 &&
	    (r = run(rs, "reading a policy", 3, argv, len)) != NULL) {
		ret = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
		freeReplyObject(r);
		argv[0] = "HDEL";
		len[0] = 4;
		if (ret == 1 && queue(rs, 3, argv, len) == -1)
			ret = -1;
	}
	free(k);
	return ret;
}

/* Sort order of two byte strings. */
static int
bytes_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c != 0 ? c : alen < blen ? -1 : alen > blen;
}

struct pair {
	const char *a, *b;
	size_t alen, blen;
};

static int
cmp_pair(const void *x, const void *y)
{
	const struct pair *p = x, *q = y;

	return bytes_cmp(p->a, p->alen, q->a, q->alen);
}

static int
rs_policy_list(void *p, int (*fn)(const char *, const char *, void *),
    void *arg)
{
	struct rs *rs = p;
	struct hash h;
	struct pair *v;
	int i, ret = 0;

	memset(&h, 0, sizeof(h));
	h.rkey = policies_key(rs, &h.rlen);
	if (read_hash(rs, &h) == -1) {
		free_hash(&h);
		return -1;
	}
	v = xcalloc((size_t)h.n + 1, sizeof(*v));
	for (i = 0; i < h.n; i++) {
		v[i].a = h.name[i];
		v[i].alen = h.nlen[i];
		v[i].b = h.val[i];
	}
	qsort(v, (size_t)h.n, sizeof(*v), cmp_pair);
	for (i = 0; i < h.n && ret == 0; i++)
		ret = fn(v[i].a, v[i].b, arg);
	free(v);
	free_hash(&h);
	return ret;
}

/*
 * Call fn with each Redis key of a kind ('k', 'l') under the prefix, the
 * throttle key's name after the prefix and tag.  SCAN, so it never blocks
 * the server.
 */
static int
scan(struct rs *rs, char tag,
    int (*fn)(struct rs *, const char *, size_t, void *), void *arg)
{
	char cursor[32] = "0", pattern[PREFIX_MAX * 2 + 8];
	const char *argv[6] = { "SCAN", cursor, "MATCH", pattern, "COUNT",
		"1000" };
	size_t len[6], i, plen = strlen(rs->prefix), j, n = 0;
	redisReply *r;
	int ret = 0;

	/* the prefix literally: escape glob characters */
	for (j = 0; j < plen; j++) {
		if (strchr("*?[]\\", rs->prefix[j]) != NULL)
			pattern[n++] = '\\';
		pattern[n++] = rs->prefix[j];
	}
	pattern[n++] = tag;
	pattern[n++] = ':';
	pattern[n++] = '*';
	pattern[n] = '\0';
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
		for (i = 0; i < r->element[1]->elements && ret == 0; i++) {
			redisReply *e = r->element[1]->element[i];

			if (e->type == REDIS_REPLY_STRING && e->len > plen + 2)
				ret = fn(rs, e->str + plen + 2,
				    e->len - plen - 2, arg);
		}
		freeReplyObject(r);
	} while (ret == 0 && strcmp(cursor, "0") != 0);
	return ret;
}

/* Names collected by a scan, to be sorted and deduplicated. */
struct names {
	struct pair *v;
	size_t n, cap;
};

static int
collect(struct rs *rs, const char *name, size_t len, void *arg)
{
	struct names *ns = arg;
	char *copy;

	(void)rs;
	if (len > KEY_MAX)
		return 0;
	if (ns->n == ns->cap) {
		ns->cap = ns->cap ? ns->cap * 2 : 64;
		ns->v = xrealloc(ns->v, ns->cap * sizeof(*ns->v));
	}
	copy = xmalloc(len + 1);
	memcpy(copy, name, len);
	copy[len] = '\0';
	ns->v[ns->n].a = copy;
	ns->v[ns->n].alen = len;
	ns->v[ns->n].b = NULL;
	ns->n++;
	return 0;
}

static void
free_names(struct names *ns)
{
	size_t i;

	for (i = 0; i < ns->n; i++)
		free((char *)ns->v[i].a);
	free(ns->v);
}

/* Every key name of the kinds in tags, sorted, once each. */
static int
all_names(struct rs *rs, const char *tags, struct names *ns)
{
	size_t i, j;

	memset(ns, 0, sizeof(*ns));
	for (; *tags != '\0'; tags++)
		if (scan(rs, *tags, collect, ns) != 0)
			return -1;
	if (ns->n > 0)
		qsort(ns->v, ns->n, sizeof(*ns->v), cmp_pair);
	for (i = j = 0; i < ns->n; i++) {
		if (j > 0 &&
		    bytes_cmp(ns->v[j - 1].a, ns->v[j - 1].alen, ns->v[i].a,
			ns->v[i].alen) == 0) {
			free((char *)ns->v[i].a);
			continue;
		}
		ns->v[j++] = ns->v[i];
	}
	ns->n = j;
	return 0;
}

static int
rs_names(void *p, int (*fn)(const char *, size_t, void *), void *arg)
{
	struct rs *rs = p;
	struct names ns;
	size_t i;
	int ret = 0;

	if (all_names(rs, "kl", &ns) == -1) {
		free_names(&ns);
		return -1;
	}
	for (i = 0; i < ns.n && ret == 0; i++)
		ret = fn(ns.v[i].a, ns.v[i].alen, arg);
	free_names(&ns);
	return ret;
}

static int
rs_list(void *p, int (*fn)(const struct keyrec *, void *), void *arg)
{
	struct rs *rs = p;
	struct names ns;
	struct keyrec *rec;
	size_t i;
	int idx, ret = 0, found;

	if (all_names(rs, "k", &ns) == -1) {
		free_names(&ns);
		return -1;
	}
	rec = xmalloc(sizeof(*rec));
	for (i = 0; i < ns.n && ret == 0; i++)
		for (idx = 0; idx < LIMITS_MAX && ret == 0; idx++) {
			if ((found = rs_load(rs, ns.v[i].a, ns.v[i].alen, idx,
				 rec)) == -1) {
				ret = -1;
				break;
			}
			if (found) {
				ret = fn(rec, arg);
				free(rec->state.slots);
			}
			if (!rec->more)
				break;
		}
	free(rec);
	free_names(&ns);
	forget(rs);
	return ret;
}

/* One line of a lease's text into buf (len bytes); the rest in *p. */
static int
lease_line(const char **p, char *buf, size_t len)
{
	const char *nl = strchr(*p, '\n');
	size_t n = nl != NULL ? (size_t)(nl - *p) : strlen(*p);

	if (n >= len)
		return -1;
	memcpy(buf, *p, n);
	buf[n] = '\0';
	*p += n + (nl != NULL);
	return 0;
}

/*
 * A lease from its text: its fields one per line, "priority acquired ttl
 * expires pid pid_start boot_id host pgid pgid_start".  Throttle 0.1 wrote
 * the first eight on one line, with "-" for an empty boot id or host.
 * Only the form is checked here; store.c checks the values.  0 or -1.
 */
static int
decode_lease(struct rs *rs, const char *id, size_t idlen, const char *val,
    struct lease *l)
{
	int64_t v[8] = { 0 };
	const char *end, *sp, *p = val;
	char line[32];
	int i;

	memset(l, 0, sizeof(*l));
	if (idlen != LEASE_ID_LEN)
		goto bad;
	memcpy(l->id, id, LEASE_ID_LEN);
	if (strchr(val, '\n') != NULL) {
		for (i = 0; i < 10; i++) {
			if (i == 6 || i == 7) {
				if (lease_line(&p,
					i == 6 ? l->boot_id : l->host,
					i == 6 ? sizeof(l->boot_id)
					       : sizeof(l->host)) == -1)
					goto bad;
				continue;
			}
			if (lease_line(&p, line, sizeof(line)) == -1 ||
			    ints(line, &v[i < 6 ? i : i - 2], 1, &end) == -1 ||
			    *end != '\0')
				goto bad;
		}
		if (*p != '\0')
			goto bad;
	} else {
		if (ints(val, v, 6, &end) == -1 || *end != ' ' ||
		    (sp = strchr(end + 1, ' ')) == NULL ||
		    (size_t)(sp - end - 1) > BOOT_ID_MAX ||
		    strlen(sp + 1) > HOST_MAX)
			goto bad;
		memcpy(l->boot_id, end + 1, (size_t)(sp - end - 1));
		l->boot_id[sp - end - 1] = '\0';
		strcpy(l->host, sp + 1);
		if (strcmp(l->boot_id, "-") == 0)
			l->boot_id[0] = '\0';
		if (strcmp(l->host, "-") == 0)
			l->host[0] = '\0';
	}
	l->priority = v[0] >= INT32_MIN && v[0] <= INT32_MAX ? (int)v[0] : -1;
	l->acquired = v[1];
	l->ttl = v[2];
	l->expires = v[3];
	l->pid = v[4];
	l->pid_start = v[5];
	l->pgid = v[6];
	l->pgid_start = v[7];
	return 0;
bad:
	set_err(rs, "holds a lease this throttle cannot read");
	return -1;
}

struct lease_ent {
	struct lease l;
	const char *key;
	size_t keylen;
};

static int
cmp_lease(const void *x, const void *y)
{
	const struct lease_ent *a = x, *b = y;
	int c = bytes_cmp(a->key, a->keylen, b->key, b->keylen);

	if (c != 0)
		return c;
	if (a->l.acquired != b->l.acquired)
		return a->l.acquired < b->l.acquired ? -1 : 1;
	return strcmp(a->l.id, b->l.id);
}

static int
rs_lease_list(void *p, const char *key, size_t keylen,
    int (*fn)(const char *, size_t, const struct lease *, void *), void *arg)
{
	struct rs *rs = p;
	struct names ns = { 0 };
	struct lease_ent *v = NULL;
	size_t i, n = 0, cap = 0, k;
	struct hash *h;
	int j, ret = 0;

	if (key == NULL && all_names(rs, "l", &ns) == -1)
		ret = -1;
	for (k = 0; ret == 0 && k < (key != NULL ? 1 : ns.n); k++) {
		const char *name = key != NULL ? key : ns.v[k].a;
		size_t nlen = key != NULL ? keylen : ns.v[k].alen;

		if ((h = get_hash(rs, 'l', name, nlen)) == NULL) {
			ret = -1;
			break;
		}
		for (j = 0; j < h->n; j++) {
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				v = xrealloc(v, cap * sizeof(*v));
			}
			if (decode_lease(rs, h->name[j], h->nlen[j], h->val[j],
				&v[n].l) == -1) {
				ret = -1;
				break;
			}
			v[n].key = name;
			v[n].keylen = nlen;
			n++;
		}
	}
	if (ret == 0 && n > 0)
		qsort(v, n, sizeof(*v), cmp_lease);
	for (i = 0; ret == 0 && i < n; i++)
		ret = fn(v[i].key, v[i].keylen, &v[i].l, arg);
	free(v);
	free_names(&ns);
	return ret;
}

static int
rs_lease_put(void *p, const char *key, size_t keylen, const struct lease *l)
{
	struct rs *rs = p;
	struct hash *h;
	char val[8 * 24 + BOOT_ID_MAX + HOST_MAX + 16];
	const char *argv[4];
	size_t len[4];
	int n;

	if ((h = get_hash(rs, 'l', key, keylen)) == NULL)
		return -1;
	n = snprintf(val, sizeof(val),
	    "%d\n%lld\n%lld\n%lld\n%lld\n%lld\n%s\n%s\n%lld\n%lld", l->priority,
	    (long long)l->acquired, (long long)l->ttl, (long long)l->expires,
	    (long long)l->pid, (long long)l->pid_start, l->boot_id, l->host,
	    (long long)l->pgid, (long long)l->pgid_start);
	argv[0] = "HSET";
	argv[1] = h->rkey;
	argv[2] = l->id;
	argv[3] = val;
	len[0] = 4;
	len[1] = h->rlen;
	len[2] = strlen(l->id);
	len[3] = (size_t)n;
	hash_set(h, l->id, len[2], val, len[3]);
	h->touched = 1;
	return queue(rs, 4, argv, len);
}

static int
rs_lease_del(void *p, const char *key, size_t keylen, const char *id)
{
	struct rs *rs = p;
	struct hash *h;
	const char *argv[3];
	size_t len[3];
	int i;

	if ((h = get_hash(rs, 'l', key, keylen)) == NULL)
		return -1;
	for (i = 0; i < h->n; i++)
		if (h->nlen[i] == strlen(id) && strcmp(h->name[i], id) == 0)
			break;
	if (i == h->n)
		return 0;
	argv[0] = "HDEL";
	argv[1] = h->rkey;
	argv[2] = id;
	len[0] = 4;
	len[1] = h->rlen;
	len[2] = strlen(id);
	hash_del(h, i);
	h->touched = 1;
	return queue(rs, 3, argv, len) == -1 ? -1 : 1;
}

/* gc: forget every limit at rest; its own CAS for each key. */
struct gc_ctx {
	int64_t now, n;
};

static int
gc_one(struct rs *rs, const char *name, size_t len, void *arg)
{
	struct gc_ctx *g = arg;
	struct keyrec *rec = xmalloc(sizeof(*rec));
	int idx, found, r, tries;

	for (tries = 0; tries < 10; tries++) {
		int64_t n = 0;

		rs_begin(rs, 1);
		for (idx = 0; idx < LIMITS_MAX; idx++) {
			if ((found = rs_load(rs, name, len, idx, rec)) == -1) {
				free(rec);
				return -1;
			}
			if (found) {
				free(rec->state.slots);
				if (rec->rest_at <= g->now) {
					const char *argv[3] = { "HDEL" };
					size_t l3[3] = { 4 };
					char f[2] = { (char)('0' + idx), 0 };
					struct hash *h =
					    get_hash(rs, 'k', name, len);

					argv[1] = h->rkey;
					argv[2] = f;
					l3[1] = h->rlen;
					l3[2] = 1;
					if (queue(rs, 3, argv, l3) == -1) {
						free(rec);
						return -1;
					}
					n++;
				}
			}
			if (!rec->more)
				break;
		}
		if ((r = rs_commit(rs)) == -1) {
			free(rec);
			return -1;
		}
		if (r == 0) {
			g->n += n;
			break;
		}
	}
	free(rec);
	return 0;
}

static int64_t
rs_tidy(void *p, int64_t now, int64_t limit)
{
	struct rs *rs = p;
	struct gc_ctx g = { now, 0 };

	/* keys expire on their own; only gc looks for limits at rest */
	if (limit != 0)
		return 0;
	if (scan(rs, 'k', gc_one, &g) != 0)
		return -1;
	return g.n;
}

/* Give each hash written its expiry: when its state ends, plus a margin. */
static int
queue_expiries(struct rs *rs)
{
	struct keyrec rec;
	struct lease l;
	const char *argv[3];
	size_t len[3];
	char t[24];
	int i, j, forever;
	int64_t until;

	for (i = 0; i < rs->nh; i++) {
		struct hash *h = &rs->h[i];

		if (!h->touched || h->n == 0)
			continue; /* a hash with no fields is gone */
		until = 0;
		forever = 0;
		for (j = 0; j < h->n; j++) {
			if (h->kind == 'k') {
				if (decode(rs, h->val[j], h->vlen[j], &rec) ==
				    -1)
					return -1;
				free(rec.state.slots);
				if (rec.rest_at > until)
					until = rec.rest_at;
			} else {
				if (decode_lease(rs, h->name[j], h->nlen[j],
					h->val[j], &l) == -1)
					return -1;
				if (l.expires == 0)
					forever = 1;
				else if (l.expires > until)
					until = l.expires;
			}
		}
		argv[1] = h->rkey;
		len[1] = h->rlen;
		if (forever) {
			argv[0] = "PERSIST";
			len[0] = 7;
			if (queue(rs, 2, argv, len) == -1)
				return -1;
			continue;
		}
		snprintf(t, sizeof(t), "%lld", ttl_ms(rs, until));
		argv[0] = "PEXPIRE";
		argv[2] = t;
		len[0] = 7;
		len[2] = strlen(t);
		if (queue(rs, 3, argv, len) == -1)
			return -1;
	}
	return 0;
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
 * Send the queued writes as MULTI ... EXEC.  0 done, STORE_RETRY if a
 * watched key changed (run the transaction again), -1 error.
 */
static int
rs_commit(void *p)
{
	struct rs *rs = p;
	redisReply *r = NULL;
	int i, ret = 0, conflict = 0;
	char t[32];

	if (rs->nq == 0) {
		unwatch(rs);
		forget(rs);
		rs->first_try = 0;
		return 0;
	}
	if (queue_expiries(rs) == -1)
		goto fail;
	redisAppendCommand(rs->c, "MULTI");
	for (i = 0; i < rs->nq; i++)
		redisAppendCommandArgv(rs->c, rs->q[i].argc,
		    (const char **)rs->q[i].argv, rs->q[i].len);
	redisAppendCommand(rs->c, "EXEC");
	for (i = 0; i < rs->nq + 2; i++) {
		if (redisGetReply(rs->c, (void **)&r) != REDIS_OK ||
		    r == NULL) {
			reply_err(rs, NULL, "saving");
			goto fail;
		}
		if (i == rs->nq + 1) {
			if (r->type == REDIS_REPLY_NIL)
				conflict = 1;
			else if (r->type != REDIS_REPLY_ARRAY) {
				reply_err(rs, r, "saving");
				ret = -1;
			} else {
				size_t k;

				for (k = 0; k < r->elements; k++)
					if (r->element[k]->type ==
					    REDIS_REPLY_ERROR) {
						reply_err(rs, r->element[k],
						    "saving");
						ret = -1;
						break;
					}
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
	forget(rs);
	if (ret == -1)
		return -1;
	if (conflict) {
		if (clock_monotonic() - rs->first_try > rs->lock_timeout) {
			output_seconds(t, sizeof(t), rs->lock_timeout);
			set_err(rs,
			    "other writers kept changing the key for %ss "
			    "(--lock-timeout); try again",
			    t);
			rs->first_try = 0;
			return -1;
		}
		return STORE_RETRY;
	}
	rs->first_try = 0;
	return 0;
fail:
	forget(rs);
	rs->first_try = 0;
	return -1;
}

static void
rs_rollback(void *p)
{
	struct rs *rs = p;

	if (rs->c != NULL && !rs->c->err)
		unwatch(rs);
	forget(rs);
	rs->first_try = 0;
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
	char *e;
	long long s, us;

	if (clock_pinned()) {
		if (clock_now(now, &err) == -1) {
			set_err(rs, "THROTTLE_NOW: %s", err);
			return -1;
		}
		rs->now = *now;
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
	s = strtoll(r->element[0]->str, &e, 10);
	us = strtoll(r->element[1]->str, &e, 10);
	freeReplyObject(r);
	*now = (int64_t)s * US_PER_SEC + us;
	rs->now = *now;
	return 0;
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

static void *
rs_open(const char *spec, int64_t lock_timeout, int flags, char *err,
    size_t errlen)
{
	struct rs *rs;
	struct redis_url u;
	struct timeval tv;
	redisReply *r;
	const char *why;
	int64_t now;

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
		goto fail;
	}
	/* a command that run starts must not inherit the connection */
	fcntl(rs->c->fd, F_SETFD, FD_CLOEXEC);
	redisSetTimeout(rs->c, tv);
	if (u.password[0] != '\0') {
		r = u.user[0] != '\0'
		    ? redisCommand(rs->c, "AUTH %s %s", u.user, u.password)
		    : redisCommand(rs->c, "AUTH %s", u.password);
		if (r == NULL || r->type == REDIS_REPLY_ERROR) {
			if (rs->c->err)
				reply_err(rs, r, "logging in");
			else
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
			if (r != NULL)
				freeReplyObject(r);
			goto fail;
		}
		freeReplyObject(r);
	}
	if (rs_now(rs, &now) == -1)
		goto fail;
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
	redisFree(rs->c);
	free(rs);
}

/* A group (batch) is one transaction per request here: nothing to do. */
static int
rs_group_begin(void *p)
{
	(void)p;
	return 0;
}

static int
rs_group_end(void *p, int commit)
{
	(void)p;
	(void)commit;
	return 0;
}

/*
 * Parse redis://[user:password@]host[:port][/db][?prefix=P&timeout=DUR]
 * or unix:///path[?db=N&prefix=P&timeout=DUR] into u; u->where names the
 * server without the password.  0, or -1 with *why.
 */
int
store_redis_parse(const char *spec, struct redis_url *u, const char **why)
{
	const char *p, *q, *at, *end, *colon;
	char opt[PREFIX_MAX + 1];
	int64_t v;
	const char *err;
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
		p = spec + 7;
		q = strchr(p, '?');
		n = q ? (size_t)(q - p) : strlen(p);
		if (n == 0 || p[0] != '/' ||
		    unescape(p, n, u->socket, sizeof(u->socket)) == -1) {
			*why = "the socket path is missing or too long";
			return -1;
		}
		snprintf(u->where, sizeof(u->where), "unix://%.250s",
		    u->socket);
	} else if (strncmp(spec, "redis://", 8) == 0) {
		p = spec + 8;
		q = strchr(p, '?');
		end = strchr(p, '/');
		if (end == NULL || (q != NULL && end > q))
			end = q != NULL ? q : p + strlen(p);
		at = memchr(p, '@', (size_t)(end - p));
		if (at != NULL) {
			colon = memchr(p, ':', (size_t)(at - p));
			if (colon == NULL) {
				/* redis://password@host, as redis-cli takes */
				if (unescape(p, (size_t)(at - p), u->password,
					sizeof(u->password)) == -1) {
					*why = "the password is too long";
					return -1;
				}
			} else if (unescape(p, (size_t)(colon - p), u->user,
				       sizeof(u->user)) == -1 ||
			    unescape(colon + 1, (size_t)(at - colon - 1),
				u->password, sizeof(u->password)) == -1) {
				*why = "the user or password is too long";
				return -1;
			}
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
		if (colon != NULL) {
			n = (size_t)(end - colon - 1);
			if (n == 0 || n >= sizeof(opt)) {
				*why = "the port is not a number";
				return -1;
			}
			memcpy(opt, colon + 1, n);
			opt[n] = '\0';
			if (parse_count(opt, 65535, &v, &err) == -1 || v == 0) {
				*why = "the port is not a number from 1 to "
				       "65535";
				return -1;
			}
			u->port = (int)v;
		}
		if (*end == '/') {
			p = end + 1;
			n = q ? (size_t)(q - p) : strlen(p);
			if (n > 0) {
				if (n >= sizeof(opt)) {
					*why = "the database is not a number";
					return -1;
				}
				memcpy(opt, p, n);
				opt[n] = '\0';
				if (parse_count(opt, INT_MAX, &v, &err) == -1) {
					*why = "the database is not a number";
					return -1;
				}
				u->db = (int)v;
			}
		}
		snprintf(u->where, sizeof(u->where), "redis://%.200s:%d/%d",
		    u->host, u->port, u->db);
	} else {
		*why = "is not a redis:// or unix:// URL";
		return -1;
	}
	/* the query: prefix, timeout (and db for unix://) */
	for (p = q ? q + 1 : NULL; p != NULL && *p != '\0';
	     p = q ? q + 1 : NULL) {
		q = strchr(p, '&');
		n = q ? (size_t)(q - p) : strlen(p);
		if (strncmp(p, "prefix=", 7) == 0) {
			if (unescape(p + 7, n - 7, u->prefix,
				sizeof(u->prefix)) == -1) {
				*why = "the prefix is too long";
				return -1;
			}
		} else if (strncmp(p, "password=", 9) == 0 ||
		    strncmp(p, "user=", 5) == 0) {
			int pw = p[0] == 'p';
			size_t skip = pw ? 9 : 5;

			if (unescape(p + skip, n - skip,
				pw ? u->password : u->user,
				pw ? sizeof(u->password) : sizeof(u->user)) ==
			    -1) {
				*why = "the user or password is too long";
				return -1;
			}
		} else if (strncmp(p, "timeout=", 8) == 0 ||
		    strncmp(p, "db=", 3) == 0) {
			size_t skip = p[0] == 't' ? 8 : 3;

			if (n - skip >= sizeof(opt)) {
				*why = "an option's value is too long";
				return -1;
			}
			memcpy(opt, p + skip, n - skip);
			opt[n - skip] = '\0';
			if (p[0] == 't') {
				if (parse_duration(opt, &u->timeout, &err) ==
					-1 ||
				    u->timeout == 0) {
					*why = "timeout= is not a duration "
					       "above 0";
					return -1;
				}
			} else if (parse_count(opt, INT_MAX, &v, &err) == -1) {
				*why = "db= is not a number";
				return -1;
			} else
				u->db = (int)v;
		} else {
			*why = "has an option other than prefix=, timeout=, "
			       "db=, user= or password=";
			return -1;
		}
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

const struct store_ops store_redis_ops = {
	.open = rs_open,
	.begin = rs_begin,
	.load = rs_load,
	.save = rs_save,
	.del = rs_del,
	.trim = rs_trim,
	.lockout_get = rs_lockout_get,
	.lockout_put = rs_lockout_put,
	.policy_get = rs_policy_get,
	.policy_put = rs_policy_put,
	.policy_del = rs_policy_del,
	.policy_list = rs_policy_list,
	.tidy = rs_tidy,
	.names = rs_names,
	.list = rs_list,
	.lease_list = rs_lease_list,
	.lease_put = rs_lease_put,
	.lease_del = rs_lease_del,
	.shed_load = rs_shed_load,
	.shed_save = rs_shed_save,
	.commit = rs_commit,
	.rollback = rs_rollback,
	.close = rs_close,
	.group_begin = rs_group_begin,
	.group_end = rs_group_end,
	.now = rs_now,
};
