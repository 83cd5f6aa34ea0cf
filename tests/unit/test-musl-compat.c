/*
 * test-musl-compat.c: what the musl build adds to musl (built and run
 * only with make LIBC=musl).  src/musl-compat.c: fcntl64() passes int
 * and pointer arguments through, as SQLite's locks need; the checking
 * copies copy what fits and abort on what does not, as glibc's do,
 * having written nothing past the object.  src/musl-mem.c: memcpy(),
 * memmove() and memset() agree with a byte loop at every length to 300
 * and past 4 KiB, at every alignment of both ends, and memmove() over
 * every overlap, both ways, touching nothing outside the destination;
 * memcmp() orders as a byte loop wherever the first difference is.
 * src/musl-malloc.c: malloc() and its family on a pool: calloc() zeroes
 * a block that was used before and refuses a product that overflows;
 * realloc() keeps the bytes, within a class, across classes and past
 * 64 KiB; a freed block is reused; alignments past 16 are refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"

int fcntl64(int fd, int cmd, ...);
void *__memcpy_chk(void *dst, const void *src, size_t n, size_t dstlen);
void *__memset_chk(void *dst, int c, size_t n, size_t dstlen);
int
__snprintf_chk(char *s, size_t n, int flag, size_t slen, const char *fmt, ...);
int __sprintf_chk(char *s, int flag, size_t slen, const char *fmt, ...);

static char buf[8];

/* called through pointers, so the compiler cannot inline its own */
static void *(*volatile copy)(void *restrict, const void *restrict,
    size_t) = memcpy;
static void *(*volatile move)(void *, const void *, size_t) = memmove;
static void *(*volatile set)(void *, int, size_t) = memset;
static int (*volatile cmp)(const void *, const void *, size_t) = memcmp;

#define ARENA 5000
static unsigned char arena[ARENA], want[ARENA];

static void
fill(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 8));
}

static int
sign(int x)
{
	return (x > 0) - (x < 0);
}

/* memcmp of n bytes at a and b (offsets in the arena), equal but for the
 * byte at diff (if diff < n), made larger (up) or smaller in b, and the
 * byte after it the other way: 1 if it orders them as a byte loop does */
static int
cmp_agrees(size_t a, size_t b, size_t n, size_t diff, int up)
{
	size_t i;
	int order = 0;

	fill(arena + a, n, 7);
	fill(arena + b, n, 7);
	if (diff < n)
		arena[b + diff] =
		    (unsigned char)(arena[a + diff] + (up ? 1 : -1));
	/* and the next byte the other way: the first difference decides */
	if (diff + 1 < n)
		arena[b + diff + 1] =
		    (unsigned char)(arena[a + diff + 1] + (up ? -1 : 1));
	for (i = 0; i < n && order == 0; i++)
		if (arena[a + i] != arena[b + i])
			order = arena[a + i] < arena[b + i] ? -1 : 1;
	return sign(cmp(arena + a, arena + b, n)) == order;
}

/* memcpy, memmove and memset from src to dst (offsets in the arena), n
 * bytes, against the same done a byte at a time; 1 if they agree over
 * the whole arena */
static int
agrees(int which, size_t dst, size_t src, size_t n)
{
	size_t i;

	fill(arena, ARENA, (unsigned)(dst + src + n));
	for (i = 0; i < ARENA; i++)
		want[i] = arena[i];
	if (which == 2) {
		for (i = 0; i < n; i++)
			want[dst + i] = 0xa5;
		return set(arena + dst, 0xa5, n) == arena + dst &&
		    memcmp(arena, want, ARENA) == 0;
	}
	if (dst < src)
		for (i = 0; i < n; i++)
			want[dst + i] = want[src + i];
	else
		for (i = n; i > 0; i--)
			want[dst + i - 1] = want[src + i - 1];
	if (which == 0)
		return copy(arena + dst, arena + src, n) == arena + dst &&
		    memcmp(arena, want, ARENA) == 0;
	return move(arena + dst, arena + src, n) == arena + dst &&
	    memcmp(arena, want, ARENA) == 0;
}

static void
mem(void)
{
	static const size_t big[] = { 511, 512, 513, 4095, 4096, 4097, 4104 };
	size_t n, a, b, i, bad[3] = { 0, 0, 0 }, overlap = 0;

	for (n = 0; n <= 300; n++)
		for (a = 0; a < 16; a++)
			for (b = 0; b < 16; b++) {
				bad[0] += !agrees(0, 16 + a, 2400 + b, n);
				bad[1] += !agrees(1, 2400 + a, 16 + b, n);
				bad[2] += !agrees(2, 16 + a, 0, n);
			}
	for (i = 0; i < sizeof(big) / sizeof(big[0]); i++)
		for (a = 0; a < 16; a += 5) {
			bad[0] += !agrees(0, 8 + a, 4900 - big[i] - a, big[i]);
			bad[1] += !agrees(1, 4900 - big[i] - a, 8 + a, big[i]);
			bad[2] += !agrees(2, 8 + a, 0, big[i]);
		}
	/* every overlap, the destination below the source and above it */
	for (n = 0; n <= 200; n++)
		for (a = 0; a <= n + 1; a++) {
			overlap += !agrees(1, 1000, 1000 + a, n);
			overlap += !agrees(1, 1000 + a, 1000, n);
		}
	for (i = 0; i < sizeof(big) / sizeof(big[0]); i++)
		for (a = 1; a < 100; a += 7) {
			overlap += !agrees(1, 100, 100 + a, big[i]);
			overlap += !agrees(1, 100 + a, 100, big[i]);
		}
	CHECK(bad[0] == 0, "memcpy agrees with a byte loop (%zu disagree)",
	    bad[0]);
	CHECK(bad[1] == 0,
	    "memmove apart agrees with a byte loop (%zu "
	    "disagree)",
	    bad[1]);
	CHECK(bad[2] == 0, "memset agrees with a byte loop (%zu disagree)",
	    bad[2]);
	CHECK(overlap == 0,
	    "memmove over every overlap, both ways (%zu "
	    "disagree)",
	    overlap);
	/* memcmp: equal, and a difference at every place, either way (a
	 * byte that wraps, 0xff + 1 or 0 - 1, is a difference too) */
	for (n = 0, bad[0] = 0; n <= 70; n++)
		for (a = 0; a < 8; a++)
			for (i = 0; i <= n; i++) {
				bad[0] +=
				    !cmp_agrees(16 + a, 2400 + 3 * a, n, i, 0);
				bad[0] +=
				    !cmp_agrees(16 + a, 2400 + 3 * a, n, i, 1);
			}
	bad[0] += !cmp_agrees(8, 4000, 700, 699, 1);
	bad[0] += !cmp_agrees(8, 4000, 700, 0, 0);
	CHECK(bad[0] == 0,
	    "memcmp orders as a byte loop, at every length and place (%zu "
	    "disagree)",
	    bad[0]);
}

/* Whether the call, in a child, aborts (SIGABRT) without writing past its
 * 8-byte object: the object and 8 guard bytes after it are shared with
 * the child, so the guard can be read after it died. */
static int
aborts(int which)
{
	char *mem, big[16] = "0123456789abcde";
	pid_t pid;
	int status, ok;

	mem = mmap(NULL, 16, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
	    -1, 0);
	if (mem == MAP_FAILED)
		return 0;
	memset(mem, '#', 16);
	fflush(stdout);
	if ((pid = fork()) == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		dup2(devnull, STDERR_FILENO); /* the overflow message */
		switch (which) {
		case 0:
			__memcpy_chk(mem, big, sizeof(big), 8);
			break;
		case 1:
			__memset_chk(mem, 'x', 9, 8);
			break;
		case 2:
			__snprintf_chk(mem, 9, 1, 8, "%s", "x");
			break;
		default:
			__sprintf_chk(mem, 1, 8, "%s", big);
			break;
		}
		_exit(0);
	}
	ok = pid > 0 && waitpid(pid, &status, 0) == pid &&
	    WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
	    memcmp(mem + 8, "########", 8) == 0;
	munmap(mem, 16);
	return ok;
}

static void
heap(void)
{
	/* volatile: gcc refuses sizes it can see are too large */
	volatile size_t half = SIZE_MAX / 2, most = SIZE_MAX - 8;
	unsigned char *p, *q, *big;
	void *r = NULL;
	size_t i, n, bad = 0;

	p = malloc(100);
	CHECK(p != NULL && ((uintptr_t)p & 15) == 0 &&
		malloc_usable_size(p) >= 100,
	    "malloc: 16-byte aligned, holding what was asked");
	memset(p, 0xee, 100);
	free(p);
	q = calloc(10, 10);
	CHECK(q == p, "a freed block is reused for its size");
	for (i = 0; i < 100 && q != NULL; i++)
		bad += q[i] != 0;
	CHECK(q != NULL && bad == 0, "calloc zeroes a block used before");
	errno = 0;
	CHECK(calloc(half, 3) == NULL && errno == ENOMEM,
	    "calloc refuses a product that overflows (ENOMEM)");
	errno = 0;
	CHECK(malloc(most) == NULL && errno == ENOMEM,
	    "malloc refuses what cannot be had (ENOMEM)");
	/* realloc through the classes and past them, and back */
	for (i = 0; i < 100; i++)
		q[i] = (unsigned char)i;
	bad = 0;
	for (n = 150; n < 300000; n = n * 3 / 2) {
		q = realloc(q, n);
		if (q == NULL)
			break;
		for (i = 0; i < 100; i++)
			bad += q[i] != (unsigned char)i;
		q[n - 1] = 1; /* it holds n */
	}
	CHECK(q != NULL && bad == 0,
	    "realloc keeps the bytes up through every class and past 64 KiB");
	q = realloc(q, 50);
	for (i = 0, bad = 0; q != NULL && i < 50; i++)
		bad += q[i] != (unsigned char)i;
	CHECK(q != NULL && bad == 0, "and back down to a small block");
	free(q);
	big = malloc(1 << 20);
	CHECK(big != NULL && malloc_usable_size(big) == 1 << 20 &&
		memset(big, 1, 1 << 20) == big,
	    "a block past 64 KiB is its own, and holds it all");
	free(big);
	free(NULL);
	p = malloc(0);
	q = malloc(0);
	CHECK(p != NULL && q != NULL && p != q,
	    "malloc(0): distinct blocks that may be freed");
	free(p);
	free(q);
	CHECK(realloc(NULL, 10) != NULL, "realloc(NULL) is malloc");
	p = aligned_alloc(16, 40);
	CHECK(p != NULL && ((uintptr_t)p & 15) == 0, "aligned_alloc to 16");
	free(p);
	errno = 0;
	CHECK(aligned_alloc(64, 40) == NULL && errno == EINVAL,
	    "aligned_alloc past 16 is refused (EINVAL)");
	CHECK(posix_memalign(&r, 16, 40) == 0 && r != NULL,
	    "posix_memalign to 16");
	free(r);
	CHECK(posix_memalign(&r, 4096, 40) == EINVAL &&
		posix_memalign(&r, 24, 40) == EINVAL,
	    "posix_memalign past 16, or not a power of two: EINVAL");
}

int
main(void)
{
	char path[] = "/tmp/test-musl-compat-XXXXXX";
	struct flock fl;
	int fd, fds[2];

	/* fcntl64: an int argument (F_SETFD, F_SETFL) and a pointer one
	 * (F_SETLK, F_GETLK) */
	CHECK(pipe(fds) == 0, "a pipe");
	CHECK(fcntl64(fds[0], F_SETFD, FD_CLOEXEC) == 0 &&
		fcntl64(fds[0], F_GETFD) == FD_CLOEXEC,
	    "fcntl64 sets and reads FD_CLOEXEC");
	CHECK(fcntl64(fds[1], F_SETFL, O_NONBLOCK) == 0 &&
		(fcntl64(fds[1], F_GETFL) & O_NONBLOCK) != 0,
	    "fcntl64 sets and reads O_NONBLOCK");
	close(fds[0]);
	close(fds[1]);
	fd = mkstemp(path);
	CHECK(fd >= 0, "a file to lock");
	unlink(path);
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	fl.l_start = 100;
	fl.l_len = 10;
	CHECK(fcntl64(fd, F_SETLK, &fl) == 0, "fcntl64 takes a write lock");
	fl.l_type = F_UNLCK;
	CHECK(fcntl64(fd, F_SETLK, &fl) == 0, "fcntl64 gives it back");
	fl.l_type = F_WRLCK;
	CHECK(fcntl64(fd, F_GETLK, &fl) == 0 && fl.l_type == F_UNLCK,
	    "fcntl64 F_GETLK fills in the struct");
	CHECK(fcntl64(-1, F_GETFD) == -1, "fcntl64 fails on a bad fd");
	close(fd);

	/* the checking copies, within bounds */
	CHECK(__memcpy_chk(buf, "abcdefgh", 8, sizeof(buf)) == buf &&
		memcmp(buf, "abcdefgh", 8) == 0,
	    "__memcpy_chk copies what fits exactly");
	CHECK(__memset_chk(buf, 'z', 8, sizeof(buf)) == buf &&
		memcmp(buf, "zzzzzzzz", 8) == 0,
	    "__memset_chk sets what fits exactly");
	CHECK(__snprintf_chk(buf, sizeof(buf), 1, sizeof(buf), "%d-%s", 42,
		  "abcdef") == 9 &&
		strcmp(buf, "42-abcd") == 0,
	    "__snprintf_chk truncates to n and returns the full length");
	CHECK(__sprintf_chk(buf, 1, sizeof(buf), "%d", 1234567) == 7 &&
		strcmp(buf, "1234567") == 0,
	    "__sprintf_chk writes what fits");
	CHECK(__sprintf_chk(buf, 1, SIZE_MAX, "%s", "abc") == 3 &&
		strcmp(buf, "abc") == 0,
	    "__sprintf_chk with an unknown object size writes it all");

	/* and past them */
	CHECK(aborts(0), "__memcpy_chk aborts on a copy past the object");
	CHECK(aborts(1), "__memset_chk aborts on a set past the object");
	CHECK(aborts(2), "__snprintf_chk aborts when n is past the object");
	CHECK(aborts(3), "__sprintf_chk aborts on a result past the object");
	mem();
	heap();
	return unit_done();
}
