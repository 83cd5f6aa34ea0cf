/*
 * store-sqlite.c: key state in one SQLite file shared by every caller.
 *
 * What this file promises:
 *	1. Every decision is one transaction.  A command that may write starts
 *	   with BEGIN IMMEDIATE, which takes the file's single write lock
 *	   before anything is read, so two processes can never both read the
 *	   same state and both admit on it.  Waiting for that lock is bounded
 *	   by --lock-timeout (busy_wait(), short jittered polls); past it,
 *	   exit 3.
 *	2. The file is in WAL mode: readers (check, inspect) never block the
 *	   writer, and a process killed at any moment leaves either the old
 *	   or the new state of a key, never a mix.  synchronous=NORMAL, so a
 *	   power cut can lose the last few commits, never corrupt the file.
 *	   The -wal and -shm files stay between calls (SQLITE_FCNTL_PERSIST_
 *	   WAL, no checkpoint on close): creating, syncing, checkpointing and
 *	   deleting them in every process cost more than the decision.  A
 *	   close that finds the WAL past WAL_FRAMES frames checkpoints it and
 *	   truncates it, if no one else holds the lock (never waiting), so
 *	   the WAL stays small and a new process's recovery of it cheap.
 *	   That recovery starts from a -shm whose index header is zeroed,
 *	   not from one SQLite truncates and grows back (shm_ftruncate()).
 *	3. A file that is not ours is never written: before SQLite is given
 *	   the file, its header is read with plain read(2); a non-SQLite file
 *	   or a database with another program's application_id is refused
 *	   there.  A database with no application_id is checked inside the
 *	   first transaction, and is taken only if it is empty (no tables);
 *	   otherwise it is refused, rolled back, and closed without the
 *	   checkpoint SQLite would otherwise run on close.
 *	4. Symbolic links are refused (SQLITE_OPEN_NOFOLLOW), but for the
 *	   folders on the path, which sqlite_path() resolves; SQLite opens
 *	   its files close-on-exec, so no child ever inherits the lock.
 *	5. Keys are bound as blobs, never spliced into SQL: any bytes work
 *	   and compare exactly.
 *	6. The schema is versioned by PRAGMA user_version, with one entry in
 *	   migrations[] per version; a file from a newer version is refused.
 *	7. A new (absent or empty) file is created and given its schema while
 *	   its folder is flock(2)ed, so concurrent first callers never race to
 *	   switch it to WAL; later callers never take that lock.
 *	8. Writers take turns (turn_take()): the turn is an open-file-
 *	   description lock on a byte of SQLite's lock-byte page that SQLite
 *	   itself never locks, held from before BEGIN IMMEDIATE to after
 *	   COMMIT.  A waiter holds a read lock on the next byte, so a batch
 *	   can see that someone waits (sq_waiting()) and end its group.
 *	   Waiters wait in the kernel, in the order they came:
 *	   the one at the front of the line (holding the byte after) for the
 *	   turn, woken the moment the holder lets go, the others for the
 *	   front (turn_wait()).  The turn only orders throttle's writers:
 *	   SQLite's own lock still makes each decision atomic, against any
 *	   writer (the sqlite3 shell included), and is still waited for by
 *	   busy_wait().
 */
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "throttle.h"

#ifndef F_OFD_SETLK /* Linux's, since 3.15; <fcntl.h> hides them */
#ifdef __linux__
#define F_OFD_GETLK 36
#define F_OFD_SETLK 37
#define F_OFD_SETLKW 38
#else /* none: fcntl() fails (EINVAL), and SQLite's lock alone orders */
#define F_OFD_GETLK (-1)
#define F_OFD_SETLK (-1)
#define F_OFD_SETLKW (-1)
#endif
#endif

/* SQLite's unix VFS is built with 64-bit file offsets, and the ftruncate
 * it calls is replaced here (shm_ftruncate()): the Makefile builds with
 * the same off_t (-D_FILE_OFFSET_BITS=64), even where 32 bits is the
 * default. */
_Static_assert(sizeof(off_t) == 8, "build with -D_FILE_OFFSET_BITS=64");

#define APPLICATION_ID 0x74687274 /* "thrt" */
#define HEADER_SIZE 100

/*
 * The schema: every record of every key (record.c) in one table, kept in
 * key order.  expires is when the record may be forgotten (gc, and the
 * tidying consume does), INT64_MAX for never.
 */
/*
 * A writer's close checkpoints the WAL once it holds WAL_FRAMES frames: a
 * process starting reads every frame of the WAL to rebuild its index
 * (about 5000 instructions a 4 KiB frame, measured), and a checkpoint
 * syncs twice.  A size, not a chance (it was one close in 16), so the
 * cost of a decision stays within the same bounds from call to call.
 */
#define WAL_FRAMES 16
/* the size of a WAL of n frames of pages of p bytes */
#define WAL_SIZE(n, p) (32 + (n) * ((p) + 24))

/*
 * A new file's page size, whatever this SQLite's default; a file made
 * with other pages (the sqlite3 shell can VACUUM it to any) keeps them,
 * and its WAL is checkpointed at the same number of frames.  Smaller
 * pages made a consume cheaper (1 KiB: 0.978x the CPU time, since every
 * process reads each frame of the WAL again) but cost batch and gc far
 * more: 200,000 requests over 10,000 keys took 1.45x as long with 1 KiB
 * pages and 1.25x with 2 KiB, as each group writes and syncs that many
 * more frames.
 */
#define NEW_PAGE_SIZE 4096
#define STR_(x) #x
#define STR(x) STR_(x)

/* promise 8: in SQLite's lock-byte page (1 GiB in), past the 512 bytes
 * it locks (PENDING_BYTE, RESERVED_BYTE, 510 shared bytes) */
#define TURN_BYTE (0x40000000 + 512)
#define WAITING_BYTE (TURN_BYTE + 1)
#define FRONT_BYTE (TURN_BYTE + 2)

#define CURRENT_SCHEMA                                                         \
	"CREATE TABLE rec ("                                                   \
	"  key     BLOB NOT NULL,"                                             \
	"  kind    INTEGER NOT NULL," /* REC_*: 1 limit, 2 lockout, 3 lease, \
					 4 shedder, 5 policy */ \
	"  id      BLOB NOT NULL,"                                             \
	"  data    BLOB NOT NULL,"                                             \
	"  expires INTEGER NOT NULL,"                                          \
	"  PRIMARY KEY (key, kind, id)"                                        \
	") WITHOUT ROWID"

/*
 * migrations[i] takes a file from user_version i to i + 1; a new file is
 * given CURRENT_SCHEMA at once.
 */
static const char *const migrations[] = {
	"CREATE TABLE key_state ("
	"  key         BLOB PRIMARY KEY NOT NULL,"
	"  algorithm   TEXT NOT NULL,"
	"  lim         INTEGER NOT NULL," /* N units ... */
	"  period      INTEGER NOT NULL," /* ... per this many us */
	"  burst       INTEGER NOT NULL,"
	"  granularity INTEGER NOT NULL," /* sliding-window sub-window, us */
	"  s1          INTEGER NOT NULL," /* algorithm state, see algo-*.c */
	"  s2          INTEGER NOT NULL,"
	"  s3          INTEGER NOT NULL,"
	"  slots       BLOB," /* sub-windows, see slots.c */
	"  rest_at     INTEGER NOT NULL" /* us when back at rest, for gc */
	") WITHOUT ROWID",

	/* 1 -> 2: concurrency leases and the utilization shedder */
	"CREATE TABLE lease ("
	"  key       BLOB NOT NULL,"
	"  id        TEXT NOT NULL,"
	"  priority  INTEGER NOT NULL,"
	"  acquired  INTEGER NOT NULL," /* us */
	"  ttl       INTEGER NOT NULL," /* us, 0: none */
	"  expires   INTEGER NOT NULL," /* us, 0: never */
	"  pid       INTEGER NOT NULL," /* owner, 0: none */
	"  pid_start INTEGER NOT NULL," /* owner's start, ticks after boot */
	"  boot_id   TEXT NOT NULL,"
	"  host      TEXT NOT NULL,"
	"  PRIMARY KEY (key, id)"
	") WITHOUT ROWID;"
	"CREATE TABLE shed_state ("
	"  key       BLOB PRIMARY KEY NOT NULL,"
	"  amount    INTEGER NOT NULL," /* units of 1e-12 */
	"  changed   INTEGER NOT NULL" /* us */
	") WITHOUT ROWID",

	/* 2 -> 3: compound limits (one row per limit), lockouts, policies */
	"CREATE TABLE key_state3 ("
	"  key         BLOB NOT NULL,"
	"  idx         INTEGER NOT NULL," /* which of the key's limits */
	"  algorithm   TEXT NOT NULL,"
	"  lim         INTEGER NOT NULL,"
	"  period      INTEGER NOT NULL,"
	"  burst       INTEGER NOT NULL,"
	"  granularity INTEGER NOT NULL,"
	"  s1          INTEGER NOT NULL,"
	"  s2          INTEGER NOT NULL,"
	"  s3          INTEGER NOT NULL,"
	"  slots       BLOB,"
	"  rest_at     INTEGER NOT NULL,"
	"  PRIMARY KEY (key, idx)"
	") WITHOUT ROWID;"
	"INSERT INTO key_state3 SELECT key, 0, algorithm, lim, period, burst,"
	"  granularity, s1, s2, s3, slots, rest_at FROM key_state;"
	"DROP TABLE key_state;"
	"ALTER TABLE key_state3 RENAME TO key_state;"
	"CREATE TABLE lockout ("
	"  key       BLOB PRIMARY KEY NOT NULL,"
	"  until     INTEGER NOT NULL" /* us */
	") WITHOUT ROWID;"
	"CREATE TABLE policy ("
	"  name      BLOB PRIMARY KEY NOT NULL,"
	"  options   TEXT NOT NULL" /* as for policy set, normalized */
	") WITHOUT ROWID",

	/* 3 -> 4: when each state was written, so that a clock that steps
	 * back moves it back (limit_carry()); when a lockout began; a run
	 * job's process group.  0 in each: not known. */
	"ALTER TABLE key_state ADD COLUMN"
	"  written_at  INTEGER NOT NULL DEFAULT 0;" /* us */
	"ALTER TABLE lockout ADD COLUMN"
	"  since       INTEGER NOT NULL DEFAULT 0;" /* us */
	"ALTER TABLE lease ADD COLUMN"
	"  pgid        INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE lease ADD COLUMN"
	"  pgid_start  INTEGER NOT NULL DEFAULT 0", /* ticks after boot */

	/* 4 -> 5: every record in one table, in record.c's bytes, the same
	 * bytes the Redis store keeps (values that are not what throttle
	 * writes are carried as they are, to be refused as before) */
	CURRENT_SCHEMA
	";"
	"INSERT INTO rec SELECT key, 1, CAST(printf('%s', idx) AS BLOB),"
	"  CAST(printf('%s %s %s %s %s %s %s %s %s', algorithm, lim, period,"
	"  burst, granularity, s1, s2, s3, rest_at)"
	/* 0 was 3 -> 4's "not known", which a record tells by having none */
	"  || CASE WHEN written_at = 0 THEN '' ELSE ' ' || written_at END"
	"  || CASE WHEN slots IS NULL THEN '' ELSE char(10) || slots END"
	"  AS BLOB), rest_at FROM key_state;"
	"INSERT INTO rec SELECT key, 2, X'', CAST(printf('%s %s', until, since)"
	"  AS BLOB), until FROM lockout;"
	"INSERT INTO rec SELECT key, 3, CAST(id AS BLOB),"
	"  CAST(printf('%s' || char(10) || '%s' || char(10) || '%s' || char(10)"
	"  || '%s' || char(10) || '%s' || char(10) || '%s' || char(10) || '%s'"
	"  || char(10) || '%s' || char(10) || '%s' || char(10) || '%s',"
	"  priority, acquired, ttl, expires, pid, pid_start, boot_id, host, "
	"pgid,"
	"  pgid_start) AS BLOB),"
	"  CASE WHEN expires = 0 THEN 9223372036854775807 ELSE expires END"
	"  FROM lease;"
	"INSERT INTO rec SELECT key, 4, X'', CAST(printf('%s %s', amount,"
	"  changed) AS BLOB), changed + 86400000000 FROM shed_state;"
	"INSERT INTO rec SELECT name, 5, X'', CAST(options AS BLOB),"
	"  9223372036854775807 FROM policy;"
	"DROP TABLE key_state;"
	"DROP TABLE lockout;"
	"DROP TABLE lease;"
	"DROP TABLE shed_state;"
	"DROP TABLE policy",
};
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))
#define NEEDS_UPGRADE 1 /* verify(): a reader found an older schema */

#define STMT_CACHE 32
#define STMT_PARAMS 8 /* named parameters a kept statement remembers */

struct sq {
	sqlite3 *db;
	char path[PATH_MAX];
	char *err;
	size_t errlen;
	int64_t lock_timeout;
	int64_t deadline; /* monotonic us: the lock waited for until then */
	int64_t carried; /* a read's deadline, which the transaction after
			  * it keeps (a policy looked up, then the decision:
			  * one call, one --lock-timeout), or 0 */
	int txn_write; /* the transaction begun writes */
	uint64_t jitter; /* the busy handler's random state */
	int in_txn;
	int empty; /* no schema yet (read transaction) */
	int created; /* schema created in this transaction */
	int group; /* in a group transaction: begin/commit mark requests */
	int kept; /* rows the current request of a group has changed */
	/* statements kept prepared, by the address of their SQL text (a
	 * literal): a batch prepares each once, not once per request */
	struct cached {
		const char *sql;
		sqlite3_stmt *stmt;
		int busy;
		/* its parameters' numbers, by name (a string literal) */
		const char *names[STMT_PARAMS];
		int nnames;
	} cache[STMT_CACHE];
	int ncache;
	struct cached *prepped; /* what prep() gave last, if it is kept */
	int broken; /* the group transaction was lost to an error */
	int readonly; /* STORE_READ: opened to read only */
	int missing; /* no file (1), or an empty one (2), and none made
		      * (STORE_READ, STORE_EXISTING): a store with no keys */
	int existing; /* STORE_EXISTING: makes no file of its own */
	int found_empty; /* this transaction found an empty SQLite
			  * database, which it reads as a store with no
			  * keys and leaves so (a reader, or STORE_EXISTING) */
	int lockfd; /* an immutable reader's read lock, or -1 */
	int turnfd; /* a writer's own descriptor of the file for its turn
		       (promise 8), or -1: closed only after SQLite's, since
		       closing any descriptor of a file drops the process's
		       POSIX locks on it, SQLite's included */
	int has_turn;
	int turn_passed; /* this transaction went on without the turn */
	int guarded; /* guarded_open() refused a file this transaction */
	int ours; /* a transaction found the file throttle's own */
	uint32_t page_size; /* the file's, once open: 0 if unknown */
};

static void
set_err(struct sq *, const char *, ...) __attribute__((format(printf, 2, 3)));

static void
set_err(struct sq *sq, const char *fmt, ...)
{
	va_list ap;
	int n;

	size_t len = strlen(sq->path);

	/* a path too long to leave room for the reason: its end */
	n = len > 300
	    ? snprintf(sq->err, sq->errlen, "...%s: ", sq->path + len - 297)
	    : snprintf(sq->err, sq->errlen, "%s: ", sq->path);
	if (n < 0 || (size_t)n >= sq->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(sq->err + n, sq->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

static int guard_why(struct sq *);
static void turn_give(struct sq *);

static void
locked_err(struct sq *sq)
{
	char t[32];

	output_human(t, sizeof(t), sq->lock_timeout);
	set_err(sq,
	    "is locked by another process for longer than the lock timeout "
	    "(%s); try again or raise --lock-timeout",
	    t);
}

/*
 * Whether the file, or its folder if it has none, is on a file system
 * mounted read-only: SQLite says only that it cannot write or open it,
 * and permissions are not what to check then.
 */
static void dir_of(const char *, char *, size_t);

static int
readonly_fs(const struct sq *sq)
{
	char dir[PATH_MAX];
	struct statvfs vfs;

	if (statvfs(sq->path, &vfs) == 0)
		return (vfs.f_flag & ST_RDONLY) != 0;
	dir_of(sq->path, dir, sizeof(dir));
	return statvfs(dir, &vfs) == 0 && (vfs.f_flag & ST_RDONLY) != 0;
}

static void
readonly_fs_err(struct sq *sq)
{
	set_err(sq,
	    "cannot be written: its file system is mounted read-only; "
	    "nothing was changed: keep the state on a writable one (--db)");
}

/*
 * A writer that may not write the state file, or the -wal or -shm beside
 * it: said before SQLite opens it, which would make a -wal and -shm beside
 * a file it cannot write, with that file's mode (a -shm of mode 0444 then
 * refuses writers after the file is made writable).  A link or a missing
 * file is left to the open, which says what it is.  0, or -1 with the
 * error set.
 */
static int
may_write(struct sq *sq)
{
	static const char *const side[] = { "", "-wal", "-shm" };
	char p[PATH_MAX + 8];
	struct stat sb;
	size_t i, missing = 0;

	for (i = 0; i < sizeof(side) / sizeof(side[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", sq->path, side[i]);
		if (lstat(p, &sb) == -1) {
			if (errno == ENOENT && i > 0 && missing == 0)
				missing = i;
			continue;
		}
		if (!S_ISREG(sb.st_mode) ||
		    faccessat(AT_FDCWD, p, W_OK, AT_EACCESS) == 0)
			continue;
		if (errno == EROFS) {
			readonly_fs_err(sq);
			return -1;
		}
		if (errno != EACCES && errno != EPERM)
			continue; /* the open will say */
		if (i == 0)
			set_err(sq,
			    "cannot be written (permission denied); check the "
			    "permissions of the file and its folder");
		else
			set_err(sq,
			    "its %s file cannot be written (mode %04o), though "
			    "the state file can: give it the state file's "
			    "permissions, or remove it if no throttle is "
			    "running",
			    side[i], (unsigned)(sb.st_mode & 07777));
		return -1;
	}
	/* a writer makes a missing -wal or -shm beside the file */
	if (missing == 0)
		return 0;
	dir_of(sq->path, p, sizeof(p));
	if (faccessat(AT_FDCWD, p, W_OK | X_OK, AT_EACCESS) == 0 ||
	    (errno != EACCES && errno != EPERM))
		return 0; /* (EROFS: the open says) */
	set_err(sq,
	    "cannot be written: its folder %s cannot be written by this "
	    "user, and a writer makes the file's %s there (permission "
	    "denied); let this user write the folder, or give --db a file "
	    "in a folder you can write",
	    p, side[missing]);
	return -1;
}

/*
 * A state file not there is made in its folder: 0 if this user may, else
 * -1 with the error set (SQLite would say only "unable to open database
 * file").  A folder that cannot be checked is left to the open.
 */
static int
folder_writable(struct sq *sq)
{
	char dir[PATH_MAX];

	dir_of(sq->path, dir, sizeof(dir));
	if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) == 0 ||
	    (errno != EACCES && errno != EPERM && errno != EROFS))
		return 0;
	if (errno == EROFS)
		readonly_fs_err(sq);
	else
		set_err(sq,
		    "cannot be created: its folder %s cannot be written by "
		    "this user (permission denied); give --db a file in a "
		    "folder you can write, or let this user write that one",
		    dir);
	return -1;
}

static void
full_err(struct sq *sq)
{
	if (sq->readonly)
		set_err(sq,
		    "cannot be read: the disk is full (a reader needs room "
		    "for the -shm file); make room on its disk and try again");
	else
		set_err(sq,
		    "cannot be written: the disk is full; nothing was "
		    "changed: make room on its disk and try again");
}

/* Put SQLite's failure of step what into words a user can act on. */
static void
sql_err(struct sq *sq, const char *what)
{
	int rc = sqlite3_extended_errcode(sq->db), e;

	if (guard_why(sq))
		return;

	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
	case SQLITE_PROTOCOL: /* the WAL's locks, held past the deadline */
		locked_err(sq);
		break;
	case SQLITE_NOTADB:
		set_err(sq,
		    "is not a throttle state file (not a SQLite "
		    "database); it was left untouched");
		break;
	case SQLITE_CORRUPT:
		set_err(sq,
		    "is corrupt (%s); it was left untouched: move it "
		    "aside, with its -wal and -shm files, to start afresh",
		    sqlite3_errmsg(sq->db));
		break;
	case SQLITE_READONLY:
		if (readonly_fs(sq)) {
			readonly_fs_err(sq);
			break;
		}
		set_err(sq,
		    "cannot be written (%s); check the permissions of "
		    "the file and its folder",
		    sqlite3_errmsg(sq->db));
		break;
	case SQLITE_FULL:
		full_err(sq);
		break;
	case SQLITE_IOERR:
		/* SQLite's name for a failed write of its -shm (growing it on
		 * a full disk) or -wal is "disk I/O error"; errno says more */
		if ((e = sqlite3_system_errno(sq->db)) == ENOSPC ||
		    e == EDQUOT) {
			full_err(sq);
			break;
		}
		if (e != 0) {
			set_err(sq, "%s failed: %s (%s)", what,
			    sqlite3_errmsg(sq->db), strerror(e));
			break;
		}
		set_err(sq, "%s failed: %s", what, sqlite3_errmsg(sq->db));
		break;
	case SQLITE_CANTOPEN:
		if (readonly_fs(sq)) {
			readonly_fs_err(sq);
			break;
		}
		set_err(sq,
		    "cannot be opened (%s); check the permissions of "
		    "the file and its folder",
		    sqlite3_errmsg(sq->db));
		break;
	case SQLITE_ERROR:
		/* a file with throttle's id and schema version whose table
		 * was dropped or changed: edited, not written by throttle */
		if (strncmp(sqlite3_errmsg(sq->db), "no such table", 13) == 0 ||
		    strncmp(sqlite3_errmsg(sq->db), "no such column", 14) ==
			0 ||
		    strstr(sqlite3_errmsg(sq->db), "has no column") != NULL) {
			set_err(sq,
			    "has throttle's application_id but not the table "
			    "it keeps (%s): it was edited; it was left "
			    "untouched: move it aside, with its -wal and -shm "
			    "files, to start afresh",
			    sqlite3_errmsg(sq->db));
			break;
		}
		set_err(sq, "%s failed: %s", what, sqlite3_errmsg(sq->db));
		break;
	default:
		set_err(sq, "%s failed: %s", what, sqlite3_errmsg(sq->db));
		break;
	}
}

static sqlite3_stmt *prep(struct sq *, const char *, const char *);
static void unprep(struct sq *, sqlite3_stmt *);

/* Run sql, a string literal (it is kept prepared), to its end. */
static int
exec_sql(struct sq *sq, const char *sql)
{
	sqlite3_stmt *stmt;
	int rc;

	if ((stmt = prep(sq, sql, sql)) == NULL)
		return -1;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
		;
	if (rc != SQLITE_DONE) {
		sql_err(sq, sql);
		unprep(sq, stmt);
		return -1;
	}
	unprep(sq, stmt);
	return 0;
}

/*
 * Prepare sql, a string literal; NULL (with the error set) if it cannot
 * be.  The statement is kept for the next call with the same literal
 * unless the cache is full or it is in use; unprep() gives it back.
 */
static sqlite3_stmt *
prep(struct sq *sq, const char *sql, const char *what)
{
	sqlite3_stmt *stmt;
	struct cached *c = NULL;
	int i;

	sq->prepped = NULL;
	for (i = 0; i < sq->ncache; i++)
		if (sq->cache[i].sql == sql) {
			if (sq->cache[i].busy)
				break; /* nested: prepare another */
			sq->cache[i].busy = 1;
			sq->prepped = &sq->cache[i];
			return sq->cache[i].stmt;
		}
	if (i == sq->ncache && sq->ncache < STMT_CACHE)
		c = &sq->cache[sq->ncache];
	if (sqlite3_prepare_v3(sq->db, sql, -1,
		c != NULL ? SQLITE_PREPARE_PERSISTENT : 0, &stmt,
		NULL) != SQLITE_OK) {
		sql_err(sq, what);
		return NULL;
	}
	if (c != NULL) {
		c->sql = sql;
		c->stmt = stmt;
		c->busy = 1;
		c->nnames = 0;
		sq->ncache++;
		sq->prepped = c;
	}
	return stmt;
}

/* Done with a statement from prep(): reset it for next time, or free it. */
static void
unprep(struct sq *sq, sqlite3_stmt *stmt)
{
	int i;

	for (i = 0; i < sq->ncache; i++)
		if (sq->cache[i].stmt == stmt) {
			/* every caller binds all of its parameters */
			sqlite3_reset(stmt);
			sq->cache[i].busy = 0;
			return;
		}
	sqlite3_finalize(stmt);
}

/* Free every kept statement, before the connection is closed. */
static void
unprep_all(struct sq *sq)
{
	while (sq->ncache > 0)
		sqlite3_finalize(sq->cache[--sq->ncache].stmt);
	sq->prepped = NULL;
}

/* Step a statement that returns no rows, then finalize it: 0 or -1. */
static int
done(struct sq *sq, sqlite3_stmt *stmt, const char *what)
{
	int rc = sqlite3_step(stmt);

	if (rc != SQLITE_DONE)
		sql_err(sq, what);
	else if (sqlite3_changes(sq->db) > 0)
		sq->kept++;
	unprep(sq, stmt);
	return rc == SQLITE_DONE ? 0 : -1;
}

/*
 * After a loop over a statement's rows: ret if the loop stopped on its
 * own or by its callback, -1 if stepping failed; the statement is
 * finalized either way.
 */
static int
rows_done(struct sq *sq, sqlite3_stmt *stmt, int rc, int ret, const char *what)
{
	if (ret == 0 && rc != SQLITE_DONE && rc != SQLITE_ROW) {
		sql_err(sq, what);
		ret = -1;
	}
	unprep(sq, stmt);
	return ret;
}

/* The path goes through a file (ENOTDIR): name it. */
static void
not_a_folder(struct sq *sq)
{
	char dir[PATH_MAX];
	struct stat sb;
	char *slash;

	snprintf(dir, sizeof(dir), "%s", sq->path);
	while ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (stat(dir, &sb) == 0) {
			if (!S_ISDIR(sb.st_mode)) {
				set_err(sq,
				    "cannot be checked: %s on its path is not "
				    "a folder; give --db a file in a folder",
				    dir);
				return;
			}
			break;
		}
	}
	set_err(sq, "cannot be checked: %s", strerror(ENOTDIR));
}

/*
 * Remove the folders make_parents() made before it failed at dir (cut at
 * its end), the first of them ending at first (NULL: none made): deepest
 * first, each only if still empty.
 */
static void
unmake_parents(char *dir, char *first)
{
	char *slash;

	if (first == NULL)
		return;
	while ((slash = strrchr(dir, '/')) != NULL && slash >= first) {
		*slash = '\0';
		if (rmdir(dir) == -1)
			return;
	}
}

/* Create the folders above path that do not exist yet, mode 0700. */
static int
make_parents(struct sq *sq)
{
	char dir[PATH_MAX];
	char *p, *first = NULL;
	struct stat sb;

	snprintf(dir, sizeof(dir), "%s", sq->path);
	if ((p = strrchr(dir, '/')) == NULL || p == dir)
		return 0;
	*p = '\0';
	if (stat(dir, &sb) == 0) {
		if (S_ISDIR(sb.st_mode))
			return 0;
		set_err(sq, "cannot be created: %s is not a folder", dir);
		return -1;
	}
	for (p = dir + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		int made;

		*p = '\0';
		if (!(made = mkdir(dir, 0700) == 0) && errno != EEXIST) {
			if (errno == ENAMETOOLONG)
				set_err(sq,
				    "cannot create the folder %s: its name is "
				    "longer than the file system allows; give "
				    "--db a path of shorter names",
				    dir);
			else
				set_err(sq,
				    "cannot create the folder %s: %s; give "
				    "--db a file in a folder you can write",
				    dir, strerror(errno));
			unmake_parents(dir, first);
			return -1;
		}
		if (made && first == NULL)
			first =
			    p; /* the first folder this call made ends here */
		if (stat(dir, &sb) == -1 || !S_ISDIR(sb.st_mode)) {
			set_err(sq, "cannot be created: %s is not a folder",
			    dir);
			unmake_parents(dir, first);
			return -1;
		}
		if ((*p = c) == '\0')
			break;
	}
	return 0;
}

static uint32_t
be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

/* The page size a database header gives: bytes 16 and 17, big-endian, 1
 * standing for 65536. */
static uint32_t
page_size_of(const unsigned char *h)
{
	uint32_t n = (uint32_t)h[16] << 8 | h[17];

	return n == 1 ? 65536 : n;
}

static void
foreign_err(struct sq *sq, int64_t app)
{
	if (app == 0)
		set_err(sq,
		    "is a SQLite database of another program (it has "
		    "tables throttle did not make), not a throttle state "
		    "file; it was left untouched");
	else
		set_err(sq,
		    "is a SQLite database of another program "
		    "(application_id 0x%08llx), not a throttle state file; "
		    "it was left untouched",
		    (unsigned long long)app);
}

/*
 * Why the header of a file (its first bytes, n of them) is not a throttle
 * state file's, or NULL if it may be one.  A file is refused here before
 * SQLite reads a page of it, so nothing SQLite might do on open
 * (recovering a hot journal, checkpointing) can touch another program's
 * data.  *app is the application_id found.
 */
static const char *
header_problem(const unsigned char *h, ssize_t n, uint32_t *app)
{
	*app = 0;
	if (n == 0)
		return NULL; /* an empty file is a new one */
	if (n < HEADER_SIZE || memcmp(h, "SQLite format 3", 16) != 0)
		return "is not a throttle state file (not a SQLite database); "
		       "it was left untouched";
	*app = be32(h + 68);
	/*
	 * A database with no application_id may be an empty one, which
	 * throttle takes (tables made and dropped leave the schema cookie
	 * at 40 above 0): the first transaction looks for tables (verify()),
	 * and guarded_open() refuses one with a rollback journal SQLite
	 * would play back into it ...
	 */
	if (*app != APPLICATION_ID && *app != 0)
		return "foreign";
	/* a newer throttle's file, as its header already says (a version
	 * only grows): refused before SQLite makes -wal and -shm for it */
	if (*app == APPLICATION_ID && be32(h + 60) > (uint32_t)SCHEMA_VERSION) {
		static char newer[160];

		snprintf(newer, sizeof(newer),
		    "was written by a newer version of throttle (schema %lu; "
		    "this one knows %d); upgrade throttle",
		    (unsigned long)be32(h + 60), SCHEMA_VERSION);
		return newer;
	}
	/* the file format's versions (18: to write, 19: to read) are 1 or
	 * 2 in every SQLite 3 yet: SQLite opens a file with a greater one
	 * read-only, or not at all, which would be told as a permission
	 * or "not a database" problem */
	if (h[18] < 1 || h[18] > 2 || h[19] < 1 || h[19] > 2) {
		static char format[320];

		snprintf(format, sizeof(format),
		    "has a file format this SQLite does not know (header "
		    "bytes 18 and 19 are %u and %u, not 1 or 2): it is damaged "
		    "or from a newer SQLite; it was left untouched: restore it "
		    "from a backup, or move it aside, with its -wal and -shm "
		    "files, to start afresh",
		    (unsigned)h[18], (unsigned)h[19]);
		return format;
	}
	/* ... but not one in WAL mode (18, 19: 2) that has had a schema:
	 * SQLite would make -wal and -shm files beside it to read it */
	if (*app == 0 && be32(h + 40) != 0 && (h[18] == 2 || h[19] == 2))
		return "is a SQLite database of another program (in WAL mode, "
		       "and it has had tables: throttle cannot look for them "
		       "without making -wal and -shm files beside it), not a "
		       "throttle state file; it was left untouched";
	return NULL;
}

/*
 * The files SQLite opens for the state file (the file itself, its -wal,
 * -shm and -journal) are opened by guarded_open(), which replaces the unix
 * VFS's open(2): with O_NOFOLLOW and O_NONBLOCK, and checked on the
 * descriptor SQLite will use, never on a path that could be swapped
 * between a check and the open.  Refused: a symbolic link, anything but a
 * regular file (a FIFO cannot hang a call), a file whose header is not
 * ours, and as root a file another user owns or could write.  The reason
 * is kept in guard.why for the message.
 */
static struct {
	char base[NAME_MAX + 1]; /* the state file's name; "" when none */
	size_t len;
	dev_t dir_dev; /* and its folder, however SQLite spells the path */
	ino_t dir_ino;
	uid_t owner; /* the state file's owner, once it is open */
	dev_t dev; /* the state file SQLite opened, if it did (dev != 0) */
	ino_t ino;
	char why[PATH_MAX + 256];
	uint32_t app; /* a foreign file's application_id */
	uint32_t cookie; /* the state file's schema cookie, as opened */
	uint32_t page_size; /* its page size, as opened; 0 for a new file */
	int wal; /* its header says WAL mode */
	dev_t shm_dev; /* its -shm file, once opened (shm_dev != 0) */
	ino_t shm_ino;
} guard;
static int (*real_open)(const char *, int, int);
static int (*real_ftruncate)(int, off_t);
static int (*real_fchown)(int, uid_t, gid_t);

static int refuse_fd(int fd, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
refuse_fd(int fd, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(guard.why, sizeof(guard.why), fmt, ap);
	va_end(ap);
	if (fd >= 0)
		close(fd);
	errno = err;
	return -1;
}

/* The folder of path into buf: "." for a bare name. */
static void
dir_of(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');

	if (slash == NULL)
		snprintf(buf, len, ".");
	else if (slash == path)
		snprintf(buf, len, "/");
	else
		snprintf(buf, len, "%.*s", (int)(slash - path), path);
}

/* Nonzero if path names the state file, or its -wal, -shm or -journal. */
static int
guarded(const char *path, const char **suffix)
{
	const char *base = strrchr(path, '/');
	char dir[PATH_MAX];
	struct stat sb;

	base = base != NULL ? base + 1 : path;
	*suffix = base + guard.len;
	if (guard.len == 0 || strncmp(base, guard.base, guard.len) != 0 ||
	    (**suffix != '\0' && strcmp(*suffix, "-wal") != 0 &&
		strcmp(*suffix, "-shm") != 0 &&
		strcmp(*suffix, "-journal") != 0))
		return 0;
	dir_of(path, dir, sizeof(dir));
	return stat(dir, &sb) == 0 && sb.st_dev == guard.dir_dev &&
	    sb.st_ino == guard.dir_ino;
}

/* Nonzero if path's -journal is a symbolic link (dangling or not). */
static int
journal_link(const char *path)
{
	char j[PATH_MAX + 16];
	struct stat sb;

	snprintf(j, sizeof(j), "%s-journal", path);
	return lstat(j, &sb) == 0 && S_ISLNK(sb.st_mode);
}

/* Nonzero if path has a -journal file SQLite could take for a hot one and
 * play back into the file when it first reads it: not empty, and its
 * first byte not zero (journal_mode=PERSIST zeroes the header of one it
 * is done with). */
static int
journal_left(const char *path)
{
	char j[PATH_MAX + 16];
	unsigned char first = 0;
	struct stat sb;
	int fd;

	snprintf(j, sizeof(j), "%s-journal", path);
	if (lstat(j, &sb) == -1)
		return 0;
	if (!S_ISREG(sb.st_mode))
		return 1;
	if (sb.st_size == 0 ||
	    (fd = open(j, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) ==
		-1)
		return sb.st_size > 0;
	if (read(fd, &first, 1) != 1)
		first = 1;
	close(fd);
	return first != 0;
}

/* Nonzero if the N bytes read of a -journal (WANT asked for) are the
 * start of a journal's header: its magic number, and all of it there. */
static int
journal_header(const unsigned char *head, ssize_t n, size_t want)
{
	return n == (ssize_t)want &&
	    memcmp(head, "\xd9\xd5\x05\xf9\x20\xa1\x63\xd7", 8) == 0;
}

/*
 * Nonzero if the -journal open on fd is another program's, to be played
 * back: it has a journal's header (a new one, being begun, is empty, and
 * one with its header zeroed is done with), and it is not throttle's own,
 * one left by a crash while a file it had just given its schema was
 * switched to WAL mode, which rewrites page 1 under a rollback journal.
 * Such a journal's first record is page 1 as it stood, with throttle's
 * application_id.  (The journal: a header of one sector, page size at 24,
 * sector size at 20; then records of a page number, the page, and a
 * checksum.)
 */
static int
journal_foreign(int fd)
{
	unsigned char head[28], rec[4 + 72];
	uint32_t sector, page;
	ssize_t n = pread(fd, head, sizeof(head), 0);

	/* empty, or its first byte zero: SQLite leaves it be */
	if (n <= 0 || head[0] == 0)
		return 0;
	/* anything else SQLite takes for a journal to play back, and one
	 * that is not a journal at all (notes, a file of another program)
	 * it deletes as an empty one */
	if (!journal_header(head, n, sizeof(head)))
		return 1;
	sector = be32(head + 20);
	page = be32(head + 24);
	return !(sector >= 32 && sector <= 65536 && page >= 512 &&
	    pread(fd, rec, sizeof(rec), (off_t)sector) ==
		(ssize_t)sizeof(rec) &&
	    be32(rec) == 1 && be32(rec + 4 + 68) == APPLICATION_ID);
}

/*
 * What SQLite would delete beside the state file at path, not there yet or
 * empty (the caller knows), as it opens the file, or NULL: a -journal it
 * takes for one left over that is not a regular file, or holds something
 * that is no journal (notes, another program's file; a journal's own
 * header, or an empty or zeroed one, is let be).  A -wal there is a state
 * file's that was removed (or moved without it): SQLite discards it, and
 * the new file starts afresh, as one removed should.  A file with pages
 * is guarded_open()'s.
 */
static const char *
stray_beside(const char *path)
{
	char j[PATH_MAX + 16];
	unsigned char head[8];
	struct stat sb;
	ssize_t n;
	int fd;

	if (snprintf(j, sizeof(j), "%s-journal", path) >= (int)sizeof(j))
		return NULL;
	if (lstat(j, &sb) == -1)
		return NULL;
	if (S_ISREG(sb.st_mode)) {
		if ((fd = open(j,
			 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) == -1)
			return NULL; /* SQLite cannot open it either */
		n = read(fd, head, sizeof(head));
		close(fd);
		if (!(n > 0 && head[0] != 0 &&
			!journal_header(head, n, sizeof(head))))
			return NULL;
	}
	return "has a -journal file beside it that is not its own (a file "
	       "in WAL mode keeps none), which SQLite would delete; the "
	       "files were left untouched: move that -journal away";
}

static int
guarded_open(const char *path, int flags, int mode)
{
	const char *suffix;
	unsigned char h[HEADER_SIZE];
	const char *problem;
	struct stat sb;
	ssize_t n;
	int fd, fl;

	if (!guarded(path, &suffix))
		return real_open(path, flags, mode);
	if ((fd = real_open(path, flags | O_NOFOLLOW | O_NONBLOCK, mode)) ==
	    -1) {
		if (errno == ELOOP && *suffix == '\0')
			return refuse_fd(-1, ELOOP,
			    "is a symbolic link; give the path of the state "
			    "file itself");
		if (errno == ELOOP)
			return refuse_fd(-1, ELOOP,
			    "its %s file is a symbolic link, which throttle "
			    "refuses to follow: remove it if no throttle is "
			    "running",
			    suffix);
		if (errno == EISDIR && *suffix != '\0')
			return refuse_fd(-1, EACCES,
			    "its %s file is not a regular file: remove it if "
			    "no throttle is running",
			    suffix);
		return -1;
	}
	if ((fstat(fd, &sb) == -1 || !S_ISREG(sb.st_mode)) && *suffix == '\0')
		return refuse_fd(fd, EACCES,
		    "is not a regular file; give the path of a throttle state "
		    "file");
	if (!S_ISREG(sb.st_mode))
		return refuse_fd(fd, EACCES,
		    "its %s file is not a regular file: remove it if no "
		    "throttle is running",
		    suffix);
	if (*suffix == '\0') {
		guard.owner = sb.st_uid;
		guard.dev = sb.st_dev;
		guard.ino = sb.st_ino;
		if (geteuid() == 0 && (sb.st_uid != 0 || (sb.st_mode & 022)))
			return refuse_fd(fd, EACCES,
			    "%s (owner %ld, mode %04o); as root throttle "
			    "refuses it, as ssh's StrictModes does: chown root "
			    "and chmod go-w it",
			    sb.st_uid != 0 ? "is owned by another user, who "
					     "can change it"
					   : "can be written by others",
			    (long)sb.st_uid, (unsigned)(sb.st_mode & 07777));
		/* any user: a file every user may write (an empty one left
		 * 0666 in a shared folder) has no limits worth keeping */
		if (sb.st_mode & S_IWOTH)
			return refuse_fd(fd, EACCES,
			    "can be written by every user (owner %ld, mode "
			    "%04o), who could lift its limits and lockouts; "
			    "the file was left untouched: chmod o-w it, or "
			    "give another file",
			    (long)sb.st_uid, (unsigned)(sb.st_mode & 07777));
		/* SQLite keeps the -wal, and the lock that makes a decision
		 * atomic, beside the name it was given: callers through two
		 * names would each decide alone, and corrupt the file */
		if (sb.st_nlink > 1)
			return refuse_fd(fd, EACCES,
			    "has %ld names (hard links), and callers using "
			    "another name would not see its -wal or its lock; "
			    "the file was left untouched: remove the other "
			    "names ('find / -xdev -samefile %s' lists them)",
			    (long)sb.st_nlink, path);
		n = pread(fd, h, sizeof(h), 0);
		if (n < 0)
			return refuse_fd(fd, errno, "cannot be read: %s",
			    strerror(errno));
		if ((problem = header_problem(h, n, &guard.app)) != NULL)
			return refuse_fd(fd, EACCES, "%s", problem);
		guard.cookie = n >= HEADER_SIZE ? be32(h + 40) : 0;
		guard.wal = n >= HEADER_SIZE && (h[18] == 2 || h[19] == 2);
		guard.page_size = n >= HEADER_SIZE ? page_size_of(h) : 0;
		/* (a new file of throttle's own has no schema yet, and may
		 * have a -journal while it is switched to WAL) */
		/* SQLite looks for a -journal through a link, and would
		 * make one where a dangling link points */
		if (journal_link(path))
			return refuse_fd(fd, ELOOP,
			    "its -journal file is a symbolic link, which "
			    "throttle refuses to follow: remove it if no "
			    "throttle is running");
		if (guard.app == 0 && guard.cookie != 0 && journal_left(path))
			return refuse_fd(fd, EACCES,
			    "is a SQLite database of another program (with "
			    "an unfinished transaction in its -journal "
			    "file), not a throttle state file; it was left "
			    "untouched");
	} else if (sb.st_mode & S_IWOTH)
		/* any user: SQLite makes them with the state file's mode,
		 * which is not o+w (that is refused above): another user's */
		return refuse_fd(fd, EACCES,
		    "its %s file can be written by every user (owner %ld, "
		    "mode %04o), who could lift its limits and lockouts; "
		    "remove it if no throttle is running",
		    suffix, (long)sb.st_uid, (unsigned)(sb.st_mode & 07777));
	else if (geteuid() == 0 && sb.st_uid != guard.owner)
		return refuse_fd(fd, EACCES,
		    "its %s file is owned by user %ld (mode %04o), not by "
		    "the state file's owner (%ld); as root throttle refuses "
		    "to read it: chown it if you trust it, or remove it if "
		    "no throttle is running (the decisions it holds are "
		    "then lost)",
		    suffix, (long)sb.st_uid, (unsigned)(sb.st_mode & 07777),
		    (long)guard.owner);
	else if (geteuid() == 0 && (sb.st_mode & 022))
		return refuse_fd(fd, EACCES,
		    "its %s file can be written by others (mode %04o); as "
		    "root throttle refuses to read it: chmod go-w it",
		    suffix, (unsigned)(sb.st_mode & 07777));
	/* SQLite opens a -journal beside a file in WAL mode only to play it
	 * back, before it reads the WAL.  Such a file keeps none (throttle's
	 * own switches before it writes a page; an empty database it adopts
	 * has one of its own while it gets its schema, and while it is
	 * switched): one there is another program's (journal_foreign()). */
	if (strcmp(suffix, "-journal") == 0 && guard.cookie != 0 && guard.wal &&
	    journal_foreign(fd))
		return refuse_fd(fd, EACCES,
		    "has a -journal file beside it that is not its own (a "
		    "file in WAL mode keeps none), which SQLite would play "
		    "back into it or delete; the files were left untouched: "
		    "move that -journal away");
	if (strcmp(suffix, "-shm") == 0) { /* see shm_ftruncate() */
		guard.shm_dev = sb.st_dev;
		guard.shm_ino = sb.st_ino;
	}
	if (!(flags & O_NONBLOCK) && (fl = fcntl(fd, F_GETFL)) != -1)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

/*
 * The first process to open the state file's -shm (none has it open: no
 * one else is connected) resets it, SQLite by truncating it to 3 bytes;
 * SQLite then grows it back a page at a time and rebuilds the WAL index
 * from the WAL.  Every throttle call is such a first process, and on
 * ext4 the truncation, the regrowth and the inode changes they journal
 * cost a sixth of a decision (paired runs; README, Performance).
 * Zeroing the index's header instead (both copies of it and the
 * checkpoint information, the first 136 bytes) invalidates the index just
 * as well: a header that is not initialised makes SQLite rebuild the
 * index, and the hash tables past it are never trusted beyond the frames
 * the rebuild counts (SQLite clears a table as its first frame is added, as
 * it does whenever the WAL restarts).  Only for the -shm file
 * guarded_open() opened, and only when it holds a whole region already,
 * every byte of it allocated: SQLite writes the index through a mapping,
 * and a page with no block behind it (a -shm restored sparse) would cost
 * a SIGBUS on a full disk where SQLite's regrowth, a write(2) per page,
 * fails with an error.  Anything else truncates as SQLite asked.
 */
#define SHM_HEADER 136
#define SHM_REGION 32768

static int
shm_ftruncate(int fd, off_t len)
{
	static const char zeros[SHM_HEADER];
	struct stat sb;

	if (len == 3 && guard.shm_dev != 0 && fstat(fd, &sb) == 0 &&
	    S_ISREG(sb.st_mode) && sb.st_dev == guard.shm_dev &&
	    sb.st_ino == guard.shm_ino && sb.st_size >= SHM_REGION &&
	    sb.st_blocks >= (sb.st_size + 511) / 512 &&
	    pwrite(fd, zeros, sizeof(zeros), 0) == (ssize_t)sizeof(zeros))
		return 0;
	return real_ftruncate(fd, len);
}

/*
 * As root, SQLite gives each -wal and -shm file it opens to the state
 * file's owner, even one it already belongs to; the change of an inode
 * that changes nothing is journaled all the same.  Only when it would
 * change something.
 */
static int
lazy_fchown(int fd, uid_t uid, gid_t gid)
{
	struct stat sb;

	if (fstat(fd, &sb) == 0 && sb.st_uid == uid && sb.st_gid == gid)
		return 0;
	return real_fchown(fd, uid, gid);
}

/*
 * Put fn in place of the unix VFS's system call name: the call it
 * replaced, or NULL (then fn is not in place).  In the PAM module the
 * hooks are in the host's SQLite, so the module is never unloaded
 * (-z nodelete, Makefile).
 */
static sqlite3_syscall_ptr
hook_syscall(sqlite3_vfs *vfs, const char *name, sqlite3_syscall_ptr fn)
{
	sqlite3_syscall_ptr real = vfs->xGetSystemCall(vfs, name);

	if (real == NULL || vfs->xSetSystemCall(vfs, name, fn) != SQLITE_OK)
		return NULL;
	return real;
}

/*
 * SQLite's own naps end at the lock timeout too: a connection whose WAL
 * index needs the locks another process holds (one that may only read
 * the -shm can hold them) retries about 10s in all before it gives up
 * with SQLITE_PROTOCOL, whatever --lock-timeout says.  Past the deadline
 * of the connection at work (napper) its retries run out at once.  The
 * throttle binary only (turn_ok: one thread, one connection at a time).
 */
static int turn_ok; /* the throttle binary: see turn_take() */
static int (*real_sleep)(sqlite3_vfs *, int);
static const struct sq *napper;

static int
bounded_sleep(sqlite3_vfs *vfs, int us)
{
	int64_t left;

	if (napper != NULL) {
		left = napper->deadline - clock_monotonic();
		if (left <= 0)
			return 0;
		if (us > left)
			us = (int)left;
	}
	return real_sleep(vfs, us);
}

/* From now until guard_end(), SQLite's opens of path are guarded. */
static void
guard_begin(const char *path)
{
	const char *base = strrchr(path, '/');
	char dir[PATH_MAX];
	struct stat sb;
	sqlite3_vfs *vfs;

	if (real_open == NULL && (vfs = sqlite3_vfs_find("unix")) != NULL &&
	    vfs->iVersion >= 3) {
		real_open = (int (*)(const char *, int, int))hook_syscall(vfs,
		    "open", (sqlite3_syscall_ptr)guarded_open);
		if (real_ftruncate == NULL)
			real_ftruncate = (int (*)(int, off_t))hook_syscall(vfs,
			    "ftruncate", (sqlite3_syscall_ptr)shm_ftruncate);
		if (real_fchown == NULL)
			real_fchown =
			    (int (*)(int, uid_t, gid_t))hook_syscall(vfs,
				"fchown", (sqlite3_syscall_ptr)lazy_fchown);
		if (turn_ok && real_sleep == NULL && vfs->xSleep != NULL) {
			real_sleep = vfs->xSleep;
			vfs->xSleep = bounded_sleep;
		}
	}
	guard.why[0] = '\0';
	guard.app = guard.cookie = guard.page_size = 0;
	guard.owner = geteuid();
	guard.dev = 0;
	guard.shm_dev = 0;
	guard.len = 0;
	dir_of(path, dir, sizeof(dir));
	if (real_open == NULL || stat(dir, &sb) == -1)
		return; /* no folder: SQLite will fail to open it anyway */
	base = base != NULL ? base + 1 : path;
	if (strlen(base) >= sizeof(guard.base))
		return; /* longer than a name can be: the open fails */
	memcpy(guard.base, base, strlen(base) + 1);
	guard.len = strlen(guard.base);
	guard.dir_dev = sb.st_dev;
	guard.dir_ino = sb.st_ino;
}

static void
guard_end(void)
{
	guard.base[0] = '\0';
	guard.len = 0;
	guard.shm_dev = 0;
}

/* Report why guarded_open() refused a file, if it did: 1, else 0. */
static int
guard_why(struct sq *sq)
{
	if (guard.why[0] == '\0')
		return 0;
	sq->guarded = 1;
	if (strcmp(guard.why, "foreign") == 0)
		foreign_err(sq, guard.app);
	else
		set_err(sq, "%s", guard.why);
	guard.why[0] = '\0';
	return 1;
}

static int sq_begin(void *, int);
static int sq_commit(void *);
static int check_file(struct sq *, int, int);

/*
 * Roll back whatever transaction is still open, keeping the message of the
 * failure that led here: after an I/O error SQLite has often rolled back
 * already, and a ROLLBACK of nothing would replace the real reason.
 */
static void
abandon(struct sq *sq)
{
	if (sq->group && sq->in_txn) {
		/* one request of a group: if it changed nothing (a statement
		 * that fails undoes itself), it fails alone; otherwise, or if
		 * the error took the transaction with it, the group is lost
		 * (a group on no file yet has nothing to lose) */
		if (sq->db != NULL &&
		    (sqlite3_get_autocommit(sq->db) || sq->kept > 0))
			sq->broken = 1;
		sq->in_txn = 0;
		return;
	}
	if (sq->db != NULL && !sqlite3_get_autocommit(sq->db))
		sqlite3_exec(sq->db, "ROLLBACK", NULL, NULL, NULL);
	if (sq->in_txn && !sq->txn_write)
		sq->carried = sq->deadline;
	sq->in_txn = 0;
	turn_give(sq);
}

/*
 * As root (a PAM guard), refuse a state folder that another user could
 * write, sticky or not, the way ssh's StrictModes does: whoever can write
 * it can drop a -wal file beside the state file that SQLite would replay,
 * and unlock anyone.  Above it, every folder must be root's (or this
 * user's) and not writable by others unless sticky (/tmp), so no one can
 * move the state folder away either.  The file itself, and its -wal, -shm
 * and -journal files, are checked as they are opened (guarded_open()).
 */
static int
strict_modes(struct sq *sq)
{
	char dir[PATH_MAX], *slash;
	struct stat sb;
	int first = 1;

	if (geteuid() != 0)
		return 0;
	if (sq->path[0] != '/') {
		if (getcwd(dir, sizeof(dir)) == NULL) {
			set_err(sq, "cannot be checked: %s", strerror(errno));
			return -1;
		}
		slash = dir + strlen(dir);
		if (snprintf(slash, sizeof(dir) - (size_t)(slash - dir), "/%s",
			sq->path) >=
		    (int)(sizeof(dir) - (size_t)(slash - dir))) {
			set_err(sq, "cannot be checked: the path is too long");
			return -1;
		}
	} else
		snprintf(dir, sizeof(dir), "%s", sq->path);
	while ((slash = strrchr(dir, '/')) != NULL) {
		if (slash == dir)
			slash[1] = '\0';
		else
			*slash = '\0';
		if (lstat(dir, &sb) == 0 && S_ISLNK(sb.st_mode)) {
			/* the folders a link leads through are not on this
			 * walk: whoever may write one could swap the file */
			set_err(sq,
			    "is on a path through a symbolic link (%s); as "
			    "root "
			    "throttle refuses it, since it cannot check the "
			    "folders a link leads through: give the path "
			    "without links",
			    dir);
			return -1;
		}
		if (stat(dir, &sb) == -1) {
			if (errno != ENOENT) {
				set_err(sq, "cannot be checked: %s: %s", dir,
				    strerror(errno));
				return -1;
			}
			/* about to be created, 0700 */
		} else if ((sb.st_uid != 0 && sb.st_uid != geteuid()) ||
		    ((sb.st_mode & 022) &&
			(first || !(sb.st_mode & S_ISVTX)))) {
			set_err(sq,
			    "is in a folder others can write (%s: owner %ld, "
			    "mode %04o); as root throttle refuses it, as ssh's "
			    "StrictModes does: use a folder only root can "
			    "write, such as /var/lib/throttle",
			    dir, (long)sb.st_uid,
			    (unsigned)(sb.st_mode & 07777));
			return -1;
		}
		first = 0;
		if (strcmp(dir, "/") == 0)
			break;
	}
	return 0;
}

/*
 * Lock the folder of the state file while it is created, so two processes
 * never both turn a new file into a WAL database (each would hold a shared
 * lock while waiting for the other's exclusive one, until the timeout).
 * The folder, not the file: closing another descriptor of the database
 * would drop the POSIX locks SQLite holds on it.  The locked descriptor,
 * -2 if the folder cannot be opened (then creation goes unlocked), or -1.
 */
static int
lock_folder(struct sq *sq)
{
	char dir[PATH_MAX];
	char *slash;
	int64_t deadline = clock_monotonic() + sq->lock_timeout;
	int fd;

	snprintf(dir, sizeof(dir), "%s", sq->path);
	if ((slash = strrchr(dir, '/')) == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return -2;
	while (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		if ((errno != EWOULDBLOCK && errno != EINTR) ||
		    clock_monotonic() > deadline) {
			close(fd);
			set_err(sq,
			    "is being created by another process for longer "
			    "than the lock timeout; try again or raise "
			    "--lock-timeout");
			return -1;
		}
		clock_nap(2000);
	}
	return fd;
}

/* path as a URI for SQLite: file:PATH?immutable=1, PATH escaped. */
static int
immutable_uri(const char *path, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;
	const unsigned char *p;

	if (len < 5 + 13)
		return -1;
	n = (size_t)snprintf(buf, len, "file:");
	for (p = (const unsigned char *)path; *p != '\0'; p++) {
		if (n + 3 + 13 >= len)
			return -1;
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("/._-~", *p) != NULL)
			buf[n++] = (char)*p;
		else {
			buf[n++] = '%';
			buf[n++] = hex[*p >> 4];
			buf[n++] = hex[*p & 15];
		}
	}
	memcpy(buf + n, "?immutable=1", 13);
	return 0;
}

/* A cheap random number (xorshift64): a syscall would cost more. */
static uint64_t
busy_jitter(struct sq *sq)
{
	if (sq->jitter == 0)
		sq->jitter =
		    ((uint64_t)getpid() << 20 ^ (uint64_t)clock_monotonic()) *
			0x9e3779b97f4a7c15ULL |
		    1;
	sq->jitter ^= sq->jitter << 13;
	sq->jitter ^= sq->jitter >> 7;
	sq->jitter ^= sq->jitter << 17;
	return sq->jitter;
}

/*
 * SQLite's busy handler: wait for the lock until the deadline in short
 * polls (20us, doubling to 1ms, each jittered by up to half), so a waiter
 * sees the lock free within a poll of its release and waiters do not all
 * wake at once; SQLite's own handler sleeps 1, 2, 5 ... 100ms while the
 * holder keeps the lock for well under one.  1 to try again, 0 to give
 * up (SQLITE_BUSY: "locked for longer than the lock timeout").
 */
static int
busy_wait(void *arg, int count)
{
	struct sq *sq = arg;
	int64_t now = clock_monotonic(), step;
	struct timespec ts;

	if (now >= sq->deadline)
		return 0;
	/* 20us doubling to 1ms; to 10ms for a caller that went on
	 * without the turn (TURN_PASSED), which may wait long among many */
	step = count < 10 ? INT64_C(20) << count : 10000;
	if (step > (sq->turn_passed ? 10000 : 1000))
		step = sq->turn_passed ? 10000 : 1000;
	step = step / 2 + (int64_t)(busy_jitter(sq) % (uint64_t)step);
	if (step > sq->deadline - now)
		step = sq->deadline - now;
	ts.tv_sec = 0;
	ts.tv_nsec = (long)step * 1000;
	nanosleep(&ts, NULL);
	return 1;
}

/*
 * Waiting for the turn (promise 8).  Only the throttle binary takes it
 * (store_sqlite_single_thread() says so): one thread, and no other
 * connection to the file in the process whose POSIX locks closing turnfd
 * would drop.  Waiters block in the kernel, woken at the deadline by a
 * timer of their own (a real-time signal, unblocked for the wait only):
 * SIGALRM and the caller's alarm() are left alone.  (turn_ok is
 * declared above bounded_sleep().)
 */
static int sq_waiting(void *);

static void
on_turn_timer(int sig)
{
	(void)sig; /* only to interrupt the wait (EINTR) */
}

static int
turn_lock(int fd, int cmd, short type, off_t at, short *held)
{
	struct flock fl;

	memset(&fl, 0, sizeof(fl));
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	fl.l_start = at;
	fl.l_len = 1;
	if (fcntl(fd, cmd, &fl) == -1)
		return -1;
	if (held != NULL)
		*held = fl.l_type;
	return 0;
}

/* Poll for the turn as busy_wait() does: 0, or -1 with errno. */
static int
turn_poll(struct sq *sq)
{
	int count = 0, r;

	turn_lock(sq->turnfd, F_OFD_SETLK, F_RDLCK, WAITING_BYTE, NULL);
	while ((r = turn_lock(sq->turnfd, F_OFD_SETLK, F_WRLCK, TURN_BYTE,
		    NULL)) == -1 &&
	    (errno == EAGAIN || errno == EACCES))
		if (!busy_wait(sq, count++)) {
			errno = EAGAIN;
			break;
		}
	turn_lock(sq->turnfd, F_OFD_SETLK, F_UNLCK, WAITING_BYTE, NULL);
	return r;
}

/* Ring the timer in us microseconds, and every ms after, should that
 * ring before the wait it is to end has begun. */
static int
turn_arm(timer_t timer, int64_t us)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = (time_t)(us / 1000000);
	its.it_value.tv_nsec = (long)(us % 1000000) * 1000;
	its.it_interval.tv_nsec = 1000000;
	return timer_settime(timer, 0, &its, NULL);
}

/*
 * Wait in the kernel, in a line: the waiter at the front (FRONT_BYTE
 * held) for the turn, the others for the front.  The kernel queues a
 * blocked lock request behind the earlier one it conflicts with, and a
 * release wakes the first; if that one finds the lock taken again, those
 * behind it are woken too and line up anew (fs/locks.c).
 *
 * What the kernel does not order is who takes a lock between its release
 * and the woken waiter's running, which on a busy machine lasts a good
 * part of a millisecond.  So a caller that arrives while others wait
 * does not try the turn, and while the front stands free it waits for
 * the one woken for it, TURN_HANDOVER_US at most, then takes the front
 * itself (that one may be stopped; one stopped while it waits in the
 * line keeps its waiting lock, and costs each arrival the full wait).
 * Taking whatever was free put new callers before the waiters: half the
 * calls of 32 callers waited 1ms and a tenth 40ms or more; with a 2ms
 * bound, their p99 was still 4-5x their p50 (10ms: 2x), as the woken one
 * can wait that long for a CPU.  Polling for the front instead cost 35ms
 * of CPU a second per waiter.
 *
 * Every waiter wakes every TURN_TICK_US to try the turn, and once more
 * at its deadline: a front stopped (^Z, a debugger) holds its place, and
 * must not keep the others from a turn that is free.  A turn still held
 * at a tick is held by a process stopped, or itself waiting for another
 * program's lock (the sqlite3 shell's), which must not keep them from a
 * SQLite lock that is free either: the waiter goes on without the turn
 * (TURN_PASSED), to SQLite's lock, polled by busy_wait(), which keeps
 * each decision atomic.  Either way a wait longer than TURN_TICK_US
 * loses its place in the line.
 * 0, TURN_PASSED, or -1 with errno.
 */
#define TURN_TICK_US 1000000
#define TURN_HANDOVER_US 10000
#define TURN_PASSED 1 /* turn_wait(): go on without the turn */

/* Whether the lock on byte at is free of other holders: 1, 0, or -1. */
static int
turn_free(struct sq *sq, off_t at)
{
	short held;

	if (turn_lock(sq->turnfd, F_OFD_GETLK, F_WRLCK, at, &held) == -1)
		return -1;
	return held == F_UNLCK;
}

/* The n-th nap while a lock is handed over: 50us, doubling to 1ms, each
 * jittered by up to half, and not past the deadline. */
static void
turn_nap(struct sq *sq, int n)
{
	struct timespec ts;
	int64_t step = n < 5 ? INT64_C(50) << n : 1000,
		left = sq->deadline - clock_monotonic();

	step = step / 2 + (int64_t)(busy_jitter(sq) % (uint64_t)step);
	if (step > left)
		step = left > 0 ? left : 0;
	ts.tv_sec = 0;
	ts.tv_nsec = (long)step * 1000;
	nanosleep(&ts, NULL);
}

static int
turn_wait(struct sq *sq, timer_t timer, int queue)
{
	int front = 0, waiting = 0, naps = 0, r;
	int64_t left, handover = clock_monotonic() + TURN_HANDOVER_US;

	for (;;) {
		if ((left = sq->deadline - clock_monotonic()) <= 0) {
			/* one last try: the one in front may be stopped */
			r = turn_lock(sq->turnfd, F_OFD_SETLK, F_WRLCK,
			    TURN_BYTE, NULL);
			if (r == -1 && errno == EACCES)
				errno = EAGAIN;
			break;
		}
		if (!front && !queue) {
			if ((r = turn_lock(sq->turnfd, F_OFD_SETLK, F_WRLCK,
				 TURN_BYTE, NULL)) == 0)
				break;
			if (errno != EAGAIN && errno != EACCES)
				break;
			if (turn_lock(sq->turnfd, F_OFD_SETLK, F_WRLCK,
				FRONT_BYTE, NULL) == 0)
				front = 1;
			else if (errno != EAGAIN && errno != EACCES) {
				r = -1;
				break;
			}
		} else if (!front && !waiting &&
		    turn_free(sq, FRONT_BYTE) == 1) {
			/* the front stands free: while others wait, it is
			 * being handed to the one woken for it; else try */
			if (sq_waiting(sq) == 1 && clock_monotonic() < handover)
				turn_nap(sq, naps++);
			else
				queue = 0;
			continue;
		}
		queue = 1; /* from now on, try only when the timer says */
		if (!waiting)
			waiting = turn_lock(sq->turnfd, F_OFD_SETLK, F_RDLCK,
				      WAITING_BYTE, NULL) == 0;
		if (turn_arm(timer,
			left < TURN_TICK_US ? left : TURN_TICK_US) == -1) {
			r = -1;
			break;
		}
		r = turn_lock(sq->turnfd, F_OFD_SETLKW, F_WRLCK,
		    front ? TURN_BYTE : FRONT_BYTE, NULL);
		if (r == 0 && front)
			break;
		if (r == 0)
			front = 1;
		else if (errno != EINTR)
			break;
		else if (sq->deadline - clock_monotonic() > 0) {
			/* the timer's tick: a turn held this long is held by
			 * a process stopped (^Z, a debugger) or waiting for
			 * another program's lock itself; go on without it, to
			 * SQLite's lock, which keeps the decision atomic */
			if ((r = turn_lock(sq->turnfd, F_OFD_SETLK, F_WRLCK,
				 TURN_BYTE, NULL)) == -1)
				r = TURN_PASSED;
			break;
		}
	}
	/* no longer waiting before the front is free for the next: those
	 * who arrive meanwhile see a handover only if one is due */
	if (waiting)
		turn_lock(sq->turnfd, F_OFD_SETLK, F_UNLCK, WAITING_BYTE, NULL);
	if (front)
		turn_lock(sq->turnfd, F_OFD_SETLK, F_UNLCK, FRONT_BYTE, NULL);
	return r;
}

/*
 * Wait for the turn until the deadline, in the kernel, woken by a timer
 * of the wait's own (a real-time signal, unblocked for the wait only):
 * SIGALRM and the caller's alarm() are left alone.  Where no timer can
 * be had, poll.  0, or -1 with errno.
 */
static int
turn_queue(struct sq *sq, int queue)
{
	struct sigaction sa, old;
	struct sigevent ev;
	sigset_t set, oldset;
	timer_t timer;
	int sig = SIGRTMIN + 2, r;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_turn_timer; /* no SA_RESTART: EINTR */
	sigemptyset(&sa.sa_mask);
	memset(&ev, 0, sizeof(ev));
	ev.sigev_notify = SIGEV_SIGNAL;
	ev.sigev_signo = sig;
	if (sigaction(sig, &sa, &old) == -1)
		return turn_poll(sq);
	if (timer_create(CLOCK_MONOTONIC, &ev, &timer) == -1) {
		sigaction(sig, &old, NULL);
		return turn_poll(sq);
	}
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, &oldset);
	r = turn_wait(sq, timer, queue);
	/* a signal of the timer's still pending is taken here, unblocked */
	timer_delete(timer);
	sigprocmask(SIG_SETMASK, &oldset, NULL);
	sigaction(sig, &old, NULL);
	return r;
}

/*
 * Take the writers' turn before BEGIN IMMEDIATE, waiting until the
 * deadline: 0, or -1 (locked for longer than the lock timeout).  Where
 * the kernel has no such locks, go on with SQLite's lock alone.
 */
static int
turn_take(struct sq *sq)
{
	int queue, r;

	sq->turn_passed = 0;
	if (sq->turnfd < 0 || sq->has_turn)
		return 0;
	/* while others wait, go to the end of the line */
	if ((queue = sq_waiting(sq)) == -1)
		return 0;
	if (!queue &&
	    turn_lock(sq->turnfd, F_OFD_SETLK, F_WRLCK, TURN_BYTE, NULL) == 0) {
		sq->has_turn = 1;
		return 0;
	}
	if (!queue && errno != EAGAIN && errno != EACCES)
		return 0;
	r = turn_queue(sq, queue);
	if (r == 0) {
		sq->has_turn = 1;
		return 0;
	}
	if (r == TURN_PASSED) {
		sq->turn_passed = 1;
		return 0; /* SQLite's lock alone, polled (busy_wait()) */
	}
	if (errno != EAGAIN && errno != EACCES)
		return 0;
	locked_err(sq);
	return -1;
}

static void
turn_give(struct sq *sq)
{
	if (sq->has_turn) {
		turn_lock(sq->turnfd, F_OFD_SETLK, F_UNLCK, TURN_BYTE, NULL);
		/* the one woken may be queued on this CPU behind this
		 * process, which has its closing and exit still to run */
		if (sq_waiting(sq) == 1)
			sched_yield();
	}
	sq->has_turn = 0;
}

/*
 * The state file SQLite opened, opened again for the turn (promise 8), or
 * -1: not if another file has taken its place at the path meanwhile.
 */
static int
open_turn(struct sq *sq)
{
	struct stat sb;
	int fd;

	if (guard.dev == 0 ||
	    (fd = open(sq->path,
		 O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)) ==
		-1)
		return -1;
	if (fstat(fd, &sb) == -1 || !S_ISREG(sb.st_mode) ||
	    sb.st_dev != guard.dev || sb.st_ino != guard.ino) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Open the file with SQLite, as readonly or read-write says. */
static int pragma_int(struct sq *, const char *, int64_t *);

/*
 * A database with no application_id that has had a schema (header_problem()
 * lets it through, as it may be an empty one): refused as soon as it is
 * open if it has tables, so a batch is refused before any request, as a
 * file with another program's id is.  Nonzero (the error set) if refused.
 */
static int
foreign_tables(struct sq *sq)
{
	int64_t tables = 0;

	if (pragma_int(sq, "SELECT count(*) FROM sqlite_schema", &tables) == -1)
		return -1;
	if (tables == 0)
		return 0;
	sqlite3_db_config(sq->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	foreign_err(sq, 0);
	return 1;
}

/* The unix VFS's MAX_PATHNAME: a longer absolute path cannot be opened. */
#define SQLITE_PATH_MAX 512

/* Nonzero if SQLite could not open path, as an absolute path too long:
 * said before any folder is made for it. */
static int
too_long_for_sqlite(const char *path)
{
	char cwd[PATH_MAX];
	size_t n = strlen(path);

	if (path[0] != '/' && getcwd(cwd, sizeof(cwd)) != NULL)
		n += strlen(cwd) + 1;
	return n > SQLITE_PATH_MAX;
}

/*
 * The path SQLite is given: its folder's symbolic links resolved, the
 * file's own name as given.  SQLite, told not to follow a link to the
 * file, refuses a path with a link anywhere in it (a home folder or
 * /var/lib that is a link to another disk); the file itself, and its
 * -wal and -shm, are still refused as links, by SQLite and guarded_open().
 * Root's path has no link in its folders (strict_modes()), so it is
 * given as it is.  0, or -1 with the error set.
 */
static int
sqlite_path(struct sq *sq, char *buf, size_t len)
{
	const char *base = strrchr(sq->path, '/');
	char dir[PATH_MAX], real[PATH_MAX];

	/* a relative path as ./PATH: never a name SQLite reads as one of
	 * its own (":memory:", a "file:" URI; store_check_spec() refuses
	 * those as given, and this keeps any other from slipping by) */
	if (snprintf(buf, len, "%s%s", sq->path[0] == '/' ? "" : "./",
		sq->path) >= (int)len) {
		set_err(sq, "cannot be opened: the path is too long");
		return -1;
	}
	dir_of(sq->path, dir, sizeof(dir));
	if (geteuid() == 0 || realpath(dir, real) == NULL)
		return 0; /* no folder: SQLite says so */
	if (snprintf(buf, len, "%s/%s", strcmp(real, "/") == 0 ? "" : real,
		base != NULL ? base + 1 : sq->path) >= (int)len ||
	    too_long_for_sqlite(buf)) {
		set_err(sq,
		    "the path, its links resolved (%.200s...), is longer "
		    "than the %d bytes SQLite takes; give a shorter one",
		    real, SQLITE_PATH_MAX);
		return -1;
	}
	return 0;
}

static int
sq_connect(struct sq *sq, int create, int immutable)
{
	char uri[PATH_MAX * 3 + 32], path[PATH_MAX + 1];
	const char *stray;
	int flags =
	    SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;

	flags |= sq->readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
	if (create)
		flags |= SQLITE_OPEN_CREATE;
	if (sqlite_path(sq, path, sizeof(path)) == -1)
		return -1;
	if (immutable) {
		if (immutable_uri(path, uri, sizeof(uri)) == -1) {
			set_err(sq, "cannot be read: the path is too long");
			return -1;
		}
		flags |= SQLITE_OPEN_URI;
	}
#ifdef THROTTLE_FAULT
	faultvfs_register();
#endif
	if (create && (stray = stray_beside(path)) != NULL) {
		set_err(sq, "%s", stray);
		return -1;
	}
	guard_begin(path);
	if (sqlite3_open_v2(immutable ? uri : path, &sq->db, flags, NULL) !=
	    SQLITE_OK) {
		if (sq->db == NULL)
			set_err(sq, "cannot be opened: out of memory");
		else
			sql_err(sq, "open");
		return -1;
	}
	if (!sq->readonly && !immutable) {
		int one = 1;

		/* before any statement: a connection closed on an error
		 * (a header SQLite finds corrupt at the first PRAGMA) must
		 * not checkpoint the -wal into the file and delete it, as
		 * SQLite's close does by default */
		sqlite3_file_control(sq->db, "main", SQLITE_FCNTL_PERSIST_WAL,
		    &one);
		sqlite3_db_config(sq->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1,
		    NULL);
	}
	sq->page_size = create ? NEW_PAGE_SIZE : guard.page_size;
	sq->deadline = clock_monotonic() + sq->lock_timeout;
	napper = sq;
	sqlite3_busy_handler(sq->db, busy_wait, sq);
	/* In WAL mode, NORMAL syncs at checkpoints: durable to the last few
	 * commits on power loss, never corrupt (promise 2 above).  Every
	 * b-tree cell is checked as it is read, so a page a decision reads
	 * that is corrupt stops it before it writes (promise 8). */
	if ((!sq->readonly &&
		exec_sql(sq, "PRAGMA synchronous=NORMAL") == -1) ||
	    exec_sql(sq, "PRAGMA cell_size_check=ON") == -1)
		return -1;
	if (!create && !immutable && guard.app == 0 && guard.cookie != 0 &&
	    foreign_tables(sq) != 0)
		return -1;
	/* the file SQLite has just opened (or made), the same one; if it
	 * cannot be opened again, SQLite's lock alone orders the writers */
	if (!sq->readonly && !immutable && turn_ok)
		sq->turnfd = open_turn(sq);
	return 0;
}

/*
 * Before a writer closes: once the WAL has grown past WAL_FRAMES, checkpoint
 * it into the file and truncate it, without waiting for the lock (promise
 * 2), and only if no other writer has the turn or waits for it: a batch
 * at work checkpoints its own WAL (SQLite's at 1000 pages), and a single
 * call beside it copying the batch's frames cost the batch a third of its
 * throughput.
 */
static void
checkpoint_now_and_then(struct sq *sq)
{
	char wal[PATH_MAX + 8];
	struct stat sb;

	if (sq->db == NULL || sq->readonly || sq->lockfd >= 0 || sq->in_txn ||
	    !sq->ours)
		return;
	snprintf(wal, sizeof(wal), "%s-wal", sq->path);
	if (lstat(wal, &sb) == -1 ||
	    sb.st_size <
		WAL_SIZE(WAL_FRAMES, sq->page_size != 0 ? sq->page_size : 4096))
		return;
	if (sq->turnfd >= 0) {
		if (sq_waiting(sq) == 1 ||
		    turn_lock(sq->turnfd, F_OFD_SETLK, F_WRLCK, TURN_BYTE,
			NULL) == -1)
			return;
		sq->has_turn = 1;
		if (sq_waiting(sq) == 1) {
			turn_give(sq);
			return;
		}
	}
	sq->deadline = 0; /* busy: leave it to the next close */
	sqlite3_exec(sq->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL,
	    NULL);
	turn_give(sq);
}

/*
 * For the throttle binary, one thread in one process: SQLite without its
 * mutexes and memory statistics, which cost about a tenth of a decision,
 * and without the 20 pages its page cache sets up at once: a decision
 * reads a handful, and each page the process touches for the first time
 * costs a page fault (a sixth of a consume's CPU time, measured).  Not
 * for the PAM module, whose host process may use SQLite otherwise.
 * Before any other SQLite call.
 */
void
store_sqlite_single_thread(void)
{
	sqlite3_config(SQLITE_CONFIG_SINGLETHREAD);
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	sqlite3_config(SQLITE_CONFIG_PAGECACHE, NULL, 0, 0);
	turn_ok = 1; /* promise 8: see turn_ok */
}

/*
 * SQLite's memory from a pool (pool.c), for a command that ends soon: not
 * for batch, gc and verify (cmd_main() asks for it only for the others),
 * not for the PAM module, and not under valgrind's memcheck, which finds
 * a block leaked only among malloc()'s (AddressSanitizer is told of the
 * pool's blocks: pool.c).  Once, before any other SQLite call but
 * sqlite3_config().
 */
static struct pool pool;
static char pool_area[256 * 1024] __attribute__((aligned(16)));

static void *
pool_xmalloc(int n)
{
	return pool_alloc(&pool, (size_t)n);
}

static void
pool_xfree(void *p)
{
	pool_free(&pool, p);
}

static void *
pool_xrealloc(void *p, int n)
{
	return pool_realloc(&pool, p, (size_t)n);
}

static int
pool_xsize(void *p)
{
	return (int)pool_size(p);
}

static int
pool_xroundup(int n)
{
	return (int)pool_roundup((size_t)n);
}

static int
pool_xinit(void *arg)
{
	(void)arg;
	return SQLITE_OK;
}

static void
pool_xshutdown(void *arg)
{
	(void)arg;
}

void
store_sqlite_pool(void)
{
	static const sqlite3_mem_methods methods = { pool_xmalloc, pool_xfree,
		pool_xrealloc, pool_xsize, pool_xroundup, pool_xinit,
		pool_xshutdown, NULL };
	const char *preload = getenv("LD_PRELOAD");
	static int asked;

	/* memcheck's own library is preloaded into what it checks (not so
	 * callgrind's, which counts a call's instructions as they are) */
	if (asked ||
	    (preload != NULL && strstr(preload, "vgpreload_memcheck") != NULL))
		return;
	asked = 1;
	/* SQLite takes no block before it starts, and refuses once it has */
	if (sqlite3_config(SQLITE_CONFIG_MALLOC, &methods) == SQLITE_OK)
		pool_init(&pool, pool_area, sizeof(pool_area));
}

/* Close the SQLite connection (the struct stays). */
static void
sq_disconnect(struct sq *sq)
{
	abandon(sq);
	checkpoint_now_and_then(sq);
	unprep_all(sq);
	sqlite3_close(sq->db);
	sq->db = NULL;
	if (napper == sq)
		napper = NULL;
	guard_end();
	if (sq->lockfd >= 0)
		close(sq->lockfd);
	sq->lockfd = -1;
	if (sq->turnfd >= 0)
		close(sq->turnfd); /* after SQLite's: see struct sq */
	sq->turnfd = -1;
	sq->has_turn = 0;
}

static void
sq_close(void *p)
{
	struct sq *sq = p;

	if (sq == NULL)
		return;
	sq_disconnect(sq);
	free(sq);
}

static int
sq_unavailable(void *p)
{
	(void)p;
	return 1;
}

static void *
sq_open(const char *path, int64_t lock_timeout, int oflags, char *err,
    size_t errlen, int *unavailable)
{
	struct sq *sq;
	struct stat sb;
	const char *base;
	int fresh, folder = -1;

	/* on a file every error may be mapped by --on-error, as before */
	*unavailable = 1;
	sq = xcalloc(1, sizeof(*sq));
	sq->err = err;
	sq->errlen = errlen;
	sq->lock_timeout = lock_timeout;
	sq->readonly = (oflags & STORE_READ) != 0;
	sq->existing = (oflags & STORE_EXISTING) != 0;
	sq->lockfd = sq->turnfd = -1;
	if (snprintf(sq->path, sizeof(sq->path), "%s", path) >=
		(int)sizeof(sq->path) ||
	    path[0] == '\0') {
		if (path[0] == '\0')
			snprintf(err, errlen, "the state file path is empty");
		else
			snprintf(err, errlen,
			    "the state file path is too long (%zu bytes, "
			    "more than %zu): %.200s...",
			    strlen(path), sizeof(sq->path) - 1, path);
		free(sq);
		return NULL;
	}
	if (too_long_for_sqlite(path)) {
		set_err(sq,
		    "the path is longer than the %d bytes SQLite takes "
		    "(as an absolute path); give a shorter one",
		    SQLITE_PATH_MAX);
		free(sq);
		return NULL;
	}
	base = strrchr(path, '/') != NULL ? strrchr(path, '/') + 1 : path;
	if (strlen(base) + strlen("-journal") > NAME_MAX) {
		/* SQLite could make the file, never its -journal: an empty
		 * file left behind that no call could open */
		set_err(sq,
		    "the file name is %zu bytes, too long to leave room for "
		    "the -journal, -wal and -shm files beside it (at most "
		    "%d); give a shorter one",
		    strlen(base), NAME_MAX - (int)strlen("-journal"));
		free(sq);
		return NULL;
	}
again:
	fresh = 0;
	if (lstat(path, &sb) == -1) {
		if (errno == ENOTDIR) {
			not_a_folder(sq);
			goto fail;
		}
		if (errno != ENOENT) {
			set_err(sq, "cannot be checked: %s", strerror(errno));
			goto fail;
		}
		if (sq->readonly || (oflags & STORE_EXISTING)) {
			sq->missing = 1; /* nothing to read, nothing made */
			return sq;
		}
		if (strict_modes(sq) == -1 || make_parents(sq) == -1 ||
		    folder_writable(sq) == -1)
			goto fail;
		fresh = 1;
	} else if (S_ISLNK(sb.st_mode)) {
		set_err(sq,
		    "is a symbolic link; give the path of the state "
		    "file itself");
		goto fail;
	} else if (!S_ISREG(sb.st_mode)) {
		set_err(sq,
		    "is not a regular file; give the path of a "
		    "throttle state file");
		goto fail;
	} else if (strict_modes(sq) == -1)
		goto fail;
	else
		fresh = sb.st_size == 0;
	if (fresh && (sq->readonly || (oflags & STORE_EXISTING))) {
		sq->missing = 2; /* an empty file: as none, and left so */
		return sq;
	}
	if (fresh && folder == -1) {
		/* take the folder's lock and look again: another process may
		 * have created the file meanwhile */
		if ((folder = lock_folder(sq)) == -1)
			goto fail;
		goto again;
	}
	if ((!sq->readonly && !fresh && may_write(sq) == -1) ||
	    sq_connect(sq, fresh, 0) == -1)
		goto fail;
	if (fresh &&
	    (exec_sql(sq, "PRAGMA page_size=" STR(NEW_PAGE_SIZE)) == -1 ||
		exec_sql(sq, "PRAGMA journal_mode=WAL") == -1 ||
		sq_begin(sq, 1) == -1 || sq_commit(sq) == -1))
		goto fail;
	if (folder >= 0)
		close(folder);
	return sq;
fail:
	if (folder >= 0)
		close(folder);
	sq_disconnect(sq);
	free(sq);
	return NULL;
}

/*
 * A reader that may not create the -shm file SQLite reads a WAL file
 * through (another user's state file, a read-only file system) reads the
 * file itself, if it has no WAL to replay: immutable, under a read lock
 * on SQLite's shared bytes, which keeps a writer's closing checkpoint from
 * rewriting pages under it.  A writer that starts meanwhile writes to a
 * new WAL, so what is read is the state as it stood when the read began.
 */
static int
reopen_immutable(struct sq *sq)
{
	/* SQLite's lock bytes: PENDING_BYTE + 2, SHARED_SIZE of them */
	struct flock fl = { .l_type = F_RDLCK,
		.l_whence = SEEK_SET,
		.l_start = 0x40000002,
		.l_len = 510 };
	int64_t deadline = clock_monotonic() + sq->lock_timeout;
	char wal[PATH_MAX + 8];
	struct stat sb;
	int fd;

	snprintf(wal, sizeof(wal), "%s-wal", sq->path);
	if (lstat(wal, &sb) == 0 && sb.st_size > 0) {
		if (readonly_fs(sq))
			set_err(sq,
			    "cannot be read here: its latest decisions are in "
			    "its -wal file, read only through a -shm file "
			    "beside it, which cannot be made on a file system "
			    "mounted read-only; read it where it can be "
			    "written, or checkpoint it there first");
		else
			set_err(sq,
			    "cannot be read by this user: its latest decisions "
			    "are in its -wal file, which only a user who may "
			    "write the -shm file beside it can read");
		return -1;
	}
	sq_disconnect(sq);
	if ((fd = open(sq->path,
		 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) == -1) {
		set_err(sq, "cannot be read: %s", strerror(errno));
		return -1;
	}
	while (fcntl(fd, F_SETLK, &fl) == -1) {
		if ((errno != EAGAIN && errno != EACCES && errno != EINTR) ||
		    clock_monotonic() > deadline) {
			close(fd);
			set_err(sq,
			    "is locked by another process for longer than "
			    "the lock timeout; try again or raise "
			    "--lock-timeout");
			return -1;
		}
		clock_nap(1000);
	}
	if (sq_connect(sq, 0, 1) == -1) {
		close(fd);
		return -1;
	}
	sq->lockfd = fd;
	return 0;
}

/*
 * A reader found a file an older throttle wrote: upgrade it with a
 * connection that may write, then read on.  A user who may not write it
 * is told what to do.
 */
static int
upgrade_for_reader(struct sq *sq)
{
	sq_disconnect(sq);
	sq->readonly = 0;
	if (sq_connect(sq, 0, 0) == -1 || sq_begin(sq, 1) == -1 ||
	    sq_commit(sq) == -1) {
		set_err(sq,
		    "was written by an older throttle and must be upgraded "
		    "before it can be read; run a command that writes it "
		    "(such as throttle gc) as a user who may write it");
		sq_disconnect(sq);
		sq->readonly = 1;
		return -1;
	}
	sq_disconnect(sq);
	sq->readonly = 1;
	return sq_connect(sq, 0, 0);
}

/* Run a statement that returns one integer. */
static int
pragma_int(struct sq *sq, const char *sql, int64_t *v)
{
	sqlite3_stmt *stmt;

	if ((stmt = prep(sq, sql, "reading the schema version")) == NULL)
		return -1;
	if (sqlite3_step(stmt) != SQLITE_ROW) {
		sql_err(sq, "reading the schema version");
		unprep(sq, stmt);
		return -1;
	}
	*v = sqlite3_column_int64(stmt, 0);
	unprep(sq, stmt);
	return 0;
}

/*
 * Check, inside the transaction, that the file is ours and current; create
 * the schema in an empty file.
 */
static int
verify(struct sq *sq, int write)
{
	int64_t app, version, tables = 0;
	char sql[64];
	int i;

	/* plain pragmas: the pragma_* table functions cost a virtual table
	 * each, which on this path is most of a decision's work */
	if (pragma_int(sq, "PRAGMA application_id", &app) == -1 ||
	    pragma_int(sq, "PRAGMA user_version", &version) == -1 ||
	    (app == 0 && version == 0 &&
		pragma_int(sq, "SELECT count(*) FROM sqlite_schema", &tables) ==
		    -1))
		return -1;

	if (app == 0 && version == 0 && tables == 0) {
		if (!write || sq->existing) {
			/* nothing to read or give back: left as it is */
			sq->empty = sq->found_empty = 1;
			return 0;
		}
		sq->created = 1;
		if (sqlite3_exec(sq->db, CURRENT_SCHEMA, NULL, NULL, NULL) !=
		    SQLITE_OK) {
			sql_err(sq, "creating the schema");
			return -1;
		}
		version = SCHEMA_VERSION;
	} else if (app != APPLICATION_ID) {
		sqlite3_db_config(sq->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1,
		    NULL);
		if (app == 0 && version != 0)
			/* no tables, perhaps, but another's version */
			set_err(sq,
			    "is a SQLite database of another program "
			    "(user_version %lld, and no application_id of "
			    "throttle's), not a throttle state file; it was "
			    "left untouched",
			    (long long)version);
		else
			foreign_err(sq, app);
		return -1;
	} else if (version > SCHEMA_VERSION) {
		set_err(sq,
		    "was written by a newer version of throttle "
		    "(schema %lld; this one knows %d); upgrade throttle",
		    (long long)version, SCHEMA_VERSION);
		return -1;
	} else if (version == SCHEMA_VERSION)
		return 0;
	else if (!write)
		return NEEDS_UPGRADE;
	/* never carry a damaged file's records into a new schema */
	if (check_file(sq, 1, 0) == -1)
		return -1;
	for (i = (int)version; i < SCHEMA_VERSION; i++)
		if (sqlite3_exec(sq->db, migrations[i], NULL, NULL, NULL) !=
		    SQLITE_OK) {
			sql_err(sq, "upgrading the schema");
			return -1;
		}
	snprintf(sql, sizeof(sql), "PRAGMA application_id=%d", APPLICATION_ID);
	if (sqlite3_exec(sq->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
		sql_err(sq, "upgrading the schema");
		return -1;
	}
	snprintf(sql, sizeof(sql), "PRAGMA user_version=%d", SCHEMA_VERSION);
	if (sqlite3_exec(sq->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
		sql_err(sq, "upgrading the schema");
		return -1;
	}
	return 0;
}

static int
sq_begin(void *p, int write)
{
	struct sq *sq = p;
	int rc;

	if (sq->group) {
		/* the group's BEGIN IMMEDIATE took the lock and checked the
		 * file; a request only counts what it changes (a group that
		 * began to read takes no write: batch never asks it to) */
		if (sq->missing) {
			/* no file: a store with no keys, in which a request
			 * that makes no file (reset, release, renew) finds
			 * nothing to write */
			sq->empty = 1;
			sq->in_txn = 1;
			return 0;
		}
		if (write && !sq->txn_write) {
			set_err(sq,
			    "internal error: a write in a batch's read group");
			return -1;
		}
		if (sq->broken || sqlite3_get_autocommit(sq->db)) {
			sq->broken = 1;
			set_err(sq,
			    "the batch's transaction was lost to an "
			    "earlier error");
			return -1;
		}
		sq->kept = 0;
		sq->in_txn = 1;
		return 0;
	}
	sq->empty = sq->created = sq->guarded = sq->found_empty = 0;
	if (write && sq->readonly) {
		set_err(sq, "is open to read only; nothing was written");
		return -1;
	}
	if (sq->missing) {
		sq->empty = 1; /* no file: a store with no keys */
		sq->in_txn = 1;
		return 0;
	}
	/* an earlier transaction's failure closed it (a reader that could
	 * not upgrade an older file): open it again, to meet that error
	 * again rather than SQLite's on no connection */
	if (sq->db == NULL && sq_connect(sq, 0, 0) == -1)
		return -1;
	if (write && sqlite3_db_readonly(sq->db, "main") == 1) {
		if (readonly_fs(sq)) {
			readonly_fs_err(sq);
			return -1;
		}
		set_err(sq,
		    "cannot be written (permission denied); check the "
		    "permissions of the file and its folder");
		return -1;
	}
	sq->deadline = sq->carried != 0 ? sq->carried
					: clock_monotonic() + sq->lock_timeout;
	sq->carried = 0;
	sq->txn_write = write;
	if (write && turn_take(sq) == -1)
		return -1;
	if (exec_sql(sq, write ? "BEGIN IMMEDIATE" : "BEGIN") == -1) {
		turn_give(sq);
		return -1;
	}
	sq->in_txn = 1;
	switch ((rc = verify(sq, write))) {
	case 0:
		sq->ours = 1;
		return 0;
	case NEEDS_UPGRADE:
		/* A reader found an older file: upgrade it in a write
		 * transaction of its own, then read as asked. */
		abandon(sq);
		if (sq->readonly) {
			if (upgrade_for_reader(sq) == -1)
				return -1;
		} else if (sq_begin(sq, 1) == -1 || sq_commit(sq) == -1)
			return -1;
		return sq_begin(sq, 0);
	default:
		rc = sqlite3_extended_errcode(sq->db) & 0xff;
		abandon(sq);
		if (sq->readonly && sq->lockfd < 0 && !sq->guarded &&
		    (rc == SQLITE_READONLY || rc == SQLITE_CANTOPEN)) {
			/* no -shm this user may make: read the file itself */
			if (reopen_immutable(sq) == -1)
				return -1;
			return sq_begin(sq, 0);
		}
		return -1;
	}
}

/*
 * The number of parameter name of stmt, as SQL spells it (":key"), for
 * binding a value to it; a name the statement does not have is a mistake
 * in this file, reported as one rather than left unbound (0).  name is a
 * string literal: a kept statement remembers its numbers by the pointer.
 */
static int
param(struct sq *sq, sqlite3_stmt *stmt, const char *name)
{
	/* a kept statement's numbers are looked up once, not by strlen and
	 * strncmp for every bind (seven a consume, a batch's millions);
	 * its binds follow its prep() */
	struct cached *c = sq->prepped != NULL && sq->prepped->stmt == stmt
	    ? sq->prepped
	    : NULL;
	int i;

	for (i = 0; c != NULL && i < c->nnames; i++)
		if (c->names[i] == name)
			return i + 1;
	i = sqlite3_bind_parameter_index(stmt, name);
	if (c != NULL && i == c->nnames + 1 && i <= STMT_PARAMS)
		c->names[c->nnames++] = name;
	if (i == 0)
		set_err(sq, "internal error: no parameter %s in: %s", name,
		    sqlite3_sql(stmt));
	return i;
}

static int
bind_blob(struct sq *sq, sqlite3_stmt *stmt, const char *name, const void *p,
    size_t n)
{
	int i = param(sq, stmt, name);

	/* "" must bind as an empty blob, not NULL */
	return i == 0 ? -1
	    : sqlite3_bind_blob(stmt, i, n ? p : "", (int)n, SQLITE_STATIC) ==
		SQLITE_OK
	    ? 0
	    : -1;
}

static int
bind_i64(struct sq *sq, sqlite3_stmt *stmt, const char *name, int64_t v)
{
	int i = param(sq, stmt, name);

	return i == 0                                     ? -1
	    : sqlite3_bind_int64(stmt, i, v) == SQLITE_OK ? 0
							  : -1;
}

/* A blob column as bytes (NULL as none). */
static const char *
column(sqlite3_stmt *stmt, int col, size_t *len)
{
	const char *p = sqlite3_column_blob(stmt, col);

	*len = (size_t)sqlite3_column_bytes(stmt, col);
	return p != NULL ? p : "";
}

/* The key's records of the kinds in mask, in kind and id order. */
static int
sq_get(void *p, const char *key, size_t keylen, unsigned mask, store_rec_fn fn,
    void *arg)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;
	const char *id, *data;
	size_t idlen, len;
	int rc, ret = 0;

	if (sq->empty)
		return 0;
	if ((stmt = prep(sq,
		 "SELECT kind, id, data FROM rec WHERE key = :key"
		 " AND (:mask >> kind) & 1 ORDER BY kind, id",
		 "reading a key")) == NULL)
		return -1;
	if (bind_blob(sq, stmt, ":key", key, keylen) == -1 ||
	    bind_i64(sq, stmt, ":mask", mask) == -1) {
		unprep(sq, stmt);
		return -1;
	}
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		id = column(stmt, 1, &idlen);
		data = column(stmt, 2, &len);
		if ((ret = fn(arg, sqlite3_column_int(stmt, 0), id, idlen, data,
			 len)) != 0)
			break;
	}
	return rows_done(sq, stmt, rc, ret, "reading a key");
}

/* Save a record, replacing the one of the same key, kind and id. */
static int
sq_put(void *p, const char *key, size_t keylen, int kind, const char *id,
    size_t idlen, const char *data, size_t len, int64_t expires)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;

	if ((stmt = prep(sq,
		 "INSERT OR REPLACE INTO rec (key, kind, id, data, expires)"
		 " VALUES (:key, :kind, :id, :data, :expires)",
		 "saving a key")) == NULL)
		return -1;
	if (bind_blob(sq, stmt, ":key", key, keylen) == -1 ||
	    bind_i64(sq, stmt, ":kind", kind) == -1 ||
	    bind_blob(sq, stmt, ":id", id, idlen) == -1 ||
	    bind_blob(sq, stmt, ":data", data, len) == -1 ||
	    bind_i64(sq, stmt, ":expires", expires) == -1) {
		unprep(sq, stmt);
		return -1;
	}
	return done(sq, stmt, "saving a key");
}

/* Delete the key's records of the kinds in mask (or the one with id). */
static int
sq_del(void *p, const char *key, size_t keylen, unsigned mask, const char *id,
    size_t idlen)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;

	if (sq->empty)
		return 0;
	if ((stmt = prep(sq,
		 id != NULL ? "DELETE FROM rec WHERE key = :key"
			      " AND (:mask >> kind) & 1 AND id = :id"
			    : "DELETE FROM rec WHERE key = :key"
			      " AND (:mask >> kind) & 1",
		 "forgetting a key")) == NULL)
		return -1;
	if (bind_blob(sq, stmt, ":key", key, keylen) == -1 ||
	    bind_i64(sq, stmt, ":mask", mask) == -1 ||
	    (id != NULL && bind_blob(sq, stmt, ":id", id, idlen) == -1)) {
		unprep(sq, stmt);
		return -1;
	}
	if (done(sq, stmt, "forgetting a key") == -1)
		return -1;
	return sqlite3_changes(sq->db) > 0;
}

/* Every record of the kinds in mask, in key order. */
static int
sq_scan(void *p, unsigned mask, store_scan_fn fn, void *arg)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;
	const char *key, *id, *data;
	size_t keylen, idlen, len;
	int rc, ret = 0;

	if (sq->empty)
		return 0;
	if ((stmt = prep(sq,
		 "SELECT key, kind, id, data FROM rec WHERE (:mask >> kind) & 1"
		 " ORDER BY key, kind, id",
		 "listing keys")) == NULL)
		return -1;
	if (bind_i64(sq, stmt, ":mask", mask) == -1) {
		unprep(sq, stmt);
		return -1;
	}
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		key = column(stmt, 0, &keylen);
		id = column(stmt, 2, &idlen);
		data = column(stmt, 3, &len);
		if ((ret = fn(arg, key, keylen, sqlite3_column_int(stmt, 1), id,
			 idlen, data, len)) != 0)
			break;
	}
	return rows_done(sq, stmt, rc, ret, "listing keys");
}

/*
 * Forget the records of the kinds in mask whose expiry has passed: all of
 * them (limit 0, counted by kind), or up to limit of those among the
 * TIDY_LOOK * limit records at or after a random place, which a write can
 * afford.  The place is the key near (one in use) cut at a random length,
 * then random bytes: a place drawn from random bytes alone lands after a
 * gap in the keys (before "login:" ...) far more often than inside a run
 * of them, and keys in use there (not at rest) hid every key behind them
 * from it for good.  Near keys in use, over many writes it reaches every
 * key.
 */
#define TIDY_LOOK 4

static int
sq_tidy(void *p, unsigned mask, int64_t now, int64_t limit, const char *near,
    size_t nearlen, int64_t *counts)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;
	unsigned char from[KEY_MAX + 8];
	size_t cut;
	uint64_t r;
	int kind;

	if (sq->empty)
		return 0;
	if (limit > 0) {
		if ((stmt = prep(sq,
			 "DELETE FROM rec WHERE (key, kind, id) IN"
			 " (SELECT key, kind, id FROM"
			 " (SELECT key, kind, id, expires FROM rec"
			 " WHERE key >= :from ORDER BY key LIMIT :look)"
			 " WHERE (:mask >> kind) & 1 AND expires <= :now"
			 " LIMIT :limit)",
			 "forgetting keys at rest")) == NULL)
			return -1;
		if (nearlen > KEY_MAX)
			nearlen = KEY_MAX;
		cut = nearlen > 0 ? (size_t)(host_random() % (nearlen + 1)) : 0;
		memcpy(from, near, cut);
		r = host_random();
		memcpy(from + cut, &r, sizeof(r));
		if (bind_blob(sq, stmt, ":from", from, cut + sizeof(r)) == -1 ||
		    bind_i64(sq, stmt, ":look", TIDY_LOOK * limit) == -1 ||
		    bind_i64(sq, stmt, ":limit", limit) == -1 ||
		    bind_i64(sq, stmt, ":mask", mask) == -1 ||
		    bind_i64(sq, stmt, ":now", now) == -1) {
			unprep(sq, stmt);
			return -1;
		}
		return done(sq, stmt, "forgetting keys at rest");
	}
	for (kind = 1; kind < REC_KINDS; kind++) {
		int64_t keys = -1;

		if (!(mask & REC_MASK(kind)))
			continue;
		/* a key's limits are one key at rest, however many */
		if (kind == REC_LIMIT &&
		    ((stmt = prep(sq,
			  "SELECT count(DISTINCT key) FROM rec"
			  " WHERE kind = :kind AND expires <= :now",
			  "counting keys at rest")) == NULL ||
			bind_i64(sq, stmt, ":kind", kind) == -1 ||
			bind_i64(sq, stmt, ":now", now) == -1 ||
			sqlite3_step(stmt) != SQLITE_ROW)) {
			if (stmt != NULL) {
				sql_err(sq, "counting keys at rest");
				unprep(sq, stmt);
			}
			return -1;
		}
		if (kind == REC_LIMIT) {
			keys = sqlite3_column_int64(stmt, 0);
			unprep(sq, stmt);
		}
		if ((stmt = prep(sq,
			 "DELETE FROM rec WHERE kind = :kind"
			 " AND expires <= :now",
			 "forgetting keys at rest")) == NULL)
			return -1;
		if (bind_i64(sq, stmt, ":kind", kind) == -1 ||
		    bind_i64(sq, stmt, ":now", now) == -1) {
			unprep(sq, stmt);
			return -1;
		}
		if (done(sq, stmt, "forgetting keys at rest") == -1)
			return -1;
		counts[kind] += keys >= 0 ? keys : sqlite3_changes(sq->db);
	}
	return 0;
}

/*
 * The -wal's checksums (SQLite's WAL format): pairs of 32-bit words, in
 * the byte order the magic number's low bit names, summed into s[] over n
 * bytes (a multiple of 8).
 */
#define WAL_MAGIC 0x377f0682u
#define WAL_HDR 32
#define WAL_FRAME_HDR 24

static uint32_t
wal_word(const unsigned char *p, int big)
{
	return big ? be32(p)
		   : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 |
		(uint32_t)p[1] << 8 | p[0];
}

static void
wal_sum(const unsigned char *p, size_t n, int big, uint32_t s[2])
{
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		s[0] += wal_word(p + i, big) + s[1];
		s[1] += wal_word(p + i + 4, big) + s[0];
	}
}

/* Frame f's checksum, chained from s[], is the one it carries. */
static int
wal_frame_ok(const unsigned char *f, size_t page, int big, uint32_t s[2])
{
	uint32_t t[2] = { s[0], s[1] };

	wal_sum(f, 8, big, t);
	wal_sum(f + WAL_FRAME_HDR, page, big, t);
	if (t[0] != be32(f + 16) || t[1] != be32(f + 20))
		return 0;
	s[0] = t[0];
	s[1] = t[1];
	return 1;
}

#define WAL_PAGE_OK(p) ((p) >= 512 && (p) <= 65536 && ((p) & ((p)-1)) == 0)

/*
 * The commits among the frames from offset at on, each with salts salt,
 * whose checksums follow one another from s[]: frames written whole, one
 * after another, in one generation of the -wal.
 */
static long
wal_chained_commits(int fd, off_t at, off_t size, unsigned char *f, size_t page,
    int big, const unsigned char *salt, uint32_t s[2])
{
	size_t fsz = WAL_FRAME_HDR + page;
	long commits = 0;

	for (; at + (off_t)fsz <= size; at += (off_t)fsz) {
		if (pread(fd, f, fsz, at) != (ssize_t)fsz ||
		    memcmp(f + 8, salt, 8) != 0 ||
		    !wal_frame_ok(f, page, big, s))
			break;
		if (be32(f + 4) != 0)
			commits++;
	}
	return commits;
}

/*
 * Whether the -wal is damaged where SQLite reads it: SQLite stops at the
 * first frame whose checksum fails, or that does not carry the header's
 * salts, and ignores the rest, as after a power cut; and it ignores every
 * frame of a -wal whose header fails its own checksum.  Frames after such
 * a frame (or after the header) that carry the salts and whose checksums
 * follow from its own checksum (so they were written after it whole) are
 * no torn tail, stale leftover of an unfinished transaction or frames of
 * an earlier generation of the -wal: it was changed since, and each
 * commit among them is a transaction lost.  1 with *frame (1 the first, 0
 * the header) and *lost, else 0.
 */
static int
wal_damaged(const struct sq *sq, long *frame, long *lost)
{
	char path[PATH_MAX + 8];
	unsigned char h[WAL_HDR], *f = NULL, salt[8];
	uint32_t s[2] = { 0, 0 }, t[2];
	struct stat sb;
	size_t page, fsz;
	off_t at;
	int fd, big, magic_ok, b;
	long i;

	*frame = *lost = 0;
	snprintf(path, sizeof(path), "%s-wal", sq->path);
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) ==
	    -1)
		return 0;
	if (fstat(fd, &sb) == -1 || !S_ISREG(sb.st_mode) ||
	    pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h))
		goto done;
	magic_ok = (be32(h) & ~1u) == WAL_MAGIC;
	big = (int)(be32(h) & 1);
	page = be32(h + 8);
	if (!WAL_PAGE_OK(page))
		page = sq->page_size; /* a damaged header: the file's own */
	if (!WAL_PAGE_OK(page))
		goto done;
	fsz = WAL_FRAME_HDR + page;
	f = xmalloc(fsz);
	if (magic_ok)
		wal_sum(h, 24, big, s);
	if (!magic_ok || s[0] != be32(h + 24) || s[1] != be32(h + 28) ||
	    page != be32(h + 8)) {
		/* a header SQLite ignores, and with it every frame: damaged
		 * if the first frame follows from it (its checksum as stored,
		 * or as the header's bytes give it), in either byte order, as
		 * the magic number's bit that says which may be the damage */
		if (pread(fd, f, fsz, WAL_HDR) != (ssize_t)fsz)
			goto done;
		memcpy(salt, f + 8, 8);
		for (b = 0; b < 2 && *lost == 0; b++) {
			t[0] = be32(h + 24);
			t[1] = be32(h + 28);
			*lost = wal_chained_commits(fd, WAL_HDR, sb.st_size, f,
			    page, b, salt, t);
			if (*lost == 0 && magic_ok && b == big) {
				t[0] = s[0];
				t[1] = s[1];
				*lost = wal_chained_commits(fd, WAL_HDR,
				    sb.st_size, f, page, b, salt, t);
			}
		}
		goto done;
	}
	for (i = 0, at = WAL_HDR; at + (off_t)fsz <= sb.st_size;
	     i++, at += (off_t)fsz) {
		if (pread(fd, f, fsz, at) != (ssize_t)fsz)
			break;
		if (memcmp(f + 8, h + 16, 8) == 0 &&
		    wal_frame_ok(f, page, big, s))
			continue;
		/* the first SQLite stops at (its checksum, or its salts):
		 * follow its checksum, as stored or as its bytes give it (the
		 * checksum itself changed), to the frames after it */
		*frame = i + 1;
		t[0] = s[0];
		t[1] = s[1];
		wal_sum(f, 8, big, t);
		wal_sum(f + WAL_FRAME_HDR, page, big, t);
		s[0] = be32(f + 16);
		s[1] = be32(f + 20);
		*lost = wal_chained_commits(fd, at + (off_t)fsz, sb.st_size, f,
		    page, big, h + 16, s);
		if (*lost == 0)
			*lost = wal_chained_commits(fd, at + (off_t)fsz,
			    sb.st_size, f, page, big, h + 16, t);
		break;
	}
done:
	free(f);
	close(fd);
	return *lost > 0;
}

/*
 * What the schema holds beside throttle's one table, exactly as made
 * (a trigger, a view, an index or a table someone added, or the table
 * changed): named in found, and 1; 0 if nothing; -1 on an error (set, and
 * found empty).  SQLite's own tables (sqlite_stat1, after an ANALYZE) are
 * let be.
 */
static int
foreign_objects(struct sq *sq, char *found, size_t len)
{
	sqlite3_stmt *stmt;
	const char *type, *name, *sql;
	size_t n = 0;
	int rc, r = 0, more = 0;

	found[0] = '\0';
	if ((stmt = prep(sq, "SELECT type, name, sql FROM sqlite_schema",
		 "reading the schema")) == NULL)
		return -1;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		type = (const char *)sqlite3_column_text(stmt, 0);
		name = (const char *)sqlite3_column_text(stmt, 1);
		sql = (const char *)sqlite3_column_text(stmt, 2);
		if (type == NULL || name == NULL ||
		    (strcmp(type, "table") == 0 && strcmp(name, "rec") == 0 &&
			sql != NULL && strcmp(sql, CURRENT_SCHEMA) == 0) ||
		    (strcmp(type, "table") == 0 &&
			strncmp(name, "sqlite_", 7) == 0))
			continue;
		/* each named, cut to 80 bytes, as long as there is room */
		if (n + strlen(type) + 100 < len)
			n += (size_t)snprintf(found + n, len - n,
			    "%s%s %.80s%s", r ? ", " : "", type, name,
			    strlen(name) > 80 ? "..." : "");
		else if (!more && n + 8 < len) {
			n += (size_t)snprintf(found + n, len - n, ", more");
			more = 1;
		}
		r = 1;
	}
	if (rc != SQLITE_DONE) {
		sql_err(sq, "reading the schema");
		r = -1;
		found[0] = '\0';
	}
	unprep(sq, stmt);
	return r;
}

/*
 * SQLite's check of every page (quick: quick_check, which skips the
 * indexes' agreement with their tables), then, with schema, that the
 * schema is throttle's one table (an older file's is not, before its
 * upgrade: foreign_objects()), then the -wal's frames (wal_damaged()): 0
 * if all is well, else -1 and the first problems found.
 */
static int
check_file(struct sq *sq, int quick, int schema)
{
	sqlite3_stmt *stmt;
	const char *t;
	char found[600] = "";
	size_t n = 0;
	long frame, lost;
	int rc, bad = 0;

	if (sq->missing || sq->found_empty) {
		set_err(sq,
		    "%s: no decision has been stored in it yet "
		    "(check --db or THROTTLE_DB)",
		    sq->missing == 1 ? "does not exist" : "is empty");
		return -2;
	}
	if (sq->empty)
		return 0;
	if ((stmt = prep(sq,
		 quick ? "PRAGMA quick_check(10)"
		       : "PRAGMA integrity_check(10)",
		 "checking the file")) == NULL)
		return -1;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		t = (const char *)sqlite3_column_text(stmt, 0);
		if (t == NULL || strcmp(t, "ok") == 0)
			continue;
		bad = 1;
		if (n + strlen(t) + 3 < sizeof(found))
			n += (size_t)snprintf(found + n, sizeof(found) - n,
			    "%s%s", n ? "; " : "", t);
	}
	if (rc != SQLITE_DONE) {
		sql_err(sq, "checking the file");
		unprep(sq, stmt);
		return -1;
	}
	unprep(sq, stmt);
	if (bad) {
		set_err(sq,
		    "is corrupt (%s: %s); it was left untouched: move it "
		    "aside, with its -wal and -shm files, to start afresh",
		    quick ? "quick_check" : "integrity_check", found);
		return -1;
	}
	if (schema && foreign_objects(sq, found, sizeof(found)) != 0) {
		if (found[0] != '\0')
			set_err(sq,
			    "holds what throttle never makes (%s), which could "
			    "change what its records say; it was left "
			    "untouched: if you made it, drop it with the "
			    "sqlite3 shell, else move the file aside, with its "
			    "-wal and -shm files, to start afresh",
			    found);
		return -1;
	}
	if (wal_damaged(sq, &frame, &lost) && frame == 0) {
		set_err(sq,
		    "its -wal file's header is damaged: SQLite ignores the "
		    "whole -wal, so the decisions of the %ld transactions in "
		    "it are lost, but for those a checkpoint had copied into "
		    "the state file (which is itself sound; the next decision "
		    "starts the -wal anew); check the disk and memory",
		    lost);
		return -1;
	}
	if (lost > 0) {
		set_err(sq,
		    "its -wal file is damaged at frame %ld: SQLite reads it "
		    "only up to there, so the decisions of that frame's "
		    "transaction and of the %ld written after it are lost, "
		    "but for those a checkpoint had copied into the state "
		    "file (which is itself sound; the next decision writes "
		    "over the damage); check the disk and memory",
		    frame, lost);
		return -1;
	}
	return 0;
}

static int
sq_verify(void *p, int quick)
{
	return check_file(p, quick, 1);
}

static int
sq_commit(void *p)
{
	struct sq *sq = p;

	if (sq->group || sq->missing) {
		sq->in_txn = 0; /* the group's COMMIT keeps it; or no file */
		return 0;
	}
	if (exec_sql(sq, "COMMIT") == -1) {
		abandon(sq);
		return -1;
	}
	sq->in_txn = 0;
	if (!sq->txn_write)
		sq->carried = sq->deadline;
	if (sq->created) {
		/*
		 * A new file: make sure it is in WAL mode (an empty database
		 * we adopted may not be) and move the header into the main
		 * file, so check_header() recognises it from now on.  Neither
		 * step matters to the commit just made.
		 */
		sq->created = 0;
		exec_sql(sq, "PRAGMA journal_mode=WAL");
		exec_sql(sq, "PRAGMA wal_checkpoint(TRUNCATE)");
	}
	turn_give(sq);
	return 0;
}

static void
sq_rollback(void *p)
{
	struct sq *sq = p;

	abandon(sq);
}

/*
 * A group transaction (throttle batch): one BEGIN IMMEDIATE around many
 * requests, so one COMMIT (and one lock) serves them all.  A request that
 * fails before it changed anything fails alone; one that fails after (an
 * I/O error or a full disk between two writes) loses the whole group,
 * since there is no undoing its first write alone: every answer of the
 * group then says so.  (A savepoint per request would undo it alone, but
 * costs a tenth of a batch's time, for errors that rarely spare the rest
 * of a group anyway.)  A group of reads (write 0) is one read transaction,
 * beside a writer as a single check is.
 */
static int
sq_group_begin(void *p, int write)
{
	struct sq *sq = p;

	sq->carried = 0; /* each group waits its own --lock-timeout */
	if (sq_begin(sq, write) == -1)
		return -1;
	sq->group = 1;
	sq->broken = 0;
	return 0;
}

/*
 * End the group: commit it (commit nonzero) or roll it back.  -1 if the
 * commit failed or the transaction was already lost: none of the group's
 * requests took effect.
 */
static int
sq_group_end(void *p, int commit)
{
	struct sq *sq = p;
	int broken = sq->broken;

	sq->group = sq->broken = 0;
	sq->in_txn = sq->db != NULL && !sqlite3_get_autocommit(sq->db);
	if (!commit || broken) {
		abandon(sq);
		return broken ? -1 : 0;
	}
	return sq_commit(sq);
}

/*
 * 1 if another throttle process waits for the writers' turn (promise 8),
 * 0 if none does, -1 if this store cannot tell (no turn here).
 */
static int
sq_waiting(void *p)
{
	struct sq *sq = p;
	short held;

	if (sq->turnfd < 0 ||
	    turn_lock(sq->turnfd, F_OFD_GETLK, F_WRLCK, WAITING_BYTE, &held) ==
		-1)
		return -1;
	return held != F_UNLCK;
}

/*
 * Nonzero if the state file open is no longer the one at its path: removed,
 * moved aside (to start afresh, as the man page says) or replaced since a
 * long-lived caller (batch) opened it.  Its decisions would go where no
 * other call reads them.  Between transactions only.
 */
static int
sq_replaced(void *p)
{
	const struct sq *sq = p;
	struct stat sb;

	if (sq->db == NULL || sq->missing || guard.dev == 0)
		return 0;
	return lstat(sq->path, &sb) == -1 || sb.st_dev != guard.dev ||
	    sb.st_ino != guard.ino;
}

/* Nonzero if a reader found no file (or an empty one) at the path. */
static int
sq_missing(void *p)
{
	const struct sq *sq = p;

	return sq->missing ? sq->missing : sq->found_empty ? 2 : 0;
}

const struct store_ops store_sqlite_ops = {
	.open = sq_open,
	.unavailable = sq_unavailable,
	.close = sq_close,
	.begin = sq_begin,
	.commit = sq_commit,
	.rollback = sq_rollback,
	.group_begin = sq_group_begin,
	.group_end = sq_group_end,
	.missing = sq_missing,
	.waiting = sq_waiting,
	.replaced = sq_replaced,
	.get = sq_get,
	.put = sq_put,
	.del = sq_del,
	.scan = sq_scan,
	.tidy = sq_tidy,
	.verify = sq_verify,
};

/* The SQLite library version this binary runs with. */
const char *
store_sqlite_version(void)
{
	return sqlite3_libversion();
}
