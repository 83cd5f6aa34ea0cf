/*
 * lease.c: pure lease arithmetic for the concurrency limiter and the fleet
 * usage load shedder (seed 004): which leases still hold a slot, whether
 * a new one fits, how many slots are kept for critical work.
 *
 * A lease holds a slot until it is released, its TTL passes, or its owner
 * is known to be gone.  Whether an owner lives is a fact about the host
 * (host.c finds it out); here it is only an input, so everything in this
 * file is a function of its arguments.
 */
#include <string.h>

#include "throttle.h"

static int
word_ok(const char *s, const char *chars, size_t max)
{
	size_t n = strlen(s);

	return n <= max && strspn(s, chars) == n;
}

/*
 * 1 if the LEN bytes at ID are a lease id as throttle makes them
 * (LEASE_ID_LEN lower-case hex digits), else 0.  The one test of an id:
 * --lease, the stores' records and their error messages all ask here.
 */
int
lease_id_ok(const char *id, size_t len)
{
	size_t i;

	if (len != LEASE_ID_LEN)
		return 0;
	for (i = 0; i < len; i++)
		if (!((id[i] >= '0' && id[i] <= '9') ||
			(id[i] >= 'a' && id[i] <= 'f')))
			return 0;
	return 1;
}

/*
 * 0 if a lease read from a store is one throttle could have written, else
 * -1 and what is wrong with it.  Every store's leases pass through here.
 */
int
lease_check(const struct lease *l, const char **errstr)
{
	const unsigned char *p;

	*errstr = "has a lease out of range";
	if (!lease_id_ok(l->id, strlen(l->id)))
		return -1;
	if (l->priority < PRIO_CRITICAL || l->priority > PRIO_LOW)
		return -1;
	if (l->acquired < 0 || l->acquired > TIME_MAX || l->ttl < 0 ||
	    l->ttl > DURATION_MAX || l->expires < 0 ||
	    l->expires > TIME_MAX + DURATION_MAX ||
	    (l->ttl == 0) != (l->expires == 0))
		return -1;
	if (l->pid < 0 || l->pid > INT32_MAX || l->pid_start < 0 ||
	    (l->ttl == 0 && l->pid == 0))
		return -1;
	if (l->pgid < 0 || l->pgid > INT32_MAX || l->pgid_start < 0 ||
	    (l->pgid != 0 && l->pid == 0))
		return -1;
	/* an empty host: a lease of throttle 0.1 without one */
	if (!word_ok(l->boot_id, "0123456789abcdef-", BOOT_ID_MAX) ||
	    strlen(l->host) > HOST_MAX)
		return -1;
	for (p = (const unsigned char *)l->host; *p != '\0'; p++)
		if (*p < 0x20 || *p == 0x7f)
			return -1;
	return 0;
}

/* 0 if a lockout read from a store is one throttle could have written. */
int
lockout_check(const struct lockout *k, const char **errstr)
{
	*errstr = "has a lockout out of range";
	if (k->since < 0 || k->since > TIME_MAX || k->until < 0)
		return -1;
	if (k->ahead < 0 || k->ahead > TIME_MAX)
		return -1;
	if (k->until != LOCKOUT_NEVER &&
	    (k->until > TIME_MAX + DURATION_MAX ||
		(k->until != 0 && k->until < k->since)))
		return -1;
	return 0;
}

/* Nonzero if the lease still holds a slot at now. */
int
lease_live(const struct lease *l, int64_t now, enum owner_state owner)
{
	if (l->expires != 0 && now >= l->expires)
		return 0;
	return owner != OWNER_DEAD;
}

/*
 * Nonzero if a lease of priority p may be added to active live leases
 * under a concurrency of n with reserve slots kept for critical work:
 * others are refused once n - reserve slots are held.
 */
int
lease_admit(int64_t active, int64_t n, int64_t reserve, int p)
{
	if (p == PRIO_CRITICAL)
		return active < n;
	return active < n - reserve;
}

/* The reserve in slots: value itself, or value percent of n rounded up. */
int64_t
lease_reserve(int64_t n, int64_t value, int percent)
{
	i128 r = value;

	if (percent)
		r = ((i128)n * value + 99) / 100;
	return r > n ? n : (int64_t)r;
}

/* us until the lease expires, or -1 if it never does. */
int64_t
lease_expires_after(const struct lease *l, int64_t now)
{
	if (l->expires == 0)
		return -1;
	return l->expires > now ? l->expires - now : 0;
}

/*
 * A lease as it stands at now: one that would outlast its TTL from now
 * was taken with the clock ahead (stepped back since), and ends at most
 * its TTL from now, as a key's state is moved back (limit_carry()), so a
 * clock put right holds a slot no longer than the TTL.  Nonzero if moved.
 */
int
lease_carry(struct lease *l, int64_t now)
{
	if (l->ttl <= 0 || l->expires == 0 || l->expires - now <= l->ttl)
		return 0;
	l->expires = now + l->ttl;
	if (l->acquired > now)
		l->acquired = now;
	return 1;
}
