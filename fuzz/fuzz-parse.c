/*
 * fuzz-parse.c: libFuzzer harness for the pure parsers.  Every input goes
 * through each parser; a limit that parses and validates is then decided
 * on by every algorithm at the edges of time, so the arithmetic behind a
 * parsed limit is covered too (run with ASan and UBSan).
 */
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static struct slot room_a[SLOTS_MAX + 2], room_b[SLOTS_MAX + 2];

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int64_t times[] = { 0, 1, 1700000000000000, TIME_MAX - 1 };
	char buf[256];
	const char *err;
	int64_t v, count, period, value;
	int percent, i;
	size_t t;
	struct limit l;
	struct kstate s, next;
	struct decision d;

	if (size >= sizeof(buf))
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	parse_duration(buf, &v, &err);
	parse_time(buf, &v, &err);
	parse_count(buf, COUNT_MAX, &v, &err);
	parse_fraction(buf, &v, &err);
	parse_reserve(buf, &value, &percent, &err);
	if (parse_limit(buf, &count, &period, &err) == -1)
		return 0;
	for (i = 0; algo_table[i] != NULL; i++) {
		memset(&l, 0, sizeof(l));
		l.algo = algo_table[i];
		l.count = count;
		l.period = period;
		l.burst = count;
		if (l.algo->default_granularity != NULL)
			l.granularity = l.algo->default_granularity(period);
		if (limit_validate(&l, &err) == -1)
			continue;
		memset(&s, 0, sizeof(s));
		s.slots = room_a;
		for (t = 0; t < sizeof(times) / sizeof(times[0]); t++) {
			memset(&next, 0, sizeof(next));
			next.slots = s.slots == room_a ? room_b : room_a;
			l.algo->decide(&l, &s, times[t], count, &d, &next);
			if (d.allowed)
				s = next;
		}
	}
	return 0;
}
