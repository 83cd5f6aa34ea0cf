/*
 * hosts.c: a host's addresses, as far as they can be known without asking
 * anyone: an address is itself, and a name may be in the text of a hosts
 * file (hosts(5)).  Pure: the caller reads the file (resolve.c).
 *
 * In a hosts file each line is an address and the names it goes by,
 * separated by blanks, and a '#' starts a comment to the end of the line.
 * Names compare in any case, as glibc's lookup compares them (musl's
 * tells the cases apart, and a name written in capitals was not found).
 * The addresses are given IPv4 first, then IPv6, each in the file's
 * order, as hiredis tries them; the same address once.  A link-local
 * IPv6 address keeps its zone (fe80::1%eth0), which hiredis's own
 * getaddrinfo() turns into the interface to use.
 */
#include <arpa/inet.h>

#include <string.h>

#include "throttle.h"

/*
 * The family of address s (a NUL-terminated string): AF_INET, AF_INET6
 * (a link-local one with its %zone too, as fe80::1%eth0), or 0 if it is
 * none.
 */
int
addr_family(const char *s)
{
	unsigned char buf[16];
	char v6[ADDR_LEN];
	const char *pct = strchr(s, '%');
	size_t n = pct != NULL ? (size_t)(pct - s) : strlen(s), i;

	if (pct == NULL && inet_pton(AF_INET, s, buf) == 1)
		return AF_INET;
	if (n >= sizeof(v6))
		return 0;
	memcpy(v6, s, n);
	v6[n] = '\0';
	if (inet_pton(AF_INET6, v6, buf) != 1)
		return 0;
	if (pct == NULL)
		return AF_INET6;
	/* an interface's name or number */
	for (i = 1; pct[i] != '\0'; i++)
		if (!((pct[i] >= 'a' && pct[i] <= 'z') ||
			(pct[i] >= 'A' && pct[i] <= 'Z') ||
			(pct[i] >= '0' && pct[i] <= '9') || pct[i] == '.' ||
			pct[i] == '-' || pct[i] == '_'))
			return 0;
	return i > 1 ? AF_INET6 : 0;
}

/* Add address s (n bytes) to a, once; 0, or -1 if a is full. */
static int
add(struct addrs *a, const char *s, size_t n)
{
	int i;

	for (i = 0; i < a->n; i++)
		if (strlen(a->a[i]) == n && memcmp(a->a[i], s, n) == 0)
			return 0;
	if (a->n >= ADDRS_MAX)
		return -1;
	memcpy(a->a[a->n], s, n);
	a->a[a->n][n] = '\0';
	a->n++;
	return 0;
}

/*
 * If name is an address, out holds it alone: 1; else 0.  A name longer
 * than an address can be is no address.
 */
int
addrs_numeric(const char *name, struct addrs *out)
{
	out->n = 0;
	if (strlen(name) >= ADDR_LEN || addr_family(name) == 0)
		return 0;
	return add(out, name, strlen(name)) == 0;
}

static int
lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/* Whether the n bytes at p are name, in any case. */
static int
same_name(const char *p, size_t n, const char *name)
{
	size_t i, len = strlen(name);

	/* a fully qualified name's final dot: the same name */
	if (len > 1 && name[len - 1] == '.')
		len--;
	if (len != n)
		return 0;
	for (i = 0; i < n; i++)
		if (lower((unsigned char)p[i]) != lower((unsigned char)name[i]))
			return 0;
	return 1;
}

static int
blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/*
 * One line of a hosts file (len bytes, no newline): if it names name, its
 * address goes to v4 or v6.
 */
static void
hosts_line(const char *p, size_t len, const char *name, struct addrs *v4,
    struct addrs *v6)
{
	const char *end = p + len, *hash = memchr(p, '#', len), *w;
	char addr[ADDR_LEN];
	size_t n;
	int first = 1, found = 0;

	if (hash != NULL)
		end = hash;
	addr[0] = '\0';
	while (p < end) {
		while (p < end && blank(*p))
			p++;
		for (w = p; p < end && !blank(*p); p++)
			;
		if ((n = (size_t)(p - w)) == 0)
			break;
		if (first) {
			/* the address: one this long cannot be */
			if (n >= ADDR_LEN)
				return;
			memcpy(addr, w, n);
			addr[n] = '\0';
			first = 0;
		} else if (same_name(w, n, name)) {
			found = 1;
			break;
		}
	}
	if (!found)
		return;
	switch (addr_family(addr)) {
	case AF_INET:
		add(v4, addr, strlen(addr));
		break;
	case AF_INET6:
		add(v6, addr, strlen(addr));
		break;
	}
}

/*
 * The addresses the hosts file text (len bytes) gives name, into out: how
 * many (0: the file does not name it).
 */
int
hosts_lookup(const char *text, size_t len, const char *name, struct addrs *out)
{
	struct addrs v6 = { 0 };
	const char *p = text, *end = text + len, *nl;
	int i;

	out->n = 0;
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		hosts_line(p, (size_t)((nl != NULL ? nl : end) - p), name, out,
		    &v6);
		p = nl != NULL ? nl + 1 : end;
	}
	for (i = 0; i < v6.n; i++)
		add(out, v6.a[i], strlen(v6.a[i]));
	return out->n;
}
