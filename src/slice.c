/*
 * slice.c: a short scheduler slice for the throttle binary's own calls.
 *
 * A call is a process that runs for about half a millisecond of CPU and
 * holds the writers' turn for a small part of it.  On a busy machine a
 * waiter woken for the turn, and every caller starting or ending, waits
 * for a CPU behind processes that run a whole default slice (0.7 to 3 ms)
 * before they yield; the line's p99 follows those waits.  Since Linux 6.12
 * a process may ask for a shorter slice without privilege
 * (sched_attr.sched_runtime, clamped to 0.1-100 ms): it keeps its share
 * of the CPU, as its nice value is unchanged, but runs and is woken in
 * smaller steps, so a woken waiter gets a CPU sooner.  Earlier kernels
 * report no slice (sched_runtime 0) and are not asked; where a call fails
 * (a kernel without sched_getattr, a seccomp filter that returns an
 * error) nothing changes.  A filter that kills on a call it does not list
 * must list sched_getattr and sched_setattr, or the caller sets
 * THROTTLE_SLICE=default, which asks for nothing.
 *
 * Only a SCHED_OTHER process asks: chrt's batch, idle or real-time
 * policies are the caller's choice and are left as they are, as is the
 * nice value.  What throttle runs (run's command), and the commands that
 * run long (batch, gc, verify: cmd_entry.runs_long), get the caller's
 * slice back (slice_default()).  The PAM module never asks: its host's
 * scheduling is not throttle's to change.
 */
#ifdef __linux__
#include <sys/syscall.h>
#endif

#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "throttle.h"

#define SLICE_NS 100000 /* the least the kernel grants: 0.1 ms */
#define RESET_ON_FORK 0x01 /* SCHED_FLAG_RESET_ON_FORK, kept as it was */

/* struct sched_attr as the kernel first defined it (48 bytes, VER0). */
struct sched_attr0 {
	uint32_t size;
	uint32_t policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime;
	uint64_t deadline;
	uint64_t period;
};
_Static_assert(sizeof(struct sched_attr0) == 48, "SCHED_ATTR_SIZE_VER0");

static int slice_asked; /* this process asked for SLICE_NS */
static uint64_t slice_was; /* the caller's slice, in ns, before */

/* The process's scheduling into *a, if it is SCHED_OTHER: 0, or -1. */
static int
slice_get(struct sched_attr0 *a)
{
#if defined(__linux__) && defined(SYS_sched_getattr)
	memset(a, 0, sizeof(*a));
	if (syscall(SYS_sched_getattr, 0, a, sizeof(*a), 0) == -1 ||
	    a->policy != SCHED_OTHER)
		return -1;
	return 0;
#else
	(void)a;
	return -1;
#endif
}

/* Ask for a slice of ns nanoseconds (0: the kernel's default), the
 * policy, nice value and reset-on-fork flag left as a says: 0, or -1. */
static int
slice_set(struct sched_attr0 *a, uint64_t ns)
{
#if defined(__linux__) && defined(SYS_sched_setattr)
	a->size = sizeof(*a);
	a->flags &= RESET_ON_FORK;
	a->priority = 0;
	a->runtime = ns;
	a->deadline = 0;
	a->period = 0;
	return syscall(SYS_sched_setattr, 0, a, 0) == -1 ? -1 : 0;
#else
	(void)a;
	(void)ns;
	return -1;
#endif
}

static int env_ignored; /* slice_ignore_env(): THROTTLE_SLICE not read */

/*
 * From now on THROTTLE_SLICE is not read, and no slice is asked for: for
 * the PAM module, whose environment may be the user's (su, sudo).
 */
void
slice_ignore_env(void)
{
	env_ignored = 1;
}

/*
 * What THROTTLE_SLICE asks for: 1 the short slice (unset, empty or
 * "short"), 0 none ("default", or the environment is not read), -1 a
 * value it cannot be (*bad set).
 */
int
slice_wanted(const char **bad)
{
	const char *env = env_ignored ? "default" : getenv("THROTTLE_SLICE");

	if (env == NULL || *env == '\0' || strcmp(env, "short") == 0)
		return 1;
	if (strcmp(env, "default") == 0)
		return 0;
	*bad = env;
	return -1;
}

/*
 * Ask for the short slice (the throttle binary, from main()), unless
 * THROTTLE_SLICE asks for none (a bad value asks for none, and
 * ctx_init() refuses it), or the caller's slice is that short already.
 */
void
slice_short(void)
{
	const char *bad;
	struct sched_attr0 a;

	if (slice_asked || slice_wanted(&bad) != 1 || slice_get(&a) == -1 ||
	    a.runtime <= SLICE_NS)
		return;
	slice_was = a.runtime;
	if (slice_set(&a, SLICE_NS) == 0)
		slice_asked = 1;
}

/*
 * Give the caller's slice back, before exec or a long run (batch, gc,
 * verify): the kernel's default, or the caller's own if it had asked for
 * one (a slice read back is a length, not whether it was asked for).
 */
void
slice_default(void)
{
	struct sched_attr0 a;

	if (!slice_asked || slice_get(&a) == -1 || slice_set(&a, 0) == -1)
		return;
	slice_asked = 0;
	if (slice_get(&a) == 0 && a.runtime != slice_was)
		slice_set(&a, slice_was);
}
