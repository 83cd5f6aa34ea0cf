/*
 * cmd-inspect.c: show a key's state (or every key's) under the limit it
 * was last used with: remaining units as it stands, how long until one
 * more unit is allowed, and how long until it is back at rest; and its
 * live leases.  Reads in a read transaction and never writes.  The list of
 * every key is printed as it is read (answer_flush()), however long.
 */
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

struct look {
	struct ctx *c;
	const struct args *a;
	struct answer *ans;
	struct host me;
	int limits; /* limits shown */
	int leases; /* live leases shown */
};

/* One limit of a key, as it reads now (moved back if the clock was ahead). */
static int
show(const struct keyrec *rec, void *arg)
{
	struct look *l = arg;
	struct decision now, one;
	struct kstate cur = { 0 }, next = { 0 };

	cur.slots = xcalloc(rec->state.nslots + 1, sizeof(*cur.slots));
	next.slots = xcalloc(rec->state.nslots + 2, sizeof(*next.slots));
	limit_carry(&rec->limit, rec, 1, l->c->now, &cur);
	rec->limit.algo->decide(&rec->limit, &cur, l->c->now, 0, &now, &next);
	next.nslots = 0;
	rec->limit.algo->decide(&rec->limit, &cur, l->c->now, 1, &one, &next);
	free(next.slots);
	free(cur.slots);
	now.retry_after = one.retry_after;
	keystate_numbers(l->ans, rec->key, rec->keylen, &rec->limit, &now, 0,
	    0);
	l->limits++;
	answer_flush(l->ans);
	return 0;
}

/* One live lease; dead ones are left for the next acquire. */
static int
show_lease(const char *key, size_t keylen, const struct lease *le, void *arg)
{
	struct look *l = arg;
	const char *prio = priority_name(le->priority);
	int64_t now = l->c->now;
	struct record *r;

	if (!lease_live(le, now, host_owner_state(&l->me, le)))
		return 0;
	l->leases++;
	if (l->c->format == FORMAT_SHELL)
		return 0; /* shell shows the rate state; leases are many */
	r = answer_record(l->ans, TEXT_FIELDS);
	rec_str(l->ans, r, "key", key, keylen, 0);
	rec_str(l->ans, r, "lease", le->id, strlen(le->id), 0);
	rec_str(l->ans, r, "priority", prio, strlen(prio), 0);
	rec_int(r, "owner", le->pid, 0);
	rec_str(l->ans, r, "host", le->host, strlen(le->host), 0);
	rec_secs(r, "age", now > le->acquired ? now - le->acquired : 0, 0);
	rec_secs(r, "expires_after", lease_expires_after(le, now), 0);
	answer_flush(l->ans);
	return 0;
}

/* One key name per line; names a line cannot hold are left out. */
static int
show_name(const char *key, size_t keylen, void *arg)
{
	struct look *l = arg;
	struct record *r;

	if (memchr(key, '\n', keylen) != NULL ||
	    memchr(key, '\r', keylen) != NULL)
		return 0;
	r = answer_record(l->ans, TEXT_RAW);
	r->line = answer_keep(l->ans, key, keylen);
	answer_flush(l->ans);
	return 0;
}

static int
look_body(struct ctx *c, void *arg, struct answer *ans)
{
	struct look *l = arg;
	const struct args *a = l->a;
	struct keyrec rec;
	int idx, found;

	if (ctx_now(c, ans) == -1)
		return -1;
	if (a->names)
		return store_names(c->store, show_name, l) == -1
		    ? ctx_fail(c, ans)
		    : 0;
	if (a->key == NULL)
		return store_list(c->store, show, l) == -1 ||
			store_lease_list(c->store, NULL, 0, show_lease, l) == -1
		    ? ctx_fail(c, ans)
		    : 0;
	/* each of the key's limits, then its leases */
	for (idx = 0; idx < LIMITS_MAX; idx++) {
		memset(&rec, 0, sizeof(rec));
		if ((found = store_load(c->store, a->key, a->keylen, idx,
			 &rec)) == -1)
			return ctx_fail(c, ans);
		if (found)
			show(&rec, l);
		free(rec.state.slots);
		if (!found)
			break;
	}
	if (store_lease_list(c->store, a->key, a->keylen, show_lease, l) == -1)
		return ctx_fail(c, ans);
	return 0;
}

static void
inspect_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct look l;

	if (a->key == NULL && c->format == FORMAT_SHELL) {
		answer_usage(ans,
		    "inspect: --format shell shows one key; give a key, or "
		    "use --format json for all of them");
		return;
	}
	if (a->names && a->key != NULL) {
		answer_usage(ans,
		    "inspect: --names lists every key; leave the key out");
		return;
	}
	memset(&l, 0, sizeof(l));
	l.c = c;
	l.a = a;
	l.ans = ans;
	host_self(&l.me);
	if (!c->batch)
		ans->stream = c; /* print as it is read: a list may be long */
	if (txn_run(c, 0, look_body, &l, ans) == -1)
		return;
	if (a->key != NULL && !a->names && l.limits == 0 && l.leases == 0) {
		answer_say_key(ans, MSG_NOTICE, a->key, a->keylen,
		    ": no state (never used, reset, or forgotten)");
		ans->rc = EXIT_REFUSED;
	}
}

const struct cmd_entry cmd_inspect_entry = {
	.name = "inspect",
	.args = "[KEY]",
	.summary = "show a key's limit and state and its live leases "
		   "(without KEY: every key); exit 1 if it has none",
	.options = CMDOPT_NAMES,
	.min_args = 0,
	.max_args = 1,
	.operand_is_key = 1,
	.in_batch = 1,
	.reads_only = 1,
	.exec = inspect_exec,
};
