/*
 * args.c: the command line.  Every option is in options[], which says
 * which commands take it; args_parse() reads argv into a struct args and
 * nothing else (no store, no environment, no exit), so the fuzzer can call
 * it (fuzz/fuzz-cli.c).  Options may stand before or after the command;
 * "--" ends them.  Command names match exactly, never by prefix.
 */
#include <stdarg.h>
#include <stddef.h>
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
	OPT_QUICK,
	OPT_LOCKED
};

struct option_def;
typedef int (*setter)(struct args *, const struct option_def *, const char *);

static int set_flag(struct args *, const struct option_def *, const char *);
static int set_text(struct args *, const struct option_def *, const char *);
static int set_duration(struct args *, const struct option_def *, const char *);
static int set_count(struct args *, const struct option_def *, const char *);
static int set_fraction(struct args *, const struct option_def *, const char *);
static int set_format(struct args *, const struct option_def *, const char *);
static int set_on_error(struct args *, const struct option_def *, const char *);
static int set_limit(struct args *, const struct option_def *, const char *);
static int
set_algorithm(struct args *, const struct option_def *, const char *);
static int set_reserve(struct args *, const struct option_def *, const char *);
static int set_owner(struct args *, const struct option_def *, const char *);
static int set_priority(struct args *, const struct option_def *, const char *);
static int set_lease(struct args *, const struct option_def *, const char *);
static int
set_utilization(struct args *, const struct option_def *, const char *);
static int set_seed(struct args *, const struct option_def *, const char *);
static int
set_exit_code(struct args *, const struct option_def *, const char *);
static int set_wait(struct args *, const struct option_def *, const char *);
static int set_lockout(struct args *, const struct option_def *, const char *);
static int
set_granularity(struct args *, const struct option_def *, const char *);

#define AT(field) offsetof(struct args, field)
#define NONE ((size_t)-1)

/*
 * Every option: its setter stores the value at off (and 1 at has, if the
 * option has a has_* member); min and max bound a count.
 */
static const struct option_def {
	int id;
	const char *name;
	char shortname;
	const char *arg;
	int flag; /* 0: global; else CMDOPT_* */
	const char *help;
	setter set;
	size_t off, has;
	int64_t min, max;
} options[] = {
	{ OPT_LIMIT, "limit", 0, "N/PERIOD", CMDOPT_LIMIT,
	    "N units per PERIOD: 5/15m, 100/1s, 1000/1d", set_limit, NONE, NONE,
	    0, 0 },
	{ OPT_BURST, "burst", 0, "B", CMDOPT_BURST,
	    "units that may be taken at once from rest (default N)", set_count,
	    AT(ls.burst), AT(ls.has_burst), 1, COUNT_MAX },
	{ OPT_ALGORITHM, "algorithm", 0, "NAME", CMDOPT_ALGORITHM,
	    NULL /* the algorithm table's names: help.c */, set_algorithm, NONE,
	    NONE, 0, 0 },
	{ OPT_GRANULARITY, "granularity", 0, "DURATION", CMDOPT_GRANULARITY,
	    "sliding-window: sub-window length (default PERIOD/60, >= 1ms)",
	    set_granularity, AT(ls.granularity), AT(ls.has_granularity), 0, 0 },
	{ OPT_COST, "cost", 0, "N", CMDOPT_COST,
	    "units this request takes or gives back (default 1)", set_count,
	    AT(cost), NONE, 0, COUNT_MAX },
	{ OPT_LOCKOUT, "lockout", 0, "DURATION", CMDOPT_LOCKOUT,
	    "once refused, the key stays refused this long (never: until "
	    "reset)",
	    set_lockout, AT(lockout), AT(has_lockout), 0, 0 },
	{ OPT_NAMES, "names", 0, NULL, CMDOPT_NAMES,
	    "inspect: only the keys' names, one per line (for completion)",
	    set_flag, AT(names), NONE, 0, 0 },
	{ OPT_LOCKED, "locked", 0, NULL, CMDOPT_LOCKED,
	    "inspect: only the keys locked out now, and for how long", set_flag,
	    AT(locked), NONE, 0, 0 },
	{ OPT_QUICK, "quick", 0, NULL, CMDOPT_QUICK,
	    "verify: SQLite's quick_check, not its full integrity_check",
	    set_flag, AT(quick), NONE, 0, 0 },
	{ OPT_WAIT, "wait", 0, "MAX", CMDOPT_WAIT,
	    "wait until allowed, at most MAX if given: --wait 1m, --wait=1m",
	    set_wait, AT(wait_max), AT(has_wait), 0, 0 },
	{ OPT_CONCURRENCY, "concurrency", 0, "N", CMDOPT_CONCURRENCY,
	    "at most N leases held at once", set_count, AT(concurrency),
	    AT(has_concurrency), 1, COUNT_MAX },
	{ OPT_RESERVE, "reserve", 0, "R", CMDOPT_CONCURRENCY,
	    "slots kept for critical work: a count or a percentage",
	    set_reserve, NONE, AT(has_reserve), 0, 0 },
	{ OPT_OWNER, "owner", 0, "PID", CMDOPT_OWNER,
	    "the lease ends when this process on this host is gone", set_owner,
	    AT(owner), AT(has_owner), 1, INT32_MAX },
	{ OPT_TTL, "ttl", 0, "DURATION", CMDOPT_TTL,
	    "the lease ends this long after it was taken or renewed "
	    "(default 1h; run: none, and renews one while it runs)",
	    set_duration, AT(ttl), AT(has_ttl), 0, 0 },
	{ OPT_PRIORITY, "priority", 0, "LEVEL", CMDOPT_PRIORITY,
	    "critical, high, normal (default) or low", set_priority,
	    AT(priority), NONE, 0, 0 },
	{ OPT_LEASE, "lease", 0, "ID", CMDOPT_LEASE,
	    "the lease to release or renew", set_lease, AT(lease), NONE, 0, 0 },
	{ OPT_UTILIZATION, "utilization", 0, "U", CMDOPT_SHED,
	    "shed: how busy the workers are: a fraction (above 1: overloaded), "
	    "or auto",
	    set_utilization, AT(utilization), AT(has_utilization), 0, 0 },
	{ OPT_SEED, "seed", 0, "N", CMDOPT_SHED,
	    "shed: make the random draw reproducible", set_seed, AT(seed),
	    AT(has_seed), 0, INT64_MAX },
	{ OPT_GOOD_BELOW, "good-below", 0, "U", CMDOPT_SHED,
	    "shed: shed less below this utilization (0.7)", set_fraction,
	    AT(shed.good_ppm), NONE, 0, 0 },
	{ OPT_BAD_ABOVE, "bad-above", 0, "U", CMDOPT_SHED,
	    "shed: shed more above this utilization (0.8)", set_fraction,
	    AT(shed.bad_ppm), NONE, 0, 0 },
	{ OPT_DELAY, "delay", 0, "DURATION", CMDOPT_SHED,
	    "shed: overload before shedding starts (28s)", set_duration,
	    AT(shed.delay), NONE, 0, 0 },
	{ OPT_RAMP, "ramp", 0, "DURATION", CMDOPT_SHED,
	    "shed: time from shedding nothing to everything (120s)",
	    set_duration, AT(shed.ramp), NONE, 0, 0 },
	{ OPT_CONFLICT_EXIT_CODE, "conflict-exit-code", 0, "N", CMDOPT_RUN,
	    "run: exit code when refused (default 75)", set_exit_code,
	    AT(conflict_exit_code), NONE, 0, 255 },
	{ OPT_DB, "db", 0, "PATH", 0, "state file (env THROTTLE_DB)", set_text,
	    AT(db), NONE, 0, 0 },
	{ OPT_FORMAT, "format", 0, "FORMAT", 0,
	    "text, json or shell (env THROTTLE_FORMAT)", set_format, AT(format),
	    AT(has_format), 0, 0 },
	{ OPT_QUIET, "quiet", 'q', NULL, 0,
	    "no message when throttled, no summary", set_flag, AT(quiet), NONE,
	    0, 0 },
	{ OPT_LOCK_TIMEOUT, "lock-timeout", 0, "DURATION", 0,
	    "how long to wait for another process (default 5s)", set_duration,
	    AT(lock_timeout), AT(has_lock_timeout), 0, 0 },
	{ OPT_ON_ERROR, "on-error", 0, "MODE", 0,
	    "what a state store error becomes: fail, allow or deny",
	    set_on_error, AT(on_error), AT(has_on_error), 0, 0 },
	{ OPT_HELP, "help", 'h', NULL, 0, "show this help", NULL, NONE, NONE, 0,
	    0 },
	{ OPT_VERSION, "version", 0, NULL, 0, "show the version", NULL, NONE,
	    NONE, 0, 0 },
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

/* --limit N/PERIOD, or several joined with ';' as in "10/1h;100/1d"
 * (blanks around each limit, as in "10/1h; 100/1d", are let be). */
static int
add_limits(struct args *a, const char *v)
{
	char buf[128];
	const char *p = v, *end, *err;
	size_t n;

	do {
		end = strchr(p, ';');
		n = end ? (size_t)(end - p) : strlen(p);
		for (; n > 0 && (*p == ' ' || *p == '\t'); n--)
			p++;
		while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		if (n >= sizeof(buf))
			return usage_error(a, "--limit: '%s' is too long", v);
		if (n == 0 && strchr(v, ';') != NULL)
			return usage_error(a,
			    "--limit: '%s' has an empty limit beside a ';' "
			    "(join limits with one ';', as in 10/1h;100/1d)",
			    v);
		memcpy(buf, p, n);
		buf[n] = '\0';
		if (a->ls.n == LIMITS_MAX)
			return usage_error(a,
			    "--limit: more than %d limits on one key",
			    LIMITS_MAX);
		if (parse_limit(buf, &a->ls.count[a->ls.n],
			&a->ls.period[a->ls.n], &err) == -1)
			/* (blanks alone: the value as given) */
			return usage_error(a, "--limit: '%s' %s",
			    n > 0 ? buf : v, err);
		a->ls.text[a->ls.n++] = v;
		p = end ? end + 1 : NULL;
	} while (p != NULL);
	return 0;
}

/* The member of a at offset off, as a T. */
#define MEMBER(T, a, off) ((T *)(void *)((char *)(a) + (off)))

/* Note that d was given, if it has a has_* member. */
static void
given(struct args *a, const struct option_def *d)
{
	if (d->has != NONE)
		*MEMBER(int, a, d->has) = 1;
}

static int
set_flag(struct args *a, const struct option_def *d, const char *v)
{
	(void)v;
	*MEMBER(int, a, d->off) = 1;
	return 0;
}

static int
set_text(struct args *a, const struct option_def *d, const char *v)
{
	*MEMBER(const char *, a, d->off) = v;
	given(a, d);
	return 0;
}

static int
set_duration(struct args *a, const struct option_def *d, const char *v)
{
	const char *err;

	if (parse_duration(v, MEMBER(int64_t, a, d->off), &err) == -1)
		return usage_error(a, "--%s: '%s' %s", d->name, v, err);
	given(a, d);
	return 0;
}

/*
 * A whole number's option refused: what was wrong with it, and what to
 * write instead (an empty one's message says so itself).
 */
static int
count_error(struct args *a, const struct option_def *d, const char *v,
    const char *err)
{
	if (strcmp(err, PARSE_TOO_LARGE) == 0)
		return usage_error(a, "--%s: '%s' %s; the most is %lld",
		    d->name, v, err, (long long)d->max);
	if (strcmp(err, PARSE_NOT_COUNT) != 0)
		return usage_error(a, "--%s: '%s' %s", d->name, v, err);
	return usage_error(a,
	    "--%s: '%s' %s; give %lld or more in digits, as in --%s %lld",
	    d->name, v, err, (long long)d->min, d->name,
	    (long long)(d->min > 0 ? d->min + 1 : 2));
}

static int
set_count(struct args *a, const struct option_def *d, const char *v)
{
	const char *err;
	int64_t n;

	if (parse_count(v, d->max, &n, &err) == -1)
		return count_error(a, d, v, err);
	if (n < d->min)
		return usage_error(a,
		    "--%s: '%s' allows nothing; give at least %lld", d->name, v,
		    (long long)d->min);
	*MEMBER(int64_t, a, d->off) = n;
	given(a, d);
	return 0;
}

static int
set_fraction(struct args *a, const struct option_def *d, const char *v)
{
	const char *err;

	if (parse_fraction(v, MEMBER(int64_t, a, d->off), &err) == -1)
		return usage_error(a, "--%s: '%s' %s", d->name, v, err);
	given(a, d);
	return 0;
}

static int
set_format(struct args *a, const struct option_def *d, const char *v)
{
	given(a, d);
	if (parse_format(v, &a->format) == -1)
		return usage_error(a,
		    "--format: '%s' is not a format; use text, json or shell",
		    v);
	return 0;
}

static int
set_on_error(struct args *a, const struct option_def *d, const char *v)
{
	given(a, d);
	if (parse_on_error(v, &a->on_error) == -1)
		return usage_error(a,
		    "--on-error: '%s' is not a mode; use fail, allow or deny",
		    v);
	return 0;
}

static int
set_limit(struct args *a, const struct option_def *d, const char *v)
{
	(void)d;
	return add_limits(a, v);
}

static int
set_algorithm(struct args *a, const struct option_def *d, const char *v)
{
	char names[200];

	(void)d;
	if ((a->ls.algo = algo_find(v)) == NULL) {
		algo_names(names, sizeof(names));
		return usage_error(a,
		    "--algorithm: '%s' is not an algorithm; use %s", v, names);
	}
	return 0;
}

static int
set_reserve(struct args *a, const struct option_def *d, const char *v)
{
	const char *err;

	if (parse_reserve(v, &a->reserve, &a->reserve_percent, &err) == -1)
		return usage_error(a, "--reserve: '%s' %s", v, err);
	given(a, d);
	return 0;
}

static int
set_owner(struct args *a, const struct option_def *d, const char *v)
{
	const char *err;

	if (parse_count(v, d->max, &a->owner, &err) == -1 || a->owner < d->min)
		return usage_error(a, "--owner: '%s' is not a process id", v);
	given(a, d);
	return 0;
}

static int
set_priority(struct args *a, const struct option_def *d, const char *v)
{
	(void)d;
	if (parse_priority(v, &a->priority) == -1)
		return usage_error(a,
		    "--priority: '%s' is not a priority; use critical, high, "
		    "normal or low",
		    v);
	return 0;
}

/* An id acquire never prints is held by no one: release and renew say
 * so (exit 1, as for an unknown lease), without echoing it. */
static int
set_lease(struct args *a, const struct option_def *d, const char *v)
{
	a->lease_bad = !lease_id_ok(v, strlen(v));
	return set_text(a, d, v);
}

static int
set_utilization(struct args *a, const struct option_def *d, const char *v)
{
	if (strcmp(v, "auto") == 0) {
		a->utilization_auto = 1;
		given(a, d);
		return 0;
	}
	if (set_fraction(a, d, v) == -1) {
		size_t n = strlen(a->err);

		snprintf(a->err + n, sizeof(a->err) - n, ", or auto");
		return -1;
	}
	return 0;
}

static int
set_seed(struct args *a, const struct option_def *d, const char *v)
{
	const char *err;
	int64_t n;

	if (parse_count(v, d->max, &n, &err) == -1)
		return count_error(a, d, v, err);
	*MEMBER(uint64_t, a, d->off) = (uint64_t)n;
	given(a, d);
	return 0;
}

static int
set_exit_code(struct args *a, const struct option_def *d, const char *v)
{
	const char *err;
	int64_t n;

	if (parse_count(v, d->max, &n, &err) == -1)
		return usage_error(a, "--%s: '%s' is not a code from 0 to 255",
		    d->name, v);
	*MEMBER(int, a, d->off) = (int)n;
	return 0;
}

static int
set_wait(struct args *a, const struct option_def *d, const char *v)
{
	given(a, d);
	a->wait_max = -1;
	return v != NULL ? set_duration(a, d, v) : 0;
}

static int
set_lockout(struct args *a, const struct option_def *d, const char *v)
{
	if (strcmp(v, "never") == 0) {
		a->lockout = LOCKOUT_FOREVER; /* until reset */
		given(a, d);
		return 0;
	}
	if (set_duration(a, d, v) == -1) {
		size_t n = strlen(a->err);

		snprintf(a->err + n, sizeof(a->err) - n,
		    ", or never (until reset)");
		return -1;
	}
	return 0;
}

static int
set_granularity(struct args *a, const struct option_def *d, const char *v)
{
	a->ls.granularity_text = v;
	return set_duration(a, d, v);
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
	return d->set != NULL ? d->set(a, d, value) : 0;
}

/* Nonzero if a's command takes option --name. */
int
args_takes(const struct args *a, const char *name)
{
	const struct option_def *d = find_long(name, strlen(name));

	return d != NULL && a->cmd != NULL && (d->flag & a->cmd->options);
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
/* What one pass over argv found besides the options. */
struct scan {
	const struct option_def **given; /* the options, in order */
	const char **vals; /* and their values */
	int ngiven;
	const char **ops; /* operands, the command name first */
	int nops;
	int nbefore; /* operands before "--", or -1 */
	int help, version;
};

/* The value of option d at argv[*i], if it takes one: 0 or -1. */
static int
option_value(struct args *a, const struct option_def *d, int argc, char **argv,
    int *i, const char **v)
{
	const char *err;
	int64_t t;

	if (d->arg == NULL || *v != NULL)
		return 0;
	if (d->id == OPT_WAIT) {
		/* --wait's bound is optional: the next word, if it is a
		 * duration that begins with a number (a key may be a unit's
		 * name, "day"); --wait=MAX always works */
		if (*i + 1 < argc &&
		    ((argv[*i + 1][0] >= '0' && argv[*i + 1][0] <= '9') ||
			argv[*i + 1][0] == '.') &&
		    parse_duration(argv[*i + 1], &t, &err) == 0)
			*v = argv[++*i];
		else if (*i + 1 < argc && argv[*i + 1][0] >= '0' &&
		    argv[*i + 1][0] <= '9')
			a->wait_word = argv[*i + 1]; /* see too_many() */
		else if (*i + 1 < argc && argv[*i + 1][0] == '-' &&
		    argv[*i + 1][1] >= '0' && argv[*i + 1][1] <= '9')
			/* not "-1s: unknown option" */
			return usage_error(a,
			    "--wait: '%s' is negative; give the longest wait "
			    "as a duration, as in --wait 30s, or --wait alone",
			    argv[*i + 1]);
		return 0;
	}
	if (*i + 1 >= argc)
		return usage_error(a, "--%s: needs a value (%s)", d->name,
		    d->arg);
	*v = argv[++*i];
	return 0;
}

/* The option argv[i] names, and its value if written --name=VALUE. */
static const struct option_def *
option_at(struct args *a, const char *arg, const char **v)
{
	const struct option_def *d;
	const char *eq;

	*v = NULL;
	if (arg[1] != '-') {
		d = arg[2] == '\0' ? find_short(arg[1]) : NULL;
		if (arg[2] != '\0' && find_long(arg + 1, strlen(arg + 1)))
			usage_error(a, "%s: unknown option; did you mean -%s?",
			    arg, arg);
		else if (d == NULL)
			/* (a key that begins with a dash, most likely) */
			usage_error(a,
			    "%s: unknown option; see throttle --help (a key "
			    "that begins with a dash goes after the options "
			    "and '--', as in throttle consume --limit 5/1m "
			    "-- %s)",
			    arg, arg);
		return d;
	}
	eq = strchr(arg + 2, '=');
	d = find_long(arg + 2, eq ? (size_t)(eq - arg - 2) : strlen(arg + 2));
	if (d == NULL) {
		usage_error(a, "%.*s: unknown option; see throttle --help",
		    eq ? (int)(eq - arg) : (int)strlen(arg), arg);
		return NULL;
	}
	if (eq != NULL && d->arg == NULL) {
		usage_error(a, "--%s: takes no value", d->name);
		return NULL;
	}
	if (eq != NULL)
		*v = eq + 1;
	return d;
}

/* Sort argv into options (a->given) and operands (sc->ops): 0 or -1. */
static int
scan_argv(struct args *a, int argc, char **argv, struct scan *sc)
{
	const struct option_def *d;
	const char *v;
	int i, dashdash = 0;

	for (i = 1; i < argc; i++) {
		const char *arg = argv[i];

		if (dashdash || arg[0] != '-' || arg[1] == '\0') {
			sc->ops[sc->nops++] = arg;
			continue;
		}
		if (strcmp(arg, "--") == 0) {
			dashdash = 1;
			sc->nbefore = sc->nops;
			continue;
		}
		if ((d = option_at(a, arg, &v)) == NULL ||
		    option_value(a, d, argc, argv, &i, &v) == -1)
			return -1;
		sc->help |= d->id == OPT_HELP;
		sc->version |= d->id == OPT_VERSION;
		sc->given[sc->ngiven] = d;
		sc->vals[sc->ngiven++] = v;
	}
	return 0;
}

/*
 * Operand op is one too many: if it is the word after --wait, a bound
 * mistyped (--wait 5x), say so; else -1 for the caller's message.
 */
static int
wait_mistyped(struct args *a, const char *op)
{
	const char *err;
	int64_t t;

	if (a->wait_word == NULL || op != a->wait_word ||
	    parse_duration(op, &t, &err) == 0)
		return 0;
	return usage_error(a,
	    "--wait: '%s' %s; a key that begins with a digit goes before "
	    "--wait",
	    op, err);
}

/*
 * run's operands: KEY -- COMMAND, or [options] -- -KEY -- COMMAND for a
 * key that begins with '-' (the first "--" ends the options, the second
 * the key; a "--" with no key before it was always an error).  The
 * command into a->command, the key left in sc: 0 or -1.
 */
static int
split_command(struct args *a, const struct cmd_entry *c, struct scan *sc)
{
	int keyfirst =
	    sc->nbefore == 1 && sc->nops > 2 && strcmp(sc->ops[2], "--") == 0;
	int i;

	if (keyfirst && sc->nops == 3)
		return usage_error(a,
		    "%s: no command to run after '%s --'; write throttle %s "
		    "[options] -- -KEY -- COMMAND [ARGS...]",
		    c->name, sc->ops[1], c->name);
	if (!keyfirst && sc->nbefore == 1 && sc->nops > 1 &&
	    sc->ops[1][0] == '-' && sc->ops[1][1] != '\0') {
		/* no command begins with '-': a dash key without its
		 * second "--", or options given after the first */
		for (i = 2; i < sc->nops && strcmp(sc->ops[i], "--") != 0; i++)
			;
		if (i < sc->nops && sc->ops[2][0] == '-')
			return usage_error(a,
			    "%s: '%s' comes after '--', which ends the "
			    "options; give the options before it, as in "
			    "throttle %s [options] -- %s -- COMMAND",
			    c->name, sc->ops[2], c->name, sc->ops[1]);
		if (i < sc->nops && wait_mistyped(a, sc->ops[2]) == -1)
			return -1;
		if (i < sc->nops)
			return usage_error(a,
			    "%s: '%s' is one argument too many (quote a key "
			    "with spaces), as in throttle %s [options] -- %s "
			    "-- COMMAND",
			    c->name, sc->ops[2], c->name, sc->ops[1]);
		return usage_error(a,
		    "%s: '%s' is not a command; a key that begins with '-' "
		    "goes between two '--', as in throttle %s [options] -- "
		    "%s -- COMMAND [ARGS...]",
		    c->name, sc->ops[1], c->name, sc->ops[1]);
	}
	if (!keyfirst && sc->nbefore < 0 && sc->nops > 2)
		return usage_error(a,
		    "%s: '%s' after the key: the command goes after '--', "
		    "as in throttle %s KEY [options] -- COMMAND [ARGS...]",
		    c->name, sc->ops[2], c->name);
	if (!keyfirst && (sc->nbefore < 0 || sc->nbefore >= sc->nops))
		return usage_error(a,
		    "%s: no command to run; write throttle %s KEY "
		    "[options] -- COMMAND [ARGS...]",
		    c->name, c->name);
	a->command = (char **)(sc->ops + (keyfirst ? 3 : sc->nbefore));
	sc->nops = keyfirst ? 2 : sc->nbefore;
	return 0;
}

/* The command's operands, checked against what it takes: 0 or -1. */
static int
take_operands(struct args *a, const struct cmd_entry *c, struct scan *sc)
{
	if (c->takes_command && split_command(a, c, sc) == -1)
		return -1;
	if (sc->nops - 1 < c->min_args)
		return usage_error(a, "%s: %s; usage: throttle %s %s", c->name,
		    c->operand_is_key ? "the key is missing"
				      : "an argument is missing",
		    c->name, c->args);
	if (sc->nops - 1 > c->max_args && sc->nbefore >= 0 &&
	    sc->nbefore <= 1 + c->max_args &&
	    sc->ops[1 + c->max_args][0] == '-')
		/* consume -- -dash --limit 5/1m: "--" made --limit a word */
		return usage_error(a,
		    "%s: '%s' comes after '--', which ends the options: "
		    "everything after it is an operand; give the options "
		    "before '--', as in throttle %s [options] -- -KEY",
		    c->name, sc->ops[1 + c->max_args], c->name);
	if (sc->nops - 1 > c->max_args &&
	    wait_mistyped(a, sc->ops[1 + c->max_args]) == -1)
		return -1;
	if (sc->nops - 1 > c->max_args)
		return usage_error(a,
		    "%s: '%s' is one argument too many%s; usage: throttle "
		    "%s%s%s",
		    c->name, sc->ops[1 + c->max_args],
		    c->operand_is_key ? " (quote a key with spaces)" : "",
		    c->name, c->args[0] != '\0' ? " " : "", c->args);
	a->operand = sc->nops > 1 ? sc->ops[1] : NULL;
	a->operand2 = sc->nops > 2 ? sc->ops[2] : NULL;
	if (!c->operand_is_key || a->operand == NULL)
		return 0;
	a->key = a->operand;
	a->keylen = strlen(a->key);
	if (a->keylen == 0)
		return usage_error(a,
		    "%s: the key is empty; give a non-empty key", c->name);
	if (a->keylen > KEY_MAX)
		return usage_error(a,
		    "%s: the key is %zu bytes, longer than the %d allowed",
		    c->name, a->keylen, KEY_MAX);
	return 0;
}

int
args_parse(int argc, char **argv, const struct cmd_entry *const *table,
    struct args *a)
{
	struct scan sc = { NULL, NULL, 0, NULL, 0, -1, 0, 0 };
	const struct cmd_entry *c = NULL;
	int i;

	a->cmd = NULL;
	a->given = sc.given =
	    xcalloc((size_t)argc + 1, sizeof(const struct option_def *));
	a->given_values = sc.vals = xcalloc((size_t)argc + 1, sizeof(*sc.vals));
	a->argv_ops = sc.ops = xcalloc((size_t)argc + 1, sizeof(*sc.ops));
	a->ngiven = 0;
	if (scan_argv(a, argc, argv, &sc) == -1)
		return -1;
	a->ngiven = sc.ngiven;
	if (sc.version)
		return PARSE_VERSION;
	if (sc.nops > 0 && (c = find_cmd(table, sc.ops[0])) == NULL) {
		/* throttle --db consume k: --db took the command's name */
		for (i = 0; i < sc.ngiven; i++)
			if (sc.vals[i] != NULL &&
			    find_cmd(table, sc.vals[i]) != NULL)
				return usage_error(a,
				    "--%s took '%s' as its value, which left "
				    "'%s' as the command: give --%s a value, "
				    "as in throttle %s KEY --%s %s",
				    sc.given[i]->name, sc.vals[i], sc.ops[0],
				    sc.given[i]->name, sc.vals[i],
				    sc.given[i]->name, sc.given[i]->arg);
		return usage_error(a,
		    "%s: unknown command; see throttle --help", sc.ops[0]);
	}
	a->cmd = c;
	if (sc.help)
		return PARSE_HELP;
	if (c == NULL)
		return PARSE_NO_COMMAND;
	for (i = 0; i < a->ngiven; i++) {
		const struct option_def *d = a->given[i];

		if (d->flag != 0 && !(d->flag & c->options))
			return usage_error(a,
			    "%s: --%s does not apply to this command; see "
			    "throttle help %s",
			    c->name, d->name, c->name);
		if (d->set != NULL && d->set(a, d, a->given_values[i]) == -1)
			return -1;
	}
	return take_operands(a, c, &sc) == -1 ? -1 : PARSE_RUN;
}
