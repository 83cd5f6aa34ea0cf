/*
 * faultvfs.c: a SQLite VFS for tests only (built with -DTHROTTLE_FAULT by
 * make faultcheck), wrapping the default one to fail the k-th write, sync,
 * lock or truncate of any file, so every command can be shown to fail
 * cleanly at every point where the disk can fail.
 *
 *	THROTTLE_FAULT_AT=k		fail the k-th call (1, 2, ...)
 *	THROTTLE_FAULT_OP=write|sync|lock|truncate|any
 *	THROTTLE_FAULT_RC=ioerr|full|busy
 *
 * When it fails a call it says so on stderr, "throttle-fault: ...", so a
 * test knows when k has passed the last call a command makes.
 */
#ifdef THROTTLE_FAULT
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

struct ffile {
	sqlite3_file base;
	sqlite3_file *real; /* follows this struct in the same allocation */
};

static sqlite3_vfs *real_vfs;
static sqlite3_vfs fault_vfs;
static sqlite3_io_methods methods;
static long calls, at;
static const char *op = "any";
static int rc = SQLITE_IOERR;

static int
fail(const char *what)
{
	if (strcmp(op, "any") != 0 && strcmp(op, what) != 0)
		return 0;
	if (++calls != at)
		return 0;
	fprintf(stderr, "throttle-fault: failing %s call %ld\n", what, calls);
	return 1;
}

#define REAL(f) (((struct ffile *)(f))->real)

static int
f_close(sqlite3_file *f)
{
	return REAL(f)->pMethods->xClose(REAL(f));
}

static int
f_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
	return REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
}

static int
f_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
	if (fail("write"))
		return rc == SQLITE_BUSY ? SQLITE_IOERR_WRITE : rc;
	return REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
}

static int
f_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	if (fail("truncate"))
		return rc == SQLITE_BUSY ? SQLITE_IOERR_TRUNCATE : rc;
	return REAL(f)->pMethods->xTruncate(REAL(f), size);
}

static int
f_sync(sqlite3_file *f, int flags)
{
	if (fail("sync"))
		return rc == SQLITE_BUSY ? SQLITE_IOERR_FSYNC : rc;
	return REAL(f)->pMethods->xSync(REAL(f), flags);
}

static int
f_size(sqlite3_file *f, sqlite3_int64 *size)
{
	return REAL(f)->pMethods->xFileSize(REAL(f), size);
}

static int
f_lock(sqlite3_file *f, int level)
{
	if (fail("lock"))
		return rc == SQLITE_FULL ? SQLITE_IOERR_LOCK : rc;
	return REAL(f)->pMethods->xLock(REAL(f), level);
}

static int
f_unlock(sqlite3_file *f, int level)
{
	return REAL(f)->pMethods->xUnlock(REAL(f), level);
}

static int
f_check(sqlite3_file *f, int *out)
{
	return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}

static int
f_control(sqlite3_file *f, int opcode, void *arg)
{
	return REAL(f)->pMethods->xFileControl(REAL(f), opcode, arg);
}

static int
f_sector(sqlite3_file *f)
{
	return REAL(f)->pMethods->xSectorSize(REAL(f));
}

static int
f_devchar(sqlite3_file *f)
{
	return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

static int
f_shmmap(sqlite3_file *f, int pg, int sz, int extend, void volatile **pp)
{
	return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, extend, pp);
}

static int
f_shmlock(sqlite3_file *f, int offset, int n, int flags)
{
	if (fail("lock"))
		return rc == SQLITE_FULL ? SQLITE_IOERR_SHMLOCK : rc;
	return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}

static void
f_shmbarrier(sqlite3_file *f)
{
	REAL(f)->pMethods->xShmBarrier(REAL(f));
}

static int
f_shmunmap(sqlite3_file *f, int del)
{
	return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}

static int
f_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp)
{
	return REAL(f)->pMethods->xFetch(REAL(f), off, n, pp);
}

static int
f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
	return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

static int
f_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags,
    int *out)
{
	struct ffile *ff = (struct ffile *)file;
	int r;

	(void)vfs;
	ff->real = (sqlite3_file *)(ff + 1);
	if ((r = real_vfs->xOpen(real_vfs, name, ff->real, flags, out)) !=
	    SQLITE_OK)
		return r;
	methods = *ff->real->pMethods;
	methods.xClose = f_close;
	methods.xRead = f_read;
	methods.xWrite = f_write;
	methods.xTruncate = f_truncate;
	methods.xSync = f_sync;
	methods.xFileSize = f_size;
	methods.xLock = f_lock;
	methods.xUnlock = f_unlock;
	methods.xCheckReservedLock = f_check;
	methods.xFileControl = f_control;
	methods.xSectorSize = f_sector;
	methods.xDeviceCharacteristics = f_devchar;
	methods.xShmMap = f_shmmap;
	methods.xShmLock = f_shmlock;
	methods.xShmBarrier = f_shmbarrier;
	methods.xShmUnmap = f_shmunmap;
	methods.xFetch = f_fetch;
	methods.xUnfetch = f_unfetch;
	ff->base.pMethods = &methods;
	return SQLITE_OK;
}

/* Install the fault VFS as the default, if THROTTLE_FAULT_AT is set. */
void
faultvfs_register(void)
{
	const char *s = getenv("THROTTLE_FAULT_AT"), *r;

	if (s == NULL || real_vfs != NULL)
		return;
	at = atol(s);
	if ((s = getenv("THROTTLE_FAULT_OP")) != NULL)
		op = s;
	if ((r = getenv("THROTTLE_FAULT_RC")) != NULL)
		rc = strcmp(r, "full") == 0  ? SQLITE_FULL
		    : strcmp(r, "busy") == 0 ? SQLITE_BUSY
					     : SQLITE_IOERR;
	real_vfs = sqlite3_vfs_find(NULL);
	fault_vfs = *real_vfs;
	fault_vfs.zName = "throttle-fault";
	fault_vfs.szOsFile = (int)sizeof(struct ffile) + real_vfs->szOsFile;
	fault_vfs.xOpen = f_open;
	sqlite3_vfs_register(&fault_vfs, 1);
}
#else
typedef int faultvfs_not_built; /* ISO C wants something in a file */
#endif
