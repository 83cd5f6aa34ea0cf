/*
 * ctx.c: the context a command runs in, built once from the command line
 * and the environment: which store (--db, THROTTLE_DB, or the default
 * file), how to answer (--format, THROTTLE_FORMAT, -q), what a store error
 * becomes (--on-error), and the time.  The store is opened on first use,
 * read only when the command only reads, and closed by ctx_close(): a
 * command never opens or closes one.
 */
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

/* Nonzero if words (separated by spaces) holds word. */
static int
has_word(const char *words, const char *word)
{
	size_t n = strlen(word);
	const char *p;

	for (p = words; n > 0 && (p = strstr(p, word)) != NULL; p += n)
		if ((p == words || p[-1] == ' ') &&
		    (p[n] == ' ' || p[n] == '\0'))
			return 1;
	return 0;
}

/*
 * Build the context of a command line.  0, or -1 with a usage error in
 * the answer (a bad THROTTLE_FORMAT, THROTTLE_SLICE, THROTTLE_NOW, or
 * --db).
 */
int
ctx_init(struct ctx *c, const struct args *a, struct answer *ans)
{
	const struct cmd_entry *cmd = a->cmd;
	const char *env, *err, *from = "--db";
#ifdef THROTTLE_REDIS
	char msg[STORE_ERR_MAX];
#endif

	memset(c, 0, sizeof(*c));
	c->format = a->format;
	/* (batch answers json lines: THROTTLE_FORMAT, for single calls,
	 * does not apply to it, so neither can a bad one stop it) */
	if (!a->has_format &&
	    (cmd == NULL || strcmp(cmd->name, "batch") != 0) &&
	    (env = getenv("THROTTLE_FORMAT")) != NULL && *env != '\0' &&
	    parse_format(env, &c->format) == -1)
		return answer_usage(ans,
		    "THROTTLE_FORMAT: '%s' is not a format; use text, json or "
		    "shell",
		    env);
	if (slice_wanted(&env) == -1)
		return answer_usage(ans,
		    "THROTTLE_SLICE: '%s' is not a scheduler slice; use short "
		    "or default",
		    env);
	c->quiet = a->quiet;
	c->lock_timeout = a->lock_timeout;
	c->on_error = cmd->decides ? a->on_error : ON_ERROR_FAIL;
	c->db = a->db;
	if (c->db != NULL && c->db[0] == '\0')
		return answer_usage(ans,
		    "--db: the path is empty; give a state file or a "
		    "redis:// URL (an empty variable in a script?)");
	if (c->db == NULL && (env = getenv("THROTTLE_DB")) != NULL) {
		/* set but empty is a script's mistake, not "the default":
		 * a guard must not quietly decide on another file */
		if (*env == '\0')
			return answer_usage(ans,
			    "THROTTLE_DB: is set but empty; give a state file "
			    "or a redis:// URL, or unset it for the default "
			    "file");
		c->db = env;
		from = "THROTTLE_DB";
	}
	if (c->db == NULL) {
		c->dbbuf = xmalloc(DBPATH_MAX);
		if (store_default_path(c->dbbuf, DBPATH_MAX, &err) == -1)
			return answer_usage(ans, "%s", err);
		c->db = c->dbbuf;
	}
	if (store_check_spec(c->db, &err) == -1) {
		/* a path that names a folder: no URL, no login in it */
		if (strcmp(c->db, ":memory:") == 0 ||
		    (store_spec_folder(c->db) && strpbrk(c->db, ":@") == NULL))
			return answer_usage(ans, "%s: '%s' %s", from, c->db,
			    err);
		/* the scheme only: the rest may hold a password */
		return answer_usage(ans, "%s: '%.*s...' %s", from,
		    (int)strcspn(c->db, ":"), c->db, err);
	}
#ifdef THROTTLE_REDIS
	/* a Redis URL that cannot be right (or needs TLS, which this
	 * build's hiredis has not) is the command line's fault */
	if (store_is_remote(c->db) &&
	    store_redis_check(c->db, msg, sizeof(msg)) == -1)
		return answer_usage(ans, "%s: %s", from, msg);
#endif
	c->dbname = xmalloc(DBNAME_MAX);
	store_display(c->db, c->dbname, DBNAME_MAX);
	c->pinned = clock_pinned();
	if (clock_now(&c->now, &err) == -1)
		return answer_usage(ans, "THROTTLE_NOW: '%s' %s",
		    clock_pinned_text(), err);
	c->read_only = cmd->reads_only ||
	    (cmd->reads_only_with != NULL && a->operand != NULL &&
		has_word(cmd->reads_only_with, a->operand));
	c->makes_no_file = cmd->makes_no_file;
	return 0;
}

/* Close the context's store, unless it belongs to a batch. */
void
ctx_close(struct ctx *c)
{
	if (!c->batch)
		store_close(c->store);
	c->store = NULL;
	free(c->open_err);
	c->open_err = NULL;
	free(c->policy_err);
	c->policy_err = NULL;
}

/*
 * Sleep us as clock_sleep() does (the signal that cut it short, or 0),
 * calling c->keep every c->keep_every on the way: counted across calls
 * (c->keep_due), so that many short sleeps (a --wait polled again and
 * again) keep it as one long one does.
 */
int
ctx_sleep(struct ctx *c, int64_t us)
{
	int64_t now = clock_monotonic(), end = now + us, step;
	int sig;

	if (c->keep != NULL && c->keep_due == 0)
		c->keep_due = now + c->keep_every;
	for (;;) {
		now = clock_monotonic();
		if (c->keep != NULL && now >= c->keep_due) {
			c->keep(c->keep_arg);
			c->keep_due = clock_monotonic() + c->keep_every;
		}
		if ((step = end - now) <= 0)
			return 0;
		if (c->keep != NULL && step > c->keep_due - now)
			step = c->keep_due - now;
		c->slept = 1;
		if ((sig = clock_sleep(step)) != 0)
			return sig;
	}
}

/* Close the context and free what it holds: it is not used again. */
void
ctx_free(struct ctx *c)
{
	ctx_close(c);
	free(c->dbbuf);
	free(c->dbname);
	c->dbbuf = c->dbname = NULL;
}

/* The context's store, opened on first use; NULL with the answer set. */
struct store *
ctx_store(struct ctx *c, struct answer *a)
{
	char err[STORE_ERR_MAX];

	if (c->policy_err != NULL) {
		/* the key's policy could not be read: a decision without it
		 * would be under the wrong rules (on a cluster, the policies
		 * live on another node than the key) */
		answer_state(a, c->policy_err);
		return NULL;
	}
	if (c->store != NULL)
		return c->store;
	if (c->open_err != NULL) {
		/* the policy lookup's open failed: the same answer, not a
		 * second wait for a server that is out of reach */
		answer_state(a, c->open_err);
		return NULL;
	}
	c->store = store_open(c->db, c->lock_timeout,
	    c->read_only           ? STORE_READ
		: c->makes_no_file ? STORE_EXISTING
				   : 0,
	    err, sizeof(err), &c->open_unavailable);
	if (c->store == NULL) {
		answer_state(a, err);
		c->open_err = xstrdup(err);
	}
	return c->store;
}

/*
 * Read the time of a decision into c->now, once its transaction has begun
 * (and, on a store that checks at commit, once it has read what it
 * decides on): decisions on one store then happen in the order of their
 * times, so a state is never saved later than a decision that reads it,
 * unless the clock itself stepped back.  The store's clock if it has one
 * (a Redis server's, so hosts with skewed clocks agree), else this
 * host's; THROTTLE_NOW pins it.  0, or -1 with the answer set.
 */
int
ctx_now(struct ctx *c, struct answer *a)
{
	const char *why;
	char err[64];

	if (c->pinned)
		return 0; /* c->now is the pinned time (plus any --wait) */
	if (store_has_clock(c->store)) {
		if (store_now(c->store, &c->now) == -1)
			return ctx_fail(c, a);
		return 0;
	}
	if (clock_system(&c->now, &why) == -1) {
		snprintf(err, sizeof(err), "the clock %s", why);
		return answer_state(a, err);
	}
	return 0;
}

/* The store's last error, as the answer's: -1. */
int
ctx_fail(struct ctx *c, struct answer *a)
{
	return answer_state(a, store_error(c->store));
}

/*
 * Nonzero if the store error at hand may be mapped by --on-error: a store
 * out of reach may; a misconfiguration (a wrong password, a command the
 * server refuses) never is, since failing open on it would silently stop
 * limiting for good.
 */
int
ctx_may_fail_open(const struct ctx *c)
{
	return c->store != NULL ? store_unavailable(c->store)
				: c->open_unavailable;
}

/*
 * A store error mapped by --on-error: the exit status (ctx_map()), and,
 * if the answer has no record, one for a script reading json or shell:
 * key, allowed, error, the rate limit the request gave (its first:
 * algorithm, limit, period, burst, cost, and reset_after 0), and
 * remaining 0 with retry_after 0 (allow) or 1s (deny: try again in a
 * moment), so a script that reads them always has them.
 */
int
ctx_fail_answer(const struct ctx *c, const struct args *a, struct answer *ans)
{
	return ctx_fail_answer_as(c, a, ans, ctx_map(c, EXIT_STATE));
}

/*
 * ctx_fail_answer() with the exit status rc the error is mapped to given
 * (a batch keeps, before its group commits, the answer a failed commit
 * would get, when the store cannot yet say how it will fail).
 */
int
ctx_fail_answer_as(const struct ctx *c, const struct args *a,
    struct answer *ans, int rc)
{
	struct limit lims[LIMITS_MAX];
	struct record *r;
	char err[256];
	int n = 0;

	if (c->on_error == ON_ERROR_FAIL || ans->nrec > 0)
		return rc;
	r = answer_record(ans, TEXT_NONE);
	rec_str(ans, r, "key", a->key != NULL ? a->key : "", a->keylen, 0);
	rec_bool(r, "allowed", rc == EXIT_ALLOWED, 0);
	if (rc != EXIT_STATE && a->ls.n > 0 &&
	    limit_settle(&a->ls, "", lims, &n, err, sizeof(err)) == 0 &&
	    n > 0) {
		rec_str(ans, r, "algorithm", lims[0].algo->name,
		    strlen(lims[0].algo->name), 0);
		rec_limit(r, "limit", lims[0].count, lims[0].period, 0);
		rec_secs(r, "period", lims[0].period, SHOW_MACHINE);
		rec_int(r, "burst", lims[0].burst, 0);
		rec_int(r, "cost", a->cost, SHOW_MACHINE);
	}
	if (rc != EXIT_STATE) {
		rec_int(r, "remaining", 0, 0);
		rec_secs(r, "retry_after", rc == EXIT_ALLOWED ? 0 : US_PER_SEC,
		    0);
		/* a rate limit's answer has it, a policy's included */
		if ((a->cmd->options & CMDOPT_LIMIT) &&
		    (a->ls.n > 0 || !a->has_concurrency))
			rec_secs(r, "reset_after", 0, 0);
	}
	rec_str(ans, r, "error", ans->msg, strlen(ans->msg), 0);
	return rc;
}

/* What a store error's message adds to say what --on-error made of it. */
const char *
ctx_state_note(const struct ctx *c)
{
	return c->on_error == ON_ERROR_FAIL ? ""
	    : !ctx_may_fail_open(c)
	    ? "; exit 3 whatever --on-error says: a misconfiguration is never "
	      "taken for an outage"
	    : c->on_error == ON_ERROR_ALLOW
	    ? "; allowing anyway (--on-error allow)"
	    : "; refusing (--on-error deny)";
}

/* The exit status --on-error makes of rc (3: 0 or 1 if mapped). */
int
ctx_map(const struct ctx *c, int rc)
{
	if (rc != EXIT_STATE || !ctx_may_fail_open(c))
		return rc;
	return c->on_error == ON_ERROR_ALLOW ? EXIT_ALLOWED
	    : c->on_error == ON_ERROR_DENY   ? EXIT_REFUSED
					     : EXIT_STATE;
}
