/*
 * cmd.c: the command table and the one flow every command line takes:
 *
 *	parse (args.c, pure) -> context (ctx.c: store, format, clock)
 *	-> policy merge (policy.c) -> limit settling (limit.c, pure)
 *	-> execute (cmd-*.c, into a struct answer) -> print (output.c)
 *
 * A store error becomes exit 3, or what --on-error maps it to, here and
 * nowhere else.  batch runs the same flow for each line it reads, in a
 * context of its own (cmd-batch.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

/* The C library the binary was built with, for --version: a bug report
 * about users or host names depends on it (musl has no NSS modules). */
#if defined(THROTTLE_MUSL)
#define LIBC_NAME "; libc: musl"
#elif defined(__GLIBC__)
#define LIBC_NAME "; libc: glibc"
#else
#define LIBC_NAME ""
#endif

extern const struct cmd_entry cmd_consume_entry, cmd_check_entry,
    cmd_release_entry, cmd_inspect_entry, cmd_reset_entry, cmd_acquire_entry,
    cmd_renew_entry, cmd_shed_entry, cmd_run_entry, cmd_gc_entry,
    cmd_policy_entry, cmd_batch_entry, cmd_verify_entry;

/* help is the driver's own: it shows the tables, and needs no context. */
static const struct cmd_entry cmd_help_entry = {
	.name = "help",
	.args = "[COMMAND]",
	.summary = "show how to use throttle, or one command",
	.options = 0,
	.min_args = 0,
	.max_args = 1,
	.operand_is_key = 0,
	.exec = NULL,
};

const struct cmd_entry *const cmd_table[] = {
	&cmd_consume_entry,
	&cmd_check_entry,
	&cmd_release_entry,
	&cmd_inspect_entry,
	&cmd_reset_entry,
	&cmd_acquire_entry,
	&cmd_renew_entry,
	&cmd_run_entry,
	&cmd_shed_entry,
	&cmd_policy_entry,
	&cmd_gc_entry,
	&cmd_verify_entry,
	&cmd_batch_entry,
	&cmd_help_entry,
	NULL,
};

/* The command called name, or NULL (no prefixes). */
const struct cmd_entry *
cmd_find(const char *name)
{
	const struct cmd_entry *const *c;

	for (c = cmd_table; *c != NULL; c++)
		if (strcmp((*c)->name, name) == 0)
			return *c;
	return NULL;
}

/*
 * Complete a parsed command line once its context is built: the key's
 * policy, option by option under the command line's, then the limits.
 * 0, or -1 with the answer set.
 */
static int
cmd_prepare(struct ctx *c, struct args *a, struct answer *ans)
{
	char err[1024];

	if (a->cmd->uses_policy && a->key != NULL &&
	    (c->store != NULL || store_may_exist(c->db))) {
		/* open the store the command decides in and look the policy
		 * up there: one open, and on Redis the key is read in the
		 * lookup's round trip (a missing file was not opened: it
		 * holds no policy, and a lookup creates nothing) */
		if (ctx_store(c, ans) == NULL || policy_find(c, a, ans) == -1) {
			/* a policy this throttle cannot use is an error; a
			 * store error is not one yet for a command line with
			 * limits of its own: the command meets it as it
			 * reaches the store (ctx_store() answers it, never
			 * deciding without the policy), and --on-error maps
			 * it as the command does (run runs or refuses CMD,
			 * with no limits of its own too), after any usage
			 * error its own options make */
			if (a->policy != NULL || ans->msg_kind != MSG_STATE ||
			    (a->ls.n == 0 && !a->has_concurrency &&
				!a->cmd->takes_command))
				return -1;
			free(c->policy_err);
			c->policy_err = xstrdup(ans->msg);
			answer_free(ans);
			answer_init(ans);
		}
	}
	/* (a message about an option a policy gave says so: cmd_answer()'s
	 * blame_policy()) */
	if ((a->cmd->options & CMDOPT_LIMIT) &&
	    limit_settle(&a->ls, a->cmd->name, a->limits, &a->nlimits, err,
		sizeof(err)) == -1)
		return answer_usage(ans, "%s", err);
	return 0;
}

/*
 * A usage error on a key whose policy gave options: say which, so a
 * message never blames an option the user did not give unsaid (as in
 * "--ttl: 0 (no expiry) needs --owner" from a policy's --ttl 0).
 */
static void
blame_policy(const struct args *a, struct answer *ans)
{
	size_t n;

	if (ans->msg_kind != MSG_USAGE || a->policy == NULL ||
	    a->policy_took[0] == '\0' || strstr(ans->msg, "the policy '"))
		return;
	n = strlen(ans->msg);
	if (n < sizeof(ans->msg) - 1)
		snprintf(ans->msg + n, sizeof(ans->msg) - n,
		    " (the policy '%.64s' gives %.128s)", a->policy,
		    a->policy_took);
}

/*
 * Answer a parsed command line in its context (the command line, the PAM
 * module and each request of a batch): the key's policy and the limits,
 * then the command's work.
 */
void
cmd_answer(struct ctx *c, struct args *a, struct answer *ans)
{
	if (cmd_prepare(c, a, ans) == 0)
		a->cmd->exec(c, a, ans);
	blame_policy(a, ans);
}

/* help [COMMAND], and --help: to stdout. */
static int
help(const struct args *a)
{
	const struct cmd_entry *c = a->cmd;

	if (c == &cmd_help_entry && a->operand != NULL) {
		if ((c = cmd_find(a->operand)) == NULL) {
			log_msg("help: '%s' is not a command; see throttle "
				"--help",
			    a->operand);
			return EXIT_USAGE;
		}
		help_cmd(stdout, c);
	} else if (c != NULL && c != &cmd_help_entry)
		help_cmd(stdout, c);
	else
		help_all(stdout, cmd_table);
	return EXIT_ALLOWED;
}

/*
 * Print the answer, mapping a store error through --on-error: the exit
 * status it becomes, and for a script reading json or shell, what
 * happened ({"key":...,"allowed":...,"error":...}).  The exit status.
 */
static int
finish(const struct ctx *c, const struct args *a, struct answer *ans)
{
	int rc = ans->rc;

	if (ans->msg_kind == MSG_STATE)
		rc = c->format == FORMAT_TEXT ? ctx_map(c, EXIT_STATE)
					      : ctx_fail_answer(c, a, ans);
	else if (c->format != FORMAT_TEXT && ans->nrec == 0 &&
	    ans->streamed == 0 && a->cmd != NULL && a->cmd->operand_is_key &&
	    !a->cmd->takes_command && a->key != NULL &&
	    (rc == EXIT_ALLOWED || rc == EXIT_REFUSED))
		/* a request on a key that had nothing more to say (reset, a
		 * lease not held) still answers a json reader with an
		 * object, the one a batch gives but for its "exit", and a
		 * shell reader with THROTTLE_KEY */
		rec_str(ans, answer_record(ans, TEXT_NONE), "key", a->key,
		    a->keylen, 0);
	output_answer(c, ans);
	return rc;
}

/*
 * Run a command line as cmd_main() would, but print nothing: the answer
 * (records, message, exit status after --on-error) is left in ans, for a
 * caller that has no terminal (the PAM module).  The exit status.
 */
int
cmd_decide(int argc, char **argv, struct answer *ans)
{
	struct args a;
	struct ctx c;
	int rc;

	args_init(&a);
	if (args_parse(argc, argv, cmd_table, &a) != PARSE_RUN ||
	    a.cmd == &cmd_help_entry) {
		answer_usage(ans, "%s",
		    a.err[0] != '\0' ? a.err : "not a command to decide");
		args_free(&a);
		return EXIT_USAGE;
	}
	memset(&c, 0, sizeof(c));
	if (ctx_init(&c, &a, ans) == 0)
		cmd_answer(&c, &a, ans);
	rc = ans->msg_kind == MSG_STATE ? ctx_map(&c, EXIT_STATE) : ans->rc;
	ctx_free(&c);
	args_free(&a);
	return rc;
}

/*
 * End by signal sig, its default action, once all that was to be said is
 * out (run's job died of ^C: a shell's loop around throttle stops as it
 * would around the job).  Returns only if the signal did not end it.
 */
static void
die_of(int sig)
{
	sigset_t set;

	fflush(stdout);
	fflush(stderr);
	signal(sig, SIG_DFL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
}

/*
 * Parse the command line and environment, run the command.  *decision is
 * set nonzero if the command was a decision, whose exit status stays the
 * decision's whatever becomes of its output.
 */
int
cmd_main(int argc, char **argv, int *decision)
{
	struct args a;
	struct ctx c;
	struct answer ans;
	int rc;

	*decision = 0;
	args_init(&a);
	switch (args_parse(argc, argv, cmd_table, &a)) {
	case -1:
		log_msg("%s", a.err);
		rc = EXIT_USAGE;
		break;
	case PARSE_VERSION:
#ifdef THROTTLE_REDIS
		printf("throttle %s (stores: sqlite %s, redis with hiredis "
		       "%s%s)\n",
		    THROTTLE_VERSION, store_sqlite_version(),
		    store_redis_version(), LIBC_NAME);
#else
		printf("throttle %s (stores: sqlite %s%s)\n", THROTTLE_VERSION,
		    store_sqlite_version(), LIBC_NAME);
#endif
		rc = EXIT_ALLOWED;
		break;
	case PARSE_HELP:
		rc = help(&a);
		break;
	case PARSE_NO_COMMAND:
		help_all(stderr, cmd_table);
		rc = EXIT_USAGE;
		break;
	default:
		if (a.cmd == &cmd_help_entry) {
			rc = help(&a);
			break;
		}
		*decision = a.cmd->decides;
		if (a.cmd->runs_long)
			slice_default();
		else
			store_sqlite_pool();
		answer_init(&ans);
		memset(&c, 0, sizeof(c));
		if (ctx_init(&c, &a, &ans) == 0)
			cmd_answer(&c, &a, &ans);
		rc = finish(&c, &a, &ans);
		ctx_free(&c);
		if (ans.died_of != 0)
			die_of(ans.died_of);
		answer_free(&ans);
	}
	args_free(&a);
	return rc;
}
