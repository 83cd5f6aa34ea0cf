/*
 * cmd-gc.c: forget what nothing is lost by forgetting: every key's limit
 * that is back at rest, every ended lockout, and every lease that has
 * ended (TTL passed, or owner on this host gone).  consume tidies a few
 * rows on every write as well, so a busy state file stays bounded without
 * anyone running gc.
 */
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

struct dead {
	struct host me;
	int64_t now;
	struct {
		char key[KEY_MAX + 1];
		size_t keylen;
		char id[LEASE_ID_LEN + 1];
	} * v;
	size_t n, cap;
};

static int
collect(const char *key, size_t keylen, const struct lease *l, void *arg)
{
	struct dead *d = arg;

	if (lease_live(l, d->now, host_owner_state(&d->me, l)))
		return 0;
	if (d->n == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 16;
		if ((d->v = realloc(d->v, d->cap * sizeof(*d->v))) == NULL) {
			fputs("throttle: out of memory\n", stderr);
			exit(EXIT_STATE);
		}
	}
	memcpy(d->v[d->n].key, key, keylen);
	d->v[d->n].keylen = keylen;
	memcpy(d->v[d->n].id, l->id, sizeof(d->v[d->n].id));
	d->n++;
	return 0;
}

static int
gc_exec(struct opts *o)
{
	struct store *st;
	struct dead d;
	int64_t keys;
	size_t i;
	int rc;

	memset(&d, 0, sizeof(d));
	host_self(&d.me);
	d.now = o->now;
	if ((st = cmd_open(o, &rc)) == NULL)
		return rc;
	do {
		d.n = 0;
		/* gc changes rows all over the file: it checks the whole
		 * file first, and leaves a corrupt one as it is */
		if (store_begin(st, 1) == -1 || store_verify(st, 1) == -1 ||
		    (keys = store_tidy(st, o->now, 0)) == -1 ||
		    store_lease_list(st, NULL, 0, collect, &d) == -1)
			goto fail;
		for (i = 0; i < d.n; i++)
			if (store_lease_del(st, d.v[i].key, d.v[i].keylen,
				d.v[i].id) == -1)
				goto fail;
		if ((rc = store_commit(st)) == -1)
			goto fail;
	} while (rc == STORE_RETRY);
	store_close(st);
	free(d.v);
	if (o->format == FORMAT_TEXT)
		printf("removed %lld key%s at rest and %zu ended lease%s\n",
		    (long long)keys, keys == 1 ? "" : "s", d.n,
		    d.n == 1 ? "" : "s");
	else {
		struct field f[] = {
			{ "keys", FIELD_INT, NULL, 0, keys },
			{ "leases", FIELD_INT, NULL, 0, (int64_t)d.n },
		};
		output_fields(o, f, sizeof(f) / sizeof(f[0]));
	}
	return EXIT_ALLOWED;
fail:
	free(d.v);
	return cmd_fail(o, st, store_error(st));
}

const struct cmd_entry cmd_gc_entry = {
	.name = "gc",
	.args = "",
	.summary = "forget keys at rest and ended leases and lockouts; print "
		   "how many",
	.options = 0,
	.min_args = 0,
	.max_args = 0,
	.exec = gc_exec,
};
