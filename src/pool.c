/*
 * pool.c: memory for a process that ends soon, in size classes.
 *
 * Debian's SQLite is built without its lookaside allocator
 * (SQLITE_OMIT_LOOKASIDE), so each of the few hundred small blocks a
 * decision's SQLite asks for is a malloc(3), and glibc's malloc was a
 * fifth of a consume's instructions (callgrind).  A pool serves them from
 * one area: a block is cut from the area's end, and a block given back is
 * kept on the list of its size class for the next block of that class
 * (the last block cut goes back to the area).  Blocks are never merged
 * and memory never goes back to the system, which suits one short call
 * (throttle consume, check, acquire ...); batch, gc and verify, which run
 * long, keep malloc (cmd_entry.runs_long), which in the build linked with
 * musl is a pool too (musl-malloc.c).
 *
 * A block is 16 bytes of header (its class) and the bytes asked for,
 * rounded up to its class: 16, 32, 48 and 64 bytes, then four classes to
 * each doubling (80, 96, 112, 128, 160, ...), so a block is less than a
 * quarter larger than it need be, up to POOL_BIG (64 KiB); a larger block
 * is mmap(2)ed on its own, unmapped when it is given back.  Blocks are
 * aligned to 16 bytes.  The first area is the caller's (a static array
 * costs nothing until it is touched; it may be empty); further areas, of
 * pool.area bytes, are mmap(2)ed.
 */
#include <sys/mman.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

/*
 * In a build with AddressSanitizer, what SQLite may not touch is poisoned:
 * the areas, each block's header, and a block given back; so a read or
 * write past a block, or into one given back, is found as it would be
 * among malloc()'s.
 */
#if defined(__SANITIZE_ADDRESS__)
#define POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_ASAN 1
#endif
#endif
#ifdef POOL_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define HDR 16 /* a block's header: its class, or BIG */
#define BIG 0xffffffffu /* the class of a block mapped on its own */

_Static_assert(POOL_CLASSES == 44, "classes 16..64 KiB, four a doubling");

/*
 * The class of a block of n bytes (header included), 1 <= n <= POOL_BIG:
 * the smallest whose size is at least n.
 */
static unsigned
class_of(size_t n)
{
	unsigned b, quarter;

	if (n <= 64)
		return (unsigned)((n + 15) / 16) - 1;
	n--;
	/* n is in [2^b, 2^(b+1)): which quarter of that doubling */
	b = 63u - (unsigned)__builtin_clzll((unsigned long long)n);
	quarter = (unsigned)(n >> (b - 2)) & 3;
	return 4 + (b - 6) * 4 + quarter;
}

/* The size of the blocks of class k, header included. */
static size_t
class_size(unsigned k)
{
	if (k < 4)
		return ((size_t)k + 1) * 16;
	return (size_t)(4 + (k - 4) % 4 + 1) << ((k - 4) / 4 + 4);
}

/* The class in the header of the block whose bytes start at p. */
static uint32_t
header(const void *p)
{
	const char *h = (const char *)p - HDR;
	uint32_t k;

	UNPOISON(h, sizeof(k));
	memcpy(&k, h, sizeof(k));
	if (k != BIG)
		POISON(h, sizeof(k));
	return k;
}

/* Start a pool on the caller's area of len bytes (16-byte aligned). */
void
pool_init(struct pool *pool, void *first, size_t len)
{
	memset(pool, 0, sizeof(*pool));
	pool->next = first;
	pool->end = (char *)first + len;
	pool->area = POOL_AREA;
	POISON(first, len);
}

/* A block of its own of n bytes: its header says BIG and n. */
static void *
big_alloc(size_t n)
{
	char *p;

	if (n > SIZE_MAX - HDR)
		return NULL;
	p = mmap(NULL, n + HDR, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	memcpy(p, &(uint32_t){ BIG }, sizeof(uint32_t));
	memcpy(p + 8, &n, sizeof(n));
	return p + HDR;
}

/* The bytes a block of its own holds. */
static size_t
big_size(const void *v)
{
	size_t n;

	memcpy(&n, (const char *)v - 8, sizeof(n));
	return n;
}

/* A block of n bytes, or NULL if there is no memory for it. */
void *
pool_alloc(struct pool *pool, size_t n)
{
	size_t need, sz;
	unsigned k;
	char *p;

	if (n == 0)
		n = 1;
	if (n > POOL_BIG - HDR)
		return big_alloc(n);
	need = n + HDR;
	k = class_of(need);
	sz = class_size(k);
	if ((p = pool->free[k]) != NULL) {
		void *next; /* kept where the block's bytes go */

		UNPOISON(p + HDR, sizeof(next));
		memcpy(&next, p + HDR, sizeof(next));
		pool->free[k] = next;
	} else {
		if ((size_t)(pool->end - pool->next) < sz) {
			void *area =
			    mmap(NULL, pool->area, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (area == MAP_FAILED)
				return NULL;
			/* what was left of the last area is lost */
			pool->next = area;
			pool->end = (char *)area + pool->area;
			pool->areas++;
			POISON(area, pool->area);
		}
		p = pool->next;
		pool->next += sz;
		UNPOISON(p, sizeof(uint32_t));
		memcpy(p, &(uint32_t){ k }, sizeof(uint32_t));
		POISON(p, sizeof(uint32_t));
	}
	UNPOISON(p + HDR, sz - HDR);
	return p + HDR;
}

/* Give back a block pool_alloc() or pool_realloc() gave (or NULL). */
void
pool_free(struct pool *pool, void *v)
{
	char *p;
	uint32_t k;

	if (v == NULL)
		return;
	p = (char *)v - HDR;
	if ((k = header(v)) == BIG) {
		munmap(p, big_size(v) + HDR);
		return;
	}
	POISON(v, class_size(k) - HDR);
	if (p + class_size(k) == pool->next) {
		pool->next = p; /* the last block cut: the area's end again */
		return;
	}
	UNPOISON(v, sizeof(pool->free[k]));
	memcpy(v, &pool->free[k], sizeof(pool->free[k]));
	POISON(v, sizeof(pool->free[k]));
	pool->free[k] = p;
}

/* The bytes a block may hold: what was asked for, rounded up. */
size_t
pool_size(const void *v)
{
	uint32_t k;

	if (v == NULL)
		return 0;
	if ((k = header(v)) != BIG)
		return class_size(k) - HDR;
	return big_size(v);
}

/* The bytes a block of n bytes would hold. */
size_t
pool_roundup(size_t n)
{
	if (n == 0)
		n = 1;
	if (n > POOL_BIG - HDR)
		return n;
	return class_size(class_of(n + HDR)) - HDR;
}

/*
 * The block v grown or shrunk to n bytes, its bytes kept (as many as
 * both hold): v itself if it holds n, else a new block, v given back.
 * NULL if there is no memory (v is kept).
 */
void *
pool_realloc(struct pool *pool, void *v, size_t n)
{
	size_t have;
	void *q;
	int big;

	if (v == NULL)
		return pool_alloc(pool, n);
	have = pool_size(v);
	big = header(v) == BIG;
	/* a block of its own is not shrunk while it stays one */
	if (n <= have && (!big || n > POOL_BIG - HDR))
		return v;
	if ((q = pool_alloc(pool, n)) == NULL)
		return NULL;
	memcpy(q, v, have < n ? have : n);
	pool_free(pool, v);
	return q;
}
