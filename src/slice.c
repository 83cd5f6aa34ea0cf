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
 * ignore the request for SCHED_OTHER; where the call is refused (seccomp,
 * a kernel without sched_setattr) nothing changes.
 *
 * Only a SCHED_OTHER process asks: chrt's batch, idle or real-time
 * policies are the caller's choice and are left as they are, as is the
 * nice value.  What throttle runs (run's command) starts with the
 * kernel's default slice again (slice_default()).  The PAM module never
 * asks: its host's scheduling is not throttle's to change.
 */
#ifdef __linux__
#include <sys/syscall.h>
#endif

#include <sched.h>
#include <stdint.h>
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

static int slice_asked; /* this process asked for SLICE_NS */

/* Ask for a slice of ns nanoseconds (0: the default): 0, or -1. */
static int
slice_set(uint64_t ns)
{
#if defined(__linux__) && defined(SYS_sched_getattr) &&                        \
    defined(SYS_sched_setattr)
	struct sched_attr0 a;

	memset(&a, 0, sizeof(a));
	if (syscall(SYS_sched_getattr, 0, &a, sizeof(a), 0) == -1 ||
	    a.policy != SCHED_OTHER)
		return -1;
	a.size = sizeof(a);
	a.flags &= RESET_ON_FORK;
	a.priority = 0;
	a.runtime = ns;
	a.deadline = 0;
	a.period = 0;
	return syscall(SYS_sched_setattr, 0, &a, 0) == -1 ? -1 : 0;
#else
	(void)ns;
	return -1;
#endif
}

/* Ask for the short slice (the throttle binary, from main()). */
void
slice_short(void)
{
	if (!slice_asked && slice_set(SLICE_NS) == 0)
		slice_asked = 1;
}

/* Give the default slice back, before exec or a long run (batch). */
void
slice_default(void)
{
	if (slice_asked && slice_set(0) == 0)
		slice_asked = 0;
}
