/*
 * test-arena.c: the allocator SQLite uses in the throttle binary
 * (arena.c): blocks are aligned, know their size and keep their bytes;
 * the newest block is given back and grown in place; other blocks stay
 * until the end; a used-up buffer hands out malloc(3)'s blocks, which go
 * back to free(3).
 */
#include <stdint.h>
#include <string.h>

#include "throttle.h"
#include "unit.h"

static int
aligned(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

int
main(void)
{
	unsigned char *a, *b, *c, *d;
	size_t used, i;
	int ok;

	arena_reset();
	a = arena_alloc(1);
	b = arena_alloc(100);
	CHECK(a != NULL && b != NULL && aligned(a) && aligned(b),
	    "blocks are aligned to 16 bytes");
	CHECK(arena_owns(a) && arena_owns(b), "they come from the buffer");
	CHECK(arena_size(a) == 16 && arena_size(b) == 112,
	    "a block's size is what was asked, rounded up to 16");
	CHECK(arena_size(NULL) == 0, "NULL has no size");
	CHECK(b >= a + arena_size(a), "blocks do not overlap");
	memset(a, 0xaa, arena_size(a));
	memset(b, 0xbb, arena_size(b));

	/* the newest block goes back; an older one stays */
	used = arena_used();
	arena_free(b);
	CHECK(arena_used() < used, "freeing the newest block gives it back");
	c = arena_alloc(100);
	CHECK(c == b, "and the next block takes its place");
	used = arena_used();
	arena_free(a);
	CHECK(arena_used() == used && a[0] == 0xaa,
	    "freeing an older block changes nothing");
	arena_free(NULL);
	CHECK(arena_used() == used, "freeing NULL changes nothing");

	/* growing: the newest block in place, another by moving it */
	memset(c, 0xcc, arena_size(c));
	d = arena_realloc(c, 1000);
	CHECK(d == c && arena_size(d) == 1008 && d[111] == 0xcc,
	    "the newest block grows in place, its bytes kept");
	CHECK(arena_realloc(d, 10) == d && arena_size(d) == 1008,
	    "shrinking keeps the block as it is");
	b = arena_alloc(32);
	memset(b, 0xbb, 32);
	c = arena_realloc(d, 2000);
	ok = c != NULL && c != d && arena_size(c) == 2000;
	for (i = 0; ok && i < 112; i++)
		ok = c[i] == 0xcc;
	CHECK(ok && b[0] == 0xbb,
	    "an older block grows by moving, its bytes kept, others untouched");
	CHECK(arena_realloc(NULL, 40) != NULL, "realloc of NULL allocates");
	CHECK(arena_alloc(SIZE_MAX - 8) == NULL &&
		arena_realloc(c, SIZE_MAX - 8) == NULL && c[0] == 0xcc,
	    "an impossible size fails, the block untouched");

	/* a used-up buffer: malloc's blocks, given back to free */
	arena_reset();
	a = arena_alloc(ARENA_SIZE - 64);
	CHECK(a != NULL && arena_owns(a), "the buffer holds one large block");
	b = arena_alloc(64);
	CHECK(b != NULL && !arena_owns(b) && aligned(b) && arena_size(b) == 64,
	    "past its end, blocks come from malloc, aligned, sized");
	memset(b, 0x5b, 64);
	c = arena_realloc(b, 4096);
	CHECK(c != NULL && !arena_owns(c) && c[63] == 0x5b &&
		arena_size(c) == 4096,
	    "and grow as malloc's blocks");
	arena_free(c);
	d = arena_realloc(a, ARENA_SIZE);
	CHECK(d != NULL && !arena_owns(d) && arena_size(d) == ARENA_SIZE,
	    "the buffer's last block, too big to grow in place, moves out");
	arena_free(d);
	CHECK(arena_used() == 0, "and leaves the buffer empty behind it");
	arena_reset();
	return unit_done();
}
