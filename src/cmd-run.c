/*
 * cmd-run.c: run a command under a limit, for cron and CI.  The only file
 * that forks, execs or handles signals.
 *
 *	1. With --limit (any algorithm): one unit (--cost) is consumed in its
 *	   own committed transaction, then throttle execs the command, which
 *	   takes its place: the status is the command's own.  A command that
 *	   cannot be executed (not found: 127, not executable: 126) gives its
 *	   unit back before throttle exits.
 *	2. With --concurrency: the command is started first, as a job in a
 *	   process group of its own, and held before it execs; a lease naming
 *	   this wrapper and the job's group is taken; then the job is let go,
 *	   or, refused, told to exit unrun.  The slot is held while the
 *	   wrapper lives and, after it, while any process of the job's group
 *	   lives (host_owner_state()): a job's background processes,
 *	   pipelines and grandchildren hold it too, even after a kill -9 of
 *	   the wrapper.  A process that leaves the group (setsid, as daemons
 *	   do) is no longer part of the job.  No transaction and no
 *	   descriptor of the state file is open while the job runs (SQLite
 *	   and hiredis descriptors are close-on-exec).
 *	3. SIGINT, SIGTERM and SIGHUP sent to the wrapper are passed on to the
 *	   job's group; the wrapper waits for the job and exits with its
 *	   status, or with 128 + N if signal N killed it.
 *	4. When the wrapper dies, the job's first process gets SIGTERM
 *	   (PR_SET_PDEATHSIG, Linux); whatever of the job lives on keeps the
 *	   slot until it ends.  A job that leaves processes in its group when
 *	   its first process exits keeps the slot the same way, and the
 *	   wrapper says so.
 *	5. When refused, the command does not run: exit 75 (EX_TEMPFAIL) or
 *	   --conflict-exit-code, with one line on stderr unless -q.
 *	6. The command gets stdout: run writes nothing there.
 *	7. At a terminal, the job's group is the foreground group while it
 *	   runs, as a shell would make it, so it can read the terminal and ^C
 *	   reaches it.
 */
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "throttle.h"

#define EXIT_NOT_FOUND 127
#define EXIT_CANNOT_RUN 126

static volatile sig_atomic_t job_group;

static void
forward(int sig)
{
	if (job_group > 0)
		kill(-(pid_t)job_group, sig);
}

/* The exit status for a command that could not be executed. */
static int
cannot_run(int err)
{
	return err == ENOENT || err == ENOTDIR ? EXIT_NOT_FOUND
					       : EXIT_CANNOT_RUN;
}

/* A job started and held before its exec (start_job()). */
struct job {
	pid_t pid; /* its first process, and its process group */
	int64_t start; /* when it started, ticks after boot */
	int go; /* a byte lets it exec; closing it unwritten ends it */
	int report; /* an errno if its exec failed, else end of file */
	int tty; /* the terminal whose foreground it takes, or -1 */
};

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP };

/*
 * Fork the job: in a process group of its own, held until j->go says.  0,
 * or -1 (reported).  Until run_job(), a signal that ends the wrapper ends
 * the held job too, unrun.
 */
static int
start_job(const struct args *a, struct job *j)
{
	sigset_t block, old;
	int go[2], report[2], err;
	pid_t parent = getpid();
	char c = 0;
	size_t i;

	memset(j, 0, sizeof(*j));
	j->tty = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp()
	    ? STDIN_FILENO
	    : -1;
	if (pipe(go) == -1 || pipe(report) == -1) {
		log_msg("run: cannot start %s: %s", a->command[0],
		    strerror(errno));
		return -1;
	}
	fcntl(go[1], F_SETFD, FD_CLOEXEC);
	fcntl(report[0], F_SETFD, FD_CLOEXEC);
	fcntl(report[1], F_SETFD, FD_CLOEXEC);
	sigemptyset(&block);
	for (i = 0; i < sizeof(forwarded) / sizeof(*forwarded); i++)
		sigaddset(&block, forwarded[i]);
	sigprocmask(SIG_BLOCK, &block, &old);
	fflush(NULL);
	if ((j->pid = fork()) == -1) {
		log_msg("run: cannot start %s: %s", a->command[0],
		    strerror(errno));
		sigprocmask(SIG_SETMASK, &old, NULL);
		return -1;
	}
	if (j->pid == 0) {
		setpgid(0, 0);
#ifdef __linux__
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(128 + SIGTERM); /* the wrapper is gone already */
#endif
		close(go[1]);
		close(report[0]);
		/* held until the wrapper has the slot; refused, or the
		 * wrapper gone: end without running anything */
		while (read(go[0], &c, 1) == -1 && errno == EINTR)
			;
		if (c != 'g')
			_exit(0);
		close(go[0]);
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(a->command[0], a->command);
		err = errno;
		fprintf(stderr, "throttle: run: %s: %s\n", a->command[0],
		    strerror(err));
		if (write(report[1], &err, sizeof(err)) == -1)
			_exit(cannot_run(err));
		_exit(cannot_run(err));
	}
	setpgid(j->pid, j->pid); /* also here: no race with the child's own */
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(go[0]);
	close(report[1]);
	j->go = go[1];
	j->report = report[0];
	if (host_pid_start(j->pid, &j->start) == -1)
		j->start = 0;
	return 0;
}

/* Make the terminal's foreground group g, as a shell does. */
static void
foreground(int tty, pid_t g)
{
	sigset_t ttou, old;

	if (tty < 0)
		return;
	sigemptyset(&ttou);
	sigaddset(&ttou, SIGTTOU);
	sigprocmask(SIG_BLOCK, &ttou, &old);
	tcsetpgrp(tty, g);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/*
 * Let the held job run, pass signals on to its group, and wait for its
 * first process: its exit status.  *ran is 0 if its exec failed.
 */
static int
run_job(const struct args *a, struct job *j, int *ran)
{
	struct sigaction sa;
	int status, err;
	ssize_t n;
	size_t i;

	foreground(j->tty, j->pid);
	job_group = j->pid;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	for (i = 0; i < sizeof(forwarded) / sizeof(*forwarded); i++)
		sigaction(forwarded[i], &sa, NULL);
	while (write(j->go, "g", 1) == -1 && errno == EINTR)
		;
	close(j->go);
	while ((n = read(j->report, &err, sizeof(err))) == -1 && errno == EINTR)
		;
	close(j->report);
	*ran = n != (ssize_t)sizeof(err);
	while (waitpid(j->pid, &status, 0) == -1) {
		if (errno != EINTR) {
			log_msg("run: lost track of %s: %s", a->command[0],
			    strerror(errno));
			job_group = 0;
			foreground(j->tty, getpgrp());
			return EXIT_CANNOT_RUN;
		}
	}
	job_group = 0;
	foreground(j->tty, getpgrp());
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return EXIT_CANNOT_RUN;
}

/* End a held job without running it. */
static void
cancel_job(struct job *j)
{
	int status;

	close(j->go);
	close(j->report);
	while (waitpid(j->pid, &status, 0) == -1 && errno == EINTR)
		;
}

/* Free the wrapper's lease; a failure only warns, the lease heals. */
static void
release(struct ctx *c, const struct args *a, const struct lease *l)
{
	struct answer ans;

	answer_init(&ans);
	if (concurrency_free(c, a->key, a->keylen, l->id, &ans) == -1)
		log_msg("%s; lease %s frees itself once this process is gone",
		    ans.msg, l->id);
	answer_free(&ans);
}

/* Refused: the command does not run; --conflict-exit-code. */
static void
refused(const struct args *a, const char *why, struct answer *ans)
{
	answer_say_key(ans, MSG_INFO, a->key, a->keylen, " %s; not running %s",
	    why, a->command[0]);
	ans->rc = a->conflict_exit_code;
}

/* --limit: consume, then become the command (or give the unit back). */
static void
run_limited(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct keywork k;
	char why[64], t[32];
	int rc, err;

	keystate_init(&k, a->key, a->keylen);
	rc = rate_wait(c, a, &k, ans);
	keystate_free(&k);
	if (rc != EXIT_ALLOWED && rc != EXIT_REFUSED) {
		if (rc > 0)
			ans->rc = rc;
		return;
	}
	if (!k.d.allowed) {
		if (ans->msg_kind != MSG_NONE && !c->quiet)
			log_msg("%s", ans->msg); /* --wait says why */
		output_seconds(t, sizeof(t), k.d.retry_after);
		snprintf(why, sizeof(why), "throttled, retry in %ss", t);
		refused(a, why, ans);
		return;
	}
	fflush(NULL);
	execvp(a->command[0], a->command);
	err = errno;
	log_msg("run: %s: %s; its unit is given back", a->command[0],
	    strerror(err));
	rate_refund(c, a);
	ans->rc = cannot_run(err);
}

/*
 * Nonzero if processes of the job's group outlive its first process: given
 * a moment to end (a signal passed on to the group may still be ending
 * them), then taken as the job going on.
 */
static int
group_lingers(const struct job *j)
{
	int i;

	for (i = 0; i < 25; i++) {
		if (!host_group_alive(j->pid, j->start))
			return 0;
		clock_sleep(10000);
	}
	return 1;
}

/* --concurrency: hold a slot while the job runs. */
static void
run_slotted(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct lease l, who;
	struct slots_seen seen;
	struct job j;
	char why[64];
	int status, ran, taken;

	if (concurrency_check(a, "run", ans) == -1)
		return;
	if (start_job(a, &j) == -1) {
		ans->rc = EXIT_CANNOT_RUN;
		return;
	}
	memset(&who, 0, sizeof(who));
	who.pid = getpid();
	who.pgid = j.pid;
	who.pgid_start = j.start;
	taken = concurrency_wait(c, a, &who, a->has_ttl ? a->ttl : 0, &l, &seen,
	    ans);
	/* no descriptor of the store stays open while the job runs */
	ctx_close(c);
	if (taken != 1) {
		cancel_job(&j);
		if (taken == 0) {
			if (a->concurrency == 1)
				snprintf(why, sizeof(why),
				    "has its one slot held");
			else
				snprintf(why, sizeof(why),
				    "has all %lld slots held",
				    (long long)a->concurrency);
			refused(a, why, ans);
		} else if (taken > 1)
			ans->rc = taken; /* a signal cut the wait short */
		return;
	}
	status = run_job(a, &j, &ran);
	if (ran && group_lingers(&j))
		answer_say_key(ans, MSG_INFO, a->key, a->keylen,
		    ": %s left processes running in its process group %ld; "
		    "the slot stays held until they end",
		    a->command[0], (long)j.pid);
	else
		release(c, a, &l);
	ans->rc = status;
}

static void
run_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	if ((a->nlimits > 0) == a->has_concurrency) {
		answer_usage(ans,
		    "run: give --limit (a rate) or --concurrency (a number of "
		    "slots), one of them");
		return;
	}
	if (a->nlimits > 0)
		run_limited(c, a, ans);
	else
		run_slotted(c, a, ans);
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
