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
		for (i = 0; (*a)->also[i] != NULL; i++)
			if (strcmp((*a)->also[i], name) == 0)
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

/* Every name --algorithm takes, for messages: "gcra, token-bucket, ... or
 * hybrid". */
void
algo_names(char *buf, size_t len)
{
	const struct algo *const *a;
	const char *names[32];
	size_t n = 0, i, off = 0;
	int j;

	for (a = algo_table; *a != NULL && n < 32; a++) {
		names[n++] = (*a)->name;
		for (j = 0; (*a)->aliases[j] != NULL && n < 32; j++)
			names[n++] = (*a)->aliases[j];
	}
	buf[0] = '\0';
	for (i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
		    i == 0           ? ""
			: i + 1 == n ? " or "
				     : ", ",
		    names[i]);
}

/*
 * The names of the algorithms that have a feature (burst: --burst, else
 * --granularity), for messages: "gcra", or "gcra and hybrid".
 */
void
algo_names_with(int burst, char *buf, size_t len)
{
	const struct algo *const *a;
	const char *names[32];
	size_t n = 0, i, off = 0;

	for (a = algo_table; *a != NULL && n < 32; a++)
		if (burst ? (*a)->takes_burst : (*a)->takes_granularity)
			names[n++] = (*a)->name;
	buf[0] = '\0';
	for (i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
		    i == 0           ? ""
			: i + 1 == n ? " and "
				     : ", ",
		    names[i]);
}

/* The algorithms for --help: "gcra (default; alias token-bucket), ...". */
void
algo_described(char *buf, size_t len)
{
	const struct algo *const *a;
	size_t off = 0;
	int j;

	buf[0] = '\0';
	for (a = algo_table; *a != NULL && off < len; a++) {
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
		    a == algo_table    ? ""
			: a[1] == NULL ? " or "
				       : ", ",
		    (*a)->name);
		for (j = 0; (*a)->aliases[j] != NULL && off < len; j++)
			off += (size_t)snprintf(buf + off, len - off, "%s%s%s",
			    j == 0 ? (a == algo_table ? " (default; alias "
						      : " (alias ")
				   : ", ",
			    (*a)->aliases[j],
			    (*a)->aliases[j + 1] == NULL ? ")" : "");
	}
}
