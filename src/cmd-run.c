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
 *	   the wrapper.  With --ttl, the wrapper renews the lease every third
 *	   of it while it waits for --limit and while the job's first process
 *	   runs, opening the store for each renewal and closing it again.  A
 *	   process that leaves the group (setsid, as daemons do) is no longer
 *	   part of the job.  No transaction and no
 *	   descriptor of the state file is open while the job runs (SQLite
 *	   and hiredis descriptors are close-on-exec).
 *	3. SIGINT, SIGTERM and SIGHUP sent to the wrapper are passed on to the
 *	   job's group; the wrapper waits for the job and exits with its
 *	   status, or with 128 + N if signal N killed it.  One the wrapper
 *	   was started ignoring (nohup) stays ignored, by the job too.
 *	4. When the wrapper dies, the job's first process gets SIGTERM
 *	   (PR_SET_PDEATHSIG, Linux); whatever of the job lives on keeps the
 *	   slot until it ends.  A job that leaves processes in its group when
 *	   its first process exits keeps the slot the same way, and the
 *	   wrapper says so.
 *	5. When refused, the command does not run: exit 75 (EX_TEMPFAIL) or
 *	   --conflict-exit-code, with one line on stderr unless -q.
 *	6. The command gets stdout: run writes nothing there.
 *	7. In the foreground of a terminal the job stays in the wrapper's
 *	   process group (the shell's job), as `time` or `nice` leave it: it
 *	   reads the terminal, ^C and ^Z reach it and the wrapper together,
 *	   and the wrapper passes on only the signals sent to it alone.  The
 *	   lease then names that group: after a kill -9 of the wrapper the
 *	   slot is held while any process of it started with or after the
 *	   job lives; background processes the job leaves behind do not hold
 *	   the slot after the wrapper exits.
 *	8. The wrapper ignores SIGPIPE (a reader that went away must not hide
 *	   a decision's exit status); the command gets it back at its default.
 */
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "throttle.h"

#define EXIT_NOT_FOUND 127
#define EXIT_CANNOT_RUN 126

static volatile sig_atomic_t job_group; /* kill(-job_group): its group */
static volatile sig_atomic_t job_pid; /* kill(job_pid): at a terminal */

static void
forward(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (job_group > 0)
		kill(-(pid_t)job_group, sig);
	/* from the terminal (SI_KERNEL), the job has it already */
	else if (job_pid > 0 && (si == NULL || si->si_code != SI_KERNEL))
		kill((pid_t)job_pid, sig);
}

/* The exit status for a command that could not be executed. */
static int
cannot_run(int err)
{
	return err == ENOENT || err == ENOTDIR ? EXIT_NOT_FOUND
					       : EXIT_CANNOT_RUN;
}

/*
 * Run file with execv(), and where the kernel cannot (ENOEXEC: a script
 * without a #! line), as a shell script: execv("/bin/sh", {sh, file,
 * args...}).  POSIX asks this of execvp(), and glibc's does it; musl's
 * does not, and a throttle linked with musl must run the same commands.
 */
static int
exec_or_sh(const char *file, char *const argv[])
{
	char **sh;
	int n, err;

	execv(file, argv);
	if ((err = errno) != ENOEXEC)
		return err;
	for (n = 0; argv[n] != NULL; n++)
		;
	if ((sh = malloc(((size_t)n + 2) * sizeof(*sh))) == NULL)
		return ENOMEM;
	sh[0] = "sh";
	sh[1] = (char *)file;
	memcpy(sh + 2, argv + 1, (size_t)n * sizeof(*sh)); /* NULL too */
	execv("/bin/sh", sh);
	err = errno;
	free(sh);
	return err;
}

/*
 * execvp() with the shell for scripts without #!, whatever the libc: the
 * command as given if it holds a slash, else the first file of that name
 * in $PATH (default "/bin:/usr/bin", as glibc's) that can be executed.
 * Returns only on failure, with the errno to report: EACCES if a file
 * was found but none could be run, else the last error met.
 */
static int
exec_command(char *const argv[])
{
	const char *file = argv[0], *path, *p, *end;
	size_t flen = strlen(file), dlen;
	int err = ENOENT, denied = 0;
	char *buf;

	if (strchr(file, '/') != NULL)
		return exec_or_sh(file, argv);
	if (flen == 0)
		return ENOENT;
	if ((path = getenv("PATH")) == NULL)
		path = "/bin:/usr/bin";
	if ((buf = malloc(strlen(path) + flen + 2)) == NULL)
		return ENOMEM;
	for (p = path;; p = end + 1) {
		if ((end = strchr(p, ':')) == NULL)
			end = p + strlen(p);
		/* an empty element is the current folder */
		dlen = (size_t)(end - p);
		memcpy(buf, p, dlen);
		if (dlen > 0)
			buf[dlen++] = '/';
		memcpy(buf + dlen, file, flen + 1);
		err = exec_or_sh(buf, argv);
		if (err == EACCES)
			denied = 1;
		else if (err != ENOENT && err != ENOTDIR && err != ELOOP &&
		    err != ENAMETOOLONG)
			break; /* found, and it fails for itself */
		if (*end == '\0') {
			if (denied)
				err = EACCES;
			break;
		}
	}
	free(buf);
	return err;
}

/* Close whichever of two pipes were made. */
static void
close_all(int go[2], int report[2])
{
	int i;

	for (i = 0; i < 2; i++) {
		if (go[i] >= 0)
			close(go[i]);
		if (report[i] >= 0)
			close(report[i]);
	}
}

/* A job started and held before its exec (start_job()). */
struct job {
	pid_t pid; /* its first process, and its process group */
	int64_t start; /* when it started, ticks after boot */
	int go; /* a byte lets it exec; closing it unwritten ends it */
	int report; /* an errno if its exec failed, else end of file */
	int own_group; /* in a group of its own (not at a terminal) */
	pid_t group; /* the group the lease names */
	int64_t group_start; /* no process of it older than this counts */
	int signal; /* the signal that killed it, 0 if none */
};

/* A lease run renews while its job runs (--ttl), and looks for once more
 * before the job starts after a wait for --limit. */
struct keep {
	struct ctx *c;
	const struct args *a;
	const struct lease *l;
	int64_t every; /* us between renewals (0: no --ttl, none) */
	char every_text[32];
	int lost; /* found ended, and said so */
	int failing; /* a renewal failed, and it was said */
};

/* Nonzero if this process is in the foreground of its terminal. */
static int
at_terminal(void)
{
	int fd, fg;

	if ((fd = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC)) == -1)
		return 0;
	fg = tcgetpgrp(fd) == getpgrp();
	close(fd);
	return fg;
}

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
	j->own_group = !at_terminal();
	go[0] = go[1] = report[0] = report[1] = -1;
	if (pipe(go) == -1 || pipe(report) == -1) {
		log_msg("run: cannot start %s: %s", a->command[0],
		    strerror(errno));
		close_all(go, report);
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
		close_all(go, report);
		return -1;
	}
	if (j->pid == 0) {
		if (j->own_group)
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
		signal(SIGPIPE, SIG_DFL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		slice_default(); /* the command's, not a call's */
		err = exec_command(a->command);
		/* the wrapper says why (run_job()), and what became of the
		 * unit it charged; said here only if it cannot be told */
		if (write(report[1], &err, sizeof(err)) == -1)
			log_msg("run: %s: %s", a->command[0], strerror(err));
		_exit(cannot_run(err));
	}
	if (j->own_group)
		setpgid(j->pid, j->pid); /* also here: no race with its own */
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(go[0]);
	close(report[1]);
	j->go = go[1];
	j->report = report[0];
	if (host_pid_start(j->pid, &j->start) == -1)
		j->start = 0;
	j->group = j->own_group ? j->pid : getpgrp();
	j->group_start = j->start;
	return 0;
}

/*
 * Renew the lease k names, as the job it holds the slot for runs on (a
 * --ttl is the longest a slot outlives a wrapper that is gone, not the
 * longest a job may run); a lease with no TTL is only looked for.  A
 * lease found ended (released by hand, or a wrapper stopped longer than
 * its TTL) may be another's slot by now: said once, and left.
 */
static void
keep_lease(void *arg)
{
	struct keep *k = arg;
	struct slots_seen seen = { 0 };
	struct answer ans;
	int r, made = k->c->makes_no_file;

	if (k->lost)
		return; /* nothing left to renew */
	answer_init(&ans);
	/* a state file removed meanwhile is not made again for it */
	k->c->makes_no_file = 1;
	r = concurrency_renew(k->c, k->a->key, k->a->keylen, k->l->id,
	    k->every > 0 ? k->a->ttl : -1, &seen, &ans);
	k->c->makes_no_file = made;
	ctx_close(k->c); /* no descriptor of the store while the job runs */
	if (r == -1 && !k->failing && !k->c->quiet && k->every > 0)
		log_msg("%s; lease %s not renewed (tried again every %s)",
		    ans.msg, k->l->id, k->every_text);
	else if (r == -1 && !k->c->quiet && k->every == 0)
		log_msg("%s; lease %s not looked for; running %s as it holds "
			"it",
		    ans.msg, k->l->id, k->a->command[0]);
	k->failing = r == -1;
	if (r == 0) {
		k->lost = 1;
		if (!k->c->quiet)
			log_key(k->a->key, k->a->keylen,
			    ": lease %s is no longer held (released, or "
			    "ended before it was renewed); its slot may be "
			    "another's",
			    k->l->id);
	}
	answer_free(&ans);
}

/*
 * Wait for the job's first process to end, its status in *status; with k,
 * renewing its lease every k->every meanwhile.  0, or -1 with errno.
 */
static int
wait_job(struct job *j, int *status, struct keep *k)
{
	sigset_t chld, old;
	struct timespec ts;
	int64_t next, left;
	pid_t r;

	if (k == NULL) {
		while (waitpid(j->pid, status, 0) == -1)
			if (errno != EINTR)
				return -1;
		return 0;
	}
	/* blocked, a SIGCHLD stays pending until sigtimedwait() takes it */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	next = clock_monotonic() + k->every;
	for (;;) {
		if ((r = waitpid(j->pid, status, WNOHANG)) == j->pid)
			break;
		if (r == -1 && errno != EINTR) {
			sigprocmask(SIG_SETMASK, &old, NULL);
			return -1;
		}
		if ((left = next - clock_monotonic()) <= 0) {
			keep_lease(k);
			next = clock_monotonic() + k->every;
			continue;
		}
		ts.tv_sec = (time_t)(left / 1000000);
		ts.tv_nsec = (long)(left % 1000000) * 1000;
		sigtimedwait(&chld, NULL, &ts); /* or a forwarded signal */
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return 0;
}

/*
 * Let the held job run, pass signals on to its group, and wait for its
 * first process: its exit status.  *ran is 0 if its exec failed, said
 * with note added ("; its unit is given back").
 */
static int
run_job(const struct args *a, struct job *j, int *ran, const char *note,
    struct keep *k)
{
	struct sigaction sa;
	int status, err;
	ssize_t n;
	size_t i;

	if (j->own_group)
		job_group = j->pid;
	else
		job_pid = j->pid;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = forward;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART | SA_SIGINFO;
	for (i = 0; i < sizeof(forwarded) / sizeof(*forwarded); i++) {
		struct sigaction cur;

		/* one ignored since the wrapper started (nohup, a script's
		 * background job) stays ignored, by the job too */
		if (sigaction(forwarded[i], NULL, &cur) == 0 &&
		    cur.sa_handler == SIG_IGN)
			continue;
		sigaction(forwarded[i], &sa, NULL);
	}
	while (write(j->go, "g", 1) == -1 && errno == EINTR)
		;
	close(j->go);
	while ((n = read(j->report, &err, sizeof(err))) == -1 && errno == EINTR)
		;
	close(j->report);
	*ran = n != (ssize_t)sizeof(err);
	if (!*ran)
		log_msg("run: %s: %s%s", a->command[0], strerror(err), note);
	if (wait_job(j, &status, k) == -1) {
		log_msg("run: lost track of %s: %s", a->command[0],
		    strerror(errno));
		job_group = job_pid = 0;
		return EXIT_CANNOT_RUN;
	}
	job_group = job_pid = 0;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status)) {
		j->signal = WTERMSIG(status);
		return 128 + WTERMSIG(status);
	}
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

/*
 * A store error before the command ran, as --on-error says: allow runs the
 * command anyway (EXIT_ALLOWED: fail open), deny refuses it as a limit
 * would (--conflict-exit-code), fail exits 3.  The message is said here;
 * the status to carry on with.
 */
static int
store_failed(struct ctx *c, const struct args *a, struct answer *ans)
{
	int rc;

	if (ans->msg_kind != MSG_STATE)
		return ans->rc != 0 ? ans->rc : EXIT_STATE;
	rc = ctx_map(c, EXIT_STATE);
	if (rc == EXIT_STATE)
		return -1; /* the driver says it, exit 3 */
	log_msg("%s; %s %s (--on-error %s)", ans->msg,
	    rc == EXIT_ALLOWED ? "running" : "not running", a->command[0],
	    rc == EXIT_ALLOWED ? "allow" : "deny");
	ans->msg_kind = MSG_NONE;
	ans->rc = rc == EXIT_ALLOWED ? 0 : a->conflict_exit_code;
	return rc == EXIT_ALLOWED ? EXIT_ALLOWED : -2;
}

enum { CHARGE_STOP, CHARGE_DONE, CHARGE_OPEN };

/*
 * --limit: consume one unit (--cost), waiting if --wait says so.
 * CHARGE_DONE charged, CHARGE_OPEN a store error that --on-error allow
 * lets through uncharged, CHARGE_STOP refused or failed (the answer says
 * why and has the exit status).
 */
static int
charge(struct ctx *c, const struct args *a, struct keywork *kw,
    struct answer *ans)
{
	struct keywork k;
	char why[96], t[48];
	int rc;

	keystate_init(kw, a->key, a->keylen);
	rc = rate_wait(c, a, kw, ans);
	k = *kw; /* its decision (the caller frees it) */
	if (rc == -1 && (rc = store_failed(c, a, ans)) == EXIT_ALLOWED)
		return CHARGE_OPEN; /* --on-error allow: fail open */
	if (rc != EXIT_ALLOWED && rc != EXIT_REFUSED) {
		if (rc > 0)
			ans->rc = rc;
		return CHARGE_STOP;
	}
	if (!k.d.allowed && ans->msg_kind != MSG_NONE) {
		/* --wait said why (a wait too long, a lockout): one line */
		size_t n = strlen(ans->msg);

		snprintf(ans->msg + n, sizeof(ans->msg) - n, "; not running %s",
		    a->command[0]);
		ans->rc = a->conflict_exit_code;
		return CHARGE_STOP;
	}
	if (!k.d.allowed) {
		output_retry(t, sizeof(t), k.d.retry_after);
		if (k.lk.until == LOCKOUT_NEVER)
			snprintf(why, sizeof(why), "%s", LOCKED_FOR_GOOD);
		else
			snprintf(why, sizeof(why), "%s, %s",
			    k.lk.until > k.now ? "locked out" : "throttled", t);
		refused(a, why, ans);
		return CHARGE_STOP;
	}
	return CHARGE_DONE;
}

/*
 * Become COMMAND, with the caller's SIGPIPE and scheduler slice; if that
 * fails, say why (and what, such as a refund) and return errno.
 */
static int
become(const struct args *a, const char *what)
{
	int err;

	fflush(NULL);
	signal(SIGPIPE, SIG_DFL);
	slice_default();
	err = exec_command(a->command);
	signal(SIGPIPE, SIG_IGN);
	log_msg("run: %s: %s%s", a->command[0], strerror(err), what);
	return err;
}

/* --limit: consume, then become the command (or give the unit back). */
static void
run_limited(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct keywork k;
	int err, charged;

	if ((charged = charge(c, a, &k, ans)) == CHARGE_STOP) {
		keystate_free(&k);
		return;
	}
	err =
	    become(a, charged == CHARGE_DONE ? "; its unit is given back" : "");
	if (charged == CHARGE_DONE)
		rate_refund(c, a, &k);
	keystate_free(&k);
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

	if (!j->own_group)
		return 0; /* the group is the shell's job, the wrapper's too */
	for (i = 0; i < 25; i++) {
		if (!host_group_alive(j->pid, j->start))
			return 0;
		clock_sleep(10000);
	}
	return 1;
}

/*
 * A job ^C killed: throttle ends by SIGINT too, once its slot is let go,
 * so a shell running it in a loop stops the loop, as it would for the
 * command itself (a shell goes on when a child only exits 130).
 */
static void
died_of(const struct job *j, struct answer *ans)
{
	if (j->signal == SIGINT)
		ans->died_of = SIGINT;
}

/* --concurrency: hold a slot while the job runs. */
static void
run_slotted(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct lease l, who;
	struct slots_seen seen = { 0 };
	struct job j;
	struct keywork kw; /* the rate's decision, with --limit */
	struct keep *keep = NULL; /* with --ttl: what renews the lease */
	int64_t mono0 = clock_monotonic();
	int status, ran, taken, failed = 0, charged = 0;

	if (concurrency_check(a, "run", ans) == -1)
		return;
	/* a rate that can never allow this cost is said before any wait */
	if (a->nlimits > 0 && rate_usable(a, ans) == -1)
		return;
	if (start_job(a, &j) == -1) {
		ans->rc = EXIT_CANNOT_RUN;
		return;
	}
	memset(&who, 0, sizeof(who));
	who.pid = getpid();
	/* at a terminal the group is the shell's job, whose later commands
	 * (the rest of a script) are no part of this one: the wrapper alone
	 * owns the lease, so a wrapper killed with SIGKILL frees it rather
	 * than leave it to them (its job got SIGTERM) */
	if (j.own_group) {
		who.pgid = j.group;
		who.pgid_start = j.group_start;
	}
	taken = concurrency_wait(c, a, &who, a->has_ttl ? a->ttl : 0, &l, &seen,
	    ans);
	if (taken == -1)
		failed = store_failed(c, a, ans);
	/* no descriptor of the store stays open while the job runs */
	ctx_close(c);
	if (taken == -1 && failed == EXIT_ALLOWED) {
		/* --on-error allow: fail open, the job runs without a slot */
		ans->rc = run_job(a, &j, &ran, "", NULL);
		died_of(&j, ans);
		return;
	}
	if (taken != 1) {
		cancel_job(&j);
		if (taken == 0) {
			concurrency_refused(a, &seen, a->command[0], ans);
			ans->rc = a->conflict_exit_code;
		} else if (taken > 1)
			ans->rc = taken; /* a signal cut the wait short */
		return;
	}
	if ((a->has_ttl && a->ttl > 0) || a->nlimits > 0) {
		keep = xcalloc(1, sizeof(*keep));
		keep->c = c;
		keep->a = a;
		keep->l = &l;
	}
	if (a->has_ttl && a->ttl > 0) {
		/* renewed at a third of its TTL (two renewals may fail, a
		 * store slow to answer, before it ends), from now on: while
		 * --wait waits for --limit too */
		keep->every = a->ttl / 3 > 0 ? a->ttl / 3 : 1;
		output_human(keep->every_text, sizeof(keep->every_text),
		    keep->every);
		c->keep = keep_lease;
		c->keep_arg = keep;
		c->keep_every = keep->every;
		c->keep_due = clock_monotonic() + keep->every; /* as taken */
	}
	if (a->nlimits > 0) {
		/* --limit too: the slot first, so a busy key charges nothing */
		struct args b = *a;

		if (b.wait_max > 0) {
			b.wait_max -= clock_monotonic() - mono0;
			if (b.wait_max < 0)
				b.wait_max = 0;
		}
		c->slept = 0;
		charged = charge(c, &b, &kw, ans);
		c->keep = NULL;
		/* after a wait, the lease may have been released meanwhile
		 * (throttle release --lease), or have ended: look once more */
		if (charged != CHARGE_STOP && c->slept && !keep->lost)
			keep_lease(keep);
		if (charged != CHARGE_STOP && keep->lost) {
			/* the slot may be another's now, and the job must
			 * not run beside it */
			if (charged == CHARGE_DONE)
				rate_refund(c, a, &kw);
			refused(a, "lost its slot while it waited for --limit",
			    ans);
			charged = CHARGE_STOP;
		}
		if (charged == CHARGE_STOP) {
			keystate_free(&kw);
			cancel_job(&j);
			release(c, a, &l);
			free(keep);
			return;
		}
		ctx_close(c);
	}
	c->keep = NULL;
	status = run_job(a, &j, &ran,
	    charged == CHARGE_DONE ? "; its unit is given back" : "",
	    keep != NULL && keep->every > 0 ? keep : NULL);
	free(keep);
	if (!ran && charged == CHARGE_DONE)
		rate_refund(c, a, &kw); /* not found or not executable */
	if (charged != 0)
		keystate_free(&kw);
	if (ran && group_lingers(&j))
		answer_say_key(ans, MSG_INFO, a->key, a->keylen,
		    ": %s left processes running in its process group %ld; "
		    "the slot stays held until they end%s",
		    a->command[0], (long)j.pid,
		    a->has_ttl && a->ttl > 0 ? ", or its --ttl passes" : "");
	else
		release(c, a, &l);
	ans->rc = status;
	died_of(&j, ans);
}

/*
 * The key's policy, which gives its only limits, could not be read (the
 * store out of reach): --on-error says whether COMMAND runs, as when a
 * decision meets the store's error.
 */
static void
run_without_policy(struct ctx *c, const struct args *a, struct answer *ans)
{
	answer_state(ans, c->policy_err);
	if (store_failed(c, a, ans) != EXIT_ALLOWED)
		return;
	ans->rc = cannot_run(become(a, ""));
}

static void
run_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	/* --conflict-exit-code 0 is a quiet skip for cron, which mails what
	 * a job writes: no refusal line, nor a wait's, as with -q (a store
	 * error is still said) */
	if (a->conflict_exit_code == 0)
		c->quiet = 1;
	if (a->nlimits == 0 && !a->has_concurrency && c->policy_err != NULL) {
		run_without_policy(c, a, ans);
		return;
	}
	if (a->nlimits == 0 && !a->has_concurrency) {
		answer_usage(ans,
		    "run: give --limit (a rate), --concurrency (a number of "
		    "slots), or both");
		return;
	}
	/* (what was typed: a policy's --ttl may be there for acquire) */
	if (!a->has_concurrency &&
	    (args_given(a, "ttl") || args_given(a, "priority") ||
		args_given(a, "reserve"))) {
		/* lease options, with no lease to take */
		answer_usage(ans,
		    "run: --%s applies to the slot --concurrency takes; give "
		    "--concurrency N too, or leave it out",
		    args_given(a, "ttl")            ? "ttl"
			: args_given(a, "priority") ? "priority"
						    : "reserve");
		return;
	}
	/* rate options, with no rate: a slot costs one and locks none out */
	if (a->nlimits == 0 &&
	    (args_given(a, "cost") || args_given(a, "lockout"))) {
		answer_usage(ans,
		    "run: --%s goes with --limit (a rate); give the limit "
		    "too, or leave it out",
		    args_given(a, "cost") ? "cost" : "lockout");
		return;
	}
	if (a->has_concurrency)
		run_slotted(c, a, ans);
	else
		run_limited(c, a, ans);
}

const struct cmd_entry cmd_run_entry = {
	.name = "run",
	.decides = 1,
	.args = "KEY [--limit N/PERIOD [limit options]] [--concurrency N "
		"[lease options]] [--wait [MAX]] [--conflict-exit-code N] -- "
		"COMMAND [ARGS...] | [options] -- -KEY -- COMMAND [ARGS...]",
	.summary = "run COMMAND if the limit allows it (a rate, a slot held "
		   "while it runs, or both); exit with its status",
	.options = CMDOPT_LIMIT | CMDOPT_BURST | CMDOPT_ALGORITHM |
	    CMDOPT_COST | CMDOPT_GRANULARITY | CMDOPT_CONCURRENCY | CMDOPT_TTL |
	    CMDOPT_PRIORITY | CMDOPT_RUN | CMDOPT_LOCKOUT |
	    CMDOPT_WAIT, /* not --owner: the lease is the wrapper's */
	.uses_policy = 1,
	.min_args = 1,
	.max_args = 1,
	.operand_is_key = 1,
	.takes_command = 1,
	.exec = run_exec,
};
