/*
 * record.c: the bytes of every record a store keeps, shared by every
 * store, so that they all keep the same bytes and none invents its own
 * encoding of "none".  A store keeps records by key, kind and id, each
 * with these bytes and an expiry; it never looks inside them.
 *
 *	REC_LIMIT	id "0".."7" (which of the key's limits):
 *			"ALGO N PERIOD BURST GRAN S1 S2 S3 REST WRITTEN", then
 *			for a sliding window "\n" and its sub-windows in the
 *			varint encoding of slots.c
 *	REC_LOCKOUT	id "": "UNTIL SINCE"
 *	REC_LEASE	id the lease id: "PRIORITY\nACQUIRED\nTTL\nEXPIRES\nPID\n
 *			PID_START\nBOOT_ID\nHOST\nPGID\nPGID_START"
 *	REC_SHED	id "": "AMOUNT CHANGED"
 *	REC_POLICY	key the policy's name, id "": its options
 *
 * Text, so redis-cli and the sqlite3 shell show it.  Decoding checks only
 * the form; store.c then checks the values (limit_check_record(),
 * lease_check() ...), the same way for every store.  Throttle 0.1 wrote a
 * limit without WRITTEN, a lockout without SINCE, and a lease on one line
 * with "-" for an empty boot id or host: those still decode.
 *
 * Pure: no I/O, no allocation.
 */
#include <string.h>

#include "throttle.h"

#define SHED_KEEP (INT64_C(24) * 3600 * US_PER_SEC) /* idle shedders */

/* Read a decimal integer at p[*off..len), optionally negative. */
static int
number(const char *p, size_t len, size_t *off, int64_t *v)
{
	uint64_t u = 0;
	size_t i = *off;
	int neg = 0;

	if (i < len && p[i] == '-') {
		neg = 1;
		i++;
	}
	if (i >= len || p[i] < '0' || p[i] > '9')
		return -1;
	for (; i < len && p[i] >= '0' && p[i] <= '9'; i++) {
		unsigned d = (unsigned)(p[i] - '0');

		/* constants, not a division a digit */
		if (u >= UINT64_MAX / 10 &&
		    (u > UINT64_MAX / 10 || d > UINT64_MAX % 10))
			return -1;
		u = u * 10 + d;
	}
	if (u > (uint64_t)INT64_MAX + (uint64_t)neg)
		return -1;
	*v = neg ? (int64_t)(0 - u) : (int64_t)u;
	*off = i;
	return 0;
}

/* Read n integers, each after one separator sep (the first after none). */
static int
numbers(const char *p, size_t len, size_t *off, char sep, int64_t *v, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		if (i > 0) {
			if (*off >= len || p[*off] != sep)
				return -1;
			(*off)++;
		}
		if (number(p, len, off, &v[i]) == -1)
			return -1;
	}
	return 0;
}

/* Bytes record_limit_encode() may need for rec. */
size_t
record_limit_size(const struct keyrec *rec)
{
	return 32 + 21 * 10 + 1 + slots_encoded_max(rec->state.nslots);
}

/*
 * v in decimal into buf, which has room for 21 bytes; its length.  (Not
 * printf: a batch writes these by the million.)
 */
size_t
record_int(char *buf, int64_t v)
{
	static const char pairs[] = "00010203040506070809"
				    "10111213141516171819"
				    "20212223242526272829"
				    "30313233343536373839"
				    "40414243444546474849"
				    "50515253545556575859"
				    "60616263646566676869"
				    "70717273747576777879"
				    "80818283848586878889"
				    "90919293949596979899";
	char t[24], *p = t + sizeof(t);
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	size_t n, i = 0;

	/* two digits a division: a time has 16 */
	while (u >= 100) {
		const char *d = pairs + 2 * (u % 100);

		u /= 100;
		*--p = d[1];
		*--p = d[0];
	}
	if (u >= 10) {
		*--p = pairs[2 * u + 1];
		*--p = pairs[2 * u];
	} else
		*--p = (char)('0' + u);
	if (v < 0)
		buf[i++] = '-';
	n = (size_t)(t + sizeof(t) - p);
	memcpy(buf + i, p, n);
	buf[i + n] = '\0';
	return i + n;
}

/* Encode a limit's record into buf (record_limit_size() bytes); its length. */
size_t
record_limit_encode(const struct keyrec *rec, char *buf)
{
	int64_t v[4 + STATE_FIELDS + 3];
	size_t n = strlen(rec->limit.algo->name);
	int i, k = 0;

	memcpy(buf, rec->limit.algo->name, n);
	v[k++] = rec->limit.count;
	v[k++] = rec->limit.period;
	v[k++] = rec->limit.burst;
	v[k++] = rec->limit.granularity;
	for (i = 0; i < STATE_FIELDS; i++)
		v[k++] = rec->state.v[i];
	v[k++] = rec->rest_at;
	if (rec->written_at >= 0) { /* else not known: none written */
		v[k++] = rec->written_at;
		if (rec->ahead != 0) /* moved back with the clock */
			v[k++] = rec->ahead;
	}
	for (i = 0; i < k; i++) {
		buf[n++] = ' ';
		n += record_int(buf + n, v[i]);
	}
	if (rec->state.nslots > 0) {
		buf[n++] = '\n';
		n += slots_encode(rec->state.slots, rec->state.nslots,
		    (unsigned char *)buf + n);
	}
	return n;
}

/*
 * Decode a limit's record into rec, all but its sub-windows, whose bytes
 * are left in *slots and *nslots (0 bytes: none) for slots_decode().  0,
 * -1 if it is not a record this throttle writes, or -2 if only its
 * algorithm is unknown (a newer throttle's?).
 */
int
record_limit_decode(const char *p, size_t len, struct keyrec *rec,
    const unsigned char **slots, size_t *nslots)
{
	const char *sp = memchr(p, ' ', len);
	char name[32];
	int64_t v[4 + STATE_FIELDS + 1];
	size_t off, i;

	*slots = NULL;
	*nslots = 0;
	rec->state.nslots = 0;
	if (sp == NULL || (size_t)(sp - p) >= sizeof(name))
		return -1;
	memcpy(name, p, (size_t)(sp - p));
	name[sp - p] = '\0';
	if ((rec->limit.algo = algo_find(name)) == NULL ||
	    strcmp(rec->limit.algo->name, name) != 0)
		return -2;
	off = (size_t)(sp - p) + 1;
	if (numbers(p, len, &off, ' ', v, 4 + STATE_FIELDS + 1) == -1)
		return -1;
	rec->limit.count = v[0];
	rec->limit.period = v[1];
	rec->limit.burst = v[2];
	rec->limit.granularity = v[3];
	for (i = 0; i < STATE_FIELDS; i++)
		rec->state.v[i] = v[4 + i];
	rec->rest_at = v[4 + STATE_FIELDS];
	rec->written_at = -1; /* throttle 0.1 wrote none: not known */
	rec->ahead = 0; /* none unless moved back with the clock */
	if (off < len && p[off] == ' ') {
		off++;
		if (number(p, len, &off, &rec->written_at) == -1 ||
		    rec->written_at < 0)
			return -1;
	}
	if (off < len && p[off] == ' ') {
		off++;
		if (number(p, len, &off, &rec->ahead) == -1)
			return -1;
	}
	if (off == len)
		return 0;
	if (p[off] != '\n')
		return -1;
	*slots = (const unsigned char *)p + off + 1;
	*nslots = len - off - 1;
	return 0;
}

/* Encode a lockout into buf (at least 72 bytes); its length. */
size_t
record_lockout_encode(const struct lockout *k, char *buf)
{
	if (k->ahead != 0) /* moved back with the clock */
		return (size_t)sprintf(buf, "%lld %lld %lld",
		    (long long)k->until, (long long)k->since,
		    (long long)k->ahead);
	return (size_t)sprintf(buf, "%lld %lld", (long long)k->until,
	    (long long)k->since);
}

/* Decode a lockout: 0 or -1. */
int
record_lockout_decode(const char *p, size_t len, struct lockout *k)
{
	size_t off = 0;

	k->since = k->ahead = 0;
	if (number(p, len, &off, &k->until) == -1)
		return -1;
	if (off < len && p[off] == ' ') {
		off++;
		if (number(p, len, &off, &k->since) == -1)
			return -1;
	}
	if (off < len && p[off] == ' ') {
		off++;
		if (number(p, len, &off, &k->ahead) == -1)
			return -1;
	}
	return off == len ? 0 : -1;
}

/* Encode a lease (but its id) into buf (RECORD_LEASE_MAX bytes). */
size_t
record_lease_encode(const struct lease *l, char *buf)
{
	return (size_t)sprintf(buf,
	    "%d\n%lld\n%lld\n%lld\n%lld\n%lld\n%s\n%s\n%lld\n%lld", l->priority,
	    (long long)l->acquired, (long long)l->ttl, (long long)l->expires,
	    (long long)l->pid, (long long)l->pid_start, l->boot_id, l->host,
	    (long long)l->pgid, (long long)l->pgid_start);
}

/* Copy the word at p[*off..) up to sep (or the end) into buf (len). */
static int
word(const char *p, size_t plen, size_t *off, char sep, char *buf, size_t len)
{
	const char *end = memchr(p + *off, sep, plen - *off);
	size_t n = end != NULL ? (size_t)(end - (p + *off)) : plen - *off;

	if (n >= len || memchr(p + *off, '\0', n) != NULL)
		return -1;
	memcpy(buf, p + *off, n);
	buf[n] = '\0';
	*off += n;
	return 0;
}

/* Decode lease id (idlen bytes) and its bytes into *l: 0 or -1. */
int
record_lease_decode(const char *id, size_t idlen, const char *p, size_t len,
    struct lease *l)
{
	int64_t v[8] = { 0 };
	size_t off = 0;
	int i;

	memset(l, 0, sizeof(*l));
	if (idlen != LEASE_ID_LEN)
		return -1;
	memcpy(l->id, id, LEASE_ID_LEN);
	if (memchr(p, '\n', len) != NULL) {
		for (i = 0; i < 10; i++) {
			if (i > 0 && (off >= len || p[off++] != '\n'))
				return -1;
			if (i == 6 &&
			    word(p, len, &off, '\n', l->boot_id,
				sizeof(l->boot_id)) == -1)
				return -1;
			if (i == 7 &&
			    word(p, len, &off, '\n', l->host,
				sizeof(l->host)) == -1)
				return -1;
			if (i != 6 && i != 7 &&
			    number(p, len, &off, &v[i < 6 ? i : i - 2]) == -1)
				return -1;
		}
		if (off != len)
			return -1;
	} else {
		/* throttle 0.1: one line, "-" for an empty boot id or host */
		if (numbers(p, len, &off, ' ', v, 6) == -1 || off >= len ||
		    p[off++] != ' ' ||
		    word(p, len, &off, ' ', l->boot_id, sizeof(l->boot_id)) ==
			-1 ||
		    off >= len || p[off++] != ' ' ||
		    word(p, len, &off, ' ', l->host, sizeof(l->host)) == -1 ||
		    off != len)
			return -1;
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
}

/* Encode a shedder's amount and when it changed (buf: 48 bytes). */
size_t
record_shed_encode(int64_t amount, int64_t changed, char *buf)
{
	return (size_t)sprintf(buf, "%lld %lld", (long long)amount,
	    (long long)changed);
}

/* Decode a shedder: 0 or -1. */
int
record_shed_decode(const char *p, size_t len, int64_t *amount, int64_t *changed)
{
	int64_t v[2];
	size_t off = 0;

	if (numbers(p, len, &off, ' ', v, 2) == -1 || off != len)
		return -1;
	*amount = v[0];
	*changed = v[1];
	return 0;
}

/*
 * When a lockout can be forgotten: when it ends, on the clock put right if
 * it was moved back with the clock (ahead).
 */
int64_t
record_lockout_expiry(const struct lockout *k)
{
	return k->until == LOCKOUT_NEVER ? RECORD_FOREVER : k->until + k->ahead;
}

/*
 * When a record can be forgotten, from its bytes: a limit when it is back
 * at rest, a lockout when it ends, a lease when it expires, a shedder a
 * day after it last changed; RECORD_FOREVER for a policy, a lease without
 * a TTL, a lockout until reset, and bytes that do not decode (nothing is
 * forgotten on a guess).
 */
int64_t
record_expiry(int kind, const char *p, size_t len)
{
	const unsigned char *slots;
	struct keyrec rec;
	struct lockout k;
	struct lease l;
	int64_t amount, changed;
	size_t n;

	switch (kind) {
	case REC_LIMIT:
		if (record_limit_decode(p, len, &rec, &slots, &n) != 0)
			break;
		return rec.rest_at;
	case REC_LOCKOUT:
		if (record_lockout_decode(p, len, &k) == -1 ||
		    k.until == LOCKOUT_NEVER)
			break;
		return record_lockout_expiry(&k);
	case REC_LEASE:
		if (record_lease_decode("0000000000000000", LEASE_ID_LEN, p,
			len, &l) == -1 ||
		    l.expires == 0)
			break;
		return l.expires;
	case REC_SHED:
		if (record_shed_decode(p, len, &amount, &changed) == -1 ||
		    changed > INT64_MAX - SHED_KEEP)
			break;
		return changed + SHED_KEEP;
	}
	return RECORD_FOREVER;
}
