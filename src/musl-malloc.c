/*
 * musl-malloc.c: malloc() and its family for the throttle linked with
 * musl (make LIBC=musl; see the Makefile), in place of musl's own: one
 * pool of size classes (pool.c) for the whole process, its areas 1 MiB.
 *
 * musl's malloc gives memory back to the system as soon as a group of
 * blocks is free, so a batch, which frees each request's answer before
 * the next, mapped and unmapped a page about every seven requests; with
 * SQLite's own blocks, a batch took about twice the CPU time it takes
 * with glibc, a third of it in malloc and the kernel.  A pool keeps what was freed for the next block of its
 * size, as glibc's malloc does; blocks past 64 KiB are mapped on their
 * own and unmapped when freed.
 *
 * throttle runs one thread (SQLite's sorter starts none unless asked
 * to), so the pool takes no lock.  Blocks are aligned to 16 bytes, as
 * malloc's must be on x86_64; a larger alignment, which nothing in
 * throttle, SQLite or hiredis asks for, is refused (EINVAL).  musl's
 * static library lets a program replace these functions: its public
 * paths (fopen, getline, getaddrinfo, getpwuid ...) then use them, and
 * the few internals that keep musl's own malloc (dlerror, the time
 * zone) free what they took with it.
 */
#if defined(THROTTLE_MUSL)

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "throttle.h"

void *malloc(size_t n);
void *calloc(size_t m, size_t n);
void *realloc(void *p, size_t n);
void free(void *p);
void *aligned_alloc(size_t align, size_t n);
int posix_memalign(void **res, size_t align, size_t n);
void *memalign(size_t align, size_t n);
size_t malloc_usable_size(void *p);

#define HEAP_AREA ((size_t)1024 * 1024)

static struct pool heap;
static int heap_ready;

static struct pool *
the_heap(void)
{
	if (!heap_ready) {
		pool_init(&heap, NULL, 0);
		heap.area = HEAP_AREA;
		heap_ready = 1;
	}
	return &heap;
}

void *
malloc(size_t n)
{
	void *p = pool_alloc(the_heap(), n);

	if (p == NULL)
		errno = ENOMEM;
	return p;
}

void *
calloc(size_t m, size_t n)
{
	size_t total;
	void *p;

	/* not malloc(), which with the memset() gcc would make a call to
	 * calloc(): this one */
	if (__builtin_mul_overflow(m, n, &total) ||
	    (p = pool_alloc(the_heap(), total)) == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	return memset(p, 0, total);
}

void *
realloc(void *p, size_t n)
{
	void *q = pool_realloc(the_heap(), p, n);

	if (q == NULL)
		errno = ENOMEM;
	return q;
}

void
free(void *p)
{
	pool_free(the_heap(), p);
}

/* 1 if align is a power of two no more than 16, else errno EINVAL */
static int
align_ok(size_t align)
{
	if (align != 0 && (align & (align - 1)) == 0 && align <= 16)
		return 1;
	errno = EINVAL;
	return 0;
}

void *
aligned_alloc(size_t align, size_t n)
{
	return align_ok(align) ? malloc(n) : NULL;
}

void *
memalign(size_t align, size_t n)
{
	return align_ok(align) ? malloc(n) : NULL;
}

int
posix_memalign(void **res, size_t align, size_t n)
{
	void *p;

	if (align < sizeof(void *) || !align_ok(align))
		return EINVAL;
	if ((p = malloc(n)) == NULL)
		return ENOMEM;
	*res = p;
	return 0;
}

size_t
malloc_usable_size(void *p)
{
	return pool_size(p);
}

#else
/* ISO C wants a translation unit to declare something. */
typedef int musl_malloc_unused;
#endif
