/*
 * resolve.c: a Redis host's addresses, within the time a connect has.
 *
 * getaddrinfo(3) waits for DNS as long as /etc/resolv.conf lets it: with
 * its defaults, against a server that never answers, 10 s with musl and
 * 20 s with glibc (measured), whatever --lock-timeout said.  So:
 *	- an address is itself (hosts.c);
 *	- a name in /etc/hosts is read there (hosts.c), in any case;
 *	- localhost, if the file does not name it, is the loopback (RFC 6761);
 *	- any other name is looked up by getaddrinfo() in a child process,
 *	  killed when the time is up (or when throttle dies).  A child, not
 *	  a thread: the lookup may go on after the caller has given up, and
 *	  the musl build's malloc serves one thread.  A child also keeps a
 *	  lookup module that crashes (NSS, in a static glibc build) out of
 *	  throttle.
 * As hiredis did, IPv4 is asked for first, and IPv6 only if there is
 * none: asking for both at once waits for both answers, and a DNS server
 * (or a middlebox) that drops the AAAA question would hold every call.
 *
 * Only the throttle binary forks (resolve_fork()): the PAM module, in a
 * host process that may have threads, looks the name up itself, for as
 * long as the resolver tries (pam_throttle(8) says so).
 */
/* glibc's EAI_NODATA and EAI_ADDRFAMILY, so that a name with no address
 * is told from a resolver that failed: before any header */
#define _GNU_SOURCE /* NOLINT: a feature macro, reserved for this */
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "throttle.h"

#define HOSTS_FILE "/etc/hosts"
#define HOSTS_MAX (16 << 20) /* a hosts file read, at most */
/* a lookup's answer: ADDRS_MAX lines, or "!CODE" */
#define ANSWER_MAX (ADDRS_MAX * (ADDR_LEN + 1) + 32)

/* The addresses /etc/hosts gives name: how many (0: none, or no file). */
static int
from_hosts_file(const char *name, struct addrs *out)
{
	FILE *f = fopen(HOSTS_FILE, "re");
	char *text;
	size_t len = 0, cap = 1 << 12, got;
	int cut = 0;

	out->n = 0;
	if (f == NULL)
		return 0;
	if ((text = malloc(cap)) == NULL) {
		fclose(f);
		return 0;
	}
	while ((got = fread(text + len, 1, cap - len, f)) > 0) {
		len += got;
		if (len == cap) {
			char *more;

			if (cap >= HOSTS_MAX ||
			    (more = realloc(text, cap * 2)) == NULL) {
				cut = 1;
				break;
			}
			text = more;
			cap *= 2;
		}
	}
	fclose(f);
	/* a file read only in part ends at its last whole line: a line cut
	 * short could name a shorter name */
	if (cut) {
		while (len > 0 && text[len - 1] != '\n')
			len--;
	}
	hosts_lookup(text, len, name, out);
	free(text);
	return out->n;
}

/* getaddrinfo() of name for one family: its addresses as lines into buf,
 * from len on; 0 or its error. */
static int
lookup_family(const char *name, int family, char *buf, size_t size, size_t *len)
{
	struct addrinfo hints, *res, *ai;
	char addr[ADDR_LEN];
	int rc, n = 0;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = family;
	hints.ai_socktype = SOCK_STREAM;
	if ((rc = getaddrinfo(name, NULL, &hints, &res)) != 0)
		return rc;
	for (ai = res; ai != NULL && n < ADDRS_MAX; ai = ai->ai_next) {
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
		const void *a;

		if (ai->ai_family != family)
			continue;
		if (family == AF_INET) {
			memcpy(&in, ai->ai_addr, sizeof(in));
			a = &in.sin_addr;
		} else {
			memcpy(&in6, ai->ai_addr, sizeof(in6));
			a = &in6.sin6_addr;
		}
		if (inet_ntop(family, a, addr, sizeof(addr)) == NULL)
			continue;
		*len += (size_t)snprintf(buf + *len, size - *len, "%s\n", addr);
		n++;
	}
	freeaddrinfo(res);
#ifdef EAI_NODATA
	return n > 0 ? 0 : EAI_NODATA;
#else
	return n > 0 ? 0 : EAI_NONAME;
#endif
}

/*
 * Look name up, into buf (ANSWER_MAX bytes): a line an address, or
 * "!CODE" for getaddrinfo's error.  Its length.
 */
static int no_such(int);
static int no_address(int);

static size_t
lookup_text(const char *name, char *buf, size_t size)
{
	size_t len = 0;
	int rc;

	/* IPv6 only if the name is there with no IPv4 address: not after a
	 * resolver that failed or did not answer, which would cost its time
	 * again, nor for a name that does not exist at all, which behind a
	 * server that drops the IPv6 question would wait for nothing */
	if ((rc = lookup_family(name, AF_INET, buf, size, &len)) == 0)
		return len;
	if (no_address(rc) &&
	    (rc = lookup_family(name, AF_INET6, buf, size, &len)) == 0)
		return len;
	return (size_t)snprintf(buf, size, "!%d\n", rc);
}

/* The lookup's answer (len bytes of text) into out: 0, or getaddrinfo's
 * error code (EAI_FAIL if the answer makes no sense). */
static int
read_answer(char *text, size_t len, struct addrs *out)
{
	char *p = text, *nl;

	out->n = 0;
	if (len > 0 && text[0] == '!') {
		long code = strtol(text + 1, NULL, 10);

		return code != 0 && code >= INT_MIN && code <= INT_MAX
		    ? (int)code
		    : EAI_FAIL;
	}
	while (p < text + len &&
	    (nl = memchr(p, '\n', (size_t)(text + len - p))) != NULL) {
		struct addrs one;

		*nl = '\0';
		if (addrs_numeric(p, &one) && out->n < ADDRS_MAX)
			memcpy(out->a[out->n++], one.a[0], ADDR_LEN);
		p = nl + 1;
	}
	return out->n > 0 ? 0 : EAI_FAIL;
}

/* Whether getaddrinfo's error code says the name is there but has no
 * address of the family asked for. */
static int
no_address(int code)
{
	switch (code) {
#ifdef EAI_NODATA
	case EAI_NODATA:
#endif
#ifdef EAI_ADDRFAMILY
	case EAI_ADDRFAMILY:
#endif
		return 1;
	default:
		return 0;
	}
}

/* Whether getaddrinfo's error code says the name has no address at all,
 * or does not exist (rather than that the resolver failed). */
static int
no_such(int code)
{
	return code == EAI_NONAME || no_address(code);
}

/* What a lookup's error code makes of it: RESOLVE_NONAME if the name is
 * known not to exist, -1 otherwise; why says it in getaddrinfo's words. */
static int
answer_error(int code, char *why, size_t whylen)
{
	snprintf(why, whylen, "%s", gai_strerror(code));
	return no_such(code) ? RESOLVE_NONAME : -1;
}

static int forking; /* resolve_fork() */

/* Whether names are looked up in a child process (1) or by the caller. */
void
resolve_fork(int on)
{
	forking = on;
}

/* In the child: the answer, written at once (a pipe takes it whole),
 * then the end; and the end too should throttle die first. */
static void
child(const char *name, int fd, pid_t parent)
{
	char text[ANSWER_MAX];
	size_t len;

#ifdef __linux__
	prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
	if (getppid() != parent)
		_exit(0);
	len = lookup_text(name, text, sizeof(text));
	(void)!write(fd, text, len);
	_exit(0);
}

/*
 * The addresses of name into out, within us microseconds: 0, or with why
 * set, RESOLVE_SLOW if the time ran out, RESOLVE_NONAME if there is no
 * such name, RESOLVE_SYSTEM if no lookup could be made, -1 if the
 * resolver failed otherwise (a DNS server that cannot be reached).
 */
int
resolve_host(const char *name, int64_t us, struct addrs *out, char *why,
    size_t whylen)
{
	char text[ANSWER_MAX];
	int64_t end = clock_monotonic() + us, left;
	size_t len = 0;
	ssize_t got = -1;
	struct pollfd pfd;
	int p[2], rc, status = 0, err = 0;
	pid_t pid, self = getpid();

	if (addrs_numeric(name, out) || from_hosts_file(name, out) > 0)
		return 0;
	if (strcasecmp(name, "localhost") == 0 ||
	    strcasecmp(name, "localhost.") == 0) {
		out->n = 2;
		strcpy(out->a[0], "127.0.0.1");
		strcpy(out->a[1], "::1");
		return 0;
	}
	if (!forking) {
		len = lookup_text(name, text, sizeof(text));
		rc = read_answer(text, len, out);
		return rc == 0 ? 0 : answer_error(rc, why, whylen);
	}
	if (pipe(p) == -1) {
		snprintf(why, whylen, "no lookup could be started: %s",
		    strerror(errno));
		return RESOLVE_SYSTEM;
	}
	fcntl(p[0], F_SETFD, FD_CLOEXEC);
	fcntl(p[1], F_SETFD, FD_CLOEXEC);
	if ((pid = fork()) == -1) {
		snprintf(why, whylen, "no lookup could be started: %s",
		    strerror(errno));
		close(p[0]);
		close(p[1]);
		return RESOLVE_SYSTEM;
	}
	if (pid == 0)
		child(name, p[1], self);
	close(p[1]);
	pfd.fd = p[0];
	pfd.events = POLLIN;
	/* until the end of its answer (a newline: it writes it at once) or
	 * its end (EOF), an error, or the time */
	while ((left = end - clock_monotonic()) > 0 &&
	    !(len > 0 && text[len - 1] == '\n')) {
		rc = poll(&pfd, 1,
		    left / 1000 >= INT_MAX ? INT_MAX
					   : (int)((left + 999) / 1000));
		if (rc == 0 || (rc == -1 && errno == EINTR))
			continue;
		if (rc == -1) {
			err = errno;
			break;
		}
		got = read(p[0], text + len, sizeof(text) - len);
		if (got == -1 && errno == EINTR)
			continue;
		if (got == -1)
			err = errno;
		if (got <= 0 || (len += (size_t)got) == sizeof(text))
			break;
	}
	close(p[0]);
	/* done, or still looking: killed either way, and waited for, so no
	 * child is left behind */
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	if (err != 0) {
		snprintf(why, whylen, "the lookup failed: %s", strerror(err));
		return RESOLVE_SYSTEM;
	}
	if (len > 0 && text[len - 1] == '\n') {
		rc = read_answer(text, len, out);
		return rc == 0 ? 0 : answer_error(rc, why, whylen);
	}
	if (got == 0) {
		/* it ended with no answer: it crashed */
		if (WIFSIGNALED(status))
			snprintf(why, whylen,
			    "the lookup ended with signal %d (the resolver "
			    "of this C library crashed)",
			    WTERMSIG(status));
		else
			snprintf(why, whylen,
			    "the lookup ended with no answer");
		return RESOLVE_SYSTEM;
	}
	snprintf(why, whylen, "the lookup took too long");
	return RESOLVE_SLOW;
}
