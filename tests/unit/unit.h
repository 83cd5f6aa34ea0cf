/*
 * unit.h: a few lines of TAP for the C unit tests of the pure layer.
 * Each CHECK prints "ok N - what" or "not ok N - what"; unit_done()
 * prints the plan and returns the exit status.
 */
#ifndef UNIT_H
#define UNIT_H

#include <stdio.h>

static int unit_count, unit_failures;

/* cond is evaluated exactly once, so it may have side effects. */
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		int unit_ok_ = !!(cond);                                       \
		unit_count++;                                                  \
		if (!unit_ok_)                                                 \
			unit_failures++;                                       \
		printf("%s %d - ", unit_ok_ ? "ok" : "not ok", unit_count);    \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
		if (!unit_ok_)                                                 \
			printf("#   failed at %s:%d: %s\n", __FILE__,          \
			    __LINE__, #cond);                                  \
	} while (0)

static int
unit_done(void)
{
	printf("1..%d\n", unit_count);
	return unit_failures != 0;
}

#endif
