/*
 * cmd-renew.c: extend a lease that a long job still holds.  Only a live
 * lease can be renewed: one that expired, or whose owner is gone, may
 * already have been replaced by another holder.
 */
#include <string.h>

#include "throttle.h"

static int
renew_exec(struct opts *o)
{
	struct store *st;
	struct lease l;
	int found, rc;

	if (o->lease == NULL)
		return cmd_usage(o,
		    "renew: --lease is missing; give the id acquire "
		    "printed");
	if ((st = cmd_open(o, &rc)) == NULL)
		return rc;
	do {
		if (store_begin(st, 1) == -1 ||
		    (found = cmd_acquire_scan(o, st, 1, o->lease, NULL, NULL,
			 &l)) == -1)
			return cmd_fail(o, st, store_error(st));
		if (found) {
			if (o->has_ttl)
				l.ttl = o->ttl;
			if (l.ttl == 0 && l.pid == 0) {
				store_rollback(st);
				store_close(st);
				return cmd_usage(o,
				    "--ttl: 0 (no expiry) needs a lease with "
				    "an owner");
			}
			l.expires = l.ttl > 0 ? o->now + l.ttl : 0;
			if (store_lease_put(st, o->key, o->keylen, &l) == -1)
				return cmd_fail(o, st, store_error(st));
		}
		if ((rc = store_commit(st)) == -1)
			return cmd_fail(o, st, store_error(st));
	} while (rc == STORE_RETRY);
	store_close(st);
	if (!found) {
		log_key(o->key, o->keylen,
		    ": no live lease %s (released, expired, or its owner is "
		    "gone); acquire a new one",
		    o->lease);
		return EXIT_REFUSED;
	}
	if (o->format != FORMAT_TEXT) {
		struct field f[] = {
			{ "key", FIELD_STR, o->key, o->keylen, 0 },
			{ "lease", FIELD_STR, l.id, strlen(l.id), 0 },
			{ "expires_after", FIELD_SECS, NULL, 0,
			    lease_expires_after(&l, o->now) },
		};
		output_fields(o, f, sizeof(f) / sizeof(f[0]));
	}
	return EXIT_ALLOWED;
}

const struct cmd_entry cmd_renew_entry = {
	.name = "renew",
	.args = "KEY --lease ID [--ttl DURATION]",
	.summary = "extend a live lease by --ttl (default: its own TTL) from "
		   "now; exit 1 if it is gone",
	.options = CMDOPT_LEASE | CMDOPT_TTL,
	.min_args = 1,
	.max_args = 1,
	.operand_is_key = 1,
	.in_batch = 1,
	.exec = renew_exec,
};
