/*
 * store-sqlite.c: key state in one SQLite file shared by every caller.
 *
 * What this file promises:
 *	1. Every decision is one transaction.  A command that may write starts
 *	   with BEGIN IMMEDIATE, which takes the file's single write lock
 *	   before anything is read, so two processes can never both read the
 *	   same state and both admit on it.  Waiting for that lock is bounded
 *	   by --lock-timeout (SQLite's busy timeout); past it, exit 3.
 *	2. The file is in WAL mode: readers (check, inspect) never block the
 *	   writer, and a process killed at any moment leaves either the old
 *	   or the new state of a key, never a mix.  synchronous=NORMAL, so a
 *	   power cut can lose the last few commits, never corrupt the file.
 *	3. A file that is not ours is never written: before SQLite is given
 *	   the file, its header is read with plain read(2); a non-SQLite file
 *	   or a database with another program's application_id is refused
 *	   there.  A database with no application_id is checked inside the
 *	   first transaction, and is taken only if it is empty (no tables);
 *	   otherwise it is refused, rolled back, and closed without the
 *	   checkpoint SQLite would otherwise run on close.
 *	4. Symbolic links are refused (SQLITE_OPEN_NOFOLLOW); SQLite opens
 *	   its files close-on-exec, so no child ever inherits the lock.
 *	5. Keys are bound as blobs, never spliced into SQL: any bytes work
 *	   and compare exactly.
 *	6. The schema is versioned by PRAGMA user_version, with one entry in
 *	   migrations[] per version; a file from a newer version is refused.
 *	7. A new (absent or empty) file is created and given its schema while
 *	   its folder is flock(2)ed, so concurrent first callers never race to
 *	   switch it to WAL; later callers never take that lock.
 */
#include <sys/file.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "throttle.h"

#define APPLICATION_ID 0x74687274 /* "thrt" */
#define HEADER_SIZE 100

/* migrations[i] takes a file from user_version i to i + 1. */
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
};
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))
#define NEEDS_UPGRADE 1 /* verify(): a reader found an older schema */

#define STMT_CACHE 32

struct sq {
	sqlite3 *db;
	char path[PATH_MAX];
	char *err;
	size_t errlen;
	int64_t lock_timeout;
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
	} cache[STMT_CACHE];
	int ncache;
	int broken; /* the group transaction was lost to an error */
};

static void
set_err(struct sq *, const char *, ...) __attribute__((format(printf, 2, 3)));

static void
set_err(struct sq *sq, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(sq->err, sq->errlen, "%s: ", sq->path);
	if (n < 0 || (size_t)n >= sq->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(sq->err + n, sq->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

/* Put SQLite's failure of step what into words a user can act on. */
static void
sql_err(struct sq *sq, const char *what)
{
	char t[32];
	int rc = sqlite3_extended_errcode(sq->db);

	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		output_seconds(t, sizeof(t), sq->lock_timeout);
		set_err(sq,
		    "is locked by another process for longer than the "
		    "lock timeout (%ss); try again or raise --lock-timeout",
		    t);
		break;
	case SQLITE_NOTADB:
		set_err(sq,
		    "is not a throttle state file (not a SQLite "
		    "database); it was left untouched");
		break;
	case SQLITE_CORRUPT:
		set_err(sq,
		    "is corrupt (%s); it was left untouched: move it "
		    "aside to start afresh",
		    sqlite3_errmsg(sq->db));
		break;
	case SQLITE_READONLY:
		set_err(sq,
		    "cannot be written (%s); check the permissions of "
		    "the file and its folder",
		    sqlite3_errmsg(sq->db));
		break;
	case SQLITE_FULL:
		set_err(sq,
		    "cannot be written: the disk is full; nothing was "
		    "changed");
		break;
	case SQLITE_CANTOPEN:
		set_err(sq,
		    "cannot be opened (%s); check the permissions of "
		    "the file and its folder",
		    sqlite3_errmsg(sq->db));
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

	for (i = 0; i < sq->ncache; i++)
		if (sq->cache[i].sql == sql) {
			if (sq->cache[i].busy)
				break; /* nested: prepare another */
			sq->cache[i].busy = 1;
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
		sq->ncache++;
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

/* Create the folders above path that do not exist yet, mode 0700. */
static int
make_parents(struct sq *sq)
{
	char dir[PATH_MAX];
	char *p;
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

		*p = '\0';
		if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
			set_err(sq, "cannot create the folder %s: %s", dir,
			    strerror(errno));
			return -1;
		}
		if (stat(dir, &sb) == -1 || !S_ISDIR(sb.st_mode)) {
			set_err(sq, "cannot be created: %s is not a folder",
			    dir);
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
 * Refuse a file that is plainly not ours before SQLite sees it, so nothing
 * SQLite might do on open (recovering a hot journal, checkpointing) can
 * touch another program's data.
 */
static int
check_header(struct sq *sq)
{
	unsigned char h[HEADER_SIZE];
	uint32_t app;
	ssize_t n;
	int fd;

	if ((fd = open(sq->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		set_err(sq, "cannot be read: %s", strerror(errno));
		return -1;
	}
	n = read(fd, h, sizeof(h));
	close(fd);
	if (n < 0) {
		set_err(sq, "cannot be read: %s", strerror(errno));
		return -1;
	}
	if (n < HEADER_SIZE || memcmp(h, "SQLite format 3", 16) != 0) {
		set_err(sq,
		    "is not a throttle state file (not a SQLite "
		    "database); it was left untouched");
		return -1;
	}
	app = be32(h + 68);
	/*
	 * Page 1 carries the application_id and the schema cookie together,
	 * so a throttle file never shows tables without its id, even while
	 * its first transaction still sits in the WAL.
	 */
	if (app != APPLICATION_ID && (app != 0 || be32(h + 40) != 0)) {
		foreign_err(sq, app);
		return -1;
	}
	return 0;
}

static int sq_begin(void *, int);
static int sq_commit(void *);

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
		 * the error took the transaction with it, the group is lost */
		if (sqlite3_get_autocommit(sq->db) || sq->kept > 0)
			sq->broken = 1;
		sq->in_txn = 0;
		return;
	}
	if (sq->db != NULL && !sqlite3_get_autocommit(sq->db))
		sqlite3_exec(sq->db, "ROLLBACK", NULL, NULL, NULL);
	sq->in_txn = 0;
}

/*
 * As root (a PAM guard), refuse a state file or folder that another user
 * could write, the way ssh's StrictModes does: whoever can write it can
 * unlock anyone.  A folder may be world-writable only if it is sticky
 * (/tmp), where others cannot replace root's file.
 */
static int
strict_modes(struct sq *sq, const struct stat *file)
{
	char dir[PATH_MAX], *slash;
	struct stat sb;

	if (geteuid() != 0)
		return 0;
	if (file != NULL && (file->st_uid != 0 || (file->st_mode & 022))) {
		set_err(sq,
		    "can be written by others (owner %ld, mode %04o); as root "
		    "throttle refuses it, as ssh's StrictModes does: chown "
		    "root and chmod go-w it",
		    (long)file->st_uid, (unsigned)(file->st_mode & 07777));
		return -1;
	}
	snprintf(dir, sizeof(dir), "%s", sq->path);
	if ((slash = strrchr(dir, '/')) == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	if (stat(dir, &sb) == -1)
		return 0; /* it is about to be created, 0700 */
	if ((sb.st_uid != 0 && sb.st_uid != geteuid()) ||
	    ((sb.st_mode & 022) && !(sb.st_mode & S_ISVTX))) {
		set_err(sq,
		    "is in a folder others can write (%s: owner %ld, mode "
		    "%04o); as root throttle refuses it, as ssh's StrictModes "
		    "does: chown root and chmod go-w the folder",
		    dir, (long)sb.st_uid, (unsigned)(sb.st_mode & 07777));
		return -1;
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
		clock_sleep(2000);
	}
	return fd;
}

static void
sq_close(void *p)
{
	struct sq *sq = p;

	if (sq == NULL)
		return;
	abandon(sq);
	unprep_all(sq);
	sqlite3_close(sq->db);
	free(sq);
}

static void *
sq_open(const char *path, int64_t lock_timeout, char *err, size_t errlen)
{
	struct sq *sq;
	struct stat sb;
	int flags, fresh, folder = -1;
	int64_t ms;

	sq = xcalloc(1, sizeof(*sq));
	sq->err = err;
	sq->errlen = errlen;
	sq->lock_timeout = lock_timeout;
	if (snprintf(sq->path, sizeof(sq->path), "%s", path) >=
		(int)sizeof(sq->path) ||
	    path[0] == '\0') {
		snprintf(err, errlen, "%s: the state file path is %s", path,
		    path[0] == '\0' ? "empty" : "too long");
		free(sq);
		return NULL;
	}
again:
	fresh = 0;
	flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW |
	    SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
	if (lstat(path, &sb) == -1) {
		if (errno != ENOENT) {
			set_err(sq, "cannot be checked: %s", strerror(errno));
			goto fail;
		}
		if (make_parents(sq) == -1 || strict_modes(sq, NULL) == -1)
			goto fail;
		flags |= SQLITE_OPEN_CREATE;
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
	} else if (strict_modes(sq, &sb) == -1 ||
	    (sb.st_size > 0 && check_header(sq) == -1))
		goto fail;
	else
		fresh = sb.st_size == 0;
	if (fresh && folder == -1) {
		/* take the folder's lock and look again: another process may
		 * have created the file meanwhile */
		if ((folder = lock_folder(sq)) == -1)
			goto fail;
		goto again;
	}

#ifdef THROTTLE_FAULT
	faultvfs_register();
#endif
	if (sqlite3_open_v2(path, &sq->db, flags, NULL) != SQLITE_OK) {
		if (sq->db == NULL)
			set_err(sq, "cannot be opened: out of memory");
		else
			sql_err(sq, "open");
		goto fail;
	}
	ms = (lock_timeout + 999) / 1000;
	sqlite3_busy_timeout(sq->db, ms > INT_MAX ? INT_MAX : (int)ms);
	/* In WAL mode, NORMAL syncs at checkpoints: durable to the last few
	 * commits on power loss, never corrupt (promise 2 above). */
	if (exec_sql(sq, "PRAGMA synchronous=NORMAL") == -1)
		goto fail;
	if (fresh &&
	    (exec_sql(sq, "PRAGMA journal_mode=WAL") == -1 ||
		sq_begin(sq, 1) == -1 || sq_commit(sq) == -1))
		goto fail;
	if (folder >= 0)
		close(folder);
	return sq;
fail:
	if (folder >= 0)
		close(folder);
	unprep_all(sq);
	sqlite3_close(sq->db);
	free(sq);
	return NULL;
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
		if (!write) {
			sq->empty = 1;
			return 0;
		}
		sq->created = 1;
	} else if (app != APPLICATION_ID) {
		sqlite3_db_config(sq->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1,
		    NULL);
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

	if (sq->group) {
		/* the group's BEGIN IMMEDIATE took the lock and checked the
		 * file; a request only counts what it changes */
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
	sq->empty = sq->created = 0;
	if (write && sqlite3_db_readonly(sq->db, "main") == 1) {
		set_err(sq,
		    "cannot be written (permission denied); check the "
		    "permissions of the file and its folder");
		return -1;
	}
	if (exec_sql(sq, write ? "BEGIN IMMEDIATE" : "BEGIN") == -1)
		return -1;
	sq->in_txn = 1;
	switch (verify(sq, write)) {
	case 0:
		return 0;
	case NEEDS_UPGRADE:
		/* A reader found an older file: upgrade it in a write
		 * transaction of its own, then read as asked. */
		abandon(sq);
		if (sq_begin(sq, 1) == -1 || sq_commit(sq) == -1)
			return -1;
		return sq_begin(sq, 0);
	default:
		abandon(sq);
		return -1;
	}
}

static int
blob_key(struct sq *sq, const void *blob, int len, struct keyrec *rec)
{
	if (blob == NULL || len <= 0 || len > KEY_MAX) {
		set_err(sq,
		    "holds a key of %d bytes, which throttle never "
		    "writes; the file was edited by something else",
		    len);
		return -1;
	}
	memcpy(rec->key, blob, (size_t)len);
	rec->key[len] = '\0';
	rec->keylen = (size_t)len;
	return 0;
}

/* Decode the slots blob at column col into rec (NULL: no slots). */
static int
decode_slots(struct sq *sq, sqlite3_stmt *stmt, int col, struct keyrec *rec)
{
	const unsigned char *blob;
	int64_t n;
	size_t len;

	rec->state.slots = NULL;
	rec->state.nslots = 0;
	if (sqlite3_column_type(stmt, col) == SQLITE_NULL)
		return 0;
	blob = sqlite3_column_blob(stmt, col);
	len = (size_t)sqlite3_column_bytes(stmt, col);
	/* one pass: a sub-window takes at least two bytes */
	rec->state.slots = xcalloc(len / 2 + 1, sizeof(struct slot));
	if ((n = slots_decode(blob, len, rec->state.slots, len / 2 + 1)) < 0) {
		free(rec->state.slots);
		rec->state.slots = NULL;
		set_err(sq,
		    "holds a key whose sub-windows are not in "
		    "throttle's encoding; the file was edited by "
		    "something else");
		return -1;
	}
	rec->state.nslots = (size_t)n;
	return 0;
}

/*
 * Decode the columns from algorithm on, starting at column col:
 * algorithm, lim, period, burst, granularity, s1, s2, s3, slots, rest_at.
 */
static int
decode(struct sq *sq, sqlite3_stmt *stmt, int col, struct keyrec *rec)
{
	const char *name;
	int i;

	rec->state.slots = NULL;
	rec->state.nslots = 0;
	name = (const char *)sqlite3_column_text(stmt, col);
	for (i = col + 1; i <= col + 9; i++) {
		if (i != col + 8 &&
		    sqlite3_column_type(stmt, i) != SQLITE_INTEGER) {
			set_err(sq,
			    "holds a key whose state is not a number "
			    "(column %d); the file was edited by something "
			    "else",
			    i);
			return -1;
		}
	}
	rec->limit.algo = name == NULL ? NULL : algo_find(name);
	if (rec->limit.algo == NULL ||
	    strcmp(rec->limit.algo->name, name) != 0) {
		set_err(sq,
		    "holds a key with an unknown algorithm '%.32s' "
		    "(written by a newer throttle?)",
		    name ? name : "");
		return -1;
	}
	rec->limit.count = sqlite3_column_int64(stmt, col + 1);
	rec->limit.period = sqlite3_column_int64(stmt, col + 2);
	rec->limit.burst = sqlite3_column_int64(stmt, col + 3);
	rec->limit.granularity = sqlite3_column_int64(stmt, col + 4);
	for (i = 0; i < STATE_FIELDS; i++)
		rec->state.v[i] = sqlite3_column_int64(stmt, col + 5 + i);
	rec->rest_at = sqlite3_column_int64(stmt, col + 9);
	return decode_slots(sq, stmt, col + 8, rec);
}

static int
sq_load(void *p, const char *key, size_t keylen, int idx, struct keyrec *rec)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;
	int rc, ret = -1;

	rec->more = 0;
	if (sq->empty)
		return 0;
	/* this limit and whether one follows it, in one seek: a command
	 * forgets limits a key no longer has only when there are some */
	if ((stmt = prep(sq,
		 "SELECT algorithm, lim, period, burst, granularity, s1, s2,"
		 " s3, slots, rest_at, idx FROM key_state"
		 " WHERE key = :key AND idx >= :idx ORDER BY idx LIMIT 2",
		 "loading a key")) == NULL)
		return -1;
	sqlite3_bind_blob(stmt, 1, key, (int)keylen, SQLITE_STATIC);
	sqlite3_bind_int(stmt, 2, idx);
	rc = sqlite3_step(stmt);
	if (rc == SQLITE_DONE)
		ret = 0;
	else if (rc != SQLITE_ROW)
		sql_err(sq, "loading a key");
	else if (sqlite3_column_int64(stmt, 10) != idx) {
		rec->more = 1; /* not this one, but a later one */
		ret = 0;
	} else if (decode(sq, stmt, 0, rec) == 0) {
		memcpy(rec->key, key, keylen);
		rec->key[keylen] = '\0';
		rec->keylen = keylen;
		rec->idx = idx;
		ret = 1;
		if ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
			rec->more = 1;
		else if (rc != SQLITE_DONE) {
			sql_err(sq, "loading a key");
			ret = -1;
		}
	}
	unprep(sq, stmt);
	return ret;
}

static int
sq_save(void *p, const struct keyrec *rec)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;
	unsigned char *blob = NULL;
	size_t len = 0;
	int i, rc;

	if ((stmt = prep(sq,
		 "INSERT OR REPLACE INTO key_state"
		 " (key, algorithm, lim, period, burst, granularity,"
		 " s1, s2, s3, slots, rest_at, idx)"
		 " VALUES (:key, :algorithm, :lim, :period, :burst,"
		 " :granularity, :s1, :s2, :s3, :slots, :rest_at, :idx)",
		 "saving a key")) == NULL)
		return -1;
	sqlite3_bind_blob(stmt, 1, rec->key, (int)rec->keylen, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 2, rec->limit.algo->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 3, rec->limit.count);
	sqlite3_bind_int64(stmt, 4, rec->limit.period);
	sqlite3_bind_int64(stmt, 5, rec->limit.burst);
	sqlite3_bind_int64(stmt, 6, rec->limit.granularity);
	for (i = 0; i < STATE_FIELDS; i++)
		sqlite3_bind_int64(stmt, 7 + i, rec->state.v[i]);
	if (rec->state.nslots > 0) {
		blob = xmalloc(slots_encoded_max(rec->state.nslots));
		len = slots_encode(rec->state.slots, rec->state.nslots, blob);
		sqlite3_bind_blob(stmt, 10, blob, (int)len, SQLITE_STATIC);
	} else
		sqlite3_bind_null(stmt, 10);
	sqlite3_bind_int64(stmt, 11, rec->rest_at);
	sqlite3_bind_int(stmt, 12, rec->idx);
	rc = done(sq, stmt, "saving a key");
	free(blob);
	return rc;
}

/* Run one statement that takes :key (and :n) and returns nothing. */
static int
key_stmt(struct sq *sq, const char *sql, const char *key, size_t keylen,
    int64_t n, const char *what)
{
	sqlite3_stmt *stmt;

	if (sq->empty)
		return 0;
	if ((stmt = prep(sq, sql, what)) == NULL)
		return -1;
	sqlite3_bind_blob(stmt, 1, key, (int)keylen, SQLITE_STATIC);
	if (sqlite3_bind_parameter_count(stmt) > 1)
		sqlite3_bind_int64(stmt, 2, n);
	return done(sq, stmt, what);
}

static int
sq_del(void *p, const char *key, size_t keylen)
{
	return key_stmt(p, "DELETE FROM key_state WHERE key = :key", key,
		   keylen, 0, "forgetting a key") == -1 ||
		key_stmt(p, "DELETE FROM lockout WHERE key = :key", key, keylen,
		    0, "forgetting a key") == -1
	    ? -1
	    : 0;
}

/* Forget the key's limits from index n on (a compound limit shrank). */
static int
sq_trim(void *p, const char *key, size_t keylen, int n)
{
	return key_stmt(p,
	    "DELETE FROM key_state WHERE key = :key AND idx >= :n", key, keylen,
	    n, "forgetting a limit");
}

/* When the key's lockout ends (0: none). */
static int
sq_lockout_get(void *p, const char *key, size_t keylen, int64_t *until)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;
	int rc;

	*until = 0;
	if (sq->empty)
		return 0;
	if ((stmt = prep(sq, "SELECT until FROM lockout WHERE key = :key",
		 "reading a lockout")) == NULL)
		return -1;
	sqlite3_bind_blob(stmt, 1, key, (int)keylen, SQLITE_STATIC);
	if ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
		*until = sqlite3_column_int64(stmt, 0);
	else if (rc != SQLITE_DONE)
		sql_err(sq, "reading a lockout");
	unprep(sq, stmt);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

static int
sq_lockout_put(void *p, const char *key, size_t keylen, int64_t until)
{
	return key_stmt(p,
	    "INSERT OR REPLACE INTO lockout (key, until) VALUES (:key, :until)",
	    key, keylen, until, "saving a lockout");
}

/* A policy's options: 1 found, 0 none, -1 error. */
static int
sq_policy_get(void *p, const char *name, char *buf, size_t len)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;
	const unsigned char *t;
	int rc, ret = -1;

	if (sq->empty)
		return 0;
	if ((stmt = prep(sq, "SELECT options FROM policy WHERE name = :name",
		 "reading a policy")) == NULL)
		return -1;
	sqlite3_bind_blob(stmt, 1, name, (int)strlen(name), SQLITE_STATIC);
	if ((rc = sqlite3_step(stmt)) == SQLITE_DONE)
		ret = 0;
	else if (rc != SQLITE_ROW)
		sql_err(sq, "reading a policy");
	else if ((t = sqlite3_column_text(stmt, 0)) == NULL ||
	    (size_t)sqlite3_column_bytes(stmt, 0) >= len)
		set_err(sq,
		    "holds a policy throttle never writes; the file "
		    "was edited by something else");
	else {
		memcpy(buf, t, (size_t)sqlite3_column_bytes(stmt, 0) + 1);
		ret = 1;
	}
	unprep(sq, stmt);
	return ret;
}

static int
sq_policy_put(void *p, const char *name, const char *options)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;

	if ((stmt = prep(sq,
		 "INSERT OR REPLACE INTO policy (name, options)"
		 " VALUES (:name, :options)",
		 "saving a policy")) == NULL)
		return -1;
	sqlite3_bind_blob(stmt, 1, name, (int)strlen(name), SQLITE_STATIC);
	sqlite3_bind_text(stmt, 2, options, -1, SQLITE_STATIC);
	return done(sq, stmt, "saving a policy");
}

/* Delete a policy: 1 if it was there, 0 if not, -1 on error. */
static int
sq_policy_del(void *p, const char *name)
{
	struct sq *sq = p;

	if (key_stmt(sq, "DELETE FROM policy WHERE name = :name", name,
		strlen(name), 0, "deleting a policy") == -1)
		return -1;
	return sq->empty ? 0 : sqlite3_changes(sq->db) > 0;
}

static int
sq_policy_list(void *p, int (*fn)(const char *, const char *, void *),
    void *arg)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;
	char name[KEY_MAX + 1];
	int rc, ret = 0, n;

	if (sq->empty)
		return 0;
	if ((stmt = prep(sq, "SELECT name, options FROM policy ORDER BY name",
		 "listing policies")) == NULL)
		return -1;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		n = sqlite3_column_bytes(stmt, 0);
		if (n <= 0 || n > KEY_MAX ||
		    sqlite3_column_text(stmt, 1) == NULL) {
			set_err(sq,
			    "holds a policy throttle never writes; the "
			    "file was edited by something else");
			ret = -1;
			break;
		}
		memcpy(name, sqlite3_column_blob(stmt, 0), (size_t)n);
		name[n] = '\0';
		if ((ret = fn(name, (const char *)sqlite3_column_text(stmt, 1),
			 arg)) != 0)
			break;
	}
	return rows_done(sq, stmt, rc, ret, "listing policies");
}

/*
 * Forget rate state that is back at rest and lockouts that ended: all of
 * it (limit 0), or the first limit rows at or after a random key, which a
 * write can afford and which over many writes reaches every key.  The
 * number of rows removed, or -1.
 */
static int64_t
sq_tidy(void *p, int64_t now, int64_t limit)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;
	int64_t n;
	uint64_t r;

	if (sq->empty)
		return 0;
	if (limit == 0) {
		if ((stmt = prep(sq,
			 "DELETE FROM key_state WHERE rest_at <= :now",
			 "forgetting keys at rest")) == NULL)
			return -1;
		sqlite3_bind_int64(stmt, 1, now);
		if (done(sq, stmt, "forgetting keys at rest") == -1)
			return -1;
		n = sqlite3_changes(sq->db);
	} else {
		if ((stmt = prep(sq,
			 "DELETE FROM key_state WHERE (key, idx) IN"
			 " (SELECT key, idx FROM key_state WHERE key >= :from"
			 " ORDER BY key, idx LIMIT :limit) AND rest_at <= :now",
			 "forgetting keys at rest")) == NULL)
			return -1;
		r = host_random();
		sqlite3_bind_blob(stmt, 1, &r, sizeof(r), SQLITE_TRANSIENT);
		sqlite3_bind_int64(stmt, 2, limit);
		sqlite3_bind_int64(stmt, 3, now);
		if (done(sq, stmt, "forgetting keys at rest") == -1)
			return -1;
		n = sqlite3_changes(sq->db);
	}
	if ((stmt = prep(sq, "DELETE FROM lockout WHERE until <= :now",
		 "forgetting lockouts")) == NULL)
		return -1;
	sqlite3_bind_int64(stmt, 1, now);
	if (done(sq, stmt, "forgetting lockouts") == -1)
		return -1;
	return n;
}

static int
sq_list(void *p, int (*fn)(const struct keyrec *, void *), void *arg)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;
	struct keyrec *rec;
	int rc, ret = 0;

	if (sq->empty)
		return 0;
	if ((stmt = prep(sq,
		 "SELECT key, idx, algorithm, lim, period, burst, granularity,"
		 " s1, s2, s3, slots, rest_at FROM key_state ORDER BY key, idx",
		 "listing keys")) == NULL)
		return -1;
	rec = xmalloc(sizeof(*rec));
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		if (blob_key(sq, sqlite3_column_blob(stmt, 0),
			sqlite3_column_bytes(stmt, 0), rec) == -1 ||
		    decode(sq, stmt, 2, rec) == -1) {
			ret = -1;
			break;
		}
		rec->idx = sqlite3_column_int(stmt, 1);
		ret = fn(rec, arg);
		free(rec->state.slots);
		rec->state.slots = NULL;
		if (ret != 0)
			break;
	}
	if (ret == 0 && rc != SQLITE_DONE) {
		sql_err(sq, "listing keys");
		ret = -1;
	}
	free(rec);
	unprep(sq, stmt);
	return ret;
}

static int
text_col(struct sq *sq, sqlite3_stmt *stmt, int col, char *buf, size_t len)
{
	const unsigned char *t = sqlite3_column_text(stmt, col);
	int n = sqlite3_column_bytes(stmt, col);

	if (t == NULL || n < 0 || (size_t)n >= len) {
		set_err(sq,
		    "holds a lease with a bad column %d; the file was "
		    "edited by something else",
		    col);
		return -1;
	}
	memcpy(buf, t, (size_t)n + 1);
	return 0;
}

static int
decode_lease(struct sq *sq, sqlite3_stmt *stmt, struct lease *l)
{
	int i;
	size_t k;

	for (i = 2; i <= 7; i++)
		if (sqlite3_column_type(stmt, i) != SQLITE_INTEGER) {
			set_err(sq,
			    "holds a lease whose column %d is not a "
			    "number; the file was edited by something "
			    "else",
			    i);
			return -1;
		}
	if (text_col(sq, stmt, 1, l->id, sizeof(l->id)) == -1 ||
	    text_col(sq, stmt, 8, l->boot_id, sizeof(l->boot_id)) == -1 ||
	    text_col(sq, stmt, 9, l->host, sizeof(l->host)) == -1)
		return -1;
	l->priority = (int)sqlite3_column_int64(stmt, 2);
	l->acquired = sqlite3_column_int64(stmt, 3);
	l->ttl = sqlite3_column_int64(stmt, 4);
	l->expires = sqlite3_column_int64(stmt, 5);
	l->pid = sqlite3_column_int64(stmt, 6);
	l->pid_start = sqlite3_column_int64(stmt, 7);
	for (k = 0; l->id[k] != '\0'; k++)
		if (strchr("0123456789abcdef", l->id[k]) == NULL)
			break;
	if (k != LEASE_ID_LEN || l->id[k] != '\0' || l->priority < 0 ||
	    l->priority > PRIO_LOW || l->ttl < 0 || l->expires < 0 ||
	    l->pid < 0) {
		set_err(sq,
		    "holds a lease throttle never writes; the file was "
		    "edited by something else");
		return -1;
	}
	return 0;
}

static int
sq_lease_list(void *p, const char *key, size_t keylen,
    int (*fn)(const char *, size_t, const struct lease *, void *), void *arg)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;
	struct lease l;
	struct keyrec k;
	int rc, ret = 0;

	if (sq->empty)
		return 0;
	if ((stmt = prep(sq,
		 key != NULL
		     ? "SELECT key, id, priority, acquired, ttl, expires, pid,"
		       " pid_start, boot_id, host FROM lease WHERE key = :key"
		       " ORDER BY acquired, id"
		     : "SELECT key, id, priority, acquired, ttl, expires, pid,"
		       " pid_start, boot_id, host FROM lease"
		       " ORDER BY key, acquired, id",
		 "listing leases")) == NULL)
		return -1;
	if (key != NULL)
		sqlite3_bind_blob(stmt, 1, key, (int)keylen, SQLITE_STATIC);
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		if (blob_key(sq, sqlite3_column_blob(stmt, 0),
			sqlite3_column_bytes(stmt, 0), &k) == -1 ||
		    decode_lease(sq, stmt, &l) == -1) {
			ret = -1;
			break;
		}
		if ((ret = fn(k.key, k.keylen, &l, arg)) != 0)
			break;
	}
	return rows_done(sq, stmt, rc, ret, "listing leases");
}

static int
sq_lease_put(void *p, const char *key, size_t keylen, const struct lease *l)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;

	if ((stmt = prep(sq,
		 "INSERT OR REPLACE INTO lease (key, id, priority, acquired,"
		 " ttl, expires, pid, pid_start, boot_id, host) VALUES"
		 " (:key, :id, :priority, :acquired, :ttl, :expires, :pid,"
		 " :pid_start, :boot_id, :host)",
		 "saving a lease")) == NULL)
		return -1;
	sqlite3_bind_blob(stmt, 1, key, (int)keylen, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 2, l->id, -1, SQLITE_STATIC);
	sqlite3_bind_int(stmt, 3, l->priority);
	sqlite3_bind_int64(stmt, 4, l->acquired);
	sqlite3_bind_int64(stmt, 5, l->ttl);
	sqlite3_bind_int64(stmt, 6, l->expires);
	sqlite3_bind_int64(stmt, 7, l->pid);
	sqlite3_bind_int64(stmt, 8, l->pid_start);
	sqlite3_bind_text(stmt, 9, l->boot_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 10, l->host, -1, SQLITE_STATIC);
	return done(sq, stmt, "saving a lease");
}

/* Delete a lease: 1 if it was there, 0 if not, -1 on error. */
static int
sq_lease_del(void *p, const char *key, size_t keylen, const char *id)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;

	if (sq->empty)
		return 0;
	if ((stmt = prep(sq, "DELETE FROM lease WHERE key = :key AND id = :id",
		 "freeing a lease")) == NULL)
		return -1;
	sqlite3_bind_blob(stmt, 1, key, (int)keylen, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 2, id, -1, SQLITE_STATIC);
	if (done(sq, stmt, "freeing a lease") == -1)
		return -1;
	return sqlite3_changes(sq->db) > 0;
}

static int
sq_shed_load(void *p, const char *key, size_t keylen, int64_t *amount,
    int64_t *changed)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;
	int rc, ret = -1;

	if (sq->empty)
		return 0;
	if ((stmt = prep(sq,
		 "SELECT amount, changed FROM shed_state WHERE key = :key",
		 "loading a shedder")) == NULL)
		return -1;
	sqlite3_bind_blob(stmt, 1, key, (int)keylen, SQLITE_STATIC);
	rc = sqlite3_step(stmt);
	if (rc == SQLITE_DONE)
		ret = 0;
	else if (rc != SQLITE_ROW)
		sql_err(sq, "loading a shedder");
	else if (sqlite3_column_type(stmt, 0) != SQLITE_INTEGER ||
	    sqlite3_column_type(stmt, 1) != SQLITE_INTEGER ||
	    sqlite3_column_int64(stmt, 0) > SHED_ONE ||
	    sqlite3_column_int64(stmt, 0) < -SHED_ONE * 1000000)
		set_err(sq,
		    "holds a shedder state throttle never writes; the "
		    "file was edited by something else");
	else {
		*amount = sqlite3_column_int64(stmt, 0);
		*changed = sqlite3_column_int64(stmt, 1);
		ret = 1;
	}
	unprep(sq, stmt);
	return ret;
}

static int
sq_shed_save(void *p, const char *key, size_t keylen, int64_t amount,
    int64_t changed)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;

	if ((stmt = prep(sq,
		 "INSERT OR REPLACE INTO shed_state (key, amount, changed)"
		 " VALUES (:key, :amount, :changed)",
		 "saving a shedder")) == NULL)
		return -1;
	sqlite3_bind_blob(stmt, 1, key, (int)keylen, SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 2, amount);
	sqlite3_bind_int64(stmt, 3, changed);
	return done(sq, stmt, "saving a shedder");
}

/* Every key that has rate state or leases, once each, in order. */
static int
sq_names(void *p, int (*fn)(const char *, size_t, void *), void *arg)
{
	struct sq *sq = p;
	sqlite3_stmt *stmt;
	int rc, ret = 0;

	if (sq->empty)
		return 0;
	if ((stmt = prep(sq,
		 "SELECT key FROM key_state UNION SELECT key FROM lease"
		 " ORDER BY 1",
		 "listing keys")) == NULL)
		return -1;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
		if ((ret = fn(sqlite3_column_blob(stmt, 0),
			 (size_t)sqlite3_column_bytes(stmt, 0), arg)) != 0)
			break;
	return rows_done(sq, stmt, rc, ret, "listing keys");
}

static int
sq_commit(void *p)
{
	struct sq *sq = p;

	if (sq->group) {
		sq->in_txn = 0; /* the group's COMMIT keeps it */
		return 0;
	}
	if (exec_sql(sq, "COMMIT") == -1) {
		abandon(sq);
		return -1;
	}
	sq->in_txn = 0;
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
 * of a group anyway.)
 */
static int
sq_group_begin(void *p)
{
	struct sq *sq = p;

	if (sq_begin(sq, 1) == -1)
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
	sq->in_txn = !sqlite3_get_autocommit(sq->db);
	if (!commit || broken) {
		abandon(sq);
		return broken ? -1 : 0;
	}
	return sq_commit(sq);
}

const struct store_ops store_sqlite_ops = {
	.group_begin = sq_group_begin,
	.group_end = sq_group_end,
	.open = sq_open,
	.begin = sq_begin,
	.load = sq_load,
	.save = sq_save,
	.del = sq_del,
	.trim = sq_trim,
	.lockout_get = sq_lockout_get,
	.lockout_put = sq_lockout_put,
	.policy_get = sq_policy_get,
	.policy_put = sq_policy_put,
	.policy_del = sq_policy_del,
	.policy_list = sq_policy_list,
	.tidy = sq_tidy,
	.names = sq_names,
	.list = sq_list,
	.lease_list = sq_lease_list,
	.lease_put = sq_lease_put,
	.lease_del = sq_lease_del,
	.shed_load = sq_shed_load,
	.shed_save = sq_shed_save,
	.commit = sq_commit,
	.rollback = sq_rollback,
	.close = sq_close,
};

/* The SQLite library version this binary runs with. */
const char *
store_sqlite_version(void)
{
	return sqlite3_libversion();
}
