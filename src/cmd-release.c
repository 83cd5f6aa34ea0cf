/*
 * cmd-release.c: give units back, for work that was counted but not done;
 * or free a lease.
 *
 * The key's own stored limit is used unless --limit is given.  A key with
 * no state is already full: there is nothing to give back, and that is not
 * an error.  A key never goes beyond its capacity.
 */
#include <string.h>

#include "throttle.h"

/* release KEY --lease ID: free one slot, touching no other lease. */
static void
release_lease(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct record *r;
	int found;

	if (a->lease_bad) {
		lease_bad(a, ans);
		return;
	}
	if ((found = concurrency_free(c, a->key, a->keylen, a->lease, ans)) ==
	    -1)
		return;
	if (!found) {
		answer_say_key(ans, MSG_NOTICE, a->key, a->keylen,
		    ": no lease %s (already released, expired and cleaned "
		    "up, or never held)",
		    a->lease);
		ans->rc = EXIT_REFUSED;
		return;
	}
	r = answer_record(ans, TEXT_NONE);
	rec_str(ans, r, "key", a->key, a->keylen, 0);
	rec_str(ans, r, "lease", a->lease, strlen(a->lease), 0);
	rec_bool(r, "released", 1, 0);
}

struct give {
	const struct args *a;
	struct keywork *k;
	int nothing; /* the key holds no state in use: nothing to give */
};

/* Give units back to each of the key's limits, in one transaction. */
static int
give_body(struct ctx *c, void *arg, struct answer *ans)
{
	struct give *g = arg;
	int i;

	/* the lockout, only to show: a release does not lift it */
	if (store_lockout_get(c->store, g->a->key, g->a->keylen, &g->k->lk) ==
	    -1)
		return ctx_fail(c, ans);
	/* keystate_load() reads the time, after the key */
	if (keystate_load(c, g->k, g->a->limits, g->a->nlimits, 1, ans) == -1)
		return -1;
	g->k->now = c->now;
	lockout_carry(&g->k->lk, c->now); /* as a decision reads it now */
	for (i = 0; i < g->k->n && !g->k->w[i].found; i++)
		;
	if (i == g->k->n && g->k->lk.until <= c->now)
		/* no state in use and no lockout: the key is full already,
		 * and nothing is written for it (the answer still shows the
		 * limit given) */
		g->nothing = 1;
	if (g->k->n == 0)
		return TXN_ROLLBACK; /* no state and no limit: nothing to do */
	keystate_carry(g->k, c->now);
	keystate_release(g->k, c->now, g->a->cost);
	if (g->k->lk.until > c->now) {
		/* locked out: the answer is a decision's on the key now,
		 * refused until the lockout ends (keystate_record() shows
		 * none remaining) */
		g->k->d.allowed = 0;
		g->k->d.retry_after = g->k->d.reset_after =
		    lockout_left(&g->k->lk, c->now);
	}
	/* no file at --db's path: nothing taken, nothing to give back,
	 * and no file made for it */
	if (g->nothing || store_missing(c->store, NULL, 0))
		return TXN_ROLLBACK;
	return keystate_save(c, g->k, SAVE_CHARGED, c->now, ans);
}

static void
release_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct keywork k;
	struct give g = { a, &k, 0 };
	char miss[DBNAME_MAX + 128];

	if (a->lease != NULL) {
		if (a->nlimits > 0)
			answer_usage(ans,
			    "release: give --lease or a limit, not both");
		else if (args_given(a, "cost"))
			answer_usage(ans,
			    "release: --lease frees one slot, whatever --cost "
			    "says; leave --cost out (it gives units back: "
			    "release KEY --cost N)");
		else
			release_lease(c, a, ans);
		return;
	}
	keystate_init(&k, a->key, a->keylen);
	if (txn_run(c, 1, give_body, &g, ans) == 0) {
		if (k.n > 0)
			keystate_record(ans, &k, 1, a->cost);
		else {
			/* no state: already full, nothing given back; json
			 * and shell still get an answer to read (a key locked
			 * out is answered as check would: refused) */
			struct record *r = answer_record(ans, TEXT_NONE);

			rec_str(ans, r, "key", a->key, a->keylen, 0);
			if (k.lk.until > k.now) {
				rec_bool(r, "allowed", 0, 0);
				rec_int(r, "remaining", 0, 0);
				rec_secs(r, "retry_after",
				    lockout_left(&k.lk, k.now), 0);
				keystate_lockout(ans, r, &k.lk, k.now);
			}
			rec_int(r, "released", 0, 0);
		}
		if (store_missing(c->store, miss, sizeof(miss)))
			answer_say(ans, MSG_INFO, "%s", miss); /* a typo? */
	}
	keystate_free(&k);
}

const struct cmd_entry cmd_release_entry = {
	.name = "release",
	.makes_no_file = 1, /* nothing to undo in a file not there */
	.decides = 1,
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
