/*
 * main.c: throttle decides whether an action keyed by a string may happen
 * now, under a limit whose state it keeps in a file shared by every caller.
 */
#include <poll.h>
#include <unistd.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "throttle.h"

/* Nonzero if stdout is a pipe whose reader has gone (as `| head` does). */
static int
reader_left(void)
{
	struct pollfd p = { .fd = STDOUT_FILENO, .events = 0, .revents = 0 };

	return errno == EPIPE ||
	    (poll(&p, 1, 0) == 1 && (p.revents & POLLERR) != 0);
}

int
main(int argc, char **argv)
{
	static char errbuf[8192], outbuf[4096];
	int rc, decision;

	/* stderr is unbuffered, and a message went out a byte or a piece at
	 * a time: a line at a time, the messages of processes that share a
	 * log (cron jobs, a CI job's steps) cannot interleave mid-line */
	setvbuf(stderr, errbuf, _IOLBF, sizeof(errbuf));
	/* stdout off a terminal is written when a command ends, or when
	 * batch ends a group, as glibc buffers it; musl's writes its first
	 * line at once, so a write that failed there took its errno (a full
	 * disk) with it before the check below could name it */
	if (!isatty(STDOUT_FILENO))
		setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
	/*
	 * A decision is committed before it is printed: a reader that went
	 * away (EPIPE) must not turn its exit status into a signal's.
	 */
	signal(SIGPIPE, SIG_IGN);
	store_sqlite_single_thread();
#ifdef THROTTLE_REDIS
	/* one thread: a host name is looked up in a child, within time */
	resolve_fork(1);
#endif
	slice_short();
	rc = cmd_main(argc, argv, &decision);
	/* if stdout cannot be written, say so (unless its reader simply
	 * left); a decision keeps its exit code, as it is still the truth,
	 * but a command whose answer is its output (inspect, verify, gc,
	 * policy, help) did not do what was asked */
	errno = 0;
	if (fflush(stdout) == EOF || ferror(stdout)) {
		/* a write that failed earlier, its reason kept */
		if (errno == 0)
			errno = output_failed();
		if (!reader_left()) {
			log_msg("standard output: %s",
			    errno != 0 ? strerror(errno) : "a write failed");
			if (!decision && rc != EXIT_USAGE)
				rc = EXIT_STATE;
		}
	}
	return rc;
}
