/*
 * host.c: facts about this machine that leases and the shedder need: its
 * name and boot, whether a process still runs, fresh random lease ids, and
 * how loaded the CPUs are.  The only reader of /proc (or of $THROTTLE_PROC,
 * a stand-in root for tests).
 *
 * A process is the same one only if its pid and its start time (field 22
 * of /proc/PID/stat, clock ticks after boot) both match, on the same boot
 * of the same host: pids are reused, start times within a boot are not.
 */
#include <sys/random.h>

#include <dirent.h>

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "throttle.h"

/* Where /proc is read: THROTTLE_PROC, or /proc. */
const char *
host_proc_root(void)
{
	const char *r = getenv("THROTTLE_PROC");

	return r != NULL && *r != '\0' ? r : "/proc";
}

/* Read a small file under the proc root into buf; its length or -1. */
static ssize_t
read_proc(const char *rel, char *buf, size_t len)
{
	char path[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", host_proc_root(), rel);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/*
 * The first PID namespace's inode (PROC_PID_INIT_INO), on every Linux
 * since 3.8: the host's own, where a pid means what it says to every
 * process of the host.
 */
#define PIDNS_INIT "pid:[4026531836]"

/* This host's name and boot id (empty if the kernel does not say). */
int
host_self(struct host *h)
{
	char buf[64], path[4096], ns[64];
	ssize_t n;
	size_t len;
	char *p;

	memset(h, 0, sizeof(*h));
	if (gethostname(h->name, sizeof(h->name) - 1) == -1 ||
	    h->name[0] == '\0')
		snprintf(h->name, sizeof(h->name), "localhost");
	for (p = h->name; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == ' ')
			*p = '?'; /* a lease's host is one printable word */
	/* a process in a PID namespace of its own (a container, unshare
	 * -p) is on another host as far as pids go: its pid 7 is not the
	 * host's, nor another container's.  Named apart, a lease it holds
	 * is never taken for one whose owner is gone, by the host or by a
	 * container with the same host name; the host's own name stays as
	 * it was, so leases taken before this are still judged. */
	snprintf(path, sizeof(path), "%s/self/ns/pid", host_proc_root());
	if ((n = readlink(path, ns, sizeof(ns) - 1)) > 0) {
		ns[n] = '\0';
		len = strlen(h->name);
		if (strcmp(ns, PIDNS_INIT) != 0 &&
		    strncmp(ns, "pid:[", 5) == 0 &&
		    len + 1 + (size_t)n < sizeof(h->name))
			snprintf(h->name + len, sizeof(h->name) - len, "/%.*s",
			    (int)(n - 6), ns + 5); /* "/4026532178" */
	}
	if (read_proc("sys/kernel/random/boot_id", buf, sizeof(buf)) > 0) {
		buf[strcspn(buf, "\n")] = '\0';
		buf[BOOT_ID_MAX] = '\0';
		if (strspn(buf, "0123456789abcdef-") == strlen(buf))
			memcpy(h->boot_id, buf, strlen(buf) + 1);
	}
	return 0;
}

/* The start time of process pid; -1 if there is no such process. */
int
host_pid_start(int64_t pid, int64_t *start)
{
	char rel[64], buf[1024], *p;
	int field;

	if (pid <= 0)
		return -1;
	snprintf(rel, sizeof(rel), "%lld/stat", (long long)pid);
	if (read_proc(rel, buf, sizeof(buf)) <= 0 ||
	    (p = strrchr(buf, ')')) == NULL)
		return -1;
	/* after "pid (comm)" come fields 3, 4, ...; starttime is 22 */
	for (field = 2; field < 22 && p != NULL; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL)
		return -1;
	*start = strtoll(p + 1, NULL, 10);
	return 0;
}

/*
 * Fields of /proc/PID/stat: the state (3), the process group (5) and the
 * start time (22).  -1 if there is no such process.
 */
static int
proc_stat(const char *pid, char *state, int64_t *pgrp, int64_t *start)
{
	char rel[300], buf[1024], *p;
	int field;

	snprintf(rel, sizeof(rel), "%s/stat", pid);
	if (read_proc(rel, buf, sizeof(buf)) <= 0 ||
	    (p = strrchr(buf, ')')) == NULL)
		return -1;
	/* after "pid (comm)" come fields 3, 4, ...: p is before field 3 */
	for (field = 2; field < 22 && p != NULL; field++) {
		if (field == 2)
			*state = p[2];
		else if (field == 5)
			*pgrp = strtoll(p + 1, NULL, 10);
		p = strchr(p + 1, ' ');
	}
	if (p == NULL)
		return -1;
	*start = strtoll(p + 1, NULL, 10);
	return 0;
}

/*
 * Nonzero if the kernel has a process (id > 0) or process group (id < 0)
 * that /proc does not show: mounted with hidepid (systemd's
 * ProtectProc=invisible), where another user's processes are not listed.
 * Only for the real /proc: a stand-in's processes are not the kernel's.
 */
static int
hidden_from_proc(pid_t id)
{
	if (strcmp(host_proc_root(), "/proc") != 0)
		return 0;
	return kill(id, 0) == 0 || errno == EPERM;
}

/*
 * Whether a process of group pgid that started no earlier than its
 * leader did (start, ticks after boot) still runs on this host: the group
 * is still there.  Zombies do not count.  A group id is not reused while
 * any process of the group lives, and a later group with the same id
 * would need its leader's pid reused as well.  OWNER_UNKNOWN if the
 * group has processes /proc does not show.
 */
static enum owner_state
group_state(int64_t pgid, int64_t start)
{
	char path[4096], state = 'X';
	struct dirent *e;
	int64_t pgrp = 0, st = 0;
	DIR *d;
	int seen = 0;
	enum owner_state r = OWNER_DEAD;

	snprintf(path, sizeof(path), "%s", host_proc_root());
	if (pgid <= 0 || pgid > INT32_MAX)
		return OWNER_DEAD;
	/* a leader started after the job: its id was free, so the job's
	 * group is gone and this is another's */
	if (host_pid_start(pgid, &st) == 0 && st > start)
		return OWNER_DEAD;
	if ((d = opendir(path)) == NULL)
		return hidden_from_proc(-(pid_t)pgid) ? OWNER_UNKNOWN
						      : OWNER_DEAD;
	while (r == OWNER_DEAD && (e = readdir(d)) != NULL) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9' ||
		    proc_stat(e->d_name, &state, &pgrp, &st) != 0 ||
		    pgrp != pgid)
			continue;
		seen = 1;
		if (st >= start && state != 'Z' && state != 'X')
			r = OWNER_ALIVE;
	}
	closedir(d);
	/* none of it shown, yet the kernel has it: not ours to end */
	if (r == OWNER_DEAD && !seen && hidden_from_proc(-(pid_t)pgid))
		r = OWNER_UNKNOWN;
	return r;
}

int
host_group_alive(int64_t pgid, int64_t start)
{
	return group_state(pgid, start) != OWNER_DEAD;
}

/*
 * Whether a lease's owner is known to live, known gone, or unknowable.  A
 * run wrapper's lease lives while the wrapper does, and after it while any
 * process of its job's process group does.
 */
enum owner_state
host_owner_state(const struct host *me, const struct lease *l)
{
	char pid[32], state = 'X';
	int64_t start = 0, pgrp = 0;

	if (l->pid == 0 || strcmp(l->host, me->name) != 0)
		return OWNER_UNKNOWN;
	/* a boot id the lease's taker could read and this process cannot
	 * (its /proc is not the same): nothing here can be judged */
	if (me->boot_id[0] == '\0' && l->boot_id[0] != '\0')
		return OWNER_UNKNOWN;
	if (me->boot_id[0] != '\0' && l->boot_id[0] != '\0' &&
	    strcmp(l->boot_id, me->boot_id) != 0)
		return OWNER_DEAD; /* this host has rebooted since */
	/* the same process, still running: a zombie has ended (a run
	 * wrapper killed with -9, not yet reaped by its parent) */
	snprintf(pid, sizeof(pid), "%lld", (long long)l->pid);
	if (proc_stat(pid, &state, &pgrp, &start) == 0) {
		if (start == l->pid_start && state != 'Z' && state != 'X')
			return OWNER_ALIVE;
	} else if (l->pid > 0 && l->pid <= INT32_MAX &&
	    hidden_from_proc((pid_t)l->pid))
		return OWNER_UNKNOWN; /* its start time cannot be read */
	if (l->pgid > 0)
		return group_state(l->pgid, l->pgid_start);
	return OWNER_DEAD;
}

/* 64 bits from the kernel's random source. */
uint64_t
host_random(void)
{
	uint64_t r = 0;
	size_t got = 0;
	ssize_t n;

	while (got < sizeof(r)) {
		n = getrandom((char *)&r + got, sizeof(r) - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* no getrandom: time and pid, still unique enough
			 * for lease ids that also carry the owner */
			r ^= (uint64_t)getpid() << 32 ^ (uint64_t)clock();
			break;
		}
		got += (size_t)n;
	}
	return r;
}

/* A new lease id: LEASE_ID_LEN hex digits. */
int
host_new_id(char *buf, size_t len)
{
	snprintf(buf, len, "%016llx", (unsigned long long)host_random());
	return 0;
}

/*
 * This machine's utilization in millionths: Linux PSI's cpu "some avg10"
 * percentage divided by 100 where the kernel has it, else the 1-minute
 * load average divided by the number of CPUs (not clamped).  *source says
 * which.
 */
int
host_utilization(int64_t *ppm, const char **source)
{
	char buf[512], *p;
	const char *err;
	long cpus;
	int64_t v;

	if (read_proc("pressure/cpu", buf, sizeof(buf)) > 0 &&
	    (p = strstr(buf, "some avg10=")) != NULL) {
		p += strlen("some avg10=");
		p[strcspn(p, " \n")] = '\0';
		if (parse_fraction(p, &v, &err) == 0) {
			*ppm = v / 100;
			*source = "psi";
			return 0;
		}
	}
	if (read_proc("loadavg", buf, sizeof(buf)) > 0) {
		buf[strcspn(buf, " \n")] = '\0';
		cpus = sysconf(_SC_NPROCESSORS_ONLN);
		if (parse_fraction(buf, &v, &err) == 0) {
			*ppm = v / (cpus > 0 ? cpus : 1);
			*source = "loadavg";
			return 0;
		}
	}
	return -1;
}
