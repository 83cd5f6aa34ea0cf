/*
 * musl-mem.c: memcpy(), memmove(), memset() and memcmp() for the
 * throttle linked with musl (make LIBC=musl; see the Makefile), in place
 * of musl's own.
 *
 * musl's x86_64 versions are a `rep movsq` or `rep stosq`, with single
 * `movsb` instructions for the unaligned ends.  On the virtual machines
 * measured here string instructions are slow (in a loop of calls, 61 ns
 * to copy 24 bytes and 388 ns to copy 4 KiB, against glibc's 4 ns and
 * 60 ns), and SQLite copies records and pages all the time: memcpy() was a
 * quarter of a batch's time (perf).  These copy 16 bytes at a time with plain
 * SSE2 loads and stores (the x86_64 baseline): a block of any length is
 * its first and last 16 or 32 bytes, which may overlap, and the 32-byte
 * chunks between.
 *
 * Every load of a chunk comes before its store, and the two ends are
 * loaded first, so memmove() copies forward when the destination is
 * below the source and backward when it is above, and nothing is read
 * after it was overwritten.
 *
 * musl's memcmp() compares a byte at a time; it was a third of a batch's
 * time on the Redis store, which compares each request's key with those
 * its group has read.  This one compares 8 bytes at a time, and where
 * two words differ, their byte-swapped values order them as their first
 * differing bytes do.
 */
#if defined(THROTTLE_MUSL)

/* gcc would turn the loops below into calls to memcpy() and memset(),
 * which would be these functions calling themselves */
#pragma GCC optimize("no-tree-loop-distribute-patterns")

#include <stddef.h>
#include <stdint.h>

typedef unsigned char v16
    __attribute__((vector_size(16), aligned(1), may_alias));
typedef uint64_t u64 __attribute__((aligned(1), may_alias));
typedef uint32_t u32 __attribute__((aligned(1), may_alias));
typedef uint16_t u16 __attribute__((aligned(1), may_alias));

void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);

/* n <= 32 bytes: every byte loaded before any is stored */
static inline void
small(unsigned char *d, const unsigned char *s, size_t n)
{
	if (n >= 16) {
		v16 a = *(const v16 *)s, b = *(const v16 *)(s + n - 16);

		*(v16 *)d = a;
		*(v16 *)(d + n - 16) = b;
	} else if (n >= 8) {
		uint64_t a = *(const u64 *)s, b = *(const u64 *)(s + n - 8);

		*(u64 *)d = a;
		*(u64 *)(d + n - 8) = b;
	} else if (n >= 4) {
		uint32_t a = *(const u32 *)s, b = *(const u32 *)(s + n - 4);

		*(u32 *)d = a;
		*(u32 *)(d + n - 4) = b;
	} else if (n >= 2) {
		uint16_t a = *(const u16 *)s, b = *(const u16 *)(s + n - 2);

		*(u16 *)d = a;
		*(u16 *)(d + n - 2) = b;
	} else if (n == 1)
		*d = *s;
}

/* n > 32, d below s or apart from it */
static inline void
forward(unsigned char *d, const unsigned char *s, size_t n)
{
	v16 t0 = *(const v16 *)(s + n - 32), t1 = *(const v16 *)(s + n - 16);
	size_t i;

	for (i = 0; i + 32 < n; i += 32) {
		v16 a = *(const v16 *)(s + i), b = *(const v16 *)(s + i + 16);

		*(v16 *)(d + i) = a;
		*(v16 *)(d + i + 16) = b;
	}
	*(v16 *)(d + n - 32) = t0;
	*(v16 *)(d + n - 16) = t1;
}

/* n > 32, d above s and overlapping it */
static inline void
backward(unsigned char *d, const unsigned char *s, size_t n)
{
	v16 h0 = *(const v16 *)s, h1 = *(const v16 *)(s + 16);
	size_t i;

	for (i = n; i > 32; i -= 32) {
		v16 a = *(const v16 *)(s + i - 32),
		    b = *(const v16 *)(s + i - 16);

		*(v16 *)(d + i - 32) = a;
		*(v16 *)(d + i - 16) = b;
	}
	*(v16 *)d = h0;
	*(v16 *)(d + 16) = h1;
}

void *
memcpy(void *restrict dst, const void *restrict src, size_t n)
{
	if (n <= 32)
		small(dst, src, n);
	else
		forward(dst, src, n);
	return dst;
}

void *
memmove(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	if (n <= 32)
		small(d, s, n);
	else if ((uintptr_t)d - (uintptr_t)s >= n) /* d below s, or apart */
		forward(d, s, n);
	else
		backward(d, s, n);
	return dst;
}

void *
memset(void *dst, int c, size_t n)
{
	unsigned char *d = dst;
	uint64_t w = 0x0101010101010101u * (unsigned char)c;
	v16 v = (v16){ 0 } + (unsigned char)c;
	size_t i;

	if (n > 32) {
		for (i = 0; i + 32 < n; i += 32) {
			*(v16 *)(d + i) = v;
			*(v16 *)(d + i + 16) = v;
		}
		*(v16 *)(d + n - 32) = v;
		*(v16 *)(d + n - 16) = v;
	} else if (n >= 16) {
		*(v16 *)d = v;
		*(v16 *)(d + n - 16) = v;
	} else if (n >= 8) {
		*(u64 *)d = w;
		*(u64 *)(d + n - 8) = w;
	} else if (n >= 4) {
		*(u32 *)d = (uint32_t)w;
		*(u32 *)(d + n - 4) = (uint32_t)w;
	} else if (n >= 2) {
		*(u16 *)d = (uint16_t)w;
		*(u16 *)(d + n - 2) = (uint16_t)w;
	} else if (n == 1)
		*d = (unsigned char)c;
	return dst;
}

int
memcmp(const void *a, const void *b, size_t n)
{
	const unsigned char *p = a, *q = b;
	size_t i = 0;

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	for (; i + 8 <= n; i += 8) {
		uint64_t x = *(const u64 *)(p + i), y = *(const u64 *)(q + i);

		if (x != y)
			return __builtin_bswap64(x) < __builtin_bswap64(y) ? -1
									   : 1;
	}
#endif
	for (; i < n; i++)
		if (p[i] != q[i])
			return p[i] < q[i] ? -1 : 1;
	return 0;
}

#else
/* ISO C wants a translation unit to declare something. */
typedef int musl_mem_unused;
#endif
