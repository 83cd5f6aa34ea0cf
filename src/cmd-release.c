/*
 * cmd-release.c: give units back, for work that was counted but not done.
 *
 * The key's own stored limit is used unless --limit is given.  A key with
 * no state is already full: there is nothing to give back, and that is not
 * an error.  A key never goes beyond its capacity.
 */
#include <string.h>

#include "throttle.h"

/* release KEY --lease ID: free one slot, touching no other lease. */
static int
release_lease(struct opts *o)
{
	struct store *st;
	int found, rc;

	if ((st = cmd_open(o, &rc)) == NULL)
		return rc;
	do {
		if (store_begin(st, 1) == -1 ||
		    (found = store_lease_del(st, o->key, o->keylen,
			 o->lease)) == -1 ||
		    (rc = store_commit(st)) == -1)
			return cmd_fail(o, st, store_error(st));
	} while (rc == STORE_RETRY);
	store_close(st);
	if (!found) {
		log_key(o->key, o->keylen,
		    ": no lease %s (already released, expired and cleaned "
		    "up, or never held)",
		    o->lease);
		return EXIT_REFUSED;
	}
	if (o->format != FORMAT_TEXT) {
		struct field f[] = {
			{ "key", FIELD_STR, o->key, o->keylen, 0 },
			{ "lease", FIELD_STR, o->lease, strlen(o->lease), 0 },
			{ "released", FIELD_BOOL, NULL, 0, 1 },
		};
		output_fields(o, f, sizeof(f) / sizeof(f[0]));
	}
	return EXIT_ALLOWED;
}

/*
 * Give units back to each of the key's limits: those on the command line,
 * or else every limit the key has stored.
 */
static int
release_exec(struct opts *o)
{
	struct store *st;
	struct work w[LIMITS_MAX];
	struct decision d;
	struct kstate back;
	char err[STORE_ERR_MAX];
	int i, n, found, rc;

	if (o->lease != NULL) {
		if (o->nlimits > 0)
			return cmd_usage(o,
			    "release: give --lease or a limit, not both");
		return release_lease(o);
	}
	memset(w, 0, sizeof(w));
	if ((st = cmd_open(o, &rc)) == NULL)
		return rc;
	for (;;) {
		if (store_begin(st, 1) == -1)
			goto fail;
		if (cmd_now(o, st, err, sizeof(err)) == -1) {
			rc = cmd_fail(o, st, err);
			goto out;
		}
		for (n = 0; n < LIMITS_MAX; n++) {
			if ((found = cmd_prepare(o, st, n, &w[n], err,
				 sizeof(err))) == -1) {
				rc = cmd_fail(o, st, err);
				goto out;
			}
			if (n >= o->nlimits && !found)
				break;
			cmd_carry(o, &w[n]);
			back = w[n].next;
			w[n].lim.algo->release(&w[n].lim, &w[n].cur, o->now,
			    o->cost, &back);
			/* the key as it now stands, for the output */
			w[n].lim.algo->decide(&w[n].lim, &back, o->now, 0,
			    &w[n].d, &w[n].cur);
			if (cmd_save(o, st, n, &w[n].lim, &back,
				o->now + w[n].d.reset_after) == -1)
				goto fail;
		}
		if (n == 0) {
			/* no state and no limit: nothing to give back */
			store_rollback(st);
			store_close(st);
			rc = EXIT_ALLOWED;
			goto out;
		}
		if ((rc = store_commit(st)) == -1)
			goto fail;
		if (rc != STORE_RETRY)
			break;
	}
	store_close(st);
	memset(&d, 0, sizeof(d));
	d.allowed = 1;
	d.remaining = INT64_MAX;
	for (i = 0; i < n; i++) {
		if (w[i].d.remaining < d.remaining)
			d.remaining = w[i].d.remaining;
		if (w[i].d.reset_after > d.reset_after)
			d.reset_after = w[i].d.reset_after;
	}
	cmd_print(o, w, n, o->cost, &d);
	rc = EXIT_ALLOWED;
	goto out;
fail:
	rc = cmd_fail(o, st, store_error(st));
out:
	for (i = 0; i < LIMITS_MAX; i++)
		cmd_unprepare(&w[i]);
	return rc;
}

const struct cmd_entry cmd_release_entry = {
	.name = "release",
	.args = "KEY [--cost N] [--limit N/PERIOD [limit options]] | "
		"KEY --lease ID",
	.summary = "give --cost units back (work counted but not done), "
		   "never beyond capacity; or free a lease",
	.options = CMDOPT_LIMIT | CMDOPT_BURST | CMDOPT_ALGORITHM |
	    CMDOPT_COST | CMDOPT_GRANULARITY | CMDOPT_LEASE,
	.min_args = 1,
	.max_args = 1,
	.operand_is_key = 1,
	.in_batch = 1,
	.exec = release_exec,
};
