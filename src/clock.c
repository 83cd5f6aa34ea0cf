/*
 * clock.c: the only reader of the clock and of THROTTLE_NOW.
 *
 * Decisions use the wall clock (CLOCK_REALTIME), since the state they are
 * compared with is shared between processes and survives reboots.
 * THROTTLE_NOW, decimal seconds since the epoch, replaces it for tests and
 * replays; an empty THROTTLE_NOW counts as unset.
 */
#include <stdlib.h>
#include <time.h>

#include "throttle.h"

/* The current time in us, or -1 with *errstr if THROTTLE_NOW is bad. */
int
clock_now(int64_t *now, const char **errstr)
{
	const char *s = getenv("THROTTLE_NOW");
	struct timespec ts;

	if (s != NULL && *s != '\0')
		return parse_time(s, now, errstr);
	if (clock_gettime(CLOCK_REALTIME, &ts) == -1 || ts.tv_sec < 0) {
		*errstr = "cannot be read from the system clock";
		return -1;
	}
	*now = (int64_t)ts.tv_sec * US_PER_SEC + ts.tv_nsec / 1000;
	return 0;
}
