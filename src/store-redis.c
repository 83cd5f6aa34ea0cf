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
 *	6. The servers are nodes (struct node), connected to when first
 *	   needed.  One server is node 0; so is the master Sentinel names
 *	   (redis+sentinel://), asked for again on READONLY or a lost
 *	   connection, every write waiting (WAIT 1) for a replica to have it.
 *	   A cluster (redis+cluster://) sends each key to the master of its
 *	   slot, following MOVED and ASK; a transaction writes keys of one
 *	   slot (a cluster's MULTI takes no more), so a batch group is one
 *	   slot's requests.  A WATCH belongs to its connection: a write whose
 *	   WATCH went with a lost connection is never sent (node epochs).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
	int old; /* read from throttle 0.1's keys, a bit a key (old_tags):
		    those go at commit */
	int node; /* the server it was read from (rs->node[]) */
	int ask; /* read there after an ASK: ASKING before each command */
	unsigned where; /* IN_HASH, IN_OLD(i): where it was read from */
	unsigned slot; /* a cluster: the hash slot of rkey */
	unsigned epoch; /* its node's connection that WATCHed it */
	int watch; /* read WATCHed */
};

/* A queued write of a policy: one Redis command. */
struct qcmd {
	int argc;
	char *argv[4];
	size_t len[4];
};

/* A server: the one of redis://, a cluster's node, Sentinel's master. */
struct node {
	char *host; /* or a unix socket's path (port 0) */
	int port;
	redisContext *c; /* NULL until needed */
	int watched; /* this connection WATCHes a key of the transaction */
	unsigned epoch; /* counts connections made: a WATCH is its epoch's */
};

/* What the last failed command's reply asked for (rs->redirect). */
#define GO_MOVED 1 /* MOVED: the slot is another node's, for good */
#define GO_ASK 2 /* ASK: this key is another node's while a slot moves */
#define GO_WAIT 3 /* TRYAGAIN, CLUSTERDOWN: wait, then again */
#define GO_MASTER 4 /* READONLY, or the master gone: ask Sentinel again */

#define SLOTS 16384

struct rs {
	redisContext *c; /* the connection the next command goes to */
	int kind; /* REDIS_ONE, REDIS_CLUSTER, REDIS_SENTINEL */
	struct node *node;
	int nnode, capnode, cur; /* rs->c is node[cur]'s */
	unsigned short *slot; /* a cluster: node index + 1 of each slot */
	struct redis_url *url; /* login, database, sentinels */
	int redirect, redir_slot, redir_node; /* GO_*, from the last reply */
	int64_t redir_until; /* monotonic: redirects are followed until */
	int64_t slice; /* asking one of several nodes: its share of the time */
	int redirs; /* redirects followed at commit, this decision */
	int narrow; /* a group's keys were on two nodes: the next takes one */
	int why_at; /* where the reason starts in err, after the store */
	int outage; /* err says why the node did not serve: keep it */
	int64_t redir_from; /* monotonic: a keyed command's start, or 0 */
	int cluster_checked; /* redis://: the server said it is no cluster */
	struct names *names; /* the keys this transaction listed, or NULL */
	int qnode; /* the node of the policies' hash, for queued writes */
	unsigned qepoch; /* its connection that WATCHed it, or 0 */
	int replicas; /* writes wait for this many replicas (Sentinel: 1) */
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
	int sentinels_down; /* find_master() reached no sentinel at all */
	int unsure; /* the last commit was sent, its reply lost: it may be kept */
	int64_t timeout; /* ?timeout=: a reply waited for this long, at most */
	int64_t deadline; /* monotonic: this decision's --lock-timeout ends */
	int64_t reply_t; /* bound_time(): how long one reply may take */
	int64_t reply_cap; /* and when the decision's time ends, or 0 */
	const redisContext *tmo_c; /* the connection whose socket timeout */
	int64_t tmo; /* is this (set_tmo()) */
	int scanning; /* inspect, gc, policy list: not one decision */
	int group; /* in a group (batch): one transaction for many requests */
	int carry; /* the policy lookup read the decision's key: keep it */
	int broken; /* a request of the group failed after it wrote */
	int req_writes; /* writes by the group's current request */
	int retries; /* this decision's lost races, for the backoff */
	char *stalled; /* in a group: the server stopped answering, and
			* why; the rest of the group meets it at once */
	const char *wkey; /* the Redis key of the reply being read, for a */
	size_t wklen; /* WRONGTYPE's message; or NULL */
};

static void
set_err(struct rs *, const char *, ...) __attribute__((format(printf, 2, 3)));

/* The message: the store, the node when there are several, then fmt. */
static void
set_err(struct rs *rs, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (rs->kind == REDIS_ONE || rs->cur < 0 || rs->cur >= rs->nnode)
		n = snprintf(rs->err, rs->errlen, "%s: ", rs->where);
	else
		n = snprintf(rs->err, rs->errlen,
		    "%s, %s %.200s:%d: ", rs->where,
		    rs->kind == REDIS_CLUSTER ? "node" : "master",
		    rs->node[rs->cur].host, rs->node[rs->cur].port);
	if (n < 0 || (size_t)n >= rs->errlen)
		return;
	rs->why_at = n;
	va_start(ap, fmt);
	vsnprintf(rs->err + n, rs->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

static int find_node(struct rs *, const char *, size_t, int);

/*
 * What an error reply asks of a client that can follow it: a cluster's
 * MOVED (the slot is another node's), ASK (this key is, while its slot
 * moves), TRYAGAIN or CLUSTERDOWN (wait); Sentinel's master demoted
 * (READONLY) or gone.  Into rs->redirect, with the slot and node.
 */
static void
note_redirect(struct rs *rs, const redisReply *r)
{
	const char *sp, *colon;
	long slot, port;

	rs->redirect = 0;
	if (rs->kind == REDIS_CLUSTER && rs->c->err) {
		/* the node is gone: a failover, maybe; nothing was written
		 * yet where this is followed (exec_writes() says so) */
		rs->redirect = GO_WAIT;
		return;
	}
	if (rs->kind == REDIS_SENTINEL &&
	    (rs->c->err ||
		(r != NULL && r->type == REDIS_REPLY_ERROR &&
		    strncmp(r->str, "READONLY", 8) == 0)))
		rs->redirect = GO_MASTER;
	if (rs->kind != REDIS_CLUSTER || r == NULL ||
	    r->type != REDIS_REPLY_ERROR)
		return;
	if (strncmp(r->str, "TRYAGAIN", 8) == 0 ||
	    strncmp(r->str, "CLUSTERDOWN", 11) == 0) {
		rs->redirect = GO_WAIT;
		return;
	}
	if (strncmp(r->str, "MOVED ", 6) != 0 &&
	    strncmp(r->str, "ASK ", 4) != 0)
		return;
	/* MOVED 3999 127.0.0.1:6381 (an empty host: the node that said it) */
	sp = strchr(r->str, ' ') + 1;
	slot = strtol(sp, NULL, 10);
	if ((sp = strchr(sp, ' ')) == NULL ||
	    (colon = strrchr(sp, ':')) == NULL || slot < 0 || slot >= SLOTS)
		return;
	sp++;
	port = strtol(colon + 1, NULL, 10);
	if (port <= 0 || port > 65535)
		return;
	rs->redir_node = colon == sp
	    ? find_node(rs, rs->node[rs->cur].host,
		  strlen(rs->node[rs->cur].host), (int)port)
	    : find_node(rs, sp, (size_t)(colon - sp), (int)port);
	rs->redir_slot = (int)slot;
	rs->redirect = r->str[0] == 'M' ? GO_MOVED : GO_ASK;
}

/*
 * In a group (throttle batch), a server that did not answer in time, or
 * could not be reached: what else the group asks of it fails at once
 * with the same message (use_node()), so a group costs one --lock-timeout
 * however many round trips it has left, as a single decision does.  The
 * next group tries again.
 */
static void
group_stalled(struct rs *rs)
{
	if (rs->group && rs->stalled == NULL)
		rs->stalled = xstrdup(rs->err);
}

static void
group_unstall(struct rs *rs)
{
	free(rs->stalled);
	rs->stalled = NULL;
}

/* The message for a failed call: the connection's, or the reply's. */
static void
reply_err(struct rs *rs, const redisReply *r, const char *what)
{
	/* out of reach: the connection failed or timed out, or the server
	 * cannot answer yet (loading, failing over); anything else it says
	 * is a misconfiguration that --on-error allow must not hide */
	/* (something that answers, not in Redis's protocol, is a wrong
	 * host or port: it will not become Redis by waiting) */
	rs->unavailable =
	    (rs->c->err != 0 && rs->c->err != REDIS_ERR_PROTOCOL) ||
	    (r != NULL && r->type == REDIS_REPLY_ERROR &&
		(strncmp(r->str, "LOADING", 7) == 0 ||
		    strncmp(r->str, "MASTERDOWN", 10) == 0 ||
		    strncmp(r->str, "TRYAGAIN", 8) == 0 ||
		    strncmp(r->str, "CLUSTERDOWN", 11) == 0 ||
		    strncmp(r->str, "BUSY ", 5) == 0 ||
		    (rs->kind == REDIS_SENTINEL &&
			strncmp(r->str, "READONLY", 8) == 0)));
	note_redirect(rs, r);
	if (rs->c->err == REDIS_ERR_IO &&
	    (errno == EAGAIN || errno == ETIMEDOUT)) {
		set_err(rs,
		    "%s: no reply in time (--lock-timeout, or ?timeout=); is "
		    "the server overloaded or stuck?",
		    what);
		group_stalled(rs);
	} else if (rs->c->err == REDIS_ERR_PROTOCOL)
		/* something answered, not in Redis's protocol: another
		 * service on that port, or a TLS one (throttle speaks plain
		 * Redis; a tunnel such as stunnel adds TLS) */
		set_err(rs,
		    "%s: what answered is not a Redis server (%s); check the "
		    "URL's host and port (a TLS port needs a tunnel: see "
		    "REDIS in throttle(1))",
		    what, rs->c->errstr);
	else if (rs->c->err == REDIS_ERR_EOF ||
	    (rs->c->err == REDIS_ERR_IO &&
		strcmp(rs->c->errstr, strerror(ECONNRESET)) == 0))
		/* what a TLS port does with a plain request, as a server
		 * going down does */
		set_err(rs,
		    "%s: %s (is the server up? a TLS port closes a plain "
		    "connection so: it needs a tunnel, see REDIS in "
		    "throttle(1))",
		    what, rs->c->errstr);
	else if (rs->c->err)
		set_err(rs, "%s: %s (is the server up and reachable?)", what,
		    rs->c->errstr[0] ? rs->c->errstr : strerror(errno));
	else if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "WRONGTYPE", 9) == 0 && rs->wkey != NULL)
		set_err(rs,
		    "%s: the key '%.*s' holds something throttle did not "
		    "write; use another ?prefix= than '%s', or remove that "
		    "key if nothing else needs it",
		    what, (int)(rs->wklen < 200 ? rs->wklen : 200), rs->wkey,
		    rs->prefix);
	else if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "WRONGTYPE", 9) == 0)
		set_err(rs,
		    "%s: a key under the prefix '%s' holds something "
		    "throttle did not write; use another ?prefix= or remove "
		    "it",
		    what, rs->prefix);
	else if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    rs->kind != REDIS_CLUSTER &&
	    (strncmp(r->str, "MOVED ", 6) == 0 ||
		strncmp(r->str, "ASK ", 4) == 0 ||
		strncmp(r->str, "CROSSSLOT", 9) == 0))
		set_err(rs,
		    "%s: %.100s: the server is a Redis Cluster node; give "
		    "--db redis+cluster://HOST:PORT to use the cluster",
		    what, r->str);
	else if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    rs->kind == REDIS_ONE && strncmp(r->str, "READONLY", 8) == 0)
		set_err(rs,
		    "%s: %.100s: the server is a replica; give --db the "
		    "master's address, or redis+sentinel://HOST:PORT/MASTER to "
		    "follow it through failovers",
		    what, r->str);
	else if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    rs->kind == REDIS_ONE && strstr(r->str, "unknown command") != NULL)
		set_err(rs,
		    "%s: %.100s: is the server a Sentinel? give --db "
		    "redis+sentinel://HOST:PORT/MASTER for the master it names",
		    what, r->str);
	else if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "NOAUTH", 6) == 0)
		set_err(rs,
		    "%s: %.100s: the server wants a password; give it in the "
		    "URL (redis://:PASSWORD@HOST:PORT, or ?password=)",
		    what, r->str);
	else if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "NOPERM", 6) == 0)
		set_err(rs,
		    "%s: %.200s: grant the user the commands throttle runs "
		    "(throttle(1), REDIS)",
		    what, r->str);
	else if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    rs->kind == REDIS_SENTINEL && strncmp(r->str, "READONLY", 8) == 0)
		set_err(rs,
		    "%s: %.100s: the master Sentinel named is a replica now, "
		    "and Sentinel named no other in time",
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

/* Set c's socket timeout, which bounds each read and write, to t us. */
static void
set_tmo(struct rs *rs, redisContext *c, int64_t t)
{
	struct timeval tv;

	tv.tv_sec = (time_t)(t / US_PER_SEC);
	tv.tv_usec = (suseconds_t)(t % US_PER_SEC);
	redisSetTimeout(c, tv);
	rs->tmo_c = c;
	rs->tmo = t;
}

/* c's socket timeout as t us, give or take 10ms: no system call for
 * most replies, whose time left is what bound_time() set. */
static void
keep_tmo(struct rs *rs, redisContext *c, int64_t t)
{
	if (rs->tmo_c != c || t < rs->tmo - 10000 || t > rs->tmo + 10000)
		set_tmo(rs, c, t);
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

	/* no one reply waits longer than --lock-timeout either */
	if (rs->lock_timeout > 0 && rs->lock_timeout < t)
		t = rs->lock_timeout;
	if (decision && rs->deadline != 0 && left < t)
		t = left > 1000 ? left : 1000;
	if (rs->slice > 0 && rs->slice < t)
		t = rs->slice; /* one of several nodes to ask: its share */
	set_tmo(rs, rs->c, t);
	rs->reply_t = t;
	rs->reply_cap = decision && rs->deadline != 0 ? rs->deadline : 0;
}

/*
 * The next reply on c, as redisGetReply() gives it, but within the time
 * bound_time() gave a reply: the socket's timeout bounds each read, and a
 * server that sends a byte at a time would otherwise hold the call for
 * as long as it goes on.  Each read waits only what is left of the
 * reply's time (and of the decision's); past it, the error is a
 * timeout's (REDIS_ERR_IO, EAGAIN).
 */
static int
get_reply(struct rs *rs, redisContext *c, redisReply **out)
{
	int64_t by = clock_monotonic() + rs->reply_t, left;
	void *r = NULL;
	int done = 0;

	*out = NULL;
	/* within the decision's time, but never less than the 1ms a reply
	 * always has (bound_time()): --lock-timeout 0 still reads one */
	if (rs->reply_cap != 0 && rs->reply_cap < by)
		by = rs->reply_cap;
	if (by < clock_monotonic() + 1000)
		by = clock_monotonic() + 1000;
	if (redisGetReplyFromReader(c, &r) == REDIS_ERR)
		return REDIS_ERR;
	if (r == NULL) {
		/* the write too, within what is left */
		left = by - clock_monotonic();
		if (rs->reply_t > 0)
			keep_tmo(rs, c, left > 1000 ? left : 1000);
		do {
			if (redisBufferWrite(c, &done) == REDIS_ERR)
				return REDIS_ERR;
		} while (!done);
	}
	while (r == NULL) {
		if (rs->reply_t > 0) {
			if ((left = by - clock_monotonic()) <= 0) {
				c->err = REDIS_ERR_IO;
				snprintf(c->errstr, sizeof(c->errstr), "%s",
				    strerror(EAGAIN));
				errno = EAGAIN;
				return REDIS_ERR;
			}
			keep_tmo(rs, c, left);
		}
		if (redisBufferRead(c) == REDIS_ERR ||
		    redisGetReplyFromReader(c, &r) == REDIS_ERR)
			return REDIS_ERR;
	}
	*out = r;
	return REDIS_OK;
}

/* A command sent and its reply read, as redisCommandArgv() does, within
 * the time get_reply() allows: the reply, or NULL (c->err set). */
static redisReply *
command_argv(struct rs *rs, redisContext *c, int argc, const char **argv,
    const size_t *len)
{
	redisReply *r;

	if (redisAppendCommandArgv(c, argc, argv, len) == REDIS_ERR ||
	    get_reply(rs, c, &r) == REDIS_ERR)
		return NULL;
	return r;
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
	r = command_argv(rs, rs->c, argc, argv, len);
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

/*
 * The servers.  One server (redis://, unix://) is node 0, and so is the
 * master Sentinel names; a cluster's nodes are those its slot map names,
 * each connected to when first needed.  rs->c is the connection of the
 * node a command goes to next (rs->cur).
 */

/* The node host:port (a unix socket: port 0), added if new. */
static int
find_node(struct rs *rs, const char *host, size_t hlen, int port)
{
	int i;

	for (i = 0; i < rs->nnode; i++)
		if (rs->node[i].port == port &&
		    strlen(rs->node[i].host) == hlen &&
		    memcmp(rs->node[i].host, host, hlen) == 0)
			return i;
	if (rs->nnode == rs->capnode) {
		rs->capnode = rs->capnode ? rs->capnode * 2 : 4;
		rs->node =
		    xrealloc(rs->node, (size_t)rs->capnode * sizeof(*rs->node));
	}
	memset(&rs->node[i], 0, sizeof(rs->node[i]));
	rs->node[i].host = cat3(host, hlen, "", 0, "", 0, &hlen);
	rs->node[i].port = port;
	rs->nnode++;
	return i;
}

/* Forget node i's connection (a WATCH on it is gone with it). */
static void
node_close(struct rs *rs, int i)
{
	if (rs->tmo_c == rs->node[i].c)
		rs->tmo_c = NULL;
	if (rs->node[i].c != NULL)
		redisFree(rs->node[i].c);
	rs->node[i].c = NULL;
	rs->node[i].watched = 0;
	if (rs->cur == i)
		rs->c = NULL;
}

/* The timeout of a connect: ?timeout=, within --lock-timeout's left. */
static struct timeval
connect_time(const struct rs *rs)
{
	int64_t t = rs->timeout, left = rs->deadline - clock_monotonic();
	struct timeval tv;

	if (rs->lock_timeout > 0 && rs->lock_timeout < t)
		t = rs->lock_timeout;
	if (rs->first_try != 0 && !rs->scanning && left < t)
		t = left > 1000 ? left : 1000;
	if (rs->slice > 0 && rs->slice < t)
		t = rs->slice;
	tv.tv_sec = (time_t)(t / US_PER_SEC);
	tv.tv_usec = (suseconds_t)(t % US_PER_SEC);
	return tv;
}

/*
 * A TCP connection to host:port within tv: the host's addresses from
 * resolve_host(), within the same time (a DNS server that never answers
 * held a call 10-20 s), tried in turn with what is left of it.  NULL with
 * *how and why set if the name was not looked up (why empty: out of
 * memory); else a context, its err set if no address answered.
 */
static redisContext *
connect_tcp(const char *host, int port, struct timeval tv, int *how, char *why,
    size_t whylen)
{
	int64_t t = (int64_t)tv.tv_sec * US_PER_SEC + tv.tv_usec,
		end = clock_monotonic() + t, left;
	struct addrs a;
	redisContext *c = NULL;
	int i, r;

	why[0] = '\0';
	if ((r = resolve_host(host, t, &a, why, whylen)) != 0) {
		*how = r;
		return NULL;
	}
	for (i = 0; i < a.n; i++) {
		if (c != NULL)
			redisFree(c);
		/* each address its share of what is left, 50 ms at least
		 * while that much is left: one that never answers must leave
		 * the next time to, and the first is the likely one */
		left = end - clock_monotonic();
		if (left / (a.n - i) >= 50000)
			left /= a.n - i;
		else if (left > 50000)
			left = 50000;
		if (left < 1000)
			left = 1000;
		tv.tv_sec = (time_t)(left / US_PER_SEC);
		tv.tv_usec = (suseconds_t)(left % US_PER_SEC);
		if ((c = redisConnectWithTimeout(a.a[i], port, tv)) == NULL ||
		    !c->err)
			return c;
	}
	return c;
}

/*
 * The message for a host name connect_tcp() could not look up (how:
 * resolve_host()'s failure).  Each is an outage, as a server that cannot
 * be reached is: a cluster or Sentinel URL goes on to the next node, and
 * --on-error applies.  Even a name DNS says does not exist: DNS can say
 * so for a while (a VPN coming up, a split view) of a name that is
 * right, and a login guard must not fail closed on it then; the message
 * says plainly which it is.
 */
static void
lookup_err(struct rs *rs, const char *who, const char *host, int how,
    const char *why)
{
	rs->unavailable = 1;
	if (how == RESOLVE_SLOW)
		set_err(rs,
		    "cannot connect to %s: its name %s was not looked up in "
		    "time (--lock-timeout, or ?timeout=; is the DNS server in "
		    "/etc/resolv.conf answering?)",
		    who, host);
	else if (how == RESOLVE_NONAME)
		set_err(rs,
		    "cannot connect to %s: DNS has no address for %s (%s); "
		    "check the name, and /etc/hosts",
		    who, host, why);
	else if (how == RESOLVE_SYSTEM)
		set_err(rs, "cannot connect to %s: its name %s: %s", who, host,
		    why);
	else
		set_err(rs,
		    "cannot connect to %s: its name %s could not be looked "
		    "up: %s (is the DNS server in /etc/resolv.conf "
		    "answering?)",
		    who, host, why);
}

/* Log in with user and password, if any: 0, or -1 with the error set. */
static int
log_in(struct rs *rs, const char *user, const char *password, const char *who)
{
	redisReply *r;

	if (password[0] == '\0')
		return 0;
	{
		const char *av[] = { "AUTH", user, password };
		int n = 3;

		if (user[0] == '\0') {
			av[1] = password;
			n = 2;
		}
		r = command_argv(rs, rs->c, n, av, NULL);
	}
	if (r != NULL && r->type != REDIS_REPLY_ERROR) {
		freeReplyObject(r);
		return 0;
	}
	if (rs->c->err)
		reply_err(rs, r, "logging in");
	else {
		rs->unavailable = 0;
		set_err(rs,
		    "%s refused the user name or password; check the URL", who);
	}
	if (r != NULL)
		freeReplyObject(r);
	return -1;
}

/* Make node i the one commands go to, connecting (and logging in) if it
 * is not yet: 0, or -1 with the error set. */

/*
 * A unix:// socket that failed to connect for a reason that is no outage:
 * this user may not use it, or what is at the path is not a socket (or
 * could never be one).  1
 * with the error set, or 0.
 */
static int
unix_misconf(struct rs *rs, const struct node *nd)
{
	struct stat sb;

	if (nd->port != 0)
		return 0; /* TCP: a refused port is a server that is down */
	if (strcmp(nd->c->errstr, strerror(EACCES)) == 0) {
		set_err(rs,
		    "cannot connect: %s: this user may not use the socket; "
		    "check its permissions and its folder's",
		    nd->c->errstr);
		return 1;
	}
	if (stat(nd->host, &sb) == 0 && !S_ISSOCK(sb.st_mode)) {
		set_err(rs,
		    "cannot connect: %s is not a socket; check the URL's "
		    "path",
		    nd->host);
		return 1;
	}
	/* a path through a file, or links in a loop: no server's socket
	 * is ever there */
	if (strcmp(nd->c->errstr, strerror(ENOTDIR)) == 0 ||
	    strcmp(nd->c->errstr, strerror(ELOOP)) == 0) {
		set_err(rs, "cannot connect: %s: %s; check the URL's path",
		    nd->host,
		    strcmp(nd->c->errstr, strerror(ELOOP)) == 0
			? "its symbolic links go round in a loop"
			: "a folder of the path is a file");
		return 1;
	}
	return 0;
}

static int
use_node(struct rs *rs, int i)
{
	struct node *nd = &rs->node[i];
	struct timeval tv = connect_time(rs);
	redisReply *r;
	char why[200] = "";
	int how = 0;

	if (nd->c != NULL && nd->c->err)
		node_close(rs, i);
	rs->cur = i;
	if ((rs->c = nd->c) != NULL)
		return 0;
	if (rs->group && rs->stalled != NULL) {
		snprintf(rs->err, rs->errlen, "%s", rs->stalled);
		rs->why_at = 0; /* (not set_err()'s: no reason to take) */
		rs->unavailable = 1;
		return -1;
	}
	nd->c = nd->port == 0
	    ? redisConnectUnixWithTimeout(nd->host, tv)
	    : connect_tcp(nd->host, nd->port, tv, &how, why, sizeof(why));
	if (nd->c == NULL && why[0] != '\0') {
		lookup_err(rs, "the server", nd->host, how, why);
		group_stalled(rs);
		return -1;
	}
	if (nd->c == NULL) {
		set_err(rs, "cannot connect: out of memory");
		return -1;
	}
	rs->c = nd->c;
	nd->epoch++;
	if (nd->c->err && unix_misconf(rs, nd)) {
		/* no outage: --on-error must not fail open on it */
		rs->unavailable = 0;
		node_close(rs, i);
		return -1;
	}
	if (nd->c->err) {
		set_err(rs,
		    "cannot connect: %s (is the server up and reachable?)",
		    nd->c->errstr);
		rs->unavailable = 1;
		group_stalled(rs);
		node_close(rs, i);
		return -1;
	}
	/* a command that run starts must not inherit the connection */
	fcntl(nd->c->fd, F_SETFD, FD_CLOEXEC);
	bound_time(rs, rs->first_try != 0 && !rs->scanning);
	if (log_in(rs, rs->url->user, rs->url->password, "the server") == -1)
		goto fail;
	if (rs->url->db != 0) {
		char db[24];
		const char *av[] = { "SELECT", db };

		snprintf(db, sizeof(db), "%d", rs->url->db);
		if ((r = command_argv(rs, rs->c, 2, av, NULL)) == NULL ||
		    r->type == REDIS_REPLY_ERROR) {
			reply_err(rs, r, "choosing the database");
			if (r != NULL)
				freeReplyObject(r);
			goto fail;
		}
		freeReplyObject(r);
	}
	return 0;
fail:
	node_close(rs, i);
	return -1;
}

/* Make node i's open connection the one replies are read from. */
static void
switch_to(struct rs *rs, int i)
{
	if (rs->cur == i && rs->c == rs->node[i].c)
		return;
	rs->cur = i;
	rs->c = rs->node[i].c;
	if (rs->c != NULL)
		bound_time(rs, rs->first_try != 0 && !rs->scanning);
}

/* Send what is waiting in node i's buffer, so that it is in flight while
 * another node's replies are read. */
static void
flush_node(struct rs *rs, int i)
{
	int done = 0;

	if (rs->node[i].c == NULL)
		return;
	while (!done && redisBufferWrite(rs->node[i].c, &done) == REDIS_OK)
		;
}

/* CRC16-CCITT (XMODEM), as Redis Cluster hashes a key to its slot. */
static unsigned
crc16(const char *p, size_t n)
{
	unsigned crc = 0;
	size_t i;
	int j;

	for (i = 0; i < n; i++) {
		crc ^= (unsigned)(unsigned char)p[i] << 8;
		for (j = 0; j < 8; j++)
			crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff
					   : (crc << 1) & 0xffff;
	}
	return crc;
}

/* The hash slot of a Redis key: of what its first {...} holds, if that is
 * not empty, else of the whole key (the cluster specification's rule). */
unsigned
store_redis_slot(const char *k, size_t n)
{
	const char *open = memchr(k, '{', n), *close;

	if (open != NULL &&
	    (close = memchr(open + 1, '}', n - (size_t)(open + 1 - k))) !=
		NULL &&
	    close > open + 1)
		return crc16(open + 1, (size_t)(close - open - 1)) % SLOTS;
	return crc16(k, n) % SLOTS;
}

/* The time one of n nodes still to ask may take: an even share of what
 * is left of the decision's (or a scan's) --lock-timeout, so that one
 * that hangs leaves time for the others. */
static int64_t
share(const struct rs *rs, int n)
{
	int64_t left = rs->first_try != 0 && !rs->scanning
	    ? rs->deadline - clock_monotonic()
	    : rs->lock_timeout;

	if (n <= 1 || left <= 0)
		return 0;
	left /= n;
	return left > 50000 ? left : 50000;
}

/* Does node m serve a slot (is it a master of the cluster)? */
static int
owns_slots(const struct rs *rs, int m)
{
	int s;

	for (s = 0; s < SLOTS; s++)
		if (rs->slot[s] == m + 1)
			return 1;
	return 0;
}

/*
 * Read the cluster's slot map (CLUSTER SLOTS) from the first node that
 * answers: the nodes it knows, then the URL's.  0, or -1 with the error
 * set.
 */
static int
refresh_slots(struct rs *rs)
{
	redisReply *r = NULL, *e, *m;
	size_t i;
	int n, tries, node, lo, hi, s, start = rs->cur < 0 ? 0 : rs->cur;
	int nnode = rs->nnode;

	for (tries = 0; tries < nnode; tries++) {
		/* the node asked last time first: it answered then */
		n = (start + tries) % nnode;
		rs->slice = share(rs, nnode - tries);
		if (use_node(rs, n) == -1) {
			rs->slice = 0;
			if (!rs->unavailable)
				return -1; /* a refused login: not an outage */
			continue;
		}
		bound_time(rs, rs->first_try != 0 && !rs->scanning);
		{
			const char *av[] = { "CLUSTER", "SLOTS" };

			r = command_argv(rs, rs->c, 2, av, NULL);
		}
		rs->slice = 0;
		if (r != NULL && r->type == REDIS_REPLY_ARRAY)
			break;
		if (r != NULL && r->type == REDIS_REPLY_ERROR &&
		    strstr(r->str, "cluster support disabled") != NULL) {
			rs->unavailable = 0;
			set_err(rs,
			    "is not a Redis Cluster node (cluster support "
			    "disabled); give --db redis://HOST:PORT for one "
			    "server");
			freeReplyObject(r);
			return -1;
		}
		if (r != NULL && r->type == REDIS_REPLY_ERROR &&
		    strstr(r->str, "unknown command") != NULL) {
			rs->unavailable = 0;
			set_err(rs,
			    "does not know CLUSTER SLOTS: is it a Sentinel? "
			    "give --db redis+sentinel://HOST:PORT/MASTER for "
			    "one");
			freeReplyObject(r);
			return -1;
		}
		reply_err(rs, r, "reading the cluster's slots");
		if (!rs->unavailable) {
			if (r != NULL)
				freeReplyObject(r);
			return -1; /* a misconfiguration: say it */
		}
		if (r != NULL)
			freeReplyObject(r);
		r = NULL;
	}
	if (r == NULL)
		return -1; /* the last node's error */
	memset(rs->slot, 0, SLOTS * sizeof(*rs->slot));
	for (i = 0; i < r->elements; i++) {
		e = r->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_INTEGER ||
		    (m = e->element[2])->type != REDIS_REPLY_ARRAY ||
		    m->elements < 2 ||
		    (m->element[0]->type != REDIS_REPLY_STRING &&
			m->element[0]->type != REDIS_REPLY_NIL) ||
		    m->element[1]->type != REDIS_REPLY_INTEGER)
			continue;
		lo = (int)e->element[0]->integer;
		hi = (int)e->element[1]->integer;
		/* no host (NULL: cluster-preferred-endpoint-type
		 * unknown-endpoint), an empty one, or "?": the node that
		 * answered's, at the port given */
		node = m->element[0]->type == REDIS_REPLY_NIL ||
			m->element[0]->len == 0 ||
			strcmp(m->element[0]->str, "?") == 0
		    ? find_node(rs, rs->node[rs->cur].host,
			  strlen(rs->node[rs->cur].host),
			  (int)m->element[1]->integer)
		    : find_node(rs, m->element[0]->str, m->element[0]->len,
			  (int)m->element[1]->integer);
		for (s = lo < 0 ? 0 : lo; s <= hi && s < SLOTS; s++)
			rs->slot[s] = (unsigned short)(node + 1);
	}
	freeReplyObject(r);
	return 0;
}

/* The node a Redis key is on: 0 but in a cluster; -1 with the error set
 * if no node serves its slot. */
static int
key_node(struct rs *rs, const char *rkey, size_t rlen)
{
	unsigned slot;

	if (rs->kind != REDIS_CLUSTER)
		return 0;
	slot = store_redis_slot(rkey, rlen);
	if (rs->slot[slot] == 0 && refresh_slots(rs) == -1)
		return -1;
	if (rs->slot[slot] == 0) {
		set_err(rs,
		    "no node serves hash slot %u; is the cluster whole "
		    "(redis-cli "
		    "cluster info)?",
		    slot);
		rs->unavailable = 1;
		return -1;
	}
	return rs->slot[slot] - 1;
}

static int find_master(struct rs *);

/* What to do when a node cannot be reached: ask Sentinel for the master,
 * or a cluster for its slot map (a failover, maybe), again. */
static int
out_of_reach(const struct rs *rs)
{
	return rs->kind == REDIS_SENTINEL ? GO_MASTER
	    : rs->kind == REDIS_CLUSTER   ? GO_WAIT
					  : 0;
}

/* A pause before trying again after a redirect: random, up to 1 ms
 * doubled with each try, at most 50 ms, within the time left. */
static void
nap(struct rs *rs, int tries)
{
	int64_t cap = 1000 << (tries < 6 ? tries : 6), t;
	int64_t left = rs->redir_until - clock_monotonic();

	if (cap > 50000)
		cap = 50000;
	t = (int64_t)(host_random() % (uint64_t)cap) + 1;
	if (t > left)
		t = left;
	if (t > 0)
		clock_nap(t);
}

/*
 * After a command failed with rs->redirect set: follow it (the slot map
 * mended after a MOVED, a pause for TRYAGAIN or CLUSTERDOWN, the master
 * asked of Sentinel again) and say to try again (the GO_* followed; for
 * GO_ASK, rs->redir_node is where), or -1 when not to: no redirect, or
 * --lock-timeout spent.  *tries counts the calls for one command.
 */
static int
redirected(struct rs *rs, int *tries)
{
	int go = rs->redirect;
	int64_t now = clock_monotonic();
	char t[32], why[300] = "";

	rs->redirect = 0;
	/* the node's own failure (no reply, refused), said with the end */
	if (rs->outage && rs->why_at > 0 && (size_t)rs->why_at < rs->errlen)
		snprintf(why, sizeof(why), "%s", rs->err + rs->why_at);
	rs->outage = 0;
	if (go == 0)
		return -1;
	if (++*tries == 1)
		rs->redir_until = rs->first_try != 0 && !rs->scanning
		    ? rs->deadline
		    : (rs->redir_from != 0 ? rs->redir_from : now) +
			rs->lock_timeout;
	/* a move or two is followed at once, even at --lock-timeout 0 */
	if (now >= rs->redir_until && (go >= GO_WAIT || *tries > 3)) {
		output_human(t, sizeof(t), rs->lock_timeout);
		if (why[0] != '\0')
			set_err(rs,
			    "%s for %s (--lock-timeout); the last one asked: "
			    "%s",
			    go == GO_MASTER
				? "Sentinel named no master that takes writes"
				: rs->kind == REDIS_CLUSTER
				? "no node of the cluster served the key's slot"
				: "the server could not be reached",
			    t, why);
		else
			set_err(rs, "%s for %s (--lock-timeout); try again",
			    go == GO_MASTER
				? "Sentinel named no master that takes writes"
				: rs->kind == REDIS_CLUSTER
				? "the cluster kept moving the key's slot, or "
				  "was down,"
				: "the server kept losing the connection",
			    t);
		rs->unavailable = 1;
		return -1;
	}
	if (go == GO_MOVED) {
		rs->slot[rs->redir_slot] = (unsigned short)(rs->redir_node + 1);
		/* a slot moved: others may have too (a failover, a reshard) */
		if (*tries > 1 && refresh_slots(rs) == -1)
			return -1;
		return go;
	}
	if (go == GO_ASK) {
		if (*tries > 1)
			nap(rs, *tries); /* ASK again: the move may be over */
		return go;
	}
	nap(rs, *tries);
	/* only a cluster has a slot map to read again */
	if (go == GO_WAIT && rs->kind == REDIS_CLUSTER &&
	    refresh_slots(rs) == -1 && !rs->unavailable)
		return -1;
	if (go == GO_MASTER && find_master(rs) == -1 && !rs->unavailable)
		return -1;
	return go;
}

/*
 * Run one command on the node of the Redis key rkey, following the
 * cluster's redirections and a Sentinel failover: its reply, or NULL with
 * the error set.  This is for the policies' hash: a read of it follows an
 * ASK (ASKING first, on the node the slot moves to), so decisions go on
 * while its slot moves; a WATCH waits the move out.
 */
static redisReply *
run_keyed(struct rs *rs, const char *rkey, size_t rlen, const char *what,
    int argc, const char **argv, const size_t *len)
{
	static const char *asking[] = { "ASKING" };
	redisReply *r, *a;
	int n, tries = 0, go, ask = -1;
	/* a read follows an ASK; a WATCH (policy set and delete, whose
	 * writes go where the slot's owner is) waits the move out */
	int reads = strcasecmp(argv[0], "WATCH") != 0;

	/* a scan's command (policy list) has --lock-timeout from here, not
	 * from its first redirect, which may come a whole timeout late */
	rs->redir_from = clock_monotonic();
	for (;;) {
		rs->redirect = 0;
		rs->wkey = rkey; /* a WRONGTYPE is of this key */
		rs->wklen = rlen;
		r = NULL;
		if ((n = ask >= 0 ? ask : key_node(rs, rkey, rlen)) != -1 &&
		    use_node(rs, n) != -1) {
			a = ask >= 0
			    ? run(rs, "asking the node a slot moves to", 1,
				  asking, NULL)
			    : NULL;
			if (ask < 0 || a != NULL)
				r = run(rs, what, argc, argv, len);
			if (a != NULL)
				freeReplyObject(a);
		}
		rs->wkey = NULL;
		if (r != NULL) {
			rs->redir_from = 0;
			return r;
		}
		rs->outage = rs->unavailable;
		if (rs->unavailable && rs->redirect == 0)
			rs->redirect = out_of_reach(rs);
		if ((go = redirected(rs, &tries)) == -1) {
			rs->redir_from = 0;
			return NULL;
		}
		ask = go == GO_ASK && reads ? rs->redir_node : -1;
	}
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

/* add_fields(): only those h has not got; each a key's record */
#define ADD_MISSING 1
#define ADD_RECORDS 2

/* Add the fields of an HGETALL reply (prefixed with tag if not 0). */
static int
add_fields(struct rs *rs, struct khash *h, const redisReply *r, char tag,
    int flags)
{
	char name[2 + LEASE_ID_LEN + 64];
	const char *id;
	size_t i, n, idlen;

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
		if ((flags & ADD_RECORDS) &&
		    field_kind(k->str, k->len, &id, &idlen) == 0) {
			/* a field no throttle writes: the key is not all
			 * ours, and rewriting it whole would drop its expiry
			 * and keep the field for good */
			set_err(rs,
			    "reading a key: the key '%.*s' holds a field "
			    "'%.*s' "
			    "throttle did not write; use another ?prefix= than "
			    "'%s', or remove that key if nothing else needs it",
			    (int)(h->rlen < 200 ? h->rlen : 200), h->rkey,
			    (int)(k->len < 40 ? k->len : 40), k->str,
			    rs->prefix);
			return -1;
		}
		n = 0;
		if (tag != 0)
			name[n++] = tag;
		memcpy(name + n, k->str, k->len);
		n += k->len;
		if ((flags & ADD_MISSING) && has_field(h, name, n))
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

/* A string of 1 to 18 digits, as a number; -1 if it is not one. */
static int64_t
digits(const redisReply *r)
{
	int64_t v = 0;
	size_t i;

	if (r->type != REDIS_REPLY_STRING || r->len == 0 || r->len > 18)
		return -1;
	for (i = 0; i < r->len; i++) {
		if (r->str[i] < '0' || r->str[i] > '9')
			return -1;
		v = v * 10 + (r->str[i] - '0');
	}
	return v;
}

/*
 * A TIME reply as microseconds: 0, or -1 if it is not two strings of
 * digits, seconds and microseconds, from the epoch to the year 10000, the
 * times THROTTLE_NOW takes (a server or proxy answering garbage is not a
 * clock to decide by).
 */
static int
time_reply(const redisReply *r, int64_t *us)
{
	int64_t sec, usec;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    (sec = digits(r->element[0])) < 0 ||
	    (usec = digits(r->element[1])) < 0 || usec >= US_PER_SEC ||
	    sec >= TIME_MAX / US_PER_SEC)
		return -1;
	*us = sec * US_PER_SEC + usec;
	return 0;
}

/* The server's TIME, from its reply (none if it is not a time). */
static void
take_time(struct rs *rs, const redisReply *r)
{
	if (time_reply(r, &rs->time) == 0)
		rs->has_time = 1;
}

/*
 * Nonzero if a hash read at a name of throttle 0.1's limits (tag 'k') or
 * leases ('l') is one 0.1 wrote: each field a limit's place (a digit) or
 * a lease id.  Another deployment's hash may have that name (its prefix
 * this one's plus "k:", its key in braces): that is not this one's to
 * merge, move or delete.
 */
static int
old_hash(const redisReply *r, char tag)
{
	size_t i;

	if (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
		return 1; /* add_fields() says what is wrong */
	for (i = 0; i < r->elements; i += 2) {
		const redisReply *k = r->element[i];

		if (k->type != REDIS_REPLY_STRING)
			return 1;
		if (tag == 'k' &&
		    !(k->len == 1 && k->str[0] >= '0' &&
			k->str[0] < '0' + LIMITS_MAX))
			return 0;
		if (tag == 'l' && !lease_id_ok(k->str, k->len))
			return 0;
	}
	return 1;
}

/*
 * Reply j of a key's read into h: 0 the key's hash, 1.. the keys of
 * throttle 0.1's layout (merged, h->old's bit j - 1 set if it held
 * something).  0, or -1 with the error set.
 */
static int
take_reply(struct rs *rs, struct khash *h, const redisReply *r, int j)
{
	int got;

	if (j == 0)
		return add_fields(rs, h, r, 0, ADD_RECORDS);
	if ((j == 1 || j == 3) && !old_hash(r, old_tags[j - 1]))
		return 0; /* not 0.1's: left as it is */
	if (j == 1 || j == 3)
		got = add_fields(rs, h, r, old_tags[j - 1], ADD_MISSING) == -1
		    ? -1
		    : r->type == REDIS_REPLY_ARRAY && r->elements > 0;
	else
		got = add_string(rs, h, r, old_tags[j - 1]);
	if (got == -1)
		return -1;
	if (got > 0)
		h->old |= 1 << (j - 1);
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
 * command each), the hash WATCHed first if watch, on the key's node (on
 * node at if at >= 0, with ASKING before each if ask); the replies are taken
 * by take_read().  Only the hash is watched: every write of a key
 * rewrites its hash (and deletes its old keys in the same EXEC), so the
 * hash changes whenever the key does, and a WATCH costs the server a
 * search of what the connection watches already (a group of 2,000 keys
 * watched in both layouts spent a second in WATCH).  0, or -1 with the
 * error set and nothing queued.
 */
static int
queue_read(struct rs *rs, struct khash *h, const char *key, size_t keylen,
    unsigned where, int watch, int at, int ask)
{
	const char *argv[2 + 4];
	size_t len[2 + 4];
	char *k[5];
	int i, n = 1;

	memset(h, 0, sizeof(*h));
	h->key = cat3(key, keylen, "", 0, "", 0, &h->keylen);
	h->rkey = hash_key(rs, key, keylen, &h->rlen);
	/* throttle 0.1 never ran on a cluster: no old keys to look for */
	h->where = rs->kind == REDIS_CLUSTER ? where & IN_HASH : where;
	h->watch = watch;
	h->ask = ask;
	h->slot =
	    rs->kind == REDIS_CLUSTER ? store_redis_slot(h->rkey, h->rlen) : 0;
	h->node = at >= 0 ? at : key_node(rs, h->rkey, h->rlen);
	if (h->node == -1 || use_node(rs, h->node) == -1)
		return -1;
	argv[0] = "WATCH";
	len[0] = 5;
	argv[1] = h->rkey;
	len[1] = h->rlen;
	if (watch) {
		if (h->ask)
			redisAppendCommand(rs->c, "ASKING");
		redisAppendCommandArgv(rs->c, 2, argv, len);
	}
	for (i = 0; i < 5; i++) {
		k[i] = NULL;
		if (h->where & (1u << i)) {
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
		if (h->ask)
			redisAppendCommand(rs->c, "ASKING");
		redisAppendCommandArgv(rs->c, 2, argv, len);
		free(k[i]);
	}
	return 0;
}

/* The next reply: 0, or -1 if the connection failed (the error set). */
static int
next_reply(struct rs *rs, redisReply **r, const char *what)
{
	*r = NULL;
	if (get_reply(rs, rs->c, r) == REDIS_OK && *r != NULL)
		return 0;
	reply_err(rs, NULL, what);
	*r = NULL;
	return -1;
}

/* The reply to an ASKING, which says nothing unless it was refused (an
 * ACL without it: NOPERM, a misconfiguration, which *ok set to -1 and the
 * error tell): 0, or -1 as next_reply(). */
static int
skip_asking(struct rs *rs, const struct khash *h, int *ok)
{
	redisReply *r;

	if (!h->ask)
		return 0;
	if (next_reply(rs, &r, "reading a key") == -1)
		return -1;
	if (*ok == 0 && bad_reply(rs, r, "asking the node a slot moves to"))
		*ok = -1;
	freeReplyObject(r);
	return 0;
}

/* bad_reply() of h's read i, naming its key if it is not a hash (or a
 * string) as throttle writes it. */
static int
bad_read(struct rs *rs, const struct khash *h, int i, const redisReply *r)
{
	char *k = NULL;
	size_t n = 0;
	int bad;

	if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "WRONGTYPE", 9) == 0) {
		k = where_key(rs, h, i, &n);
		rs->wkey = k;
		rs->wklen = n;
	}
	bad = bad_reply(rs, r, "reading a key");
	rs->wkey = NULL;
	free(k);
	return bad;
}

/*
 * Take the replies of queue_read() into h, from its node, merging
 * throttle 0.1's keys (h->old set if any held something).  -1 if the
 * connection failed (no more replies will come); otherwise 0, with *ok
 * set to -1 (and the error set) if a reply was bad.
 */
static int
take_read(struct rs *rs, struct khash *h, int *ok)
{
	redisReply *r;
	int i;

	switch_to(rs, h->node);
	if (rs->c == NULL) {
		set_err(rs, "reading a key: the connection was closed");
		return -1;
	}
	if (h->watch) {
		if (skip_asking(rs, h, ok) == -1 ||
		    next_reply(rs, &r, "reading a key") == -1)
			return -1;
		if (*ok == 0 && bad_reply(rs, r, "reading a key"))
			*ok = -1;
		else {
			rs->node[h->node].watched = 1;
			h->epoch = rs->node[h->node].epoch;
		}
		freeReplyObject(r);
	}
	for (i = 0; i < 5; i++) {
		if (!(h->where & (1u << i)))
			continue;
		if (skip_asking(rs, h, ok) == -1 ||
		    next_reply(rs, &r, "reading a key") == -1)
			return -1;
		if (i > 0 && r->type == REDIS_REPLY_ERROR &&
		    strncmp(r->str, "WRONGTYPE", 9) == 0) {
			/* at a name of 0.1's lockout or shedder, a key of
			 * another kind than 0.1 wrote: not 0.1's */
			freeReplyObject(r);
			continue;
		}
		if (*ok == 0 && bad_read(rs, h, i, r))
			*ok = -1;
		else if (*ok == 0)
			*ok = take_reply(rs, h, r, i);
		freeReplyObject(r);
	}
	return 0;
}

/* One try of read_key(), on node ask if ask >= 0. */
static int
read_key_once(struct rs *rs, const char *key, size_t keylen, int watch,
    int decision, struct khash *h, int ask)
{
	redisReply *r;
	int ok = 0;

	rs->redirect = 0;
	if (queue_read(rs, h, key, keylen, IN_ALL, watch, ask, ask >= 0) ==
	    -1) {
		free_hash(h);
		return -1;
	}
	redisAppendCommand(rs->c, "TIME");
	bound_time(rs, decision);
	if (take_read(rs, h, &ok) == -1 ||
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

/*
 * Read key's hash into h, with throttle 0.1's keys merged into it (h->old
 * set if there were any), WATCHing them all first when watch; and the
 * server's TIME after them, into rs->time.  One round trip, and another
 * for each redirection a cluster (or a failover) gives.  0 or -1.
 */
static int
read_key(struct rs *rs, const char *key, size_t keylen, int watch, int decision,
    struct khash *h)
{
	int tries = 0, go, ask = -1;

	while (read_key_once(rs, key, keylen, watch, decision, h, ask) == -1) {
		rs->outage = rs->unavailable;
		if (rs->unavailable && rs->redirect == 0)
			rs->redirect = out_of_reach(rs);
		if ((go = redirected(rs, &tries)) == -1)
			return -1;
		ask = go == GO_ASK ? rs->redir_node : -1;
	}
	return 0;
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

static void drop_names(struct rs *);

/* Forget what this transaction read and queued. */
static void
forget(struct rs *rs)
{
	int i, j;

	drop_names(rs);
	for (i = 0; i < rs->nh; i++)
		free_hash(&rs->h[i]);
	rs->nh = 0;
	for (i = 0; i < rs->nq; i++)
		for (j = 0; j < rs->q[i].argc; j++)
			free(rs->q[i].argv[j]);
	rs->nq = 0;
	rs->qnode = -1;
	rs->qepoch = 0;
	rs->has_time = 0;
}

/* The policies' hash key. */
static char *
policies_key(const struct rs *rs, size_t *len)
{
	return cat3(rs->prefix, strlen(rs->prefix), "policies", 8, "", 0, len);
}

/*
 * WATCH the policies' hash, in a transaction that writes one: its node is
 * where the transaction's policy writes go.  0 or -1.
 */
static int
watch_policies(struct rs *rs, const char *k, size_t klen)
{
	const char *argv[2] = { "WATCH", k };
	size_t len[2] = { 5, klen };
	redisReply *r;

	if ((r = run_keyed(rs, k, klen, "reading a policy", 2, argv, len)) ==
	    NULL)
		return -1;
	freeReplyObject(r);
	rs->node[rs->cur].watched = 1;
	rs->qnode = rs->cur;
	rs->qepoch = rs->node[rs->cur].epoch;
	return 0;
}

/* A policy (REC_POLICY records have the policy's name for key). */
static int
get_policy(struct rs *rs, const char *name, size_t nlen, store_rec_fn fn,
    void *arg)
{
	size_t klen;
	char *k = policies_key(rs, &klen);
	const char *argv[3] = { "HGET", k, name };
	size_t len[3] = { 4, klen, nlen };
	redisReply *r;
	int ret = -1;

	if (rs->write && watch_policies(rs, k, klen) == -1) {
		free(k);
		return -1;
	}
	if ((r = run_keyed(rs, k, klen, "reading a policy", 3, argv, len)) !=
	    NULL) {
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
 * For a decision on key that looks its policy up first: read the key
 * (WATCHed, with its node's TIME) and run the policy query (argv) in the
 * same round trip, on the key's node and the policies' (both in flight at
 * once when they differ).  The query's reply, or NULL with the error set;
 * the key's hash is kept for the decision (rs->carry) unless its read was
 * redirected, when the decision reads it again.
 */
static redisReply *
carry_read(struct rs *rs, const char *key, size_t keylen, const char *k,
    size_t klen, int argc, const char **argv, const size_t *len)
{
	struct khash *h;
	redisReply *r = NULL, *t;
	char *rkey;
	size_t rlen;
	int ok = 0, pn = -1, kn, fail = 0;

	if (rs->caph == 0) {
		rs->caph = 4;
		rs->h = xrealloc(rs->h, (size_t)rs->caph * sizeof(*rs->h));
	}
	h = &rs->h[0];
	rs->redirect = 0;
	/* both nodes found, and connected to, before anything is queued
	 * (finding one may read the slot map) */
	rkey = hash_key(rs, key, keylen, &rlen);
	kn = key_node(rs, rkey, rlen);
	free(rkey);
	if (kn == -1 || (pn = key_node(rs, k, klen)) == -1 ||
	    use_node(rs, pn) == -1 || use_node(rs, kn) == -1 ||
	    rs->node[pn].c == NULL)
		return run_keyed(rs, k, klen, "reading a policy", argc, argv,
		    len);
	if (queue_read(rs, h, key, keylen, IN_ALL, 1, kn, 0) == -1) {
		free_hash(h);
		return run_keyed(rs, k, klen, "reading a policy", argc, argv,
		    len);
	}
	redisAppendCommand(rs->c, "TIME");
	if (pn != h->node) {
		redisAppendCommandArgv(rs->node[pn].c, argc, argv, len);
		flush_node(rs, pn);
	} else
		redisAppendCommandArgv(rs->c, argc, argv, len);
	bound_time(rs, 1);
	if (take_read(rs, h, &ok) == -1 ||
	    next_reply(rs, &t, "reading a key") == -1)
		fail = 1;
	else {
		if (ok == 0 && bad_reply(rs, t, "reading a key"))
			ok = -1;
		else if (ok == 0)
			take_time(rs, t);
		freeReplyObject(t);
	}
	if (pn != h->node && fail && rs->node[pn].c != NULL) {
		/* the query's reply is still to come: read it, or drop it */
		switch_to(rs, pn);
		if (get_reply(rs, rs->c, &t) == REDIS_OK && t != NULL)
			freeReplyObject(t);
		else
			node_close(rs, pn);
	}
	if (fail) {
		free_hash(h);
		return NULL;
	}
	if (ok == -1 && rs->redirect == 0) {
		/* the query's reply is read and dropped: the key's error
		 * is the one to tell */
		switch_to(rs, pn);
		if (get_reply(rs, rs->c, &t) == REDIS_OK && t != NULL)
			freeReplyObject(t);
		free_hash(h);
		return NULL;
	}
	if (ok == -1)
		free_hash(h); /* moved: the decision reads it where it is */
	else {
		rs->nh = 1;
		rs->carry = 1;
	}
	switch_to(rs, pn);
	if (next_reply(rs, &r, "reading a policy") == -1)
		return NULL;
	if (r->type == REDIS_REPLY_ERROR) {
		/* the policies' slot moved, or the cluster paused: again */
		freeReplyObject(r);
		return run_keyed(rs, k, klen, "reading a policy", argc, argv,
		    len);
	}
	return r;
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

	if (rs->write && watch_policies(rs, k, klen) == -1)
		goto out;
	argv[0] = "HMGET";
	len[0] = 5;
	argv[1] = k;
	len[1] = klen;
	for (i = 0; i < n; i++) {
		argv[i + 2] = names[i];
		len[i + 2] = lens[i];
	}
	/* a decision on names[0] follows: read its key (WATCHed) and the
	 * server's TIME in this same round trip */
	r = !rs->write && !rs->group && rs->nh == 0
	    ? carry_read(rs, names[0], lens[0], k, klen, n + 2, argv, len)
	    : run_keyed(rs, k, klen, "reading a policy", n + 2, argv, len);
	if (r == NULL)
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
	if (ret == -1 && rs->carry) {
		rs->carry = 0; /* a failed lookup's read is not kept */
		forget(rs);
	}
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
		if (rs->qnode < 0 &&
		    (rs->qnode = key_node(rs, k, klen)) == -1) {
			free(k);
			return -1;
		}
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
		const char *argv[3] = { "HEXISTS", k, key };
		size_t len[3] = { 7, klen, keylen };
		redisReply *r;

		found = -1;
		if (watch_policies(rs, k, klen) == 0 &&
		    (r = run_keyed(rs, k, klen, "reading a policy", 3, argv,
			 len)) != NULL) {
			found =
			    r->type == REDIS_REPLY_INTEGER && r->integer == 1;
			freeReplyObject(r);
			argv[0] = "HDEL";
			len[0] = 4;
			if (found) {
				queue(rs, 3, argv, len);
				rs->req_writes++;
			}
		}
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
	for (i = 0; i < 4; i++) {
		if (!(h->old & (1 << i)))
			continue; /* none there, or not 0.1's */
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

/* Drop the WATCHes of every node that has some. */
static void
unwatch(struct rs *rs)
{
	redisReply *r;
	int i;

	for (i = 0; i < rs->nnode; i++) {
		if (!rs->node[i].watched)
			continue;
		rs->node[i].watched = 0;
		if (rs->node[i].c == NULL || rs->node[i].c->err)
			continue;
		switch_to(rs, i);
		if ((r = command_argv(rs, rs->c, 1,
			 (const char *[]){ "UNWATCH" }, NULL)) != NULL)
			freeReplyObject(r);
	}
}

static int
any_watched(const struct rs *rs)
{
	int i;

	for (i = 0; i < rs->nnode; i++)
		if (rs->node[i].watched)
			return 1;
	return 0;
}

#define SPANS 2 /* exec_writes(): the writes are on more than one node */

/*
 * Send the writes: MULTI, each hash rewritten, each policy write, EXEC,
 * to the node they are all on (with ASKING first if they were read there
 * after an ASK).  0 done, 1 the EXEC was refused (a watched key changed),
 * SPANS if they are on more than one node (nothing sent), -1 error.
 */
static int
exec_writes(struct rs *rs, const struct khash *h, int nh, int64_t now)
{
	redisReply *r = NULL;
	int i, n = 0, ret = 0, conflict = 0, node = -1, ask = 0, lost = 0;
	unsigned slot = 0;

	/* a cluster runs a MULTI only on keys of one hash slot */
	for (i = 0; i < nh; i++) {
		if (!h[i].touched)
			continue;
		if (node != -1 && (h[i].node != node || h[i].slot != slot))
			return SPANS;
		node = h[i].node;
		slot = h[i].slot;
		ask |= h[i].ask;
		/* read on a connection since lost, WATCH and all: a write
		 * now could undo what another host did meanwhile */
		if (h[i].watch && h[i].epoch != rs->node[node].epoch)
			lost = 1;
	}
	if (rs->nq > 0) {
		if (node != -1 &&
		    (rs->qnode != node || rs->kind == REDIS_CLUSTER))
			return SPANS;
		node = rs->qnode;
		if (rs->qepoch != 0 && rs->qepoch != rs->node[node].epoch)
			lost = 1;
	}
	rs->redirect = 0;
	if (node < 0)
		node = 0;
	if (lost || rs->node[node].c == NULL || rs->node[node].c->err) {
		/* what this transaction read was WATCHed on a connection
		 * that is gone (or blind policy writes, whose node is not
		 * connected yet): read again, unless the node is out of
		 * reach */
		if (!lost && nh == 0 && use_node(rs, node) == 0)
			goto send;
		rs->cur = node;
		set_err(rs, "saving: the connection was lost; try again");
		rs->unavailable = 1;
		/* nothing was sent: again (Sentinel: ask for the master) */
		rs->redirect = rs->kind == REDIS_SENTINEL ? GO_MASTER : GO_WAIT;
		return -1;
	}
	switch_to(rs, node);
send:
	if (ask) {
		redisAppendCommand(rs->c, "ASKING");
		n++;
	}
	redisAppendCommand(rs->c, "MULTI");
	for (i = 0; i < nh; i++)
		if (h[i].touched)
			n += append_hash(rs, &h[i], now);
	for (i = 0; i < rs->nq; i++)
		redisAppendCommandArgv(rs->c, rs->q[i].argc,
		    (const char **)rs->q[i].argv, rs->q[i].len);
	n += rs->nq;
	redisAppendCommand(rs->c, "EXEC");
	if (rs->replicas > 0) {
		/* Sentinel: a write no replica has is lost if the master
		 * fails over now, and its decision with it; wait (in the
		 * same round trip) for one replica to have it */
		int64_t left = rs->deadline - clock_monotonic();

		if (rs->scanning || left > rs->timeout)
			left = rs->timeout;
		if (rs->lock_timeout > 0 && left > rs->lock_timeout)
			left = rs->lock_timeout;
		/* half of what is left: the reply must come before the
		 * socket's own timeout, which has the rest, says it is late */
		left /= 2;
		redisAppendCommand(rs->c, "WAIT 1 %lld",
		    (long long)(left > 1000 ? left / 1000 : 1));
	}
	bound_time(rs, !rs->scanning);
	for (i = 0; i < n + 2; i++) {
		if (get_reply(rs, rs->c, &r) != REDIS_OK || r == NULL) {
			reply_err(rs, NULL, "saving");
			rs->redirect = 0; /* it may have been saved: no again */
			rs->unsure = 1;
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

				for (k = 0; k < r->elements && ret == 0; k++) {
					/* the policies' writes come last */
					size_t q = k + (size_t)rs->nq;

					if (q >= r->elements) {
						q -= r->elements;
						rs->wkey = rs->q[q].argv[1];
						rs->wklen = rs->q[q].len[1];
					}
					if (bad_reply(rs, r->element[k],
						"saving"))
						ret = -1;
					rs->wkey = NULL;
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
	rs->node[rs->cur].watched = 0; /* EXEC unwatches */
	if (rs->replicas > 0) {
		if (get_reply(rs, rs->c, &r) != REDIS_OK || r == NULL) {
			reply_err(rs, NULL, "saving");
			rs->redirect = 0;
			return -1;
		}
		if (ret == 0 && !conflict &&
		    (r->type != REDIS_REPLY_INTEGER || r->integer < 1)) {
			/* kept on the master alone: told as not kept, so a
			 * failover cannot undo what was allowed */
			if (r->type == REDIS_REPLY_ERROR)
				reply_err(rs, r, "waiting for a replica");
			else {
				set_err(rs,
				    "saving: no replica confirmed the write "
				    "in time, so a failover could lose it: "
				    "not told as decided (the master may "
				    "keep it); is a replica down, or a "
				    "failover under way?");
				rs->unavailable = 1;
			}
			rs->redirect = 0;
			ret = -1;
		}
		freeReplyObject(r);
	}
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
		clock_nap(nap);
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
	rs->redirs = 0;
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
	if (r == SPANS || (r == -1 && rs->redirect != 0)) {
		/* a cluster moved a slot since the keys were read (or the
		 * group's keys are on two nodes), or Sentinel's master
		 * changed: nothing was saved; read them again where they
		 * are now */
		unwatch(rs);
		if (r == SPANS) {
			rs->redirect = GO_WAIT;
			/* one slot's keys split between two nodes (a slot
			 * being moved, some keys there already): the group
			 * again, with its first request alone, which is on
			 * one node; the next group takes the rest */
			rs->narrow = rs->kind == REDIS_CLUSTER;
		}
		/* counted over the decision's tries, so that a slot that
		 * keeps moving is given up on at --lock-timeout */
		rs->redir_until = rs->deadline;
		if (rs->redirs == 0)
			rs->redirs = 1;
		if (redirected(rs, &rs->redirs) == -1) {
			done(rs);
			return -1;
		}
		return STORE_RETRY;
	}
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
	rs->unsure = 0;
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
/* The last commit's EXEC was sent, and its reply lost: it may be kept. */
static int
rs_unsure(void *p)
{
	return ((struct rs *)p)->unsure;
}

static int
rs_group_begin(void *p, int write)
{
	struct rs *rs = p;

	(void)write; /* a group reads what it decides on, WATCHed, either way */
	group_unstall(rs);
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
	group_unstall(rs);
	if (!commit || broken) {
		rs_rollback(rs);
		return broken ? -1 : 0;
	}
	return rs_commit(rs);
}

/*
 * Read, in one round trip, the keys of a group's requests that it has not
 * read yet (WATCHed, with the server's TIME): each request then decides
 * without a round trip of its own.  A group's writes go in one MULTI,
 * which a cluster runs only on the keys of one hash slot: there it takes
 * the keys from the first up to one in another slot than the group's.
 * The number taken (at least 1 of n > 0).
 * A read that fails leaves each request to read its own key.
 */
static int
rs_prefetch(void *p, char *const *keys, const size_t *lens, int n)
{
	struct rs *rs = p;
	redisReply *r;
	char *rkey;
	size_t rlen;
	int i, j, first = rs->nh, ok = 0, slot, ks, kn, dead = 0;

	if (rs->kind == REDIS_CLUSTER) {
		if (rs->narrow && n > 1)
			n = 1; /* see rs_commit() */
		rs->narrow = 0;
		/* a MULTI takes keys of one slot: so does a group */
		slot = rs->nh > 0 ? (int)rs->h[0].slot : -1;
		for (i = 0; i < n; i++) {
			rkey = hash_key(rs, keys[i], lens[i], &rlen);
			ks = (int)store_redis_slot(rkey, rlen);
			kn = key_node(rs, rkey, rlen);
			free(rkey);
			if (kn == -1 || (slot != -1 && ks != slot))
				break;
			slot = ks;
		}
		if (i == 0)
			return n > 0 ? 1
				     : 0; /* its own read tells what failed */
		n = i;
	}
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
		if (queue_read(rs, &rs->h[rs->nh++], keys[i], lens[i], IN_ALL,
			1, -1, 0) == -1) {
			/* nothing of it was queued */
			free_hash(&rs->h[--rs->nh]);
			break;
		}
	}
	if (rs->nh == first)
		return n;
	switch_to(rs, rs->h[first].node);
	redisAppendCommand(rs->c, "TIME");
	bound_time(rs, 1);
	/* every reply is read, even after a bad one: the connection must
	 * be left with none pending */
	for (i = first; i < rs->nh && dead == 0; i++)
		dead = take_read(rs, &rs->h[i], &ok);
	if (dead == 0 && next_reply(rs, &r, "reading a key") == 0) {
		if (ok == 0 && bad_reply(rs, r, "reading a key"))
			ok = -1;
		else if (ok == 0)
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
	return n;
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
	int n, i;

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
	/* the clock of the node the transaction writes to; before it has
	 * read a key (gc, inspect), a cluster's first master that answers */
	n = rs->nh > 0 ? rs->h[0].node : rs->qnode >= 0 ? rs->qnode : -1;
	for (i = 0, r = NULL; r == NULL && i < (n >= 0 ? 1 : rs->nnode); i++) {
		int m =
		    n >= 0 ? n : ((rs->cur < 0 ? 0 : rs->cur) + i) % rs->nnode;

		if (n < 0 && rs->kind == REDIS_CLUSTER && !owns_slots(rs, m))
			continue;
		rs->slice = n >= 0 ? 0 : share(rs, rs->nnode - i);
		if (use_node(rs, m) == 0)
			r = run(rs, "reading the server's clock", 1, argv, len);
		rs->slice = 0;
		if (r == NULL && !rs->unavailable)
			return -1;
	}
	if (r == NULL) {
		if (rs->err[0] == '\0')
			set_err(rs,
			    "reading the server's clock: no node answered");
		return -1;
	}
	if (time_reply(r, now) == -1) {
		reply_err(rs, NULL,
		    "reading the server's clock: TIME did not answer seconds "
		    "and microseconds");
		freeReplyObject(r);
		return -1;
	}
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
 * What a Redis key under the prefix (s, n bytes past it) holds: IN_HASH
 * for {KEY}, IN_OLD(i) for throttle 0.1's T:KEY, 0 for anything else (the
 * policies); *k and *kn the throttle key.
 */
static unsigned
classify(const char *s, size_t n, const char **k, size_t *kn)
{
	const char *t;

	if (n >= 3 && s[0] == '{' && s[n - 1] == '}') {
		*k = s + 1;
		*kn = n - 2;
		return IN_HASH;
	}
	if (n >= 3 && s[1] == ':' && s[0] != '\0' &&
	    (t = strchr(old_tags, s[0])) != NULL) {
		*k = s + 2;
		*kn = n - 2;
		return IN_OLD(t - old_tags);
	}
	return 0;
}

/*
 * Add to ns the throttle keys of the Redis keys under the prefix, with
 * where each was found: one SCAN over them all (P*, or P{* on a cluster,
 * which never had the old layout), each name sorted out here, so the
 * server walks its keys once.  SCAN, so it never blocks the server.
 * 0 or -1.
 */
static int
scan_keys(struct rs *rs, struct names *ns)
{
	char cursor[32] = "0", pattern[PREFIX_MAX * 2 + 8];
	const char *argv[6] = { "SCAN", cursor, "MATCH", pattern, "COUNT",
		"1000" };
	size_t len[6], i, plen = strlen(rs->prefix), j, n = 0, kn;
	const char *k;
	unsigned where;
	redisReply *r;

	/* the prefix literally: escape glob characters */
	for (j = 0; j < plen; j++) {
		if (strchr("*?[]\\", rs->prefix[j]) != NULL)
			pattern[n++] = '\\';
		pattern[n++] = rs->prefix[j];
	}
	snprintf(pattern + n, sizeof(pattern) - n, "%s",
	    rs->kind == REDIS_CLUSTER ? "\\{*" : "*");
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

			if (e->type != REDIS_REPLY_STRING || e->len <= plen)
				continue;
			where = classify(e->str + plen, e->len - plen, &k, &kn);
			if (where != 0 && kn > 0 && kn <= KEY_MAX)
				add_name(ns, k, kn, where);
		}
		freeReplyObject(r);
	} while (strcmp(cursor, "0") != 0);
	return 0;
}

/*
 * redis:// names one server: one that is a cluster node would show a
 * scan a third of the keys, and take a policy on the wrong node, without
 * a MOVED to say so.  Asked (INFO cluster) by what walks many keys or the
 * policies, once.  0, or -1 with the error set.
 */
static int
not_a_cluster(struct rs *rs)
{
	redisReply *r;
	int bad;

	if (rs->kind != REDIS_ONE || rs->cluster_checked)
		return 0;
	if (use_node(rs, 0) == -1 ||
	    (r = run(rs, "asking the server", 2,
		 (const char *[]){ "INFO", "cluster" },
		 (const size_t[]){ 4, 7 })) == NULL)
		return -1;
	bad = r->type == REDIS_REPLY_STRING &&
	    strstr(r->str, "cluster_enabled:1") != NULL;
	freeReplyObject(r);
	if (bad) {
		rs->unavailable = 0;
		set_err(rs,
		    "the server is a Redis Cluster node; give --db "
		    "redis+cluster://HOST:PORT to use the cluster");
		return -1;
	}
	rs->cluster_checked = 1;
	return 0;
}

/* Forget the keys this transaction listed. */
static void
drop_names(struct rs *rs)
{
	if (rs->names == NULL)
		return;
	free_names(rs->names);
	free(rs->names);
	rs->names = NULL;
}

/*
 * Every throttle key under the prefix, in either layout (on every master
 * of a cluster): sorted, once; listed once a transaction (inspect walks
 * the keys for each kind of record), into *out.  0 or -1.
 */
static int
all_keys(struct rs *rs, struct names **out)
{
	struct names *ns;
	size_t i, j;
	int m;

	if ((*out = rs->names) != NULL)
		return 0;
	ns = xcalloc(1, sizeof(*ns));
	if (rs->kind == REDIS_CLUSTER) {
		/* the masters of today's map, each once */
		if (refresh_slots(rs) == -1)
			goto fail;
		for (m = 0; m < rs->nnode; m++) {
			if (!owns_slots(rs, m))
				continue;
			if (use_node(rs, m) == -1 || scan_keys(rs, ns) == -1)
				goto fail;
		}
	} else if (not_a_cluster(rs) == -1 || use_node(rs, 0) == -1 ||
	    scan_keys(rs, ns) == -1)
		goto fail;
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
	*out = rs->names = ns;
	return 0;
fail:
	free_names(ns);
	free(ns);
	return -1;
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
	if (not_a_cluster(rs) == -1) {
		free(k);
		return -1;
	}
	r = run_keyed(rs, k, klen, "listing policies", 2, argv, len);
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

/* Close every connection: replies may be pending on them. */
static void
close_all(struct rs *rs)
{
	int i;

	for (i = 0; i < rs->nnode; i++)
		node_close(rs, i);
}

/*
 * Read the hashes of the n names of v, each from where it was found, into
 * h[0..n), in one round trip (to each node that has some; WATCHed if
 * watch); a key a cluster redirects is read again alone, where it is.
 * 0, or -1 with every h freed.
 */
static int
read_names(struct rs *rs, const struct name *v, size_t n, int watch,
    struct khash *h)
{
	char *again = xcalloc(n + 1, 1);
	size_t i, q;
	int ok, bad = 0, j;

	int *at = xcalloc(n + 1, sizeof(*at));
	char *rkey;
	size_t rlen;

	/* every node first: finding one may read the slot map, which must
	 * not happen on a connection with replies still to come */
	for (q = 0; q < n && !bad; q++) {
		rkey = hash_key(rs, v[q].s, v[q].n, &rlen);
		if ((at[q] = key_node(rs, rkey, rlen)) == -1 ||
		    use_node(rs, at[q]) == -1)
			bad = 1;
		free(rkey);
	}
	if (bad) {
		free(at);
		free(again);
		return -1;
	}
	for (q = 0; q < n; q++)
		if (queue_read(rs, &h[q], v[q].s, v[q].n, v[q].where, watch,
			at[q], 0) == -1) {
			free_hash(&h[q]);
			bad = 1;
			break;
		}
	for (j = 0; j < rs->nnode && !bad; j++)
		flush_node(rs, j);
	for (i = 0; i < q && bad < 2; i++) {
		ok = 0;
		rs->redirect = 0;
		if (take_read(rs, &h[i], &ok) == -1)
			bad = 2; /* no more replies on that connection */
		else if (ok == -1 && rs->redirect != 0)
			again[i] = 1;
		else if (ok == -1)
			bad = 1; /* the rest are read all the same */
	}
	if (bad == 2 || (bad && q < n))
		close_all(rs); /* replies may be left on them */
	for (i = 0; i < q && !bad; i++)
		if (again[i]) {
			free_hash(&h[i]);
			if (read_key(rs, v[i].s, v[i].n, watch, 0, &h[i]) == -1)
				bad = 1;
		}
	if (bad)
		for (i = 0; i < n; i++)
			free_hash(&h[i]);
	free(again);
	free(at);
	return bad ? -1 : 0;
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
	struct names *ns;
	struct khash *h;
	size_t i, j, m;
	int ret = 0;

	if (mask & REC_MASK(REC_POLICY))
		return scan_policies(rs, fn, arg);
	if (all_keys(rs, &ns) == -1)
		return -1;
	h = xcalloc(BATCH, sizeof(*h));
	for (i = 0; i < ns->n && ret == 0; i += m) {
		m = ns->n - i < BATCH ? ns->n - i : BATCH;
		if (read_names(rs, ns->v + i, m, 0, h) == -1) {
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
	int j, kind, n = 0, limits = 0;

	for (j = h->n - 1; j >= 0; j--) {
		kind = field_kind(h->f[j].name, h->f[j].nlen, &id, &idlen);
		if (kind != 0 && (mask & REC_MASK(kind)) &&
		    record_expiry(kind, h->f[j].val, h->f[j].vlen) <= now) {
			hash_del(h, j);
			/* a key's limits are one key at rest, however many */
			if (kind != REC_LIMIT || limits++ == 0)
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
		if (r == -1 && rs->redirect != 0) {
			/* the slot moved, or the master changed: again */
			int t = 1;

			rs->redir_until = clock_monotonic() + rs->lock_timeout;
			if (redirected(rs, &t) == -1)
				return -1;
			continue;
		}
		if (r != 1)
			return r;
	}
	return 0;
}

/*
 * gc of the n keys of v that need it, all in one compare-and-set: read
 * again WATCHed in one round trip, their ended records dropped, and every
 * write in one MULTI.  Not on a cluster, whose MULTI holds one hash slot,
 * and not when a key changed meanwhile: then each key has a compare-and-
 * set of its own, as tidy_key() does.  0 or -1.
 */
static int
tidy_keys(struct rs *rs, struct name *v, size_t n, unsigned mask, int64_t now,
    int64_t *counts)
{
	int64_t dropped[REC_KINDS];
	struct khash *h;
	size_t i;
	int j, r = 1;

	if (rs->kind != REDIS_CLUSTER && n > 1) {
		memset(dropped, 0, sizeof(dropped));
		h = xcalloc(n, sizeof(*h));
		for (i = 0; i < n; i++)
			v[i].where = IN_ALL;
		if (read_names(rs, v, n, 1, h) == -1) {
			free(h);
			if (!rs->unavailable)
				return -1;
			/* the server went away (a failover?): one by one,
			 * each read following it as a decision's does */
			unwatch(rs);
		} else {
			for (i = 0; i < n; i++)
				h[i].touched =
				    drop_ended(&h[i], mask, now, dropped) > 0 ||
				    h[i].old;
			r = exec_writes(rs, h, (int)n, now);
			for (i = 0; i < n; i++)
				free_hash(&h[i]);
			free(h);
			if (r == 0)
				for (j = 0; j < REC_KINDS; j++)
					counts[j] += dropped[j];
			else if (r == -1 && rs->redirect == 0)
				return -1;
			else /* a lost race, or a failover: one by one */
				unwatch(rs);
		}
	}
	for (i = 0; i < n && r != 0; i++)
		if (tidy_key(rs, &v[i], mask, now, counts) == -1)
			return -1;
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
	struct names *ns;
	struct khash *h;
	struct name *todo;
	int64_t dropped[REC_KINDS];
	size_t i, j, m, t;
	int r = 0;

	if (limit > 0)
		return 0;
	if (any_watched(rs) || rs->nh > 0 || rs->nq > 0) {
		set_err(rs,
		    "internal error: gc's tidying inside a transaction");
		return -1;
	}
	if (all_keys(rs, &ns) == -1)
		return -1;
	h = xcalloc(BATCH, sizeof(*h));
	todo = xcalloc(BATCH, sizeof(*todo));
	memset(dropped, 0, sizeof(dropped)); /* only whether any is */
	for (i = 0; i < ns->n && r != -1; i += m) {
		m = ns->n - i < BATCH ? ns->n - i : BATCH;
		if ((r = read_names(rs, ns->v + i, m, 0, h)) == -1)
			break;
		for (j = 0, t = 0; j < m; j++) {
			/* a key with nothing to do is left alone */
			if (h[j].old ||
			    drop_ended(&h[j], mask, now, dropped) > 0)
				todo[t++] = ns->v[i + j];
			free_hash(&h[j]);
		}
		if (t > 0)
			r = tidy_keys(rs, todo, t, mask, now, counts);
	}
	free(todo);
	free(h);
	rs->has_time = 0;
	return r == -1 ? -1 : 0;
}

/* Whether n bytes of s hold a % not followed by two hex digits. */
static int
bad_escape(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (s[i] == '%' &&
		    (i + 2 >= n || !isxdigit((unsigned char)s[i + 1]) ||
			!isxdigit((unsigned char)s[i + 2])))
			return 1;
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

static int
rs_unavailable(void *p)
{
	return ((struct rs *)p)->unavailable;
}

/*
 * Ask the sentinels, in turn, where the master named in the URL is; make
 * it node 0 and check with ROLE that it is a master now.  0, or -1 with
 * the error set (unavailable if it may answer later).
 */
static int
find_master(struct rs *rs)
{
	const struct redis_url *u = rs->url;
	redisContext *save_c = rs->c;
	redisReply *r, *w;
	char host[256];
	int i, port = 0, save_cur = rs->cur, found = 0, unknown = 0;
	int misconf = 0, port_asked = 0;

	rs->sentinels_down = 1;
	for (i = 0; i < u->nseed && !found; i++) {
		struct timeval tv;
		redisContext *c;
		char why[200];
		int how = 0;

		/* a sentinel that hangs leaves the others their share */
		rs->slice = share(rs, u->nseed - i);
		tv = connect_time(rs);
		c = connect_tcp(u->seed_host[i], u->seed_port[i], tv, &how, why,
		    sizeof(why));
		if (c == NULL) {
			char who[300];

			if (why[0] == '\0')
				continue;
			rs->cur = -1; /* messages name the URL, not a master */
			snprintf(who, sizeof(who), "Sentinel %s:%d",
			    u->seed_host[i], u->seed_port[i]);
			lookup_err(rs, who, u->seed_host[i], how, why);
			continue;
		}
		rs->c = c;
		rs->cur = -1; /* messages name the URL, not a master */
		if (c->err) {
			set_err(rs,
			    "cannot connect to Sentinel %s:%d: %s (is it up "
			    "and reachable?)",
			    u->seed_host[i], u->seed_port[i], c->errstr);
			rs->unavailable = 1;
			if (rs->tmo_c == c)
				rs->tmo_c = NULL;
			redisFree(c);
			continue;
		}
		rs->sentinels_down = 0;
		bound_time(rs, rs->first_try != 0 && !rs->scanning);
		if (log_in(rs, u->sentinel_user, u->sentinel_password,
			"Sentinel") == -1) {
			if (rs->tmo_c == c)
				rs->tmo_c = NULL;
			redisFree(c);
			if (rs->unavailable)
				continue;
			misconf = 1; /* a refused login: say so */
			break;
		}
		{
			const char *av[] = { "SENTINEL",
				"get-master-addr-by-name", u->master };

			r = command_argv(rs, c, 3, av, NULL);
		}
		if (r != NULL && r->type == REDIS_REPLY_ARRAY &&
		    r->elements == 2 &&
		    r->element[0]->type == REDIS_REPLY_STRING &&
		    r->element[1]->type == REDIS_REPLY_STRING &&
		    r->element[0]->len < sizeof(host)) {
			memcpy(host, r->element[0]->str,
			    r->element[0]->len + 1);
			port = (int)strtol(r->element[1]->str, NULL, 10);
			found = port > 0 && port <= 65535;
		} else if (r != NULL && r->type == REDIS_REPLY_NIL)
			unknown = port_asked = u->seed_port[i];
		else if (r != NULL && r->type == REDIS_REPLY_ERROR &&
		    strstr(r->str, "unknown command") != NULL) {
			set_err(rs,
			    "%s:%d does not know SENTINEL: it is no Sentinel; "
			    "give --db redis://HOST:PORT for one server, or "
			    "redis+cluster:// for a cluster node",
			    u->seed_host[i], u->seed_port[i]);
			rs->unavailable = 0;
			misconf = 1;
		} else {
			reply_err(rs, r, "asking Sentinel for the master");
			misconf = !rs->unavailable;
		}
		if (r != NULL)
			freeReplyObject(r);
		if (rs->tmo_c == c)
			rs->tmo_c = NULL;
		redisFree(c);
		if (misconf)
			break;
	}
	rs->slice = 0;
	rs->c = save_c;
	rs->cur = save_cur;
	if (misconf) {
		rs->unavailable = 0;
		return -1;
	}
	if (!found && unknown) {
		rs->cur = -1;
		set_err(rs,
		    "Sentinel knows no master named '%s'; check the name "
		    "(redis-cli -p %d sentinel masters)",
		    u->master, port_asked);
		rs->unavailable = 0;
		return -1;
	}
	if (!found)
		return -1;
	if (rs->nnode == 0)
		find_node(rs, host, strlen(host), port);
	else if (strcmp(rs->node[0].host, host) != 0 ||
	    rs->node[0].port != port) {
		node_close(rs, 0);
		free(rs->node[0].host);
		rs->node[0].host = xstrdup(host);
		rs->node[0].port = port;
	}
	if (use_node(rs, 0) == -1)
		return -1;
	/* and, in the same round trip, that WAIT (which every write ends
	 * with) is allowed: refused only after a write, it would leave that
	 * write kept but told as failed (WAIT 0 0 answers at once) */
	redisAppendCommand(rs->c, "ROLE");
	redisAppendCommand(rs->c, "WAIT 0 0");
	if (next_reply(rs, &r, "checking the master's role") == -1)
		return -1;
	if (next_reply(rs, &w, "checking the master's role") == -1) {
		freeReplyObject(r);
		return -1;
	}
	if (w->type == REDIS_REPLY_ERROR && r->type == REDIS_REPLY_ARRAY &&
	    r->elements >= 1 && r->element[0]->type == REDIS_REPLY_STRING &&
	    strcmp(r->element[0]->str, "master") == 0) {
		/* (a replica refuses WAIT too: that is the role's matter) */
		reply_err(rs, w, "checking that WAIT is allowed");
		freeReplyObject(w);
		freeReplyObject(r);
		node_close(rs, 0);
		return -1;
	}
	freeReplyObject(w);
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    strcmp(r->element[0]->str, "master") != 0) {
		if (r->type == REDIS_REPLY_ERROR)
			reply_err(rs, r, "checking the master's role");
		else {
			set_err(rs,
			    "Sentinel named it the master, but it is not one "
			    "(yet); a failover may be under way");
			rs->redirect = GO_MASTER;
			rs->unavailable = 1;
		}
		freeReplyObject(r);
		node_close(rs, 0);
		return -1;
	}
	freeReplyObject(r);
	return 0;
}

static void rs_close(void *);

static void *
rs_open(const char *spec, int64_t lock_timeout, int flags, char *err,
    size_t errlen, int *unavailable)
{
	struct rs *rs;
	struct redis_url *u = xcalloc(1, sizeof(*u));
	const char *why;
	int i, tries = 0, ok;

	(void)flags; /* reading never writes on a server either */
	(void)why;
	if (store_redis_check(spec, err, errlen) == -1 ||
	    store_redis_parse(spec, u, &why) == -1) {
		free(u);
		return NULL;
	}
	rs = xcalloc(1, sizeof(*rs));
	rs->url = u;
	rs->kind = u->kind;
	rs->cur = -1;
	rs->qnode = -1;
	rs->err = err;
	rs->errlen = errlen;
	rs->lock_timeout = lock_timeout;
	snprintf(rs->where, sizeof(rs->where), "%s", u->where);
	snprintf(rs->prefix, sizeof(rs->prefix), "%s", u->prefix);
	/* connecting, too, takes no longer than --lock-timeout: connect,
	 * AUTH and SELECT count against the first decision's */
	rs->first_try = clock_monotonic();
	rs->deadline = rs->first_try + lock_timeout;
	rs->timeout = u->timeout;
	if (rs->kind == REDIS_ONE) {
		if (u->socket[0] != '\0')
			find_node(rs, u->socket, strlen(u->socket), 0);
		else
			find_node(rs, u->host, strlen(u->host), u->port);
		ok = use_node(rs, 0);
	} else if (rs->kind == REDIS_CLUSTER) {
		rs->slot = xcalloc(SLOTS, sizeof(*rs->slot));
		for (i = 0; i < u->nseed; i++)
			find_node(rs, u->seed_host[i], strlen(u->seed_host[i]),
			    u->seed_port[i]);
		rs->cur = 0;
		ok = refresh_slots(rs);
	} else {
		/* a failover promotes a replica: a write only the old
		 * master has is lost with it (even one a master with no
		 * replica left took, in the moment Sentinel still named
		 * it), so every write waits for one replica to have it */
		rs->replicas = 1;
		/* during a failover, Sentinel may name the old master for
		 * a moment, or none: ask again, within --lock-timeout; but
		 * no sentinel reached at all is an outage at once, as a
		 * server or a cluster that cannot be reached is */
		rs->redir_until = rs->deadline;
		while ((ok = find_master(rs)) == -1 && rs->unavailable &&
		    !rs->sentinels_down && clock_monotonic() < rs->deadline)
			nap(rs, ++tries);
	}
	if (ok == -1) {
		*unavailable = rs->unavailable;
		rs->err = NULL;
		rs_close(rs);
		return NULL;
	}
	return rs;
}

static void
rs_close(void *p)
{
	struct rs *rs = p;
	int i;

	if (rs == NULL)
		return;
	forget(rs);
	drop_names(rs);
	group_unstall(rs);
	free(rs->h);
	free(rs->q);
	for (i = 0; i < rs->nnode; i++) {
		node_close(rs, i);
		free(rs->node[i].host);
	}
	free(rs->node);
	free(rs->slot);
	free(rs->url);
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

	u->login_given = 1;
	if (colon == NULL) {
		/* redis://password@host, as redis-cli takes */
		if (unescape(p, (size_t)(at - p), u->password,
			sizeof(u->password)) == -1) {
			*why =
			    "the password is too long or has a bad %XX escape";
			return -1;
		}
		return 0;
	}
	if (unescape(p, (size_t)(colon - p), u->user, sizeof(u->user)) == -1 ||
	    unescape(colon + 1, (size_t)(at - colon - 1), u->password,
		sizeof(u->password)) == -1) {
		*why =
		    "the user or password is too long or has a bad %XX escape";
		return -1;
	}
	return 0;
}

/* Whether [p, q) is an IPv6 address (a %zone after it or not). */
static int
is_ipv6(const char *p, const char *q)
{
	char v6[ADDR_LEN];

	if (q <= p || (size_t)(q - p) >= sizeof(v6))
		return 0;
	memcpy(v6, p, (size_t)(q - p));
	v6[q - p] = '\0';
	return addr_family(v6) == AF_INET6;
}

/* Whether [p, end), or its part before a last colon and a port, is an
 * IPv6 address (a URL that gives one without brackets). */
static int
ipv6_before_port(const char *p, const char *end)
{
	const char *last = NULL, *q;

	for (q = p; q < end; q++)
		if (*q == ':')
			last = q;
	return last != NULL && (is_ipv6(p, end) || is_ipv6(p, last));
}

/*
 * Nonzero if the n bytes at p may be a host name or an IPv4 address:
 * letters, digits, '-', '_' and dots, each after one of those.  Anything else (a
 * '@' of a password written as it is, a space, a %-escape) names no
 * server, and would be taken for one out of reach.
 */
static int
host_chars(const char *p, size_t n)
{
	size_t i;

	/* a fully qualified name may end in a dot (redis.ns.svc.) */
	for (i = 0; i < n; i++)
		if (p[i] == '.' ? i == 0 || p[i - 1] == '.'
				: !isalnum((unsigned char)p[i]) &&
			    p[i] != '-' && p[i] != '_')
			return 0;
	return 1;
}

/* host[:port] in [p, end) into host (256 bytes) and *port. */
static int
parse_host(const char *p, const char *end, char *host, int *port,
    const char **why)
{
	const char *colon = memchr(p, ':', (size_t)(end - p));
	size_t n = (size_t)((colon ? colon : end) - p);

	/* [::1]:6379, or ::1:6379 */
	if ((p < end && *p == '[') || ipv6_before_port(p, end)) {
		*why = "an IPv6 address is not supported; give a host name "
		       "that resolves to it";
		return -1;
	}
	if (n == 0 || n >= 256) {
		*why = "the host is missing or too long";
		return -1;
	}
	if (!host_chars(p, n)) {
		*why = "the host is no host name or IPv4 address (letters, "
		       "digits, '-', '_' and dots; a '?' in the password is "
		       "written %3F)";
		return -1;
	}
	memcpy(host, p, n);
	host[n] = '\0';
	if (colon != NULL &&
	    parse_port(colon + 1, (size_t)(end - colon - 1), port) == -1) {
		*why = "the port is not a number from 1 to 65535";
		return -1;
	}
	return 0;
}

/* The last '@' in [p, end), or NULL: what is before it is the login,
 * which may hold one as it is (RFC 3986 splits there too). */
static const char *
last_at(const char *p, const char *end)
{
	const char *at = NULL;

	for (; p < end; p++)
		if (*p == '@')
			at = p;
	return at;
}

/* Where the hosts of the URL's part p end: the first '/' after the
 * login, or its query q, or its end. */
static const char *
hosts_end(const char *p, const char *q)
{
	const char *stop = q != NULL ? q : p + strlen(p);
	const char *at = last_at(p, stop), *slash;

	slash = memchr(at != NULL ? at : p, '/',
	    (size_t)(stop - (at != NULL ? at : p)));
	return slash != NULL ? slash : stop;
}

/* [login@]host[:port][,host[:port]...] in [p, end): the seeds. */
static int
parse_hosts(const char *p, const char *end, struct redis_url *u, int port,
    const char **why)
{
	const char *at = last_at(p, end), *comma;

	if (at != NULL) {
		if (parse_login(p, at, u, why) == -1)
			return -1;
		p = at + 1;
	}
	for (;;) {
		comma = memchr(p, ',', (size_t)(end - p));
		if (u->nseed == REDIS_SEEDS) {
			*why = "names more than 16 hosts";
			return -1;
		}
		u->seed_port[u->nseed] = port;
		if (parse_host(p, comma ? comma : end, u->seed_host[u->nseed],
			&u->seed_port[u->nseed], why) == -1)
			return -1;
		u->nseed++;
		if (comma == NULL)
			return 0;
		p = comma + 1;
	}
}

/* The database number in [d, d + n), if any. */
static int
parse_db(const char *d, size_t n, struct redis_url *u, const char **why)
{
	if (n > 0 && parse_small(d, n, INT_MAX, &u->db) == -1) {
		*why = "the database is not a number";
		return -1;
	}
	u->db_given = n > 0;
	return 0;
}

/* redis://[login@]host[:port][/db]: *q the query, if any. */
static int
parse_tcp(const char *p, struct redis_url *u, const char **q, const char **why)
{
	const char *end;

	*q = strchr(p, '?');
	end = hosts_end(p, *q);
	if (parse_hosts(p, end, u, 6379, why) == -1)
		return -1;
	if (u->nseed > 1) {
		*why = "names more than one host; for a Redis Cluster write "
		       "redis+cluster://, for Sentinel redis+sentinel://";
		return -1;
	}
	snprintf(u->host, sizeof(u->host), "%s", u->seed_host[0]);
	u->port = u->seed_port[0];
	if (*end == '/' &&
	    parse_db(end + 1,
		*q != NULL ? (size_t)(*q - end - 1) : strlen(end + 1), u,
		why) == -1)
		return -1;
	snprintf(u->where, sizeof(u->where), "redis://%.200s:%d/%d", u->host,
	    u->port, u->db);
	return 0;
}

/*
 * redis+cluster://[login@]host[:port][,host[:port]...] or
 * redis+sentinel://[login@]host[:port][,...]/MASTER[/db]: *q the query.
 */
static int
parse_many(const char *p, struct redis_url *u, const char **q, const char **why)
{
	const char *end, *m, *mend;
	int sentinel = u->kind == REDIS_SENTINEL;

	*q = strchr(p, '?');
	end = hosts_end(p, *q);
	if (parse_hosts(p, end, u, sentinel ? 26379 : 6379, why) == -1)
		return -1;
	m = *end == '/' ? end + 1 : end;
	mend = *q != NULL ? *q : m + strlen(m);
	if (!sentinel) {
		if (m < mend && !(mend - m == 1 && *m == '0')) {
			*why = "a Redis Cluster has database 0 only, and no "
			       "master's name: leave /... out";
			return -1;
		}
		snprintf(u->where, sizeof(u->where),
		    "redis+cluster://%.200s:%d%s", u->seed_host[0],
		    u->seed_port[0], u->nseed > 1 ? ",..." : "");
		return 0;
	}
	end = memchr(m, '/', (size_t)(mend - m));
	if (end == NULL)
		end = mend;
	if (end == m || (size_t)(end - m) >= sizeof(u->master) ||
	    unescape(m, (size_t)(end - m), u->master, sizeof(u->master)) ==
		-1) {
		*why = "the master's name, after the hosts, is missing or too "
		       "long";
		return -1;
	}
	if (*end == '/' &&
	    parse_db(end + 1, (size_t)(mend - end - 1), u, why) == -1)
		return -1;
	snprintf(u->where, sizeof(u->where),
	    "redis+sentinel://%.150s:%d%s/%.100s", u->seed_host[0],
	    u->seed_port[0], u->nseed > 1 ? ",..." : "", u->master);
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
			*why = bad_escape(p + 7, n - 7)
			    ? "the prefix has a bad %XX escape (a % is "
			      "written %25)"
			    : "the prefix is too long";
			return -1;
		}
		return 0;
	}
	if (strncmp(p, "sentinel_password=", 18) == 0 ||
	    strncmp(p, "sentinel_user=", 14) == 0) {
		int pw = p[9] == 'p';
		size_t skip = pw ? 18 : 14;

		if (u->kind != REDIS_SENTINEL) {
			*why =
			    "has sentinel_user= or sentinel_password=, which "
			    "only redis+sentinel:// takes";
			return -1;
		}
		if (unescape(p + skip, n - skip,
			pw ? u->sentinel_password : u->sentinel_user,
			pw ? sizeof(u->sentinel_password)
			   : sizeof(u->sentinel_user)) == -1) {
			*why = "the user or password is too long or has a bad "
			       "%XX escape";
			return -1;
		}
		return 0;
	}
	if (strncmp(p, "password=", 9) == 0 || strncmp(p, "user=", 5) == 0) {
		int pw = p[0] == 'p';
		size_t skip = pw ? 9 : 5;

		if (u->login_given) {
			*why = "has a login both before the host and as user= "
			       "or password=; give it once";
			return -1;
		}
		if (unescape(p + skip, n - skip, pw ? u->password : u->user,
			pw ? sizeof(u->password) : sizeof(u->user)) == -1) {
			*why = "the user or password is too long or has a bad "
			       "%XX escape";
			return -1;
		}
		return 0;
	}
	if (strncmp(p, "db=", 3) == 0) {
		if (u->db_given) {
			*why = "has the database both in the path and as db=; "
			       "give it once";
			return -1;
		}
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
	*why = "has an option other than prefix=, timeout=, db=, user=, "
	       "password=, sentinel_user= or sentinel_password=";
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
	/* until the URL is read, messages name its scheme */
	snprintf(u->where, sizeof(u->where), "%.*s", (int)strcspn(spec, ":"),
	    spec);
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
	} else if (strncmp(spec, "redis+cluster://", 16) == 0) {
		u->kind = REDIS_CLUSTER;
		if (parse_many(spec + 16, u, &q, why) == -1)
			return -1;
	} else if (strncmp(spec, "redis+sentinel://", 17) == 0) {
		u->kind = REDIS_SENTINEL;
		if (parse_many(spec + 17, u, &q, why) == -1)
			return -1;
	} else {
		*why = "is not a redis://, unix://, redis+cluster:// or "
		       "redis+sentinel:// URL";
		return -1;
	}
	for (p = q ? q + 1 : NULL; p != NULL && *p != '\0';
	     p = q ? q + 1 : NULL) {
		const char *r;
		size_t name = strcspn(p, "=&");

		q = strchr(p, '&');
		n = q ? (size_t)(q - p) : strlen(p);
		/* the same option twice: which one was meant is a guess */
		for (r = q; r != NULL && name > 0; r = strchr(r + 1, '&'))
			if (strncmp(r + 1, p, name) == 0 &&
			    r[1 + name] == '=') {
				*why = "has the same option twice after the "
				       "'?'; give each one once";
				return -1;
			}
		if (parse_option(p, n, u, why) == -1)
			return -1;
	}
	if (u->kind == REDIS_CLUSTER && u->db != 0) {
		*why = "a Redis Cluster has database 0 only; leave db= out";
		return -1;
	}
	if (u->kind == REDIS_CLUSTER &&
	    (strchr(u->prefix, '{') != NULL ||
		strchr(u->prefix, '}') != NULL)) {
		*why = "the prefix has a brace, which would decide the hash "
		       "slot of every key in a Redis Cluster; use one without";
		return -1;
	}
	return 0;
}

/*
 * Is spec a Redis URL this build can use?  0, or -1 with a message that
 * says what is wrong and how to write one (never the password).
 */
int
store_redis_check(const char *spec, char *msg, size_t len)
{
	struct redis_url *u = xcalloc(1, sizeof(*u));
	const char *why;
	int r = store_redis_parse(spec, u, &why);

	if (r == -1)
		snprintf(msg, len,
		    "%.64s: %s; write redis://[user:password@]host[:port][/db]"
		    "[?prefix=P&timeout=DUR], unix:///path/to/redis.sock, "
		    "redis+cluster://host:port[,host:port...] or "
		    "redis+sentinel://host:26379[,host:port...]/MASTERNAME",
		    u->where, why);
	free(u);
	return r;
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
	/* (a batch group's tidy is the group's: its time is the group's,
	 * or a group tried again would never reach --lock-timeout) */
	if (rs->first_try != 0 && !rs->group) {
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
rs_tidy(void *p, unsigned mask, int64_t now, int64_t limit, const char *near,
    size_t nearlen, int64_t *counts)
{
	struct rs *rs = p;
	int r;

	(void)near; /* a single decision's tidying does nothing here */
	(void)nearlen;
	rs->scanning = 1;
	r = tidy_all(p, mask, now, limit, counts);
	rescan_done(rs);
	return r;
}

static int
rs_one_key(void *p)
{
	return ((struct rs *)p)->kind == REDIS_CLUSTER;
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
	.unsure = rs_unsure,
	.get = rs_get,
	.put = rs_put,
	.del = rs_del,
	.scan = rs_scan,
	.tidy = rs_tidy,
	.now = rs_now,
	.policy_first = rs_policy_first,
	.one_key = rs_one_key,
};
