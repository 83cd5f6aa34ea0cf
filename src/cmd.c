/*
 * cmd.c: the command table, the command line, and help built from both.
 *
 * Options may stand before or after the command; "--" ends them.  Command
 * names match exactly (no prefixes).  Every option is in options[], which
 * says which commands take it; --help, `throttle help COMMAND` and the
 * usage errors are all written from options[] and cmd_table[], so they
 * cannot disagree with what the parser accepts.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "throttle.h"

extern const struct cmd_entry cmd_consume_entry, cmd_check_entry,
    cmd_release_entry, cmd_inspect_entry, cmd_reset_entry, cmd_help_entry,
    cmd_acquire_entry, cmd_renew_entry, cmd_shed_entry, cmd_run_entry,
    cmd_gc_entry, cmd_policy_entry, cmd_batch_entry, cmd_verify_entry;

static const struct cmd_entry *const cmd_table[] = {
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

enum {
	OPT_DB,
	OPT_FORMAT,
	OPT_QUIET,
	OPT_LOCK_TIMEOUT,
	OPT_ON_ERROR,
	OPT_HELP,
	OPT_VERSION,
	OPT_LIMIT,
	OPT_BURST,
	OPT_ALGORITHM,
	OPT_COST,
	OPT_GRANULARITY,
	OPT_CONCURRENCY,
	OPT_RESERVE,
	OPT_OWNER,
	OPT_TTL,
	OPT_PRIORITY,
	OPT_LEASE,
	OPT_UTILIZATION,
	OPT_SEED,
	OPT_GOOD_BELOW,
	OPT_BAD_ABOVE,
	OPT_DELAY,
	OPT_RAMP,
	OPT_CONFLICT_EXIT_CODE,
	OPT_LOCKOUT,
	OPT_WAIT,
	OPT_NAMES,
	OPT_QUICK
};

static const struct option_def {
	int id;
	const char *name;
	char shortname;
	const char *arg;
	int flag; /* 0: global; else CMDOPT_* */
	const char *help;
} options[] = {
	{ OPT_LIMIT, "limit", 0, "N/PERIOD", CMDOPT_LIMIT,
	    "N units per PERIOD: 5/15m, 100/1s, 1000/1d" },
	{ OPT_BURST, "burst", 0, "B", CMDOPT_BURST,
	    "units that may be taken at once from rest (default N)" },
	{ OPT_ALGORITHM, "algorithm", 0, "NAME", CMDOPT_ALGORITHM,
	    "gcra (default; alias token-bucket), fixed-window, "
	    "sliding-window or hybrid" },
	{ OPT_GRANULARITY, "granularity", 0, "DURATION", CMDOPT_GRANULARITY,
	    "sliding-window: sub-window length (default PERIOD/60, >= 1ms)" },
	{ OPT_COST, "cost", 0, "N", CMDOPT_COST,
	    "units this request takes or gives back (default 1)" },
	{ OPT_LOCKOUT, "lockout", 0, "DURATION", CMDOPT_LOCKOUT,
	    "once refused, the key stays refused this long" },
	{ OPT_NAMES, "names", 0, NULL, CMDOPT_NAMES,
	    "inspect: only the keys' names, one per line (for completion)" },
	{ OPT_QUICK, "quick", 0, NULL, CMDOPT_QUICK,
	    "verify: SQLite's quick_check, not its full integrity_check" },
	{ OPT_WAIT, "wait", 0, "MAX", CMDOPT_WAIT,
	    "wait until allowed (at most MAX, with --wait=MAX)" },
	{ OPT_CONCURRENCY, "concurrency", 0, "N", CMDOPT_CONCURRENCY,
	    "at most N leases held at once" },
	{ OPT_RESERVE, "reserve", 0, "R", CMDOPT_CONCURRENCY,
	    "slots kept for critical work: a count or a percentage" },
	{ OPT_OWNER, "owner", 0, "PID", CMDOPT_CONCURRENCY,
	    "the lease ends when this process on this host is gone" },
	{ OPT_TTL, "ttl", 0, "DURATION", CMDOPT_TTL,
	    "the lease ends this long after it was taken (default 1h)" },
	{ OPT_PRIORITY, "priority", 0, "LEVEL", CMDOPT_PRIORITY,
	    "critical, high, normal (default) or low" },
	{ OPT_LEASE, "lease", 0, "ID", CMDOPT_LEASE,
	    "the lease to release or renew" },
	{ OPT_UTILIZATION, "utilization", 0, "U", CMDOPT_SHED,
	    "shed: how busy the workers are, 0 to 1, or auto" },
	{ OPT_SEED, "seed", 0, "N", CMDOPT_SHED,
	    "shed: make the random draw reproducible" },
	{ OPT_GOOD_BELOW, "good-below", 0, "U", CMDOPT_SHED,
	    "shed: shed less below this utilization (0.7)" },
	{ OPT_BAD_ABOVE, "bad-above", 0, "U", CMDOPT_SHED,
	    "shed: shed more above this utilization (0.8)" },
	{ OPT_DELAY, "delay", 0, "DURATION", CMDOPT_SHED,
	    "shed: overload before shedding starts (28s)" },
	{ OPT_RAMP, "ramp", 0, "DURATION", CMDOPT_SHED,
	    "shed: time from shedding nothing to everything (120s)" },
	{ OPT_CONFLICT_EXIT_CODE, "conflict-exit-code", 0, "N", CMDOPT_RUN,
	    "run: exit code when refused (default 75)" },
	{ OPT_DB, "db", 0, "PATH", 0, "state file (env THROTTLE_DB)" },
	{ OPT_FORMAT, "format", 0, "FORMAT", 0,
	    "text, json or shell (env THROTTLE_FORMAT)" },
	{ OPT_QUIET, "quiet", 'q', NULL, 0, "no message when throttled" },
	{ OPT_LOCK_TIMEOUT, "lock-timeout", 0, "DURATION", 0,
	    "how long to wait for another process (default 5s)" },
	{ OPT_ON_ERROR, "on-error", 0, "MODE", 0,
	    "what a state store error becomes: fail, allow or deny" },
	{ OPT_HELP, "help", 'h', NULL, 0, "show this help" },
	{ OPT_VERSION, "version", 0, NULL, 0, "show the version" },
};
#define NOPTIONS (sizeof(options) / sizeof(options[0]))

/* Which commands take an option (CMDOPT_*; 0 for a global option). */
int
option_flag(const struct option_def *d)
{
	return d->flag;
}

/* An option's long name. */
const char *
option_name(const struct option_def *d)
{
	return d->name;
}

static const struct option_def *
find_long(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < NOPTIONS; i++)
		if (strlen(options[i].name) == len &&
		    strncmp(options[i].name, name, len) == 0)
			return &options[i];
	return NULL;
}

static const struct option_def *
find_short(char c)
{
	size_t i;

	for (i = 0; i < NOPTIONS; i++)
		if (options[i].shortname == c && c != 0)
			return &options[i];
	return NULL;
}

static const struct cmd_entry *
find_cmd(const char *name)
{
	const struct cmd_entry *const *c;

	for (c = cmd_table; *c != NULL; c++)
		if (strcmp((*c)->name, name) == 0)
			return *c;
	return NULL;
}

static void
print_option(FILE *fp, const struct option_def *d)
{
	char left[40];

	if (d->shortname)
		snprintf(left, sizeof(left), "-%c, --%s%s%s", d->shortname,
		    d->name, d->arg ? " " : "", d->arg ? d->arg : "");
	else
		snprintf(left, sizeof(left), "    --%s%s%s", d->name,
		    d->arg ? " " : "", d->arg ? d->arg : "");
	fprintf(fp, "  %-26s %s\n", left, d->help);
}

static void
usage_all(FILE *fp)
{
	const struct cmd_entry *const *c;
	size_t i;

	fputs("usage: throttle [global options] command [options] [key]\n\n"
	      "Decide whether an action keyed by a string may happen now.\n\n"
	      "commands:\n",
	    fp);
	for (c = cmd_table; *c != NULL; c++)
		fprintf(fp, "  %s %s\n        %s\n", (*c)->name, (*c)->args,
		    (*c)->summary);
	fputs("\noptions:\n", fp);
	for (i = 0; i < NOPTIONS; i++)
		if (options[i].flag != 0)
			print_option(fp, &options[i]);
	fputs("\nglobal options (before or after the command):\n", fp);
	for (i = 0; i < NOPTIONS; i++)
		if (options[i].flag == 0)
			print_option(fp, &options[i]);
	fputs("\nexit status: 0 allowed or done, 1 throttled, 2 usage error, "
	      "3 state store error\nsee throttle(1) for more\n",
	    fp);
}

static void
usage_cmd(FILE *fp, const struct cmd_entry *c)
{
	size_t i;

	fprintf(fp, "usage: throttle %s %s\n\n%s\n", c->name, c->args,
	    c->summary);
	if (c->options != 0) {
		fputs("\noptions:\n", fp);
		for (i = 0; i < NOPTIONS; i++)
			if (options[i].flag & c->options)
				print_option(fp, &options[i]);
	}
	fputs("\nglobal options: see throttle --help\n", fp);
}

static int
help_exec(struct opts *o)
{
	const struct cmd_entry *c;

	if (o->operand == NULL) {
		usage_all(stdout);
		return EXIT_ALLOWED;
	}
	if ((c = find_cmd(o->operand)) == NULL)
		die_usage("help: '%s' is not a command; see throttle --help",
		    o->operand);
	usage_cmd(stdout, c);
	return EXIT_ALLOWED;
}

const struct cmd_entry cmd_help_entry = {
	.name = "help",
	.args = "[COMMAND]",
	.summary = "show how to use throttle, or one command",
	.options = 0,
	.min_args = 0,
	.max_args = 1,
	.operand_is_key = 0,
	.exec = help_exec,
};

/* --limit N/PERIOD, or several joined with ';' as in "10/1h;100/1d". */
static int
add_limits(struct opts *o, const char *v)
{
	char buf[128];
	const char *p = v, *end, *err;
	size_t n;

	do {
		end = strchr(p, ';');
		n = end ? (size_t)(end - p) : strlen(p);
		if (n >= sizeof(buf))
			return usage_error(o, "--limit: '%s' is too long", v);
		memcpy(buf, p, n);
		buf[n] = '\0';
		if (o->nlimits == LIMITS_MAX)
			return usage_error(o,
			    "--limit: more than %d limits on one key",
			    LIMITS_MAX);
		if (parse_limit(buf, &o->limits[o->nlimits].count,
			&o->limits[o->nlimits].period, &err) == -1)
			return usage_error(o, "--limit: '%s' %s", buf, err);
		o->limit_texts[o->nlimits++] = v;
		p = end ? end + 1 : NULL;
	} while (p != NULL);
	return 0;
}

static int
apply(struct opts *o, const struct option_def *d, const char *v)
{
	const char *err;
	int64_t n;

	switch (d->id) {
	case OPT_DB:
		o->db = v;
		break;
	case OPT_FORMAT:
		if (parse_format(v, &o->format) == -1)
			return usage_error(o,
			    "--format: '%s' is not a format; use text, "
			    "json or shell",
			    v);
		break;
	case OPT_QUIET:
		o->quiet = 1;
		break;
	case OPT_LOCK_TIMEOUT:
		if (parse_duration(v, &o->lock_timeout, &err) == -1)
			return usage_error(o, "--lock-timeout: '%s' %s", v,
			    err);
		break;
	case OPT_ON_ERROR:
		if (parse_on_error(v, &o->on_error) == -1)
			return usage_error(o,
			    "--on-error: '%s' is not a mode; use fail, "
			    "allow or deny",
			    v);
		break;
	case OPT_LIMIT:
		return add_limits(o, v);
	case OPT_BURST:
		if (parse_count(v, COUNT_MAX, &n, &err) == -1)
			return usage_error(o, "--burst: '%s' %s", v, err);
		if (n == 0)
			return usage_error(o,
			    "--burst: '%s' allows nothing; give at "
			    "least 1",
			    v);
		o->limit.burst = n;
		o->has_burst = 1;
		break;
	case OPT_ALGORITHM:
		if ((o->limit.algo = algo_find(v)) == NULL)
			return usage_error(o,
			    "--algorithm: '%s' is not an algorithm; use "
			    "gcra, token-bucket, fixed-window, "
			    "sliding-window or hybrid",
			    v);
		o->has_algorithm = 1;
		break;
	case OPT_COST:
		if (parse_count(v, COUNT_MAX, &o->cost, &err) == -1)
			return usage_error(o, "--cost: '%s' %s", v, err);
		break;
	case OPT_CONCURRENCY:
		if (parse_count(v, COUNT_MAX, &o->concurrency, &err) == -1)
			return usage_error(o, "--concurrency: '%s' %s", v, err);
		if (o->concurrency == 0)
			return usage_error(o,
			    "--concurrency: '%s' allows nothing; give at "
			    "least 1",
			    v);
		o->has_concurrency = 1;
		break;
	case OPT_RESERVE:
		if (parse_reserve(v, &o->reserve, &o->reserve_percent, &err) ==
		    -1)
			return usage_error(o, "--reserve: '%s' %s", v, err);
		o->has_reserve = 1;
		break;
	case OPT_OWNER:
		if (parse_count(v, INT32_MAX, &o->owner, &err) == -1 ||
		    o->owner == 0)
			return usage_error(o,
			    "--owner: '%s' is not a process id", v);
		o->has_owner = 1;
		break;
	case OPT_TTL:
		if (parse_duration(v, &o->ttl, &err) == -1)
			return usage_error(o, "--ttl: '%s' %s", v, err);
		o->has_ttl = 1;
		break;
	case OPT_PRIORITY:
		if (parse_priority(v, &o->priority) == -1)
			return usage_error(o,
			    "--priority: '%s' is not a priority; use "
			    "critical, high, normal or low",
			    v);
		break;
	case OPT_LEASE:
		if (strlen(v) != LEASE_ID_LEN ||
		    strspn(v, "0123456789abcdef") != LEASE_ID_LEN)
			return usage_error(o,
			    "--lease: '%s' is not a lease id (%d hex "
			    "digits, as acquire prints them)",
			    v, LEASE_ID_LEN);
		o->lease = v;
		break;
	case OPT_UTILIZATION:
		if (strcmp(v, "auto") == 0)
			o->utilization_auto = 1;
		else if (parse_fraction(v, &o->utilization, &err) == -1)
			return usage_error(o, "--utilization: '%s' %s, or auto",
			    v, err);
		o->has_utilization = 1;
		break;
	case OPT_SEED:
		if (parse_count(v, INT64_MAX, &n, &err) == -1)
			return usage_error(o, "--seed: '%s' %s", v, err);
		o->seed = (uint64_t)n;
		o->has_seed = 1;
		break;
	case OPT_GOOD_BELOW:
		if (parse_fraction(v, &o->shed.good_ppm, &err) == -1)
			return usage_error(o, "--good-below: '%s' %s", v, err);
		break;
	case OPT_BAD_ABOVE:
		if (parse_fraction(v, &o->shed.bad_ppm, &err) == -1)
			return usage_error(o, "--bad-above: '%s' %s", v, err);
		break;
	case OPT_DELAY:
		if (parse_duration(v, &o->shed.delay, &err) == -1)
			return usage_error(o, "--delay: '%s' %s", v, err);
		break;
	case OPT_RAMP:
		if (parse_duration(v, &o->shed.ramp, &err) == -1)
			return usage_error(o, "--ramp: '%s' %s", v, err);
		break;
	case OPT_CONFLICT_EXIT_CODE:
		if (parse_count(v, 255, &n, &err) == -1)
			return usage_error(o,
			    "--conflict-exit-code: '%s' is not a code "
			    "from 0 to 255",
			    v);
		o->conflict_exit_code = (int)n;
		break;
	case OPT_NAMES:
		o->names = 1;
		break;
	case OPT_QUICK:
		o->quick = 1;
		break;
	case OPT_LOCKOUT:
		if (parse_duration(v, &o->lockout, &err) == -1)
			return usage_error(o, "--lockout: '%s' %s", v, err);
		o->has_lockout = 1;
		break;
	case OPT_WAIT:
		o->has_wait = 1;
		o->wait_max = -1;
		if (v != NULL && parse_duration(v, &o->wait_max, &err) == -1)
			return usage_error(o, "--wait: '%s' %s", v, err);
		break;
	case OPT_GRANULARITY:
		if (parse_duration(v, &o->limit.granularity, &err) == -1)
			return usage_error(o, "--granularity: '%s' %s", v, err);
		o->has_granularity = 1;
		o->granularity_text = v;
		break;
	}
	return 0;
}

/*
 * Complete and check the limits, once the command line and the key's
 * policy have both been heard: every limit takes the algorithm, --burst
 * (one limit only) and --granularity given.
 */
int
cmd_settle(struct opts *o, const char *cmd)
{
	struct limit *l;
	const char *err;
	int i;

	if ((o->has_burst || o->has_algorithm || o->has_granularity) &&
	    o->nlimits == 0)
		return usage_error(o,
		    "%s: %s goes with --limit; give the limit too", cmd,
		    o->has_burst             ? "--burst"
			: o->has_granularity ? "--granularity"
					     : "--algorithm");
	if (o->has_burst && o->nlimits > 1)
		return usage_error(o,
		    "--burst: applies to one --limit; with several, each "
		    "limit's burst is its own N");
	if (o->limit.algo == NULL)
		o->limit.algo = algo_table[0];
	for (i = 0; i < o->nlimits; i++) {
		l = &o->limits[i];
		l->algo = o->limit.algo;
		if (o->has_burst && !l->algo->takes_burst)
			return usage_error(o,
			    "--burst: %s has no burst (only gcra does); "
			    "leave --burst out",
			    l->algo->name);
		if (o->has_granularity && !l->algo->takes_granularity)
			return usage_error(o,
			    "--granularity: %s has no sub-windows (only "
			    "sliding-window does); leave --granularity "
			    "out",
			    l->algo->name);
		l->burst = o->has_burst ? o->limit.burst : l->count;
		l->granularity = !l->algo->takes_granularity ? 0
		    : o->has_granularity
		    ? o->limit.granularity
		    : algo_sliding_default_granularity(l->period);
		if (limit_validate(l, &err) == -1) {
			if (o->has_granularity)
				return usage_error(o,
				    "--granularity: '%s' with --limit "
				    "'%s': %s",
				    o->granularity_text, o->limit_texts[i],
				    err);
			return usage_error(o, "--limit: '%s' %s",
			    o->limit_texts[i], err);
		}
	}
	return 0;
}

/*
 * Merge a policy's options into o: each option the command line did not
 * give.  -1 if the policy holds something throttle would not store.
 */
static int
merge_policy(struct opts *o, char *spec)
{
	struct opts cli = *o;
	const struct option_def *d;
	char *name, *value, *save = NULL;

	for (name = strtok_r(spec, " ", &save); name != NULL;
	     name = strtok_r(NULL, " ", &save)) {
		if (strncmp(name, "--", 2) != 0 ||
		    (d = find_long(name + 2, strlen(name + 2))) == NULL ||
		    !(d->flag & CMDOPT_POLICY) || d->id == OPT_OWNER ||
		    (value = strtok_r(NULL, " ", &save)) == NULL)
			return -1;
		if ((d->id == OPT_LIMIT && cli.nlimits > 0) ||
		    (d->id == OPT_BURST && cli.has_burst) ||
		    (d->id == OPT_ALGORITHM && cli.has_algorithm) ||
		    (d->id == OPT_GRANULARITY && cli.has_granularity) ||
		    (d->id == OPT_LOCKOUT && cli.has_lockout) ||
		    (d->id == OPT_CONCURRENCY && cli.has_concurrency) ||
		    (d->id == OPT_RESERVE && cli.has_reserve) ||
		    (d->id == OPT_TTL && cli.has_ttl))
			continue;
		if (apply(o, d, value) == -1)
			return -1;
	}
	return 0;
}

/*
 * A key without limit options on its command line uses the policy named
 * like the key, or like its longest prefix before a ':' ("login" governs
 * "login:alice").  Looked up in a read transaction of its own.  0, or -1
 * with *rc the exit code of a store error, already reported.
 */
static int
find_policy(struct opts *o, int *rc)
{
	static char spec[POLICY_MAX], name[KEY_MAX + 1];
	struct store *st;
	char msg[STORE_ERR_MAX];
	size_t n = o->keylen;
	int found = 0, ro;

	ro = o->read_only;
	o->read_only = 1; /* looking a policy up never creates a file */
	st = cmd_open(o, rc);
	o->read_only = ro;
	if (st == NULL)
		return -1;
	if (store_begin(st, 0) == -1) {
		*rc = cmd_fail(o, st, store_error(st));
		return -1;
	}
	for (;;) {
		memcpy(name, o->key, n);
		name[n] = '\0';
		if ((found = store_policy_get(st, name, spec, sizeof(spec))) ==
		    -1) {
			*rc = cmd_fail(o, st, store_error(st));
			return -1;
		}
		if (found)
			break;
		while (n > 0 && o->key[n - 1] != ':')
			n--;
		if (n == 0)
			break;
		n--; /* drop the ':' */
	}
	store_rollback(st);
	store_close(st);
	if (!found)
		return 0;
	o->policy = name;
	if (merge_policy(o, spec) == -1) {
		snprintf(msg, sizeof(msg),
		    "%.1000s: the policy '%.64s' holds options this throttle "
		    "cannot use (set the policy afresh with throttle policy "
		    "set)",
		    o->dbname, name);
		*rc = state_error(o, msg);
		return -1;
	}
	return 0;
}

/*
 * Settle what depends on the environment and the state file: the default
 * --db, the clock, the key's policy, then the limits.  0 to go on, or -1
 * with *rc the exit code of an error already reported (cmd_usage(), or
 * state_error(), which --on-error may have mapped to 0).
 */
int
cmd_finish(struct opts *o, const struct cmd_entry *c, int *rc)
{
	const char *err, *env;

	if (o->db == NULL && (env = getenv("THROTTLE_DB")) != NULL &&
	    *env != '\0')
		o->db = env;
	if (o->db == NULL) {
		if (store_default_path(o->dbbuf, sizeof(o->dbbuf), &err) ==
		    -1) {
			*rc = cmd_usage(o, "--db: %s", err);
			return -1;
		}
		o->db = o->dbbuf;
	}
	if (store_check_spec(o->db, &err) == -1) {
		*rc = cmd_usage(o, "--db: '%s' %s", o->db, err);
		return -1;
	}
	store_display(o->db, o->dbname, sizeof(o->dbname));
	o->read_only = c->reads_only ||
	    (c->reads_only_with != NULL && o->operand != NULL &&
		strstr(c->reads_only_with, o->operand) != NULL);
	if (clock_now(&o->now, &err) == -1) {
		*rc = cmd_usage(o, "THROTTLE_NOW: '%s' %s",
		    getenv("THROTTLE_NOW"), err);
		return -1;
	}
	if (store_is_remote(o->db)) {
		/* one connection for the whole command, and the server's
		 * clock, so hosts with skewed clocks agree */
		if (o->store == NULL) {
			if ((o->store = cmd_open(o, rc)) == NULL)
				return -1;
			store_hold(o->store);
			o->owned = o->store;
		}
		if (!clock_pinned()) {
			if (store_now(o->store, &o->now) == -1) {
				*rc = state_error(o, store_error(o->store));
				return -1;
			}
		}
	}
	if (c->uses_policy && o->key != NULL && o->nlimits == 0 &&
	    !o->has_concurrency && find_policy(o, rc) == -1)
		return -1;
	if ((c->options & CMDOPT_LIMIT) && cmd_settle(o, c->name) == -1) {
		if (!o->batch)
			log_msg("%s", o->err);
		*rc = EXIT_USAGE;
		return -1;
	}
	return 0;
}

/* Open the state store; on failure, report it and set *rc. */
struct store *
cmd_open(const struct opts *o, int *rc)
{
	struct store *st;
	char err[STORE_ERR_MAX];

	if (o->store != NULL)
		return o->store; /* a batch's, open for all its requests */
	if ((st = store_open(o->db, o->lock_timeout,
		 o->read_only ? STORE_READ : 0, err, sizeof(err))) == NULL)
		*rc = state_error(o, err);
	return st;
}

/*
 * Load the command's key: 1 found, 0 no state, -1 with a message in err.
 * The store refuses a record throttle could not have written.
 */
int
cmd_load(const struct opts *o, struct store *st, int idx, struct keyrec *rec,
    char *err, size_t errlen)
{
	int found;

	if ((found = store_load(st, o->key, o->keylen, idx, rec)) == -1)
		snprintf(err, errlen, "%s", store_error(st));
	return found;
}

/*
 * Read the time of a decision into o->now once its transaction has begun
 * (and, on a store that checks at commit, once it has read what it
 * decides on): decisions on one store then happen in the order of their
 * times, so a state is never saved later than a decision that reads it,
 * unless the clock itself stepped back.  The store's clock if it has one
 * (a Redis server's), else this host's; THROTTLE_NOW pins it.  0, or -1
 * with a message in err.
 */
int
cmd_now(struct opts *o, struct store *st, char *err, size_t errlen)
{
	const char *why;

	if (clock_pinned())
		return 0; /* o->now is the pinned time (plus any --wait) */
	if (store_now(st, &o->now) == 0)
		return 0;
	if (store_has_clock(st)) {
		snprintf(err, errlen, "%s", store_error(st));
		return -1;
	}
	if (clock_now(&o->now, &why) == -1) {
		snprintf(err, errlen, "the clock %s", why);
		return -1;
	}
	return 0;
}

/*
 * Load limit idx of the command's key and make ready to decide on it:
 * w->lim is the limit to use (--limit, else the key's own), and w->cur and
 * w->next have room for the state under it and what the algorithm writes.
 * 1 found, 0 no state (then w->lim is set only if --limit was given), -1
 * with a message in err.  cmd_carry() then fills w->cur; cmd_unprepare()
 * frees the buffers.
 */
int
cmd_prepare(const struct opts *o, struct store *st, int idx, struct work *w,
    char *err, size_t errlen)
{
	cmd_unprepare(w);
	if ((w->found = cmd_load(o, st, idx, &w->rec, err, errlen)) == -1)
		return -1;
	if (idx < o->nlimits)
		w->lim = o->limits[idx];
	else if (w->found)
		w->lim = w->rec.limit;
	w->cur.slots = xcalloc(w->rec.state.nslots + 1, sizeof(struct slot));
	w->next.slots = xcalloc(w->rec.state.nslots + 2, sizeof(struct slot));
	return w->found;
}

/* The state of a prepared limit as it stands at o->now, into w->cur. */
void
cmd_carry(const struct opts *o, struct work *w)
{
	w->cur.nslots = 0;
	w->moved = limit_carry(&w->lim, &w->rec, w->found, o->now, &w->cur);
}

/* Free what cmd_prepare() allocated; safe to call again. */
void
cmd_unprepare(struct work *w)
{
	free(w->rec.state.slots);
	free(w->cur.slots);
	free(w->next.slots);
	w->rec.state.slots = w->cur.slots = w->next.slots = NULL;
	w->rec.state.nslots = w->cur.nslots = w->next.nslots = 0;
}

/*
 * Save the command's key under limit l with state next; it is back at rest
 * reset_after from now.
 */
int
cmd_save(const struct opts *o, struct store *st, int idx, const struct limit *l,
    const struct kstate *next, int64_t rest_at)
{
	struct keyrec rec;

	memset(&rec, 0, sizeof(rec));
	rec.written_at = o->now;
	memcpy(rec.key, o->key, o->keylen);
	rec.key[o->keylen] = '\0';
	rec.keylen = o->keylen;
	rec.idx = idx;
	rec.limit = *l;
	rec.state = *next;
	rec.rest_at = rest_at;
	return store_save(st, &rec);
}

/* Print a decision on the command's key, and the throttled line if refused. */
void
cmd_print(const struct opts *o, const struct work *w, int n, int64_t cost,
    const struct decision *d)
{
	struct result r;
	int i, b = 0;

	/* the binding limit: the longest wait, then the fewest left */
	for (i = 1; i < n; i++)
		if (w[i].d.retry_after > w[b].d.retry_after ||
		    (w[i].d.retry_after == w[b].d.retry_after &&
			w[i].d.remaining < w[b].d.remaining))
			b = i;
	memset(&r, 0, sizeof(r));
	r.key = o->key;
	r.keylen = o->keylen;
	r.limit = &w[b].lim;
	r.allowed = d->allowed;
	r.cost = cost;
	r.remaining = d->remaining;
	r.retry_after = d->retry_after;
	r.reset_after = d->reset_after;
	r.works = n > 1 ? w : NULL;
	r.nworks = n;
	output_result(o, &r);
	if (!d->allowed)
		output_throttled(o, &r);
}

/* End a failed transaction: roll back, report, close; the exit code. */
int
cmd_fail(const struct opts *o, struct store *st, const char *msg)
{
	int rc;

	store_rollback(st);
	rc = state_error(o, msg);
	store_close(st);
	return rc;
}

/* The options every command starts from. */
void
cmd_defaults(struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->lock_timeout = 5 * US_PER_SEC;
	o->cost = 1;
	o->priority = PRIO_NORMAL;
	o->ttl = 3600 * US_PER_SEC;
	o->conflict_exit_code = 75; /* EX_TEMPFAIL */
	shed_default_params(&o->shed);
}

/* Free what cmd_parse() allocated; safe to call again. */
void
cmd_free(struct opts *o)
{
	free((void *)o->given);
	free((void *)o->given_values);
	free((void *)o->argv_ops);
	o->given = NULL;
	o->given_values = NULL;
	o->argv_ops = NULL;
}

/*
 * Parse a command line (argv[0] is the program) into o, which
 * cmd_defaults() has set up, and *cp, the command.  Touches nothing
 * outside o: no store, no environment, no exit.  PARSE_RUN, PARSE_HELP
 * (show help for *cp, or all if NULL), PARSE_VERSION, PARSE_NO_COMMAND,
 * or -1 with a message in o->err.  cmd_free() frees what it allocates.
 */
int
cmd_parse(int argc, char **argv, struct opts *o, const struct cmd_entry **cp)
{
	const struct option_def *d, **given;
	const char **vals, **ops, *v, *eq;
	const struct cmd_entry *c = NULL;
	int i, nops = 0, ngiven = 0, dashdash = 0, help = 0, nbefore = -1;
	int version = 0;

	*cp = NULL;
	given = xcalloc((size_t)argc + 1, sizeof(const struct option_def *));
	vals = xcalloc((size_t)argc + 1, sizeof(*vals));
	ops = xcalloc((size_t)argc + 1, sizeof(*ops));
	o->given = given;
	o->given_values = vals;
	o->argv_ops = ops;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (dashdash || a[0] != '-' || a[1] == '\0') {
			ops[nops++] = a;
			continue;
		}
		if (strcmp(a, "--") == 0) {
			dashdash = 1;
			nbefore = nops;
			continue;
		}
		v = NULL;
		if (a[1] == '-') {
			eq = strchr(a + 2, '=');
			d = find_long(a + 2,
			    eq ? (size_t)(eq - a - 2) : strlen(a + 2));
			if (d == NULL)
				return usage_error(o,
				    "%.*s: unknown option; see throttle --help",
				    eq ? (int)(eq - a) : (int)strlen(a), a);
			if (eq != NULL) {
				if (d->arg == NULL)
					return usage_error(o,
					    "--%s: takes no value", d->name);
				v = eq + 1;
			}

		} else {
			if (a[2] != '\0' || (d = find_short(a[1])) == NULL)
				return usage_error(o,
				    "%s: unknown option; see throttle --help",
				    a);
		}
		/* --wait takes its optional bound only as --wait=MAX */
		if (d->arg != NULL && v == NULL && d->id != OPT_WAIT) {
			if (i + 1 >= argc)
				return usage_error(o,
				    "--%s: needs a value (%s)", d->name,
				    d->arg);
			v = argv[++i];
		}
		if (d->id == OPT_HELP)
			help = 1;
		else if (d->id == OPT_VERSION)
			version = 1;
		given[ngiven] = d;
		vals[ngiven++] = v;
	}
	o->ngiven = ngiven;

	if (version)
		return PARSE_VERSION;
	if (nops > 0 && (c = find_cmd(ops[0])) == NULL)
		return usage_error(o,
		    "%s: unknown command; see throttle --help", ops[0]);
	*cp = c;
	if (help)
		return PARSE_HELP;
	if (c == NULL)
		return PARSE_NO_COMMAND;
	for (i = 0; i < ngiven; i++) {
		if (given[i]->flag != 0 && !(given[i]->flag & c->options))
			return usage_error(o,
			    "%s: --%s does not apply to this command; see "
			    "throttle help %s",
			    c->name, given[i]->name, c->name);
		if (apply(o, given[i], vals[i]) == -1)
			return -1;
	}
	if (c->takes_command) {
		if (nbefore < 0 || nbefore >= nops)
			return usage_error(o,
			    "%s: no command to run; write throttle %s KEY "
			    "[options] -- COMMAND [ARGS...]",
			    c->name, c->name);
		o->command = (char **)(ops + nbefore);
		nops = nbefore;
	}
	if (nops - 1 < c->min_args)
		return usage_error(o, "%s: %s; usage: throttle %s %s", c->name,
		    c->operand_is_key ? "the key is missing"
				      : "an argument is missing",
		    c->name, c->args);
	if (nops - 1 > c->max_args)
		return usage_error(o,
		    "%s: '%s' is one argument too many (quote a key with "
		    "spaces); usage: throttle %s %s",
		    c->name, ops[1 + c->max_args], c->name, c->args);
	o->operand = nops > 1 ? ops[1] : NULL;
	o->operand2 = nops > 2 ? ops[2] : NULL;
	if (c->operand_is_key && o->operand != NULL) {
		o->key = o->operand;
		o->keylen = strlen(o->key);
		if (o->keylen == 0)
			return usage_error(o,
			    "%s: the key is empty; give a non-empty key",
			    c->name);
		if (o->keylen > KEY_MAX)
			return usage_error(o,
			    "%s: the key is %zu bytes, longer than the %d "
			    "allowed",
			    c->name, o->keylen, KEY_MAX);
	}
	return PARSE_RUN;
}

/* Parse the command line and environment, run the command. */
int
cmd_main(int argc, char **argv)
{
	struct opts o;
	const struct cmd_entry *c;
	const char *env;
	int rc;

	cmd_defaults(&o);
	if ((env = getenv("THROTTLE_FORMAT")) != NULL && *env != '\0' &&
	    parse_format(env, &o.format) == -1)
		die_usage("THROTTLE_FORMAT: '%s' is not a format; use text, "
			  "json or shell",
		    env);
	switch (cmd_parse(argc, argv, &o, &c)) {
	case -1:
		die_usage("%s", o.err);
	case PARSE_VERSION:
#ifdef THROTTLE_REDIS
		printf("throttle %s (stores: sqlite %s, redis with hiredis "
		       "%s)\n",
		    THROTTLE_VERSION, store_sqlite_version(),
		    store_redis_version());
#else
		printf("throttle %s (stores: sqlite %s)\n", THROTTLE_VERSION,
		    store_sqlite_version());
#endif
		rc = EXIT_ALLOWED;
		break;
	case PARSE_HELP:
		if (c != NULL && c != &cmd_help_entry)
			usage_cmd(stdout, c);
		else
			usage_all(stdout);
		rc = EXIT_ALLOWED;
		break;
	case PARSE_NO_COMMAND:
		usage_all(stderr);
		rc = EXIT_USAGE;
		break;
	default:
		if (c == &cmd_help_entry || cmd_finish(&o, c, &rc) == 0)
			rc = c->exec(&o);
		store_free(o.owned);
	}
	cmd_free(&o);
	return rc;
}
