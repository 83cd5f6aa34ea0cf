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
 *	  killed when the time is up.  A child, not a thread: the lookup may
 *	  go on after the caller has given up and gone on, and the musl
 *	  build's malloc serves one thread.  A child also keeps a lookup
 *	  module that crashes (NSS, in a static glibc build) out of throttle.
 * IPv4 addresses come first, then IPv6, as hiredis asks for them.
 *
 * Only the throttle binary forks (resolve_fork()): the PAM module, in a
 * host process that may have threads, looks the name up itself, for as
 * long as the resolver tries (pam_throttle(8) says so).
 */
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
#include <unistd.h>

#include "throttle.h"

#define HOSTS_FILE "/etc/hosts"
#define HOSTS_MAX (16 << 20) /* a hosts file read, at most */

/* The addresses /etc/hosts gives name: how many (0: none, or no file). */
static int
from_hosts_file(const char *name, struct addrs *out)
{
	FILE *f = fopen(HOSTS_FILE, "re");
	char *text;
	size_t len = 0, cap = 1 << 12, got;

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
			    (more = realloc(text, cap * 2)) == NULL)
				break;
			text = more;
			cap *= 2;
		}
	}
	fclose(f);
	hosts_lookup(text, len, name, out);
	free(text);
	return out->n;
}

/*
 * Look name up with getaddrinfo(), into buf (size bytes: room for
 * ADDRS_MAX addresses): a line an address, IPv4 first, or "!CODE" for
 * getaddrinfo's error.  Its length.
 */
static size_t
lookup_text(const char *name, char *buf, size_t size)
{
	struct addrinfo hints, *res, *ai;
	char addr[ADDR_LEN];
	size_t len = 0;
	int rc, pass, n = 0;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if ((rc = getaddrinfo(name, NULL, &hints, &res)) != 0)
		return (size_t)snprintf(buf, size, "!%d\n", rc);
	for (pass = 0; pass < 2; pass++)
		for (ai = res; ai != NULL && n < ADDRS_MAX; ai = ai->ai_next) {
			int family = pass == 0 ? AF_INET : AF_INET6;
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
			len += (size_t)snprintf(buf + len, size - len, "%s\n",
			    addr);
			n++;
		}
	freeaddrinfo(res);
	return len;
}

/* The child's answer (len bytes of text) into out: 0, or getaddrinfo's
 * error code (EAI_FAIL if the answer makes no sense). */
static int
child_answer(char *text, size_t len, struct addrs *out)
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
	return out->n > 0 ? 0 : EAI_NONAME;
}

static int forking; /* resolve_fork() */

/* Whether names are looked up in a child process (1) or by the caller. */
void
resolve_fork(int on)
{
	forking = on;
}

/*
 * The addresses of name into out, within us microseconds: 0; or -1 with
 * why set to what failed (getaddrinfo's words), or RESOLVE_SLOW if the
 * time ran out.
 */
int
resolve_host(const char *name, int64_t us, struct addrs *out, char *why,
    size_t whylen)
{
	char text[ADDRS_MAX * (ADDR_LEN + 1) + 32];
	int64_t end = clock_monotonic() + us, left;
	size_t len = 0;
	ssize_t got = -1;
	struct pollfd pfd;
	int p[2], rc, status, err = 0;
	pid_t pid;

	if (addrs_numeric(name, out) || from_hosts_file(name, out) > 0)
		return 0;
	if (strcasecmp(name, "localhost") == 0) {
		out->n = 2;
		strcpy(out->a[0], "127.0.0.1");
		strcpy(out->a[1], "::1");
		return 0;
	}
	if (!forking) {
		len = lookup_text(name, text, sizeof(text));
		text[len < sizeof(text) ? len : sizeof(text) - 1] = '\0';
		if ((rc = child_answer(text, len, out)) != 0) {
			snprintf(why, whylen, "%s", gai_strerror(rc));
			return -1;
		}
		return 0;
	}
	if (pipe(p) == -1) {
		snprintf(why, whylen, "cannot look the name up: %s",
		    strerror(errno));
		return -1;
	}
	fcntl(p[0], F_SETFD, FD_CLOEXEC);
	fcntl(p[1], F_SETFD, FD_CLOEXEC);
	if ((pid = fork()) == -1) {
		snprintf(why, whylen, "cannot look the name up: %s",
		    strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		/* the child: its answer, then its end */
		close(p[0]);
		len = lookup_text(name, text, sizeof(text));
		(void)!write(p[1], text, len);
		_exit(0);
	}
	close(p[1]);
	pfd.fd = p[0];
	pfd.events = POLLIN;
	while ((left = end - clock_monotonic()) > 0) {
		rc = poll(&pfd, 1, (int)((left + 999) / 1000));
		if (rc == 0 || (rc == -1 && errno == EINTR))
			continue;
		if (rc == -1) {
			err = errno;
			break;
		}
		got = read(p[0], text + len, sizeof(text) - 1 - len);
		if (got == -1 && errno == EINTR)
			continue;
		if (got == -1)
			err = errno;
		if (got <= 0)
			break;
		if ((len += (size_t)got) == sizeof(text) - 1)
			break;
	}
	close(p[0]);
	/* done (it has written all), or still looking: killed either way,
	 * and waited for, so no child is left behind */
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	if (err != 0) {
		snprintf(why, whylen, "cannot look the name up: %s",
		    strerror(err));
		return -1;
	}
	if (got != 0 && len < sizeof(text) - 1) {
		snprintf(why, whylen, "looking the name up took too long");
		return RESOLVE_SLOW;
	}
	text[len] = '\0';
	if ((rc = child_answer(text, len, out)) != 0) {
		snprintf(why, whylen, "%s", gai_strerror(rc));
		return -1;
	}
	return 0;
}
