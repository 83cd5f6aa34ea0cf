/*
 * arena.c: SQLite's memory for a process that decides once and exits.
 *
 * A consume's SQLite allocates about 90 KiB in a few thousand calls and
 * frees it all at close.  glibc's malloc spent a sixth of a consume's
 * instructions keeping those blocks, and the call 7-8% of its wall time
 * (bench/: paired, with and without).  Here a block is carved from one
 * fixed buffer by moving a pointer: freeing a block gives it back only if
 * it is the newest (a temporary string, a statement prepared and
 * finalized), and other blocks stay until the process ends.  Once the
 * buffer is used up (a batch, an inspect of a million keys), blocks come
 * from malloc(3) and go back to it: a long process wastes at most
 * ARENA_SIZE.
 *
 * Every block has a header of ARENA_ALIGN bytes holding its size, so a
 * block knows its size wherever it came from, and its payload is aligned
 * to ARENA_ALIGN.  One thread only: store_sqlite_single_thread() installs
 * it for the throttle binary, never for the PAM module.  No I/O; the unit
 * tests drive it directly (arena_reset()).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

#define ARENA_ALIGN 16

static _Alignas(ARENA_ALIGN) unsigned char arena[ARENA_SIZE];
static size_t top; /* the first free byte */
static size_t newest = SIZE_MAX; /* the newest block's header, if any */

static size_t
round_up(size_t n)
{
	return (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
}

static unsigned char *
header(const void *p)
{
	return (unsigned char *)p - ARENA_ALIGN;
}

/* Whether p (a block's payload) was carved from the buffer. */
int
arena_owns(const void *p)
{
	uintptr_t a = (uintptr_t)arena, u = (uintptr_t)p;

	return u >= a && u < a + sizeof(arena);
}

/* A block of at least n bytes (n > 0), or NULL if memory ran out. */
void *
arena_alloc(size_t n)
{
	unsigned char *h;

	if (n > SIZE_MAX / 2)
		return NULL;
	n = round_up(n == 0 ? 1 : n);
	if (ARENA_ALIGN + n <= sizeof(arena) - top) {
		h = arena + top;
		newest = top;
		top += ARENA_ALIGN + n;
	} else if ((h = malloc(ARENA_ALIGN + n)) == NULL)
		return NULL;
	memcpy(h, &n, sizeof(n));
	return h + ARENA_ALIGN;
}

/* The usable size of block p (0 for NULL). */
size_t
arena_size(const void *p)
{
	size_t n;

	if (p == NULL)
		return 0;
	memcpy(&n, header(p), sizeof(n));
	return n;
}

/* Whether p is the newest block of the buffer, at its end. */
static int
is_newest(const void *p)
{
	return arena_owns(p) && (size_t)(header(p) - arena) == newest &&
	    newest + ARENA_ALIGN + arena_size(p) == top;
}

/* Give block p back (NULL is fine). */
void
arena_free(void *p)
{
	if (p == NULL)
		return;
	if (!arena_owns(p)) {
		free(header(p));
		return;
	}
	if (is_newest(p)) {
		top = newest;
		newest = SIZE_MAX; /* the one before it is not known */
	}
}

/*
 * Block p resized to at least n bytes, its contents kept: p itself if it
 * is big enough or is the newest block and the buffer has room, else a
 * new block.  NULL, p untouched, if memory ran out.
 */
void *
arena_realloc(void *p, size_t n)
{
	size_t have = arena_size(p);
	void *q;

	if (p == NULL)
		return arena_alloc(n);
	if (n <= have)
		return p;
	if (n > SIZE_MAX / 2)
		return NULL;
	if (is_newest(p) && round_up(n) - have <= sizeof(arena) - top) {
		top += round_up(n) - have;
		n = round_up(n);
		memcpy(header(p), &n, sizeof(n));
		return p;
	}
	if ((q = arena_alloc(n)) == NULL)
		return NULL;
	memcpy(q, p, have);
	arena_free(p);
	return q;
}

/* Bytes of the buffer in use: for the tests. */
size_t
arena_used(void)
{
	return top;
}

/* Forget every block of the buffer: for the tests, which own them all. */
void
arena_reset(void)
{
	top = 0;
	newest = SIZE_MAX;
}
