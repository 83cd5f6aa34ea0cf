/*
 * clock.c: the only reader of the clock and of THROTTLE_NOW, and the only
 * sleeper (for --wait).
 *
 * Decisions use the wall clock (CLOCK_REALTIME), since the state they are
 * compared with is shared between processes and survives reboots.
 * THROTTLE_NOW, decimal seconds since the epoch, replaces it for tests and
 * replays; an empty THROTTLE_NOW counts as unset.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "throttle.h"

/* The current time in us, or -1 with *errstr if THROTTLE_NOW is bad. */
int
clock_now(int64_t *now, const char **errstr)
{
	const char *s = clock_pinned_text();

	return s != NULL ? parse_time(s, now, errstr)
			 : clock_system(now, errstr);
}

/* The system's time in us, whatever THROTTLE_NOW says: 0, or -1 with
 * *errstr (for a caller that has looked at THROTTLE_NOW already). */
int
clock_system(int64_t *now, const char **errstr)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_REALTIME, &ts) == -1 || ts.tv_sec < 0) {
		*errstr = "cannot be read from the system clock";
		return -1;
	}
	*now = (int64_t)ts.tv_sec * US_PER_SEC + ts.tv_nsec / 1000;
	return 0;
}

/* Nonzero if THROTTLE_NOW pins the clock (tests and replays). */
int
clock_pinned(void)
{
	return clock_pinned_text() != NULL;
}

static int ignore_env; /* clock_real_only(): THROTTLE_NOW is not read */

/*
 * From now on the clock is the system's whatever THROTTLE_NOW says: for
 * the PAM module, whose environment may be the user's (su, sudo).
 */
void
clock_real_only(void)
{
	ignore_env = 1;
}

/* THROTTLE_NOW as given, for messages, or NULL if the clock is real. */
const char *
clock_pinned_text(void)
{
	const char *s = ignore_env ? NULL : getenv("THROTTLE_NOW");

	return s != NULL && *s != '\0' ? s : NULL;
}

/* Microseconds on the monotonic clock, for waits that clock steps spare. */
int64_t
clock_monotonic(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * US_PER_SEC + ts.tv_nsec / 1000;
}

static volatile sig_atomic_t caught;

static void
on_signal(int sig)
{
	caught = sig;
}

/*
 * Sleep us, leaving signals as they are: a store's nap between tries is
 * no --wait to cut short, so a signal that ends the process (SIGTERM from
 * a service manager) ends it at once, not once --lock-timeout has run out
 * (clock_sleep() would catch it, and a store's caller not look).
 */
void
clock_nap(int64_t us)
{
	struct timespec ts;
	int64_t deadline = clock_monotonic() + us, left;

	while ((left = deadline - clock_monotonic()) > 0) {
		ts.tv_sec = (time_t)(left / US_PER_SEC);
		ts.tv_nsec = (long)(left % US_PER_SEC) * 1000;
		if (nanosleep(&ts, NULL) == -1 && errno != EINTR)
			break;
	}
}

/*
 * Sleep us microseconds on the monotonic clock.  SIGINT, SIGTERM or SIGHUP
 * cut the sleep short: the signal's number is returned (0 if none came),
 * so the caller can undo what it reserved before it exits.
 */
int
clock_sleep(int64_t us)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa, old[3];
	struct timespec ts;
	int64_t deadline = clock_monotonic() + us, left;
	int i;

	caught = 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < 3; i++) {
		/* one ignored since throttle started (nohup, a script's
		 * background job) stays ignored */
		sigaction(sigs[i], NULL, &old[i]);
		if (old[i].sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
	}
	while (!caught && (left = deadline - clock_monotonic()) > 0) {
		ts.tv_sec = (time_t)(left / US_PER_SEC);
		ts.tv_nsec = (long)(left % US_PER_SEC) * 1000;
		if (nanosleep(&ts, NULL) == -1 && errno != EINTR)
			break;
	}
	for (i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	return caught;
}
