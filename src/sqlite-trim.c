/*
 * sqlite-trim.c: SQLite without the virtual tables a state file never has.
 *
 * Opening a database registers every extension SQLite was built with:
 * Debian's has full-text search (FTS3, FTS4, FTS5), R*Tree, dbstat and
 * stmt, and registering them was a tenth of a consume's instructions, and
 * their code 330 KiB of the binary, touched page by page.  Debian's
 * libsqlite3.a is an object per source file, so these functions, defined
 * here first, take the place of SQLite's: the objects that hold them (and
 * all they call) are not linked, and each registration is a no-op.  The
 * Makefile builds this file into throttle only where the archive is laid
 * out that way (SQLITE_TRIM); where the names are SQLite's own static
 * functions (an amalgamation) or SQLite is a shared library, it is left
 * out and nothing changes.  A state file is refused if it has a table
 * throttle did not make, so no state file ever needs one of these.
 *
 * The names and the signature are SQLite's own (its sqlite3BuiltinExtensions
 * in main.c), not this file's prefix.
 */
#include <sqlite3.h>

int sqlite3Fts3Init(sqlite3 *);
int sqlite3Fts5Init(sqlite3 *);
int sqlite3RtreeInit(sqlite3 *);
int sqlite3DbstatRegister(sqlite3 *);
int sqlite3StmtVtabInit(sqlite3 *);

int
sqlite3Fts3Init(sqlite3 *db)
{
	(void)db;
	return SQLITE_OK;
}

int
sqlite3Fts5Init(sqlite3 *db)
{
	(void)db;
	return SQLITE_OK;
}

int
sqlite3RtreeInit(sqlite3 *db)
{
	(void)db;
	return SQLITE_OK;
}

int
sqlite3DbstatRegister(sqlite3 *db)
{
	(void)db;
	return SQLITE_OK;
}

int
sqlite3StmtVtabInit(sqlite3 *db)
{
	(void)db;
	return SQLITE_OK;
}
