/*
 * args.c: the command line.  Every option is in options[], which says
 * which commands take it; args_parse() reads argv into a struct args and
 * nothing else (no store, no environment, no exit), so the fuzzer can call
 * it (fuzz/fuzz-cli.c).  Options may stand before or after the command;
 * "--" ends them.  Command names match exactly, never by prefix.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

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
	    NULL /* the algorithm table's names: help.c */ },
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
find_cmd(const struct cmd_entry *const *table, const char *name)
{
	const struct cmd_entry *const *c;

	for (c = table; *c != NULL; c++)
		if (strcmp((*c)->name, name) == 0)
			return *c;
	return NULL;
}

/* Keep a usage error in a->err for the caller to report; -1. */
static int usage_error(struct args *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
usage_error(struct args *a, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(a->err, sizeof(a->err), fmt, ap);
	va_end(ap);
	return -1;
}

/* --limit N/PERIOD, or several joined with ';' as in "10/1h;100/1d". */
static int
add_limits(struct args *a, const char *v)
{
	char buf[128];
	const char *p = v, *end, *err;
	size_t n;

	do {
		end = strchr(p, ';');
		n = end ? (size_t)(end - p) : strlen(p);
		if (n >= sizeof(buf))
			return usage_error(a, "--limit: '%s' is too long", v);
		memcpy(buf, p, n);
		buf[n] = '\0';
		if (a->ls.n == LIMITS_MAX)
			return usage_error(a,
			    "--limit: more than %d limits on one key",
			    LIMITS_MAX);
		if (parse_limit(buf, &a->ls.count[a->ls.n],
			&a->ls.period[a->ls.n], &err) == -1)
			return usage_error(a, "--limit: '%s' %s", buf, err);
		a->ls.text[a->ls.n++] = v;
		p = end ? end + 1 : NULL;
	} while (p != NULL);
	return 0;
}

static int
apply(struct args *a, const struct option_def *d, const char *v)
{
	const char *err;
	char names[200];
	int64_t n;

	switch (d->id) {
	case OPT_DB:
		a->db = v;
		break;
	case OPT_FORMAT:
		a->has_format = 1;
		if (parse_format(v, &a->format) == -1)
			return usage_error(a,
			    "--format: '%s' is not a format; use text, "
			    "json or shell",
			    v);
		break;
	case OPT_QUIET:
		a->quiet = 1;
		break;
	case OPT_LOCK_TIMEOUT:
		a->has_lock_timeout = 1;
		if (parse_duration(v, &a->lock_timeout, &err) == -1)
			return usage_error(a, "--lock-timeout: '%s' %s", v,
			    err);
		break;
	case OPT_ON_ERROR:
		a->has_on_error = 1;
		if (parse_on_error(v, &a->on_error) == -1)
			return usage_error(a,
			    "--on-error: '%s' is not a mode; use fail, "
			    "allow or deny",
			    v);
		break;
	case OPT_LIMIT:
		return add_limits(a, v);
	case OPT_BURST:
		if (parse_count(v, COUNT_MAX, &n, &err) == -1)
			return usage_error(a, "--burst: '%s' %s", v, err);
		if (n == 0)
			return usage_error(a,
			    "--burst: '%s' allows nothing; give at "
			    "least 1",
			    v);
		a->ls.burst = n;
		a->ls.has_burst = 1;
		break;
	case OPT_ALGORITHM:
		if ((a->ls.algo = algo_find(v)) == NULL) {
			algo_names(names, sizeof(names));
			return usage_error(a,
			    "--algorithm: '%s' is not an algorithm; use %s", v,
			    names);
		}
		break;
	case OPT_COST:
		if (parse_count(v, COUNT_MAX, &a->cost, &err) == -1)
			return usage_error(a, "--cost: '%s' %s", v, err);
		break;
	case OPT_CONCURRENCY:
		if (parse_count(v, COUNT_MAX, &a->concurrency, &err) == -1)
			return usage_error(a, "--concurrency: '%s' %s", v, err);
		if (a->concurrency == 0)
			return usage_error(a,
			    "--concurrency: '%s' allows nothing; give at "
			    "least 1",
			    v);
		a->has_concurrency = 1;
		break;
	case OPT_RESERVE:
		if (parse_reserve(v, &a->reserve, &a->reserve_percent, &err) ==
		    -1)
			return usage_error(a, "--reserve: '%s' %s", v, err);
		a->has_reserve = 1;
		break;
	case OPT_OWNER:
		if (parse_count(v, INT32_MAX, &a->owner, &err) == -1 ||
		    a->owner == 0)
			return usage_error(a,
			    "--owner: '%s' is not a process id", v);
		a->has_owner = 1;
		break;
	case OPT_TTL:
		if (parse_duration(v, &a->ttl, &err) == -1)
			return usage_error(a, "--ttl: '%s' %s", v, err);
		a->has_ttl = 1;
		break;
	case OPT_PRIORITY:
		if (parse_priority(v, &a->priority) == -1)
			return usage_error(a,
			    "--priority: '%s' is not a priority; use "
			    "critical, high, normal or low",
			    v);
		break;
	case OPT_LEASE:
		if (strlen(v) != LEASE_ID_LEN ||
		    strspn(v, "0123456789abcdef") != LEASE_ID_LEN)
			return usage_error(a,
			    "--lease: '%s' is not a lease id (%d hex "
			    "digits, as acquire prints them)",
			    v, LEASE_ID_LEN);
		a->lease = v;
		break;
	case OPT_UTILIZATION:
		if (strcmp(v, "auto") == 0)
			a->utilization_auto = 1;
		else if (parse_fraction(v, &a->utilization, &err) == -1)
			return usage_error(a, "--utilization: '%s' %s, or auto",
			    v, err);
		a->has_utilization = 1;
		break;
	case OPT_SEED:
		if (parse_count(v, INT64_MAX, &n, &err) == -1)
			return usage_error(a, "--seed: '%s' %s", v, err);
		a->seed = (uint64_t)n;
		a->has_seed = 1;
		break;
	case OPT_GOOD_BELOW:
		if (parse_fraction(v, &a->shed.good_ppm, &err) == -1)
			return usage_error(a, "--good-below: '%s' %s", v, err);
		break;
	case OPT_BAD_ABOVE:
		if (parse_fraction(v, &a->shed.bad_ppm, &err) == -1)
			return usage_error(a, "--bad-above: '%s' %s", v, err);
		break;
	case OPT_DELAY:
		if (parse_duration(v, &a->shed.delay, &err) == -1)
			return usage_error(a, "--delay: '%s' %s", v, err);
		break;
	case OPT_RAMP:
		if (parse_duration(v, &a->shed.ramp, &err) == -1)
			return usage_error(a, "--ramp: '%s' %s", v, err);
		break;
	case OPT_CONFLICT_EXIT_CODE:
		if (parse_count(v, 255, &n, &err) == -1)
			return usage_error(a,
			    "--conflict-exit-code: '%s' is not a code "
			    "from 0 to 255",
			    v);
		a->conflict_exit_code = (int)n;
		break;
	case OPT_NAMES:
		a->names = 1;
		break;
	case OPT_QUICK:
		a->quick = 1;
		break;
	case OPT_LOCKOUT:
		if (parse_duration(v, &a->lockout, &err) == -1)
			return usage_error(a, "--lockout: '%s' %s", v, err);
		a->has_lockout = 1;
		break;
	case OPT_WAIT:
		a->has_wait = 1;
		a->wait_max = -1;
		if (v != NULL && parse_duration(v, &a->wait_max, &err) == -1)
			return usage_error(a, "--wait: '%s' %s", v, err);
		break;
	case OPT_GRANULARITY:
		if (parse_duration(v, &a->ls.granularity, &err) == -1)
			return usage_error(a, "--granularity: '%s' %s", v, err);
		a->ls.has_granularity = 1;
		a->ls.granularity_text = v;
		break;
	}
	return 0;
}

/* The options every command line starts from. */
void
args_init(struct args *a)
{
	memset(a, 0, sizeof(*a));
	a->lock_timeout = 5 * US_PER_SEC;
	a->cost = 1;
	a->priority = PRIO_NORMAL;
	a->ttl = 3600 * US_PER_SEC;
	a->conflict_exit_code = 75; /* EX_TEMPFAIL */
	shed_default_params(&a->shed);
}

/* Free what args_parse() allocated; safe to call again. */
void
args_free(struct args *a)
{
	free((void *)a->given);
	free((void *)a->given_values);
	free((void *)a->argv_ops);
	a->given = NULL;
	a->given_values = NULL;
	a->argv_ops = NULL;
}

/*
 * Apply option --name with value (NULL for a flag), as if given on the
 * command line; for policies.  0, or -1 with a message in a->err.
 */
int
args_apply(struct args *a, const char *name, const char *value)
{
	const struct option_def *d = find_long(name, strlen(name));

	if (d == NULL || (d->arg != NULL) != (value != NULL))
		return usage_error(a, "--%s: not an option that takes %s", name,
		    value != NULL ? "a value" : "no value");
	return apply(a, d, value);
}

/* Nonzero if the command line gave option --name. */
int
args_given(const struct args *a, const char *name)
{
	int i;

	for (i = 0; i < a->ngiven; i++)
		if (strcmp(a->given[i]->name, name) == 0)
			return 1;
	return 0;
}

/* An option's long name. */
const char *
args_option_name(const struct option_def *d)
{
	return d->name;
}

/* Which commands take an option (CMDOPT_*; 0 for a global option). */
int
args_option_flag(const struct option_def *d)
{
	return d->flag;
}

/* Call fn for every option: long name, short name, value, flag, help. */
void
args_options(void (*fn)(const char *, char, const char *, int, const char *,
		 void *),
    void *arg)
{
	size_t i;

	for (i = 0; i < NOPTIONS; i++)
		fn(options[i].name, options[i].shortname, options[i].arg,
		    options[i].flag, options[i].help, arg);
}

/*
 * Parse a command line (argv[0] is the program) into a, which
 * args_init() has set up; a->cmd is the command, looked up in table.
 * Touches nothing outside a: no store, no environment, no exit.
 * PARSE_RUN, PARSE_HELP (show help for a->cmd, or all if NULL),
 * PARSE_VERSION, PARSE_NO_COMMAND, or -1 with a message in a->err.
 * args_free() frees what it allocates.
 */
int
args_parse(int argc, char **argv, const struct cmd_entry *const *table,
    struct args *a)
{
	const struct option_def *d, **given;
	const char **vals, **ops, *v, *eq;
	const struct cmd_entry *c = NULL;
	int i, nops = 0, ngiven = 0, dashdash = 0, help = 0, nbefore = -1;
	int version = 0;

	a->cmd = NULL;
	given = xcalloc((size_t)argc + 1, sizeof(const struct option_def *));
	vals = xcalloc((size_t)argc + 1, sizeof(*vals));
	ops = xcalloc((size_t)argc + 1, sizeof(*ops));
	a->given = given;
	a->given_values = vals;
	a->argv_ops = ops;
	for (i = 1; i < argc; i++) {
		const char *arg = argv[i];

		if (dashdash || arg[0] != '-' || arg[1] == '\0') {
			ops[nops++] = arg;
			continue;
		}
		if (strcmp(arg, "--") == 0) {
			dashdash = 1;
			nbefore = nops;
			continue;
		}
		v = NULL;
		if (arg[1] == '-') {
			eq = strchr(arg + 2, '=');
			d = find_long(arg + 2,
			    eq ? (size_t)(eq - arg - 2) : strlen(arg + 2));
			if (d == NULL)
				return usage_error(a,
				    "%.*s: unknown option; see throttle --help",
				    eq ? (int)(eq - arg) : (int)strlen(arg),
				    arg);
			if (eq != NULL) {
				if (d->arg == NULL)
					return usage_error(a,
					    "--%s: takes no value", d->name);
				v = eq + 1;
			}

		} else {
			if (arg[2] != '\0' || (d = find_short(arg[1])) == NULL)
				return usage_error(a,
				    "%s: unknown option; see throttle --help",
				    arg);
		}
		/* --wait takes its optional bound only as --wait=MAX */
		if (d->arg != NULL && v == NULL && d->id != OPT_WAIT) {
			if (i + 1 >= argc)
				return usage_error(a,
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
	a->ngiven = ngiven;

	if (version)
		return PARSE_VERSION;
	if (nops > 0 && (c = find_cmd(table, ops[0])) == NULL)
		return usage_error(a,
		    "%s: unknown command; see throttle --help", ops[0]);
	a->cmd = c;
	if (help)
		return PARSE_HELP;
	if (c == NULL)
		return PARSE_NO_COMMAND;
	for (i = 0; i < ngiven; i++) {
		if (given[i]->flag != 0 && !(given[i]->flag & c->options))
			return usage_error(a,
			    "%s: --%s does not apply to this command; see "
			    "throttle help %s",
			    c->name, given[i]->name, c->name);
		if (apply(a, given[i], vals[i]) == -1)
			return -1;
	}
	if (c->takes_command) {
		if (nbefore < 0 || nbefore >= nops)
			return usage_error(a,
			    "%s: no command to run; write throttle %s KEY "
			    "[options] -- COMMAND [ARGS...]",
			    c->name, c->name);
		a->command = (char **)(ops + nbefore);
		nops = nbefore;
	}
	if (nops - 1 < c->min_args)
		return usage_error(a, "%s: %s; usage: throttle %s %s", c->name,
		    c->operand_is_key ? "the key is missing"
				      : "an argument is missing",
		    c->name, c->args);
	if (nops - 1 > c->max_args)
		return usage_error(a,
		    "%s: '%s' is one argument too many (quote a key with "
		    "spaces); usage: throttle %s %s",
		    c->name, ops[1 + c->max_args], c->name, c->args);
	a->operand = nops > 1 ? ops[1] : NULL;
	a->operand2 = nops > 2 ? ops[2] : NULL;
	if (c->operand_is_key && a->operand != NULL) {
		a->key = a->operand;
		a->keylen = strlen(a->key);
		if (a->keylen == 0)
			return usage_error(a,
			    "%s: the key is empty; give a non-empty key",
			    c->name);
		if (a->keylen > KEY_MAX)
			return usage_error(a,
			    "%s: the key is %zu bytes, longer than the %d "
			    "allowed",
			    c->name, a->keylen, KEY_MAX);
	}
	return PARSE_RUN;
}
