/*
 * test-pool.c: the size-class pool SQLite's memory comes from in a short
 * call (pool.c): every size gets a block that holds it, aligned, less
 * than a quarter larger than it needs; bytes survive a realloc; a block
 * given back is reused for its class and only its class; the last block
 * cut gives its bytes back to the area; past the first area, areas are
 * mapped; past the largest class, blocks are malloc()ed on their own.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "throttle.h"
#include "unit.h"

static char area[64 * 1024] __attribute__((aligned(16)));

/* Every size from 1 to past the largest class: held, aligned, its block
 * (header in) less than a quarter more than it needs (or 16 bytes more),
 * and roundup() agrees. */
static void
sizes(void)
{
	struct pool p;
	size_t n, worst = 0, bad = 0, misaligned = 0, disagree = 0;

	for (n = 1; n <= POOL_BIG + 4096; n += n < 4096 ? 1 : 61) {
		void *b;
		size_t have;

		pool_init(&p, area, sizeof(area));
		if ((b = pool_alloc(&p, n)) == NULL) {
			bad++;
			continue;
		}
		have = pool_size(b);
		if (have < n)
			bad++;
		if (have - n > 16 && (have - n) * 4 > n + 16 &&
		    have - n > worst)
			worst = have - n;
		if ((uintptr_t)b % 16 != 0)
			misaligned++;
		if (pool_roundup(n) != have)
			disagree++;
		memset(b, 0xa5, have); /* all of it is the caller's */
		pool_free(&p, b);
	}
	CHECK(bad == 0,
	    "every size from 1 byte to past 64 KiB gets a block "
	    "that holds it");
	CHECK(worst == 0,
	    "a block is less than a quarter (or 16 bytes) more "
	    "than it needs (worst %zu)",
	    worst);
	CHECK(misaligned == 0, "every block is aligned to 16 bytes");
	CHECK(disagree == 0, "pool_roundup() says what a block will hold");
	CHECK(pool_roundup(0) == 16 && pool_roundup(1) == 16 &&
		pool_roundup(17) == 32 && pool_roundup(64) == 64 &&
		pool_roundup(65) == 80,
	    "16-byte steps, then four a doubling");
}

/* Blocks given back are reused for their class, the last one cut gives
 * its bytes back, and blocks never overlap. */
static void
reuse(void)
{
	struct pool p;
	char *a, *b, *c, *d, *e;

	pool_init(&p, area, sizeof(area));
	a = pool_alloc(&p, 100);
	b = pool_alloc(&p, 100);
	c = pool_alloc(&p, 1000);
	CHECK(a != NULL && b != NULL && c != NULL && b >= a + 100 &&
		c >= b + 100,
	    "blocks are cut one after another, never overlapping");
	pool_free(&p, a);
	d = pool_alloc(&p, 1000);
	CHECK(d != a, "a block given back is not reused for another class");
	e = pool_alloc(&p, 97);
	CHECK(e == a, "a block given back is reused for its class");
	pool_free(&p, d);
	CHECK(pool_alloc(&p, 1000) == d,
	    "the last block cut gives its bytes back to the area");
	pool_free(&p, NULL);
	CHECK(1, "giving back NULL does nothing");
}

/* realloc keeps the bytes, in place while they fit. */
static void
grow(void)
{
	struct pool p;
	char *a, *b, *big, *big2;
	size_t i, ok = 1;

	pool_init(&p, area, sizeof(area));
	a = pool_alloc(&p, 40);
	memcpy(a, "0123456789012345678901234567890123456789", 40);
	CHECK(pool_realloc(&p, a, pool_size(a)) == a,
	    "a block that holds the new size stays where it is");
	CHECK(pool_realloc(&p, a, 10) == a, "a block shrunk stays where it is");
	b = pool_realloc(&p, a, 3000);
	CHECK(b != NULL &&
		memcmp(b, "0123456789012345678901234567890123456789", 40) == 0,
	    "a block grown past its class moves, its bytes with it");
	big = pool_realloc(&p, b, 100000);
	CHECK(big != NULL && pool_size(big) == 100000 &&
		memcmp(big, "0123456789", 10) == 0,
	    "grown past the largest class: a block of its own, bytes kept");
	for (i = 0; i < 100000; i++)
		big[i] = (char)i;
	big2 = pool_realloc(&p, big, 200000);
	for (i = 0; big2 != NULL && i < 100000; i++)
		ok &= big2[i] == (char)i;
	CHECK(big2 != NULL && ok && pool_size(big2) == 200000,
	    "a block of its own grows by realloc(), its bytes kept");
	a = pool_realloc(&p, big2, 64);
	CHECK(a != NULL && memcmp(a, "\0\1\2\3\4\5\6\7", 8) == 0 &&
		pool_size(a) < 100,
	    "and shrinks back into a class");
	pool_free(&p, a);
	CHECK(pool_realloc(&p, NULL, 8) != NULL, "realloc of NULL allocates");
}

/* Past the first area: areas are mapped, and nothing is lost. */
static void
areas(void)
{
	struct pool p;
	char *b[200];
	int i, n = 0, intact = 1;

	pool_init(&p, area, sizeof(area));
	for (i = 0; i < 200; i++) {
		if ((b[i] = pool_alloc(&p, 3000)) != NULL)
			n++;
		if (b[i] != NULL)
			memset(b[i], i, 3000);
	}
	for (i = 0; i < 200; i++)
		intact &= b[i] != NULL && (unsigned char)b[i][0] == i &&
		    (unsigned char)b[i][2999] == i;
	CHECK(n == 200 && intact,
	    "600 KB of blocks from a 64 KiB first area, every byte kept");
	CHECK(p.areas >= 2, "further areas were mapped (%u)", p.areas);
	for (i = 0; i < 200; i++)
		pool_free(&p, b[i]);
	CHECK(pool_alloc(&p, 3000) != NULL, "and blocks are reused after");
}

/* The edges: the largest class and the first size past it, the smallest
 * class's blocks (just room for the list's pointer), and an area's end. */
static void
edges(void)
{
	struct pool p;
	char *a, *b, *c;
	size_t top = POOL_BIG - 16;

	pool_init(&p, area, sizeof(area));
	a = pool_alloc(&p, top);
	CHECK(a != NULL && pool_size(a) == top && a == area + 16,
	    "%zu bytes: the largest class, from the area", top);
	pool_free(&p, a);
	b = pool_alloc(&p, top + 1);
	CHECK(b != NULL && pool_size(b) == top + 1 &&
		(b < area || b >= area + sizeof(area)),
	    "%zu bytes: a block of its own", top + 1);
	memset(b, 1, top + 1);
	c = pool_realloc(&p, b, top);
	CHECK(c != NULL && c >= area && c < area + sizeof(area) &&
		pool_size(c) == top && c[0] == 1 && c[top - 1] == 1,
	    "shrunk to the largest class: back in the area, bytes kept");
	b = pool_realloc(&p, c, top + 1);
	CHECK(b != NULL && pool_size(b) == top + 1 && b[top - 1] == 1,
	    "and grown past it again: a block of its own, bytes kept");
	pool_free(&p, b);
	CHECK(pool_size(NULL) == 0, "a NULL block holds nothing");

	pool_init(&p, area, sizeof(area));
	a = pool_alloc(&p, 1);
	b = pool_alloc(&p, 16);
	c = pool_alloc(&p, 1);
	pool_free(&p, a);
	pool_free(&p, c); /* the last one cut: back to the area */
	CHECK(pool_alloc(&p, 8) == a && pool_alloc(&p, 16) == c,
	    "the smallest class (16 bytes, room for the list's pointer): "
	    "its list first, then the area's end");
	(void)b;

	/* fill the first area to its last byte, then give that block back
	 * after an area was mapped: it goes on its list, the new area's end
	 * stays where it is */
	pool_init(&p, area, sizeof(area));
	a = pool_alloc(&p, sizeof(area) - 16);
	CHECK(a == area + 16 && p.next == p.end, "a block can fill the area");
	b = pool_alloc(&p, 100);
	CHECK(b != NULL && p.areas == 1, "the next one maps an area");
	c = p.next;
	pool_free(&p, a);
	CHECK(p.next == c && pool_alloc(&p, sizeof(area) - 16) == a,
	    "a block of an earlier area goes on its list, not back to the "
	    "area being cut");
}

int
main(void)
{
	sizes();
	reuse();
	grow();
	areas();
	edges();
	return unit_done();
}
