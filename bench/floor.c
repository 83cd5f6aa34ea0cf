/*
 * floor.c: the least a process can do to make one decision in SQLite, the
 * floor throttle is measured against.  It opens an existing file in WAL
 * mode and runs BEGIN IMMEDIATE, one SELECT, one UPSERT and COMMIT, with
 * the same synchronous setting and busy timeout as throttle, and is built
 * and linked the same way.
 *
 *	floor FILE --setup	create its table (once, before timing)
 *	floor FILE [KEY]	one decision on KEY (default "k")
 */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

static int
fail(sqlite3 *db, const char *what)
{
	fprintf(stderr, "floor: %s: %s\n", what, sqlite3_errmsg(db));
	sqlite3_close(db);
	return 3;
}

int
main(int argc, char **argv)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *sel, *up;
	const char *key = argc > 2 ? argv[2] : "k";
	sqlite3_int64 v = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: floor FILE [--setup | KEY]\n");
		return 2;
	}
	if (sqlite3_open_v2(argv[1], &db,
		SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
		    SQLITE_OPEN_NOMUTEX,
		NULL) != SQLITE_OK)
		return fail(db, "open");
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_exec(db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL) !=
	    SQLITE_OK)
		return fail(db, "synchronous");
	if (argc > 2 && strcmp(argv[2], "--setup") == 0) {
		if (sqlite3_exec(db,
			"PRAGMA journal_mode=WAL;"
			"CREATE TABLE IF NOT EXISTS floor"
			" (k TEXT PRIMARY KEY, v INTEGER) WITHOUT ROWID",
			NULL, NULL, NULL) != SQLITE_OK)
			return fail(db, "setup");
		sqlite3_close(db);
		return 0;
	}
	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return fail(db, "begin");
	if (sqlite3_prepare_v2(db, "SELECT v FROM floor WHERE k = ?1", -1,
		&sel, NULL) != SQLITE_OK)
		return fail(db, "select");
	sqlite3_bind_text(sel, 1, key, -1, SQLITE_STATIC);
	if (sqlite3_step(sel) == SQLITE_ROW)
		v = sqlite3_column_int64(sel, 0);
	sqlite3_finalize(sel);
	if (sqlite3_prepare_v2(db,
		"INSERT INTO floor (k, v) VALUES (?1, ?2)"
		" ON CONFLICT (k) DO UPDATE SET v = excluded.v",
		-1, &up, NULL) != SQLITE_OK)
		return fail(db, "upsert");
	sqlite3_bind_text(up, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(up, 2, v + 1);
	if (sqlite3_step(up) != SQLITE_DONE)
		return fail(db, "upsert");
	sqlite3_finalize(up);
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		return fail(db, "commit");
	sqlite3_close(db);
	return 0;
}
