/*
 * slots.c: the byte encoding of a sliding window's sub-windows, shared by
 * every store so they all keep the same bytes.
 *
 * A sequence of unsigned LEB128 varints: the first sub-window's index, its
 * count, then for each further one the gap from the previous index (at
 * least 1) and its count (at least 1).  Steady traffic on a 1 h window at
 * 1 s granularity takes about 3 bytes a sub-window.  The decoder refuses
 * anything the encoder cannot have written.
 */
#include "throttle.h"

static size_t
put(unsigned char *p, uint64_t v)
{
	size_t n = 0;

	do {
		p[n] = (unsigned char)(v & 0x7f);
		v >>= 7;
		if (v != 0)
			p[n] |= 0x80;
		n++;
	} while (v != 0);
	return n;
}

static int
get(const unsigned char *p, size_t len, size_t *off, uint64_t *v)
{
	uint64_t r = 0;
	int shift;

	for (shift = 0; shift < 64 && *off < len; shift += 7) {
		unsigned char b = p[(*off)++];

		if (shift == 63 && (b & 0x7e) != 0)
			return -1;
		r |= (uint64_t)(b & 0x7f) << shift;
		if ((b & 0x80) == 0) {
			if (b == 0 && shift > 0)
				return -1; /* not the shortest form */
			*v = r;
			return 0;
		}
	}
	return -1;
}

/* Bytes slots_encode() may need for n sub-windows. */
size_t
slots_encoded_max(size_t n)
{
	return n * 20;
}

/* Encode n sub-windows (indexes increasing, from 0) into buf. */
size_t
slots_encode(const struct slot *s, size_t n, unsigned char *buf)
{
	size_t i, len = 0;

	for (i = 0; i < n; i++) {
		len += put(buf + len,
		    (uint64_t)(i == 0 ? s[0].index
				      : s[i].index - s[i - 1].index));
		len += put(buf + len, (uint64_t)s[i].count);
	}
	return len;
}

/*
 * Decode buf into at most cap sub-windows; with out NULL, only count them.
 * The number found, or -1 if buf is not an encoding of sub-windows.
 */
int64_t
slots_decode(const unsigned char *buf, size_t len, struct slot *out, size_t cap)
{
	uint64_t gap, count, index = 0;
	size_t off = 0, n = 0;

	while (off < len) {
		if (get(buf, len, &off, &gap) == -1 ||
		    get(buf, len, &off, &count) == -1)
			return -1;
		if ((n > 0 && gap == 0) || count == 0 || count > INT64_MAX ||
		    gap > (uint64_t)INT64_MAX - index || n >= SLOTS_MAX)
			return -1;
		index += gap;
		if (out != NULL) {
			if (n >= cap)
				return -1;
			out[n].index = (int64_t)index;
			out[n].count = (int64_t)count;
		}
		n++;
	}
	return (int64_t)n;
}
