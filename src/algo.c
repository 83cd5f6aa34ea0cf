/*
 * algo.c: the table of algorithms, looked up by name or alias.
 */
#include <string.h>

#include "throttle.h"

const struct algo *const algo_table[] = {
	&algo_gcra,
	&algo_fixed,
	&algo_sliding,
	&algo_hybrid,
	NULL,
};

/* The algorithm called name (or one of its aliases), or NULL. */
const struct algo *
algo_find(const char *name)
{
	const struct algo *const *a;
	int i;

	for (a = algo_table; *a != NULL; a++) {
		if (strcmp((*a)->name, name) == 0)
			return *a;
		for (i = 0; (*a)->aliases[i] != NULL; i++)
			if (strcmp((*a)->aliases[i], name) == 0)
				return *a;
	}
	return NULL;
}

/*
 * Start next as a copy of s's fixed fields with no slots: next->slots is
 * the caller's buffer and must never be replaced.
 */
void
algo_copy_fields(struct kstate *next, const struct kstate *s)
{
	memcpy(next->v, s->v, sizeof(next->v));
	next->nslots = 0;
}
