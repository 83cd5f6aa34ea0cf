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
#define STORE_ERR_MAX 1536 /* bytes of a store's error message */
#define DBPATH_MAX 4096 /* bytes of the default state file's path */
#define DBNAME_MAX 300 /* bytes of a store's name as messages show it */

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
	const char *aliases[3]; /* other names, shown in help and messages */
	const char *also[3]; /* short names also taken, not shown */
	int takes_burst; /* --burst applies */
	int takes_granularity; /* --granularity applies */
	int reserves; /* --wait queues by reservation (else it polls) */
	/* the sub-window for a period when --granularity is not given */
	int64_t (*default_granularity)(int64_t);
	/* 0 if the algorithm can work with l, else -1 and why. */
	int (*limit_ok)(const struct limit *l, const char **errstr);
	/* Decide whether cost units may be taken at now; fill *next. */
	void (*decide)(const struct limit *, const struct kstate *, int64_t now,
	    int64_t cost, struct decision *, struct kstate *next);
	/* Give cost units back (never beyond capacity). */
	void (*release)(const struct limit *, const struct kstate *,
	    int64_t now, int64_t cost, struct kstate *next);
	/*
	 * Adapt state saved under old limit for use under new one, as if
	 * the new one had been the key's since at (when the state was
	 * saved): never less strict than the state kept as it is.
	 */
	void (*convert)(const struct limit *old, const struct limit *new,
	    const struct kstate *, int64_t at, struct kstate *next);
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
	int64_t ahead; /* moved back with the clock: by how much (0: not) */
};
#define LOCKOUT_NEVER INT64_MAX
#define LOCKOUT_FOREVER (-1) /* --lockout never, in struct args */

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
	int64_t written_at; /* the clock when it was saved; -1: not known
			       (0 is a save at the epoch, THROTTLE_NOW=0) */
	int64_t ahead; /* a state moved back with the clock: by how much in
			  all (so written_at + ahead is where it came from);
			  0: not moved */
	int more; /* store_load(): the key has limits past idx */
};

struct option_def;

/* The limit options of a command line, as given, before settling. */
struct limitspec {
	int n; /* --limit, repeated or ;-joined */
	int64_t count[LIMITS_MAX], period[LIMITS_MAX];
	const char *text[LIMITS_MAX]; /* as typed, for messages */
	const struct algo *algo; /* --algorithm, or NULL */
	int has_burst;
	int64_t burst;
	int has_granularity;
	int64_t granularity;
	const char *granularity_text;
};

/*
 * A parsed command line: the command, its operands and every option, as
 * args_parse() leaves it (pure: no store, no environment).  Policy merge
 * and limit settling complete it; commands read it and never change it.
 */
struct args {
	const struct cmd_entry *cmd;

	/* global options (has_*: given on the command line) */
	const char *db;
	int has_format;
	enum format format;
	int quiet;
	int has_lock_timeout;
	int64_t lock_timeout;
	int has_on_error;
	enum on_error on_error;

	/* limits: as given, then settled by limit_settle() */
	struct limitspec ls;
	int nlimits;
	struct limit limits[LIMITS_MAX];
	int64_t cost;
	int has_lockout;
	int64_t lockout;
	int has_wait;
	const char *wait_word; /* the word after --wait, begun with a digit
				  and no duration: a bound mistyped, if it
				  is one operand too many */
	int64_t wait_max; /* -1: no bound */
	const char *policy; /* the policy that supplied options, if any */
	char policy_took[256]; /* the options it supplied, for messages */

	/* leases */
	int has_concurrency, has_ttl, has_owner, has_reserve;
	int64_t concurrency, ttl, owner;
	int64_t reserve;
	int reserve_percent;
	int priority;
	const char *lease;
	int lease_bad; /* --lease is no id acquire prints: none held */

	/* shed */
	int has_utilization, utilization_auto, has_seed;
	int64_t utilization; /* millionths */
	uint64_t seed;
	struct shed_params shed;

	/* run, inspect, verify */
	int conflict_exit_code;
	char **command; /* after "--", NULL-terminated */
	int names; /* inspect --names */
	int locked; /* inspect --locked */
	int quick; /* verify --quick */

	/* operands */
	const char *operand;
	const char *operand2;
	const char *key;
	size_t keylen;

	/* the options as given, for policy set and batch */
	const struct option_def *const *given;
	const char *const *given_values;
	int ngiven;
	const char **argv_ops; /* args_parse()'s, for args_free() */
	char err[1024]; /* a usage error */
};

/*
 * What a command runs in: the store it works on, opened once and lazily
 * by ctx_store() (read only for a command that only reads), how it
 * answers, and the time of its decision (ctx_now()).  The driver (cmd.c)
 * or a batch builds it; commands never open or close a store.
 */
struct ctx {
	const char *db; /* --db, THROTTLE_DB, or the default file */
	char *dbbuf; /* the default file's path, if db is that */
	char *dbname; /* db as messages show it (no password) */
	enum format format;
	int quiet;
	int64_t lock_timeout;
	enum on_error on_error;
	int read_only;
	int makes_no_file; /* a missing state file is not made (gc) */
	int batch; /* a request of throttle batch: the store is the batch's */
	int64_t now; /* us: the time of the decision */
	int pinned; /* THROTTLE_NOW pins the clock: now is what it says */
	struct store *store;
	int open_unavailable; /* opening the store failed: out of reach */
	char *open_err; /* opening the store failed: why (not tried again,
			 * so a call spends --lock-timeout once) */
	char *policy_err; /* looking the key's policy up failed: why (the
			   * command's own store calls meet it) */
	/* while a --wait sleeps, keep(keep_arg) every keep_every us (run:
	 * renew the lease it holds); NULL: nothing to keep */
	void (*keep)(void *);
	void *keep_arg;
	int64_t keep_every;
	int64_t
	    keep_due; /* monotonic: when keep is next due (0: now + every) */
	int slept; /* ctx_sleep() has slept (a caller sets it to 0) */
};

/* Which command options a command takes (cmd_entry.options). */
#define CMDOPT_LIMIT 0x01
#define CMDOPT_BURST 0x02
#define CMDOPT_ALGORITHM 0x04
#define CMDOPT_COST 0x08
#define CMDOPT_GRANULARITY 0x10
#define CMDOPT_CONCURRENCY 0x20 /* --concurrency, --reserve */
#define CMDOPT_TTL 0x40
#define CMDOPT_PRIORITY 0x80
#define CMDOPT_LEASE 0x100
#define CMDOPT_SHED 0x200 /* --utilization, --seed and the constants */
#define CMDOPT_RUN 0x400 /* --conflict-exit-code */
#define CMDOPT_LOCKOUT 0x800
#define CMDOPT_WAIT 0x1000
#define CMDOPT_NAMES 0x2000
#define CMDOPT_QUICK 0x4000
#define CMDOPT_LOCKED 0x8000
#define CMDOPT_OWNER 0x10000 /* a lease's process: not for policies */
/* what a policy may hold */
#define CMDOPT_POLICY                                                          \
	(CMDOPT_LIMIT | CMDOPT_BURST | CMDOPT_ALGORITHM | CMDOPT_GRANULARITY | \
	    CMDOPT_CONCURRENCY | CMDOPT_TTL | CMDOPT_LOCKOUT)

struct answer;

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
	int decides; /* says whether something may happen: --on-error maps
			its store errors (the others report the store as
			it is, and exit 3 on an error whatever it says) */
	int in_batch; /* may be a request of throttle batch */
	int reads_only; /* never writes: opens the store to read only */
	const char *reads_only_with; /* ... with one of these first operands */
	int makes_no_file; /* writes only to a file that is there: a missing
			      one is read as a store with no keys */
	int runs_long; /* not a short call: gives the scheduler slice back
			  (slice.c) */
	/* Do the command's work; the answer says what to print. */
	void (*exec)(struct ctx *, const struct args *, struct answer *);
};

/*
 * A command's answer, as data: its exit status, the records it prints
 * (each a list of named fields), and a message for standard error.
 * output.c encodes it in text, json or shell; batch adds one field.
 */
enum field_kind {
	FIELD_STR, /* s, n bytes */
	FIELD_INT, /* v */
	FIELD_BOOL, /* v */
	FIELD_MICRO, /* v millionths, as a decimal: 0.75 */
	FIELD_SECS, /* v us, as seconds; < 0: never (null) */
	FIELD_DUR, /* v us, as seconds, but as a duration in text: 1h30m */
	FIELD_LIMIT, /* v count per u us: "5/15m" in text, count in json */
	FIELD_NONE /* no value: "none" in text, null in json, empty in shell */
};
/* where a field shows (0: everywhere) */
#define SHOW_TEXT 0x01
#define SHOW_JSON 0x02
#define SHOW_SHELL 0x04
#define SHOW_MACHINE (SHOW_JSON | SHOW_SHELL)
struct field {
	const char *name;
	enum field_kind kind;
	const char *s;
	size_t n;
	int64_t v;
	int64_t u;
	int show;
};
/* how a record shows in text */
enum text_style {
	TEXT_NONE, /* nothing: the exit status and any message say it */
	TEXT_FIELDS, /* "VALUE-OF-FIRST name=value ..." */
	TEXT_VALUE, /* the value of field text_field alone (a lease id) */
	TEXT_LINE, /* line, as the command wrote it */
	TEXT_RAW /* line, as it is, in every format (inspect --names) */
};
#define RECORD_FIELDS 24
struct record {
	enum text_style text;
	int text_field;
	const char *line;
	int nf;
	struct field f[RECORD_FIELDS];
	int nsub; /* a compound limit's own limits: json "limits":[...] */
	struct record *sub;
};
enum msg_kind {
	MSG_NONE,
	MSG_INFO, /* on stderr unless -q (throttled, shed, all held) */
	MSG_NOTICE, /* on stderr even with -q (no such lease, no state) */
	MSG_USAGE, /* a usage error: exit 2 */
	MSG_STATE /* a store error: exit 3, or what --on-error makes it */
};
struct answer {
	int rc;
	int died_of; /* run's job died of SIGINT: throttle ends so too */
	int nrec, cap;
	struct record **rec;
	enum msg_kind msg_kind;
	/* memory the records' strings point into */
	char **blocks;
	int nblocks, capblocks;
	/* print each record as it is added (inspect of every key) */
	const struct ctx *stream;
	int streamed;
	int first_used; /* rec[0] is first */
	/* last, and large: answer_init() zeroes all above, sets msg[0] and
	 * leaves first to answer_record() */
	struct record first; /* most answers have one record: no malloc */
	char msg[STORE_ERR_MAX + 256];
};

/* algo.c */
const struct algo *algo_find(const char *);
void algo_names(char *, size_t);
void algo_names_with(int, char *, size_t);
void algo_described(char *, size_t);
void algo_copy_fields(struct kstate *, const struct kstate *);
extern const struct algo *const algo_table[];

/* algo-gcra.c */
extern const struct algo algo_gcra;

/* algo-fixed.c */
extern const struct algo algo_fixed;

/* algo-sliding.c */
extern const struct algo algo_sliding;

/* algo-hybrid.c */
extern const struct algo algo_hybrid;

/* clock.c */
int clock_now(int64_t *, const char **);
int clock_system(int64_t *, const char **);
int clock_pinned(void);
const char *clock_pinned_text(void);
void clock_real_only(void);
int64_t clock_monotonic(void);
int clock_sleep(int64_t);
void clock_nap(int64_t);

struct store;

/* answer.c */
void answer_init(struct answer *);
void answer_free(struct answer *);
struct record *answer_record(struct answer *, enum text_style);
const char *answer_keep(struct answer *, const char *, size_t);
void rec_str(struct answer *, struct record *, const char *, const char *,
    size_t, int);
void rec_int(struct record *, const char *, int64_t, int);
void rec_bool(struct record *, const char *, int, int);
void rec_secs(struct record *, const char *, int64_t, int);
void rec_dur(struct record *, const char *, int64_t, int);
struct record *rec_sub(struct record *);
void rec_line(struct answer *, struct record *, const char *, ...)
    __attribute__((format(printf, 3, 4)));
void rec_micro(struct record *, const char *, int64_t, int);
void rec_none(struct record *, const char *, int);
void rec_limit(struct record *, const char *, int64_t, int64_t, int);
void answer_say(struct answer *, enum msg_kind, const char *, ...)
    __attribute__((format(printf, 3, 4)));
void answer_say_key(struct answer *, enum msg_kind, const char *, size_t,
    const char *, ...) __attribute__((format(printf, 5, 6)));
int answer_usage(struct answer *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
int answer_state(struct answer *, const char *);
void answer_flush(struct answer *);

/* args.c */
/* what args_parse() found the command line asks for */
enum { PARSE_RUN, PARSE_HELP, PARSE_VERSION, PARSE_NO_COMMAND };
void args_init(struct args *);
int args_parse(int, char **, const struct cmd_entry *const *, struct args *);
void args_free(struct args *);
int args_apply(struct args *, const char *, const char *);
int args_given(const struct args *, const char *);
int args_takes(const struct args *, const char *);
const char *args_option_name(const struct option_def *);
int args_option_flag(const struct option_def *);
void args_options(void (*)(const char *, char, const char *, int, const char *,
		      void *),
    void *);

/* cmd.c */
extern const struct cmd_entry *const cmd_table[];
const struct cmd_entry *cmd_find(const char *);
int cmd_main(int, char **, int *);
int cmd_decide(int, char **, struct answer *);
void cmd_answer(struct ctx *, struct args *, struct answer *);

/* concurrency.c */
/* A key's slots as one scan of its leases found them. */
struct slots_seen {
	int64_t active; /* live leases */
	int64_t soonest; /* the earliest expiry of a live lease; 0: none */
	int has_found; /* the lease looked for is live */
	struct lease found;
	int has_oldest; /* oldest: the live lease held longest */
	struct lease oldest;
	int64_t now; /* when they were counted */
	struct lockout lk; /* the key's lockout, when it is locked out */
};
int concurrency_scan(struct ctx *, const char *, size_t, int, const char *,
    struct slots_seen *);
int concurrency_check(const struct args *, const char *, struct answer *);
int concurrency_possible(const struct args *);
int concurrency_locked(const struct slots_seen *);
void lease_bad(const struct args *, struct answer *);
int concurrency_take(struct ctx *, const struct args *, const struct lease *,
    int64_t, struct lease *, struct slots_seen *, struct answer *);
int concurrency_wait(struct ctx *, const struct args *, const struct lease *,
    int64_t, struct lease *, struct slots_seen *, struct answer *);
void concurrency_refused(const struct args *, const struct slots_seen *,
    const char *, struct answer *);
int concurrency_free(struct ctx *, const char *, size_t, const char *,
    struct answer *);
int concurrency_renew(struct ctx *, const char *, size_t, const char *, int64_t,
    struct slots_seen *, struct answer *);

/* ctx.c */
int ctx_init(struct ctx *, const struct args *, struct answer *);
void ctx_close(struct ctx *);
int ctx_sleep(struct ctx *, int64_t);
void ctx_free(struct ctx *);
struct store *ctx_store(struct ctx *, struct answer *);
int ctx_now(struct ctx *, struct answer *);
int ctx_map(const struct ctx *, int);
const char *ctx_state_note(const struct ctx *);
int ctx_fail_answer(const struct ctx *, const struct args *, struct answer *);
int ctx_fail_answer_as(const struct ctx *, const struct args *, struct answer *,
    int);
int ctx_fail(struct ctx *, struct answer *);

/* escape.c */
void escape_text(FILE *, const char *, size_t);
char *escape_text_dup(const char *, size_t);
void escape_message(FILE *, const char *);
int text_plain(const char *, size_t);
void escape_json(FILE *, const char *, size_t);
void escape_shell(FILE *, const char *, size_t);

/* help.c */
void help_all(FILE *, const struct cmd_entry *const *);
void help_cmd(FILE *, const struct cmd_entry *);

/* host.c */
struct host {
	char name[HOST_MAX + 1];
	char boot_id[BOOT_ID_MAX + 1];
};
int host_self(struct host *);
int host_pid_start(int64_t, int64_t *);
int host_group_alive(int64_t, int64_t);
const char *host_proc_root(void);
enum owner_state host_owner_state(const struct host *, const struct lease *);
int host_new_id(char *, size_t);
uint64_t host_random(void);
int host_utilization(int64_t *, const char **);

/* hosts.c */
#define ADDRS_MAX 8 /* addresses of a host tried, at most */
#define ADDR_LEN 64 /* an IPv6 address as text, a %zone, its NUL */
struct addrs {
	int n;
	char a[ADDRS_MAX][ADDR_LEN];
};
int addr_family(const char *);
int addrs_numeric(const char *, struct addrs *);
int hosts_lookup(const char *, size_t, const char *, struct addrs *);

/* keystate.c */
/* One limit of a key, loaded and ready to decide on. */
struct work {
	struct keyrec rec; /* as stored */
	struct limit lim; /* the limit to decide under */
	struct kstate cur; /* the state under lim, at the decision's time */
	struct kstate next; /* room for what the algorithm writes */
	struct decision d;
	int found;
	int at; /* the place its state was found in (-1: none) */
	int moved; /* limit_carry() moved the state: save it even if refused */
	int64_t ahead; /* what limit_carry() says to save as rec.ahead */
};
/* Every limit of one key. */
struct keywork {
	const char *key;
	size_t keylen;
	int n; /* limits in w[] */
	int trim; /* a charge rewrites: stored limits past n, or in other
		     places than the ones they are now given in (match()) */
	struct work w[LIMITS_MAX];
	struct decision d; /* all of them together */
	int bind; /* the binding limit: the longest wait, then the fewest */
	struct lockout lk; /* the key's lockout as it stands (until 0: none) */
	int64_t now; /* the decision's time */
	int64_t lk_started; /* this refusal started lk: the rate's wait, or 0 */
};
void keystate_forget(struct keywork *);
void keystate_lockout(struct answer *, struct record *, const struct lockout *,
    int64_t);
int64_t lockout_left(const struct lockout *, int64_t);
int lockout_carry(struct lockout *, int64_t);
void keystate_init(struct keywork *, const char *, size_t);
void keystate_free(struct keywork *);
int keystate_load(struct ctx *, struct keywork *, const struct limit *, int,
    int, struct answer *);
void keystate_carry(struct keywork *, int64_t);
int64_t keystate_ahead(const struct keywork *);
void keystate_fresh_ahead(struct keywork *, int64_t);
int64_t keystate_latest(const struct keywork *);
void keystate_decide(struct keywork *, int64_t, int64_t);
void keystate_combine(struct keywork *);
int keystate_storable(const struct keywork *);
void keystate_refused(struct keywork *, int64_t);
#define SAVE_CHARGED 0 /* what the decision took (or release gave back) */
#define SAVE_MOVED 1 /* only states moved back to the clock, uncharged */
int
keystate_save(struct ctx *, struct keywork *, int, int64_t, struct answer *);
void keystate_release(struct keywork *, int64_t, int64_t);
int keystate_restore(struct ctx *, const struct keywork *,
    const struct keywork *, struct answer *);
struct record *
keystate_record(struct answer *, const struct keywork *, int, int64_t);
struct record *keystate_numbers(struct answer *, const char *, size_t,
    const struct limit *, const struct decision *, int, int64_t);

/* lease.c */
int lease_id_ok(const char *, size_t);
int lease_check(const struct lease *, const char **);
int lockout_check(const struct lockout *, const char **);
int lease_live(const struct lease *, int64_t, enum owner_state);
int lease_admit(int64_t, int64_t, int64_t, int);
int64_t lease_reserve(int64_t, int64_t, int);
int64_t lease_expires_after(const struct lease *, int64_t);
int lease_carry(struct lease *, int64_t);

/* limit.c */
int limit_validate(const struct limit *, const char **);
int64_t limit_horizon(const struct limit *);
int limit_same(const struct limit *, const struct limit *);
int limit_carry(const struct limit *, const struct keyrec *, int, int64_t,
    struct kstate *, int64_t *);
int limit_check_record(const struct keyrec *, const char **);
int limit_combine(const struct decision *, int, struct decision *);
int limit_settle(const struct limitspec *, const char *, struct limit *, int *,
    char *, size_t);

/* log.c */
void log_line_to(FILE *, const char *, const char *);
void log_line(const char *, const char *);
void log_msg(const char *, ...) __attribute__((format(printf, 1, 2)));
void log_key(const char *, size_t, const char *, ...)
    __attribute__((format(printf, 3, 4)));
void
die_usage(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));

/* output.c */
size_t output_seconds(char *, size_t, int64_t);
size_t output_human(char *, size_t, int64_t);
void output_retry(char *, size_t, int64_t);
/* A lockout until reset, in a refusal's words (after the key). */
#define LOCKED_FOR_GOOD "locked out until reset; throttle reset lifts it"
size_t output_duration(char *, size_t, int64_t);
size_t output_bound(char *, size_t, int64_t);
size_t output_micro(char *, size_t, int64_t);
void output_record(FILE *, enum format, const struct record *);
void output_check(FILE *);
int output_failed(void);
void output_answer(const struct ctx *, struct answer *);
void output_json(FILE *, const struct record *, int);
void output_json_one(FILE *, const struct record *const *, int, int);

/* parse.c */
struct duration_unit {
	const char *name;
	int64_t us;
};
extern const struct duration_unit duration_units[];
int parse_duration(const char *, int64_t *, const char **);
/* parse_count()'s error for what is not digits (callers add an example) */
#define PARSE_NOT_COUNT "is not a whole number"
#define PARSE_TOO_LARGE "is too large"
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

/* policy.c */
int policy_find(struct ctx *, struct args *, struct answer *);
int policy_merge(struct args *, char *);
int policy_valid(char *);
int policy_spec(const struct args *, char *, size_t, const char **);
int policy_set_check(const struct args *, struct answer *);

/* pool.c */
#define POOL_CLASSES 44 /* size classes: 16 bytes to POOL_BIG */
#define POOL_BIG 65536 /* bytes of the largest class, its header in */
#define POOL_AREA ((size_t)256 * 1024) /* bytes of each area mapped */
struct pool {
	void *free[POOL_CLASSES]; /* given-back blocks, by class */
	char *next, *end; /* the rest of the area blocks are cut from */
	unsigned areas; /* areas mapped after the first */
	size_t area; /* the size of each: POOL_AREA unless changed */
};
void pool_init(struct pool *, void *, size_t);
void *pool_alloc(struct pool *, size_t);
void pool_free(struct pool *, void *);
void *pool_realloc(struct pool *, void *, size_t);
size_t pool_size(const void *);
size_t pool_roundup(size_t);

/* rate.c */
int rate_usable(const struct args *, struct answer *);
int rate_decide(struct ctx *, const struct args *, int, int64_t,
    struct keywork *, struct answer *);
int
rate_wait(struct ctx *, const struct args *, struct keywork *, struct answer *);
void rate_refund(struct ctx *, const struct args *, const struct keywork *);
void rate_answer(const struct args *, const struct keywork *, struct answer *);

/* shed.c */
void shed_default_params(struct shed_params *);
int shed_params_ok(const struct shed_params *, const char **);
int64_t shed_rest(const struct shed_params *);
int64_t
shed_update(const struct shed_params *, int64_t, int64_t, int64_t, int64_t);
int64_t shed_drop_chance(int64_t, int);
int shed_check(int64_t, int64_t, const char **);
int64_t shed_micro(int64_t);

/* slice.c */
int slice_wanted(const char **);
void slice_ignore_env(void);
void slice_short(void);
void slice_default(void);

/* slots.c */
size_t slots_encoded_max(size_t);
size_t slots_encode(const struct slot *, size_t, unsigned char *);
int64_t slots_decode(const unsigned char *, size_t, struct slot *, size_t);

/* faultvfs.c (tests only, -DTHROTTLE_FAULT) */
void faultvfs_register(void);

/* record.c */
/* What a store keeps of a key: records of these kinds, each with an id. */
enum rec_kind {
	REC_LIMIT = 1, /* id "0".."7": one of the key's limits */
	REC_LOCKOUT = 2,
	REC_LEASE = 3, /* id: the lease id */
	REC_SHED = 4,
	REC_POLICY = 5 /* key: the policy's name */
};
#define REC_KINDS 6
#define REC_MASK(k) (1u << (k))
#define RECORD_FOREVER INT64_MAX /* a record's expiry: never */
#define RECORD_LEASE_MAX (10 * 24 + BOOT_ID_MAX + HOST_MAX)
size_t record_limit_size(const struct keyrec *);
size_t record_int(char *, int64_t);
size_t record_limit_encode(const struct keyrec *, char *);
int record_limit_decode(const char *, size_t, struct keyrec *,
    const unsigned char **, size_t *);
size_t record_lockout_encode(const struct lockout *, char *);
int record_lockout_decode(const char *, size_t, struct lockout *);
size_t record_lease_encode(const struct lease *, char *);
int
record_lease_decode(const char *, size_t, const char *, size_t, struct lease *);
size_t record_shed_encode(int64_t, int64_t, char *);
int record_shed_decode(const char *, size_t, int64_t *, int64_t *);
int64_t record_expiry(int, const char *, size_t);
int64_t record_lockout_expiry(const struct lockout *);

/* store.c */
#define STORE_RETRY 1
struct store;
/* fn(arg, kind, id, idlen, data, len): one record of a key; nonzero stops */
typedef int (
    *store_rec_fn)(void *, int, const char *, size_t, const char *, size_t);
/* fn(arg, key, keylen, kind, id, idlen, data, len): one record of a scan */
typedef int (*store_scan_fn)(void *, const char *, size_t, int, const char *,
    size_t, const char *, size_t);
/*
 * What a store implements: records by key, kind and id, with their bytes
 * (record.c) and an expiry, in transactions.  Errors go to the buffer
 * given to open.  A store never looks inside a record.
 */
struct store_ops {
	/* the last int: set nonzero when the failure is the store's
	 * being out of reach (see unavailable) */
	void *(*open)(const char *, int64_t, int, char *, size_t, int *);
	/* nonzero if the last error was the store's being out of reach
	 * (down, timed out, loading, failing over), which --on-error allow
	 * may fail open on; zero for a misconfiguration (a wrong password,
	 * a refused command, a key of another type), which it never does */
	int (*unavailable)(void *);
	void (*close)(void *);
	int (*begin)(void *, int);
	/* 0 done, STORE_RETRY (a race lost: run it again), -1 error */
	int (*commit)(void *);
	void (*rollback)(void *);
	int (*group_begin)(void *, int); /* nonzero: it will write */
	/* 0, -1, or STORE_RETRY: decide the group again */
	int (*group_end)(void *, int);
	/* read ahead the keys a group's requests will read, or NULL */
	int (*prefetch)(void *, char *const *, const size_t *, int);
	/* nonzero if the last commit failed after it was sent, so the
	 * server may have kept it (NULL: never) */
	int (*unsure)(void *);
	/* the key's records of the kinds in mask, in kind and id order */
	int (
	    *get)(void *, const char *, size_t, unsigned, store_rec_fn, void *);
	int (*put)(void *, const char *, size_t, int, const char *, size_t,
	    const char *, size_t, int64_t);
	/* the key's records of the kinds in mask, or the one with id: 1 if
	 * any was there, 0 if none */
	int (
	    *del)(void *, const char *, size_t, unsigned, const char *, size_t);
	/* every record of the kinds in mask, in key order */
	int (*scan)(void *, unsigned, store_scan_fn, void *);
	/* forget records of the kinds in mask whose expiry has passed: all
	 * of them (limit 0) or at most limit from a random place, near the
	 * key given (if any); counts by kind.  A store that checks at commit
	 * runs its own transactions: call it outside any other. */
	int (*tidy)(void *, unsigned, int64_t, int64_t, const char *, size_t,
	    int64_t *);
	int (*now)(void *, int64_t *); /* the store's clock, or NULL */
	/* check every page (quick: less thoroughly), or NULL: none to do */
	int (*verify)(void *, int);
	/* 1 if a reader found no file, 2 an empty one (a store with no
	 * keys); 0 if the store is there; or NULL */
	int (*missing)(void *);
	/* 1 if another process waits for the lock this store's group holds,
	 * 0 if none, -1 if it cannot tell; or NULL: cannot tell */
	int (*waiting)(void *);
	/* nonzero if the file open is no longer the one at its path
	 * (removed, moved aside, replaced), between transactions; or NULL */
	int (*replaced)(void *);
	/* the first of n policies there is, in one round trip: fn(arg,
	 * REC_POLICY, its name, ...) and 1, or 0 if none; NULL: one get()
	 * per name */
	int (*policy_first)(void *, char *const *, const size_t *, int,
	    store_rec_fn, void *);
	/* nonzero if a transaction outside a group may write one key only
	 * (a Redis Cluster runs a MULTI on one hash slot), or NULL */
	int (*one_key)(void *);
};
#define STORE_READ 0x01 /* store_open(): only read; create nothing */
#define STORE_EXISTING                                                         \
	0x02 /* store_open(): a missing file is not made,
			     * and is a store with no keys (store_missing) */
struct store *store_open(const char *, int64_t, int, char *, size_t, int *);
int store_unavailable(const struct store *);
int ctx_may_fail_open(const struct ctx *);
int store_spec_folder(const char *);
int store_check_spec(const char *, const char **);
int store_is_remote(const char *);
int store_may_exist(const char *);
void store_display(const char *, char *, size_t);
int store_now(struct store *, int64_t *);
int store_has_clock(const struct store *);
int store_begin(struct store *, int);
int store_group_begin(struct store *, int);
int store_group_end(struct store *, int);
int store_prefetch(struct store *, char *const *, const size_t *, int);
int store_can_prefetch(const struct store *);
int store_unsure(const struct store *);
int store_waiting(struct store *);
int store_replaced(struct store *);
int store_load(struct store *, const char *, size_t, int, struct keyrec *);
int store_trim(struct store *, const char *, size_t, int);
int store_lockout_get(struct store *, const char *, size_t, struct lockout *);
int
store_lockout_put(struct store *, const char *, size_t, const struct lockout *);
int store_lockout_del(struct store *, const char *, size_t);
int store_shed_list(struct store *,
    int (*)(const char *, size_t, int64_t, int64_t, void *), void *);
int store_lockout_list(struct store *,
    int (*)(const char *, size_t, const struct lockout *, void *), void *);
int store_policy_get(struct store *, const char *, char *, size_t);
int
store_policy_find(struct store *, const char *, size_t, char *, char *, size_t);
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
int store_one_key(const struct store *);
int store_shed_load(struct store *, const char *, size_t, int64_t *, int64_t *);
int store_shed_save(struct store *, const char *, size_t, int64_t, int64_t);
int store_verify(struct store *, int);
int64_t store_tidied_lockouts(const struct store *);
int64_t store_tidied_sheds(const struct store *);
int store_commit(struct store *);
void store_rollback(struct store *);
const char *store_error(const struct store *);
int store_missing(const struct store *, char *, size_t);
void store_close(struct store *);
int store_default_path(char *, size_t, const char **);

/* store-sqlite.c */
extern const struct store_ops store_sqlite_ops;
const char *store_sqlite_version(void);
void store_sqlite_single_thread(void);
void store_sqlite_pool(void);

/* store-redis.c (built with REDIS=1) */
#define REDIS_ONE 0 /* redis:// or unix://: one server */
#define REDIS_CLUSTER 1 /* redis+cluster://: a Redis Cluster */
#define REDIS_SENTINEL 2 /* redis+sentinel://: a master Sentinel names */
#define REDIS_SEEDS 16
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
	int kind; /* REDIS_ONE, REDIS_CLUSTER, REDIS_SENTINEL */
	int nseed; /* cluster nodes or sentinels to ask first */
	char seed_host[REDIS_SEEDS][256];
	int seed_port[REDIS_SEEDS];
	char master[128]; /* Sentinel: the master's name */
	char sentinel_user[128], sentinel_password[256];
	int db_given, login_given; /* in the path, or before the host */
};
#ifdef THROTTLE_REDIS
int store_redis_parse(const char *, struct redis_url *, const char **);
int store_redis_check(const char *, char *, size_t);
extern const struct store_ops store_redis_ops;
const char *store_redis_version(void);
unsigned store_redis_slot(const char *, size_t);
/* resolve.c */
#define RESOLVE_SLOW (-2) /* resolve_host(): the time ran out */
#define RESOLVE_NONAME (-3) /* resolve_host(): there is no such name */
#define RESOLVE_SYSTEM (-4) /* resolve_host(): no lookup could be made */
void resolve_fork(int);
int resolve_host(const char *, int64_t, struct addrs *, char *, size_t);
#endif

/* txn.c */
#define TXN_ROLLBACK 1 /* a body's "done, keep nothing" */
int txn_run(struct ctx *, int, int (*)(struct ctx *, void *, struct answer *),
    void *, struct answer *);

/* xmalloc.c */
void *xmalloc(size_t);
void *xcalloc(size_t, size_t);
void *xrealloc(void *, size_t);
char *xstrdup(const char *);

#endif /* THROTTLE_H */
