/*
 * xmalloc.c: allocation that cannot fail; running out of memory ends the
 * process with a message (exit 3: nothing was decided or written).
 */
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

static void
oom(void)
{
	fputs("throttle: out of memory\n", stderr);
	exit(EXIT_STATE);
}

/* malloc(3) that never returns NULL. */
void *
xmalloc(size_t n)
{
	void *p;

	if ((p = malloc(n == 0 ? 1 : n)) == NULL)
		oom();
	return p;
}

/* calloc(3) that never returns NULL. */
void *
xcalloc(size_t n, size_t size)
{
	void *p;

	if ((p = calloc(n == 0 ? 1 : n, size == 0 ? 1 : size)) == NULL)
		oom();
	return p;
}

/* realloc(3) that never returns NULL. */
void *
xrealloc(void *p, size_t n)
{
	if ((p = realloc(p, n == 0 ? 1 : n)) == NULL)
		oom();
	return p;
}

/* strdup(3) that never returns NULL. */
char *
xstrdup(const char *s)
{
	char *p;

	if ((p = strdup(s)) == NULL)
		oom();
	return p;
}
