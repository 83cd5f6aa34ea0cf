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

static int
release_exec(struct opts *o)
{
	struct store *st;
	struct keyrec rec = { 0 };
	struct kstate cur = { 0 }, next = { 0 };
	struct limit lim;
	struct decision d;
	char err[STORE_ERR_MAX];
	int found, rc;

	if (o->lease != NULL) {
		if (o->has_limit)
			die_usage("release: give --lease or a limit, not both");
		return release_lease(o);
	}
	if ((st = cmd_open(o, &rc)) == NULL)
		return rc;
	for (;;) {
		if (store_begin(st, 1) == -1) {
			rc = cmd_fail(o, st, store_error(st));
			goto out;
		}
		if ((found = cmd_prepare(o, st, &rec, &lim, &cur, &next, err,
			 sizeof(err))) == -1) {
			rc = cmd_fail(o, st, err);
			goto out;
		}
		if (!found && !o->has_limit) {
			store_rollback(st);
			store_close(st);
			rc = EXIT_ALLOWED;
			goto out;
		}
		lim.algo->release(&lim, &cur, o->now, o->cost, &next);
		/* the key as it now stands, for the output (cur is free) */
		lim.algo->decide(&lim, &next, o->now, 0, &d, &cur);
		if (cmd_save(o, st, &lim, &next, d.reset_after) == -1) {
			rc = cmd_fail(o, st, store_error(st));
			goto out;
		}
		if ((rc = store_commit(st)) == -1) {
			rc = cmd_fail(o, st, store_error(st));
			goto out;
		}
		if (rc != STORE_RETRY)
			break;
	}
	store_close(st);
	cmd_print(o, &lim, o->cost, &d);
	rc = EXIT_ALLOWED;
out:
	cmd_unprepare(&rec, &cur, &next);
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
	.exec = release_exec,
};
