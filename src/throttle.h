/*
 * throttle.h: shared types, exit codes and the module map.
 *
 * Every time inside throttle is an int64_t count of microseconds: absolute
 * times since the Unix epoch, durations as differences.  Only parse.c reads
 * other units and only output.c writes them.
 *
 * Prototypes are grouped under the file that defines them; a file's exported
 * names start with its own name (store-sqlite.c exports store_sqlite_*).
 */
#ifndef THROTTLE_H
#define THROTTLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define THROTTLE_VERSION "0.1.0"

/* 128-bit intermediates keep products such as now * N exact. */
__extension__ typedef __int128 i128;

/* Exit codes: the whole contract with calling scripts. */
enum exit_code {
	EXIT_ALLOWED = 0, /* allowed, or the command did what it was asked */
	EXIT_REFUSED = 1, /* throttled; nothing was changed */
	EXIT_USAGE = 2, /* bad command line or input */
	EXIT_STATE = 3 /* the state store failed; nothing was changed */
};

#define KEY_MAX 1024 /* bytes */
/* consume forgets TIDY_ROWS rows at rest in one write of TIDY_EVERY */
#define TIDY_EVERY 16
#define TIDY_ROWS 64
#define LIMITS_MAX 8 /* limits on one key (compound limits) */
#define POLICY_MAX 4096 /* bytes of a policy's options */
#define US_PER_SEC INT64_C(1000000)
#define DURATION_MAX (INT64_C(1) << 62) /* about 146,000 years, in us */
#define TIME_MAX INT64_C(253402300800000000) /* year 10000, in us */
#define COUNT_MAX INT64_MAX

enum format { FORMAT_TEXT, FORMAT_JSON, FORMAT_SHELL };

enum on_error { ON_ERROR_FAIL, ON_ERROR_ALLOW, ON_ERROR_DENY };

/* A limit as given on the command line or remembered with a key. */
struct limit {
	const struct algo *algo;
	int64_t count; /* N units ... */
	int64_t period; /* ... per this many microseconds */
	int64_t burst; /* units that may be taken at once from rest */
	int64_t granularity; /* sliding-window: sub-window length, us */
};

/* One sub-window of a sliding window: units taken in [index*G, index*G+G). */
struct slot {
	int64_t index;
	int64_t count;
};

#define SLOTS_MAX 100000 /* sub-windows per period, at most */

/*
 * A key's saved algorithm state: a few integers whose meaning belongs to the
 * algorithm (see the opening comment of each algo-*.c), and for the sliding
 * window its non-empty sub-windows, oldest first.  A key that has never
 * been used has all fields zero and no slots.  A state an algorithm writes
 * into must have room for one more slot than the state it reads.
 */
#define STATE_FIELDS 3
struct kstate {
	int64_t v[STATE_FIELDS];
	struct slot *slots;
	size_t nslots;
};

/* What an algorithm answers for one request. */
struct decision {
	int allowed;
	int64_t remaining; /* units left after this request */
	int64_t retry_after; /* us until this request would be allowed */
	int64_t reset_after; /* us until the key is back at rest */
};

/* One algorithm: pure functions over plain data, no I/O, no clock. */
struct algo {
	const char *name;
	const char *aliases[3];
	int takes_burst; /* --burst applies */
	int takes_granularity; /* --granularity applies */
	/* 0 if the algorithm can work with l, else -1 and why. */
	int (*limit_ok)(const struct limit *l, const char **errstr);
	/* Decide whether cost units may be taken at now; fill *next. */
	void (*decide)(const struct limit *, const struct kstate *, int64_t now,
	    int64_t cost, struct decision *, struct kstate *next);
	/* Give cost units back (never beyond capacity). */
	void (*release)(const struct limit *, const struct kstate *,
	    int64_t now, int64_t cost, struct kstate *next);
	/* Adapt state saved under old limit for use under new one. */
	void (*convert)(const struct limit *old, const struct limit *new,
	    const struct kstate *, struct kstate *next);
	/* 0 if a stored state is one this algorithm could have written. */
	int (*valid)(const struct limit *, const struct kstate *);
	/*
	 * Move every absolute time in the state by delta us (delta < 0: a
	 * clock that stepped back), in place, keeping it valid: a state
	 * written at T then reads at T + delta as it read at T.
	 */
	void (*shift)(const struct limit *, struct kstate *, int64_t delta);
};

/* Priorities, most important first: critical is never shed or reserved. */
enum priority { PRIO_CRITICAL, PRIO_HIGH, PRIO_NORMAL, PRIO_LOW };

#define LEASE_ID_LEN 16 /* hex digits */
#define HOST_MAX 255
#define BOOT_ID_MAX 36

/* One held slot of a concurrency limit (see lease.c). */
struct lease {
	char id[LEASE_ID_LEN + 1];
	int priority;
	int64_t acquired; /* us since the epoch */
	int64_t ttl; /* us; 0: no expiry */
	int64_t expires; /* us since the epoch; 0: never */
	int64_t pid; /* owner process; 0: none */
	int64_t pid_start; /* its start time, clock ticks after boot */
	char boot_id[BOOT_ID_MAX + 1]; /* the owner's boot ("": not known) */
	char host[HOST_MAX + 1]; /* the owner's host */
	int64_t pgid; /* run: the job's process group; 0: none */
	int64_t pgid_start; /* its leader's start time, ticks after boot */
};

/* A key's lockout: refused from since until until (LOCKOUT_NEVER: reset). */
struct lockout {
	int64_t since; /* us; 0: not known (an older file) */
	int64_t until; /* us; 0: none */
};
#define LOCKOUT_NEVER INT64_MAX

/* What is known about a lease owner's life. */
enum owner_state { OWNER_UNKNOWN, OWNER_ALIVE, OWNER_DEAD };

/* The worker utilization shedder's settings (seed 004's constants). */
struct shed_params {
	int64_t good_ppm; /* below this utilization, shed less (0.7) */
	int64_t bad_ppm; /* above this, shed more (0.8) */
	int64_t delay; /* us of overload before shedding starts (28 s) */
	int64_t ramp; /* us from shedding nothing to everything (120 s) */
};

#define SHED_ONE INT64_C(1000000000000) /* a shedding amount of 1 */

/* A key's record in the store. */
struct keyrec {
	char key[KEY_MAX + 1];
	size_t keylen;
	int idx; /* which of the key's limits (compound limits) */
	struct limit limit;
	struct kstate state;
	int64_t rest_at; /* when the key is back at rest (for gc) */
	int64_t written_at; /* the clock when it was saved; 0: not known */
	int more; /* store_load(): the key has limits past idx */
};

struct option_def;

/* Options gathered from the command line and environment. */
struct opts {
	const char *db;
	char dbbuf[4096];
	enum format format;
	int quiet;
	int64_t lock_timeout;
	enum on_error on_error;
	int64_t now;

	/* command options */
	int has_burst, has_algorithm, has_granularity;
	struct limit limit; /* --burst, --algorithm, --granularity as given */
	int nlimits; /* --limit, repeated or ;-joined */
	struct limit limits[LIMITS_MAX];
	const char *limit_texts[LIMITS_MAX]; /* as typed, for messages */
	const char *granularity_text;
	int has_lockout;
	int64_t lockout;
	int has_wait;
	int names; /* inspect --names */
	int quick; /* verify --quick */
	int64_t wait_max; /* -1: no bound */
	const char *policy; /* the policy that supplied options, if any */

	/* the options as given, for policy set */
	const struct option_def *const *given;
	const char *const *given_values;
	int ngiven;

	/* leases */
	int has_concurrency, has_ttl, has_owner, has_reserve;
	int64_t concurrency, ttl, owner;
	int64_t reserve;
	int reserve_percent;
	int priority;
	const char *lease;

	/* shed */
	int has_utilization, utilization_auto, has_seed;
	int64_t utilization; /* millionths */
	uint64_t seed;
	struct shed_params shed;

	/* run */
	int conflict_exit_code;
	char **command; /* after "--", NULL-terminated */
	int64_t cost;

	/* operands */
	const char *operand;
	const char *operand2;
	const char *key;
	size_t keylen;

	const char **argv_ops; /* cmd_parse()'s, for cmd_free() */
	int batch; /* a request of throttle batch */
	int read_only; /* the command only reads the store */
	struct store *store; /* the store every cmd_open() returns, if set */
	struct store *owned; /* the one cmd_finish() opened, for cmd_main() */
	char dbname[300]; /* --db as messages show it (no password) */
	char err[1024]; /* the usage error, when a parse fails */
};

/* Which command options a command takes (cmd_entry.options). */
#define CMDOPT_LIMIT 0x01
#define CMDOPT_BURST 0x02
#define CMDOPT_ALGORITHM 0x04
#define CMDOPT_COST 0x08
#define CMDOPT_GRANULARITY 0x10
#define CMDOPT_CONCURRENCY 0x20 /* --concurrency, --reserve, --owner */
#define CMDOPT_TTL 0x40
#define CMDOPT_PRIORITY 0x80
#define CMDOPT_LEASE 0x100
#define CMDOPT_SHED 0x200 /* --utilization, --seed and the constants */
#define CMDOPT_RUN 0x400 /* --conflict-exit-code */
#define CMDOPT_LOCKOUT 0x800
#define CMDOPT_WAIT 0x1000
#define CMDOPT_NAMES 0x2000
#define CMDOPT_QUICK 0x4000
/* what a policy may hold */
#define CMDOPT_POLICY                                                          \
	(CMDOPT_LIMIT | CMDOPT_BURST | CMDOPT_ALGORITHM | CMDOPT_GRANULARITY | \
	    CMDOPT_CONCURRENCY | CMDOPT_TTL | CMDOPT_LOCKOUT)

/* One command: cmd-<name>.c exports cmd_<name>_entry. */
struct cmd_entry {
	const char *name;
	const char *args; /* usage after the name */
	const char *summary;
	int options; /* CMDOPT_* it takes */
	int min_args, max_args;
	int operand_is_key;
	int takes_command; /* run: KEY -- COMMAND [ARGS...] */
	int uses_policy; /* a key without limit options uses its policy */
	int in_batch; /* may be a request of throttle batch */
	int reads_only; /* never writes: opens the store to read only */
	const char *reads_only_with; /* ... with one of these first operands */
	int (*exec)(struct opts *);
};

struct work;

/* One key's numbers, ready for output. */
struct result {
	const char *key;
	size_t keylen;
	const struct limit *limit;
	int inspect; /* a state, not a decision */
	int allowed;
	int64_t cost;
	int64_t remaining;
	int64_t retry_after;
	int64_t reset_after;
	const struct work *works; /* each limit of a compound limit */
	int nworks;
};

/* algo.c */
const struct algo *algo_find(const char *);
void algo_copy_fields(struct kstate *, const struct kstate *);
extern const struct algo *const algo_table[];

/* algo-gcra.c */
extern const struct algo algo_gcra;

/* algo-fixed.c */
extern const struct algo algo_fixed;

/* algo-sliding.c */
extern const struct algo algo_sliding;
int64_t algo_sliding_default_granularity(int64_t);

/* algo-hybrid.c */
extern const struct algo algo_hybrid;

/* clock.c */
int clock_now(int64_t *, const char **);
int clock_pinned(void);
int64_t clock_monotonic(void);
int clock_sleep(int64_t);

struct store;

/* cmd-acquire.c */
int cmd_acquire_scan(const struct opts *, struct store *, int, const char *,
    int64_t *, int64_t *, struct lease *);
int cmd_acquire_take(struct opts *, const struct lease *, int64_t,
    struct lease *, int64_t *, int64_t *, int *);
int cmd_acquire_wait(struct opts *, const struct lease *, int64_t,
    struct lease *, int64_t *, int64_t *, int *);
int cmd_acquire_check(struct opts *, const char *);
void cmd_acquire_refused(const struct opts *, int64_t);

/* cmd-consume.c */
int cmd_consume_decide(struct opts *, int, int64_t, struct work *,
    struct decision *, int *);
int cmd_consume_wait(struct opts *, int, struct decision *);
void cmd_consume_refund(struct opts *);

/* cmd.c */
/* One limit of the command's key, loaded and ready to decide on. */
struct work {
	struct keyrec rec; /* as stored */
	struct limit lim; /* the limit to decide under */
	struct kstate cur; /* the state under lim */
	struct kstate next; /* room for what the algorithm writes */
	struct decision d;
	int found;
	int moved; /* limit_carry() moved the state: save it even if refused */
};
int cmd_main(int, char **);
/* what cmd_parse() found the command line asks for */
enum { PARSE_RUN, PARSE_HELP, PARSE_VERSION, PARSE_NO_COMMAND };
void cmd_defaults(struct opts *);
int cmd_parse(int, char **, struct opts *, const struct cmd_entry **);
int cmd_finish(struct opts *, const struct cmd_entry *, int *);
void cmd_free(struct opts *);
int cmd_settle(struct opts *, const char *);
int option_flag(const struct option_def *);
const char *option_name(const struct option_def *);
struct store *cmd_open(const struct opts *, int *);
int cmd_load(const struct opts *, struct store *, int, struct keyrec *, char *,
    size_t);
int cmd_prepare(const struct opts *, struct store *, int, struct work *, char *,
    size_t);
void cmd_unprepare(struct work *);
void cmd_carry(const struct opts *, struct work *);
int cmd_now(struct opts *, struct store *, char *, size_t);
int cmd_fail(const struct opts *, struct store *, const char *);
int cmd_save(const struct opts *, struct store *, int, const struct limit *,
    const struct kstate *, int64_t);
void cmd_print(const struct opts *, const struct work *, int, int64_t,
    const struct decision *);

/* host.c */
struct host {
	char name[HOST_MAX + 1];
	char boot_id[BOOT_ID_MAX + 1];
};
int host_self(struct host *);
int host_pid_start(int64_t, int64_t *);
int host_group_alive(int64_t, int64_t);
enum owner_state host_owner_state(const struct host *, const struct lease *);
int host_new_id(char *, size_t);
uint64_t host_random(void);
int host_utilization(int64_t *, const char **);

/* lease.c */
int lease_check(const struct lease *, const char **);
int lockout_check(const struct lockout *, const char **);
int lease_live(const struct lease *, int64_t, enum owner_state);
int lease_admit(int64_t, int64_t, int64_t, int);
int64_t lease_reserve(int64_t, int64_t, int);
int64_t lease_expires_after(const struct lease *, int64_t);

/* limit.c */
int limit_validate(const struct limit *, const char **);
int limit_same(const struct limit *, const struct limit *);
int limit_carry(const struct limit *, const struct keyrec *, int, int64_t,
    struct kstate *);
int limit_check_record(const struct keyrec *, const char **);

/* log.c */
void log_msg(const char *, ...) __attribute__((format(printf, 1, 2)));
const char *log_last(void);
void log_forget(void);
void
die_usage(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));
int state_error(const struct opts *, const char *);
int cmd_usage(struct opts *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
int usage_error(struct opts *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
void log_key(const char *, size_t, const char *, ...)
    __attribute__((format(printf, 3, 4)));

/* output.c */
enum field_kind { FIELD_STR, FIELD_INT, FIELD_BOOL, FIELD_MICRO, FIELD_SECS };
/* One named value for output_fields(); FIELD_SECS < 0 means never. */
struct field {
	const char *name;
	enum field_kind kind;
	const char *s;
	size_t n;
	int64_t v;
};
void output_fields(const struct opts *, const struct field *, size_t);
size_t output_seconds(char *, size_t, int64_t);
size_t output_duration(char *, size_t, int64_t);
size_t output_micro(char *, size_t, int64_t);
void output_escape_text(FILE *, const char *, size_t);
void output_to(FILE *);
void output_batch_error(FILE *, const char *, size_t, const char *, int);
void output_result(const struct opts *, const struct result *);
void output_throttled(const struct opts *, const struct result *);
void output_mapped_error(const struct opts *, int, const char *);

/* parse.c */
struct duration_unit {
	const char *name;
	int64_t us;
};
extern const struct duration_unit duration_units[];
int parse_duration(const char *, int64_t *, const char **);
int parse_count(const char *, int64_t, int64_t *, const char **);
int parse_limit(const char *, int64_t *, int64_t *, const char **);
int parse_time(const char *, int64_t *, const char **);
int parse_format(const char *, enum format *);
int parse_on_error(const char *, enum on_error *);
int parse_priority(const char *, int *);
const char *priority_name(int);
int parse_fraction(const char *, int64_t *, const char **);
int parse_reserve(const char *, int64_t *, int *, const char **);
int parse_words(char *, char **, int, const char **);

/* shed.c */
void shed_default_params(struct shed_params *);
int shed_params_ok(const struct shed_params *, const char **);
int64_t shed_rest(const struct shed_params *);
int64_t
shed_update(const struct shed_params *, int64_t, int64_t, int64_t, int64_t);
int64_t shed_drop_chance(int64_t, int);
int shed_check(int64_t, int64_t, const char **);

/* slots.c */
size_t slots_encoded_max(size_t);
size_t slots_encode(const struct slot *, size_t, unsigned char *);
int64_t slots_decode(const unsigned char *, size_t, struct slot *, size_t);

/* faultvfs.c (tests only, -DTHROTTLE_FAULT) */
void faultvfs_register(void);

/* store.c */
#define STORE_ERR_MAX 1536
#define STORE_RETRY 1
struct store;
/* What a store implements; errors go to the buffer given to open. */
struct store_ops {
	void *(*open)(const char *, int64_t, int, char *, size_t);
	int (*begin)(void *, int);
	int (*load)(void *, const char *, size_t, int, struct keyrec *);
	int (*save)(void *, const struct keyrec *);
	int (*del)(void *, const char *, size_t);
	int (*trim)(void *, const char *, size_t, int);
	int (*lockout_get)(void *, const char *, size_t, struct lockout *);
	int (
	    *lockout_put)(void *, const char *, size_t, const struct lockout *);
	int (*policy_get)(void *, const char *, char *, size_t);
	int (*policy_put)(void *, const char *, const char *);
	int (*policy_del)(void *, const char *);
	int (*policy_list)(void *, int (*)(const char *, const char *, void *),
	    void *);
	int64_t (*tidy)(void *, int64_t, int64_t);
	int (*names)(void *, int (*)(const char *, size_t, void *), void *);
	int (*list)(void *, int (*)(const struct keyrec *, void *), void *);
	int (*lease_list)(void *, const char *, size_t,
	    int (*)(const char *, size_t, const struct lease *, void *),
	    void *);
	int (*lease_put)(void *, const char *, size_t, const struct lease *);
	int (*lease_del)(void *, const char *, size_t, const char *);
	int (*shed_load)(void *, const char *, size_t, int64_t *, int64_t *);
	int (*shed_save)(void *, const char *, size_t, int64_t, int64_t);
	int (*commit)(void *);
	void (*rollback)(void *);
	void (*close)(void *);
	int (*group_begin)(void *);
	int (*group_end)(void *, int);
	int (*now)(void *, int64_t *); /* the store's clock, or NULL */
	/* check every page (quick: less thoroughly), or NULL: none to do */
	int (*verify)(void *, int);
};
#define STORE_READ 0x01 /* store_open(): only read; create nothing */
struct store *store_open(const char *, int64_t, int, char *, size_t);
int store_check_spec(const char *, const char **);
int store_is_remote(const char *);
void store_display(const char *, char *, size_t);
int store_now(struct store *, int64_t *);
int store_has_clock(const struct store *);
void store_hold(struct store *);
void store_free(struct store *);
int store_begin(struct store *, int);
int store_group_begin(struct store *);
int store_group_end(struct store *, int);
int store_load(struct store *, const char *, size_t, int, struct keyrec *);
int store_trim(struct store *, const char *, size_t, int);
int store_lockout_get(struct store *, const char *, size_t, struct lockout *);
int
store_lockout_put(struct store *, const char *, size_t, const struct lockout *);
int store_policy_get(struct store *, const char *, char *, size_t);
int store_policy_put(struct store *, const char *, const char *);
int store_policy_del(struct store *, const char *);
int store_policy_list(struct store *,
    int (*)(const char *, const char *, void *), void *);
int64_t store_tidy(struct store *, int64_t, int64_t);
int store_names(struct store *, int (*)(const char *, size_t, void *), void *);
int store_save(struct store *, const struct keyrec *);
int store_delete(struct store *, const char *, size_t);
int store_list(struct store *, int (*)(const struct keyrec *, void *), void *);
int store_lease_list(struct store *, const char *, size_t,
    int (*)(const char *, size_t, const struct lease *, void *), void *);
int store_lease_put(struct store *, const char *, size_t, const struct lease *);
int store_lease_del(struct store *, const char *, size_t, const char *);
int store_shed_load(struct store *, const char *, size_t, int64_t *, int64_t *);
int store_shed_save(struct store *, const char *, size_t, int64_t, int64_t);
int store_verify(struct store *, int);
int store_commit(struct store *);
void store_rollback(struct store *);
const char *store_error(const struct store *);
void store_close(struct store *);
int store_default_path(char *, size_t, const char **);

/* store-sqlite.c */
extern const struct store_ops store_sqlite_ops;
const char *store_sqlite_version(void);

/* store-redis.c (built with REDIS=1) */
struct redis_url {
	char host[256];
	int port;
	int db;
	char user[128];
	char password[256];
	char socket[4096];
	char prefix[129];
	int64_t timeout; /* us */
	char where[300]; /* the server, without the password */
};
#ifdef THROTTLE_REDIS
int store_redis_parse(const char *, struct redis_url *, const char **);
extern const struct store_ops store_redis_ops;
const char *store_redis_version(void);
#endif

/* xmalloc.c */
void *xmalloc(size_t);
void *xcalloc(size_t, size_t);
void *xrealloc(void *, size_t);
char *xstrdup(const char *);

#endif /* THROTTLE_H */
