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
#include "throttle.h"

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
