/*
 * cmd-run.c: run a command under a limit, for cron and CI.  The only file
 * that forks, execs or handles signals.
 *
 *	1. With --limit (any algorithm): one unit (--cost) is consumed in its
 *	   own committed transaction, then throttle execs the command, which
 *	   takes its place: the status is the command's own.
 *	2. With --concurrency: a lease owned by this wrapper process is taken,
 *	   the command runs as a child, and the lease is released when the
 *	   child exits, whatever the reason.  No transaction and no descriptor
 *	   of the state file is open while the child runs: the store is closed
 *	   before the fork (and SQLite opens its files close-on-exec anyway).
 *	3. SIGINT, SIGTERM and SIGHUP sent to the wrapper are passed on to the
 *	   child; the wrapper waits for it and exits with its status, or with
 *	   128 + N if signal N killed it.
 *	4. A wrapper killed with SIGKILL cannot release its lease, but the
 *	   lease names the wrapper as its owner (pid and start time), so the
 *	   next acquire on this host sees the owner gone and frees the slot.
 *	   On Linux the child gets SIGTERM when the wrapper dies
 *	   (PR_SET_PDEATHSIG), so no job runs on without its slot.
 *	5. When refused, the command does not run: exit 75 (EX_TEMPFAIL) or
 *	   --conflict-exit-code, with one line on stderr unless -q.
 *	6. The command gets stdout: run writes nothing there.
 */
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "throttle.h"

#define EXIT_NOT_FOUND 127
#define EXIT_CANNOT_RUN 126

static volatile sig_atomic_t child;

static void
forward(int sig)
{
	if (child > 0)
		kill((pid_t)child, sig);
}

static void
exec_command(struct opts *o)
{
	execvp(o->command[0], o->command);
	fprintf(stderr, "throttle: run: %s: %s\n", o->command[0],
	    strerror(errno));
	_exit(errno == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN);
}

/* Run the command as a child, passing signals on; its exit status. */
static int
run_child(struct opts *o)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa;
	sigset_t block, old;
	pid_t parent = getpid(), pid;
	int status, i;

	sigemptyset(&block);
	for (i = 0; i < 3; i++)
		sigaddset(&block, sigs[i]);
	/* no signal may slip in between the fork and knowing the child */
	sigprocmask(SIG_BLOCK, &block, &old);
	fflush(NULL);
	if ((pid = fork()) == -1) {
		log_msg("run: cannot start %s: %s", o->command[0],
		    strerror(errno));
		sigprocmask(SIG_SETMASK, &old, NULL);
		return EXIT_CANNOT_RUN;
	}
	if (pid == 0) {
#ifdef __linux__
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(128 + SIGTERM); /* the wrapper is gone already */
#endif
		sigprocmask(SIG_SETMASK, &old, NULL);
		exec_command(o);
	}
	child = pid;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	for (i = 0; i < 3; i++)
		sigaction(sigs[i], &sa, NULL);
	sigprocmask(SIG_SETMASK, &old, NULL);
	while (waitpid(pid, &status, 0) == -1) {
		if (errno != EINTR) {
			log_msg("run: lost track of %s: %s", o->command[0],
			    strerror(errno));
			child = 0;
			return EXIT_CANNOT_RUN;
		}
	}
	child = 0;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return EXIT_CANNOT_RUN;
}

/* Free the wrapper's lease; a failure only warns, the lease heals. */
static void
release(const struct opts *o, const struct lease *l)
{
	struct store *st;
	char err[STORE_ERR_MAX];
	int rc;

	if ((st = store_open(o->db, o->lock_timeout, err, sizeof(err))) ==
	    NULL) {
		log_msg("%s; lease %s frees itself once this process is gone",
		    err, l->id);
		return;
	}
	do {
		if (store_begin(st, 1) == -1 ||
		    store_lease_del(st, o->key, o->keylen, l->id) == -1 ||
		    (rc = store_commit(st)) == -1) {
			log_msg("%s; lease %s frees itself once this process "
				"is gone",
			    store_error(st), l->id);
			store_rollback(st);
			break;
		}
	} while (rc == STORE_RETRY);
	store_close(st);
}

static int
refused(const struct opts *o, const char *why)
{
	if (!o->quiet) {
		log_key(o->key, o->keylen, " %s; not running %s", why,
		    o->command[0]);
	}
	return o->conflict_exit_code;
}

static int
run_exec(struct opts *o)
{
	struct decision d;
	struct lease l;
	int64_t active, soonest;
	char why[64], t[32];
	int rc, status;

	if ((o->nlimits > 0) == o->has_concurrency)
		die_usage("run: give --limit (a rate) or --concurrency (a "
			  "number of slots), one of them");
	if (o->nlimits > 0) {
		if ((rc = cmd_consume_wait(o, 0, &d)) != EXIT_ALLOWED &&
		    rc != EXIT_REFUSED)
			return rc;
		if (!d.allowed) {
			output_seconds(t, sizeof(t), d.retry_after);
			snprintf(why, sizeof(why), "throttled, retry in %ss",
			    t);
			return refused(o, why);
		}
		fflush(NULL);
		exec_command(o);
	}
	if (cmd_acquire_check(o, "run") != 0)
		return EXIT_USAGE;
	switch (cmd_acquire_wait(o, getpid(), o->has_ttl ? o->ttl : 0, &l,
	    &active, &soonest, &rc)) {
	case -1:
		return rc;
	case 0:
		if (o->concurrency == 1)
			snprintf(why, sizeof(why), "has its one slot held");
		else
			snprintf(why, sizeof(why), "has all %lld slots held",
			    (long long)o->concurrency);
		return refused(o, why);
	}
	status = run_child(o);
	release(o, &l);
	return status;
}

const struct cmd_entry cmd_run_entry = {
	.name = "run",
	.args = "KEY --limit N/PERIOD [limit options] | --concurrency N "
		"[lease options] [--wait[=MAX]] [--conflict-exit-code N] -- "
		"COMMAND [ARGS...]",
	.summary = "run COMMAND if the limit allows it (a rate, or a slot held "
		   "while it runs); exit with its status",
	.options = CMDOPT_LIMIT | CMDOPT_BURST | CMDOPT_ALGORITHM |
	    CMDOPT_COST | CMDOPT_GRANULARITY | CMDOPT_CONCURRENCY | CMDOPT_TTL |
	    CMDOPT_PRIORITY | CMDOPT_RUN | CMDOPT_LOCKOUT | CMDOPT_WAIT,
	.uses_policy = 1,
	.min_args = 1,
	.max_args = 1,
	.operand_is_key = 1,
	.takes_command = 1,
	.exec = run_exec,
};
