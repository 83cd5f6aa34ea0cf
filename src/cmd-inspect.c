/*
 * cmd-inspect.c: show a key's state (or every key's) under the limit it
 * was last used with: remaining units as it stands, how long until one
 * more unit is allowed, and how long until it is back at rest; its
 * lockout, if it is locked; and its live leases.  --locked lists only the
 * keys locked out now.  Reads in a read transaction and never writes.  The
 * list of every key is printed as it is read (answer_flush()), however
 * long.  A key whose lockout has ended shows as it will be used next:
 * afresh, with its whole allowance.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

/* A key's lockout, gathered before a listing of every key. */
struct locked {
	char *key;
	size_t keylen;
	struct lockout lk;
	int shown; /* with a limit of its key */
};

struct look {
	struct ctx *c;
	const struct args *a;
	struct answer *ans;
	struct host me;
	int limits; /* limits shown */
	int leases; /* live leases shown */
	int locks; /* lockouts shown */
	struct lockout lk; /* the key's, when one key is shown */
	struct locked *all; /* every key's, sorted, for a listing */
	size_t nall, capall;
};

static int
cmp_locked(const void *x, const void *y)
{
	const struct locked *a = x, *b = y;
	size_t n = a->keylen < b->keylen ? a->keylen : b->keylen;
	int c = memcmp(a->key, b->key, n);

	return c != 0 ? c : (a->keylen > b->keylen) - (a->keylen < b->keylen);
}

static int
gather(const char *key, size_t keylen, const struct lockout *k, void *arg)
{
	struct look *l = arg;
	struct locked *e;

	if (l->nall == l->capall) {
		l->capall = l->capall ? l->capall * 2 : 16;
		l->all = xrealloc(l->all, l->capall * sizeof(struct locked));
	}
	e = &l->all[l->nall++];
	e->key = xmalloc(keylen + 1);
	memcpy(e->key, key, keylen);
	e->keylen = keylen;
	e->lk = *k;
	e->shown = 0;
	return 0;
}

/* The lockout of key as gathered, or one that is none. */
static struct lockout
lockout_of(const struct look *l, const char *key, size_t keylen)
{
	struct locked want = { (char *)(uintptr_t)key, keylen, { 0, 0 }, 0 },
		      *e;
	struct lockout none = { 0, 0 };

	if (l->a->key != NULL)
		return l->lk;
	e = l->nall == 0
	    ? NULL
	    : bsearch(&want, l->all, l->nall, sizeof(*l->all), cmp_locked);
	if (e == NULL)
		return none;
	e->shown = 1;
	return e->lk;
}

/* A key locked out now, with nothing else to show: its lockout alone. */
static void
show_lockout(struct look *l, const char *key, size_t keylen,
    const struct lockout *k)
{
	struct record *r;

	if (k->until <= l->c->now)
		return;
	r = answer_record(l->ans, TEXT_FIELDS);
	rec_str(l->ans, r, "key", key, keylen, 0);
	keystate_lockout(l->ans, r, k, l->c->now);
	l->locks++;
	answer_flush(l->ans);
}

static int
show_locked(const char *key, size_t keylen, const struct lockout *k, void *arg)
{
	show_lockout(arg, key, keylen, k);
	return 0;
}

/* One limit of a key, as it reads now (moved back if the clock was ahead). */
static int
show(const struct keyrec *rec, void *arg)
{
	struct look *l = arg;
	struct decision now, one;
	struct kstate cur = { 0 }, next = { 0 };
	struct lockout lk = lockout_of(l, rec->key, rec->keylen);
	struct record *r;

	cur.slots = xcalloc(rec->state.nslots + 1, sizeof(*cur.slots));
	next.slots = xcalloc(rec->state.nslots + 2, sizeof(*next.slots));
	/* an ended lockout: the key starts afresh when next used */
	limit_carry(&rec->limit, rec, lk.until == 0 || lk.until > l->c->now,
	    l->c->now, &cur);
	rec->limit.algo->decide(&rec->limit, &cur, l->c->now, 0, &now, &next);
	next.nslots = 0;
	rec->limit.algo->decide(&rec->limit, &cur, l->c->now, 1, &one, &next);
	free(next.slots);
	free(cur.slots);
	now.retry_after = one.retry_after;
	if (lk.until > l->c->now) {
		/* locked: refused until the lockout ends */
		now.retry_after = now.reset_after =
		    lockout_left(&lk, l->c->now);
	}
	r = keystate_numbers(l->ans, rec->key, rec->keylen, &rec->limit, &now,
	    0, 0);
	keystate_lockout(l->ans, r, &lk, l->c->now);
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
	/* no owner: "none" to a person, 0 to a script */
	if (le->pid == 0)
		rec_str(l->ans, r, "owner", "none", 4, SHOW_TEXT);
	rec_int(r, "owner", le->pid, le->pid == 0 ? SHOW_MACHINE : 0);
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
	size_t i;

	if (ctx_now(c, ans) == -1)
		return -1;
	if (a->names)
		return store_names(c->store, show_name, l) == -1
		    ? ctx_fail(c, ans)
		    : 0;
	if (a->locked && a->key == NULL)
		return store_lockout_list(c->store, show_locked, l) == -1
		    ? ctx_fail(c, ans)
		    : 0;
	if (a->key == NULL) {
		if (store_lockout_list(c->store, gather, l) == -1)
			return ctx_fail(c, ans);
		if (l->nall > 0)
			qsort(l->all, l->nall, sizeof(*l->all), cmp_locked);
		if (store_list(c->store, show, l) == -1)
			return ctx_fail(c, ans);
		/* keys locked out whose rate state is gone */
		for (i = 0; i < l->nall; i++)
			if (!l->all[i].shown)
				show_lockout(l, l->all[i].key, l->all[i].keylen,
				    &l->all[i].lk);
		return store_lease_list(c->store, NULL, 0, show_lease, l) == -1
		    ? ctx_fail(c, ans)
		    : 0;
	}
	if (store_lockout_get(c->store, a->key, a->keylen, &l->lk) == -1)
		return ctx_fail(c, ans);
	if (a->locked) {
		show_lockout(l, a->key, a->keylen, &l->lk);
		return 0;
	}
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
	if (l->limits == 0) /* its rate state forgotten, its lockout not */
		show_lockout(l, a->key, a->keylen, &l->lk);
	if (store_lease_list(c->store, a->key, a->keylen, show_lease, l) == -1)
		return ctx_fail(c, ans);
	return 0;
}

static void
forget_all(struct look *l)
{
	size_t i;

	for (i = 0; i < l->nall; i++)
		free(l->all[i].key);
	free(l->all);
	l->all = NULL;
	l->nall = l->capall = 0;
}

static void
inspect_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	char miss[STORE_ERR_MAX + 200];
	struct look l;

	if (a->key == NULL && c->format == FORMAT_SHELL) {
		answer_usage(ans,
		    "inspect: --format shell shows one key; give a key, or "
		    "use --format json for all of them");
		return;
	}
	if (a->names && a->locked) {
		answer_usage(ans,
		    "inspect: --names and --locked do not go together; give "
		    "one");
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
	if (txn_run(c, 0, look_body, &l, ans) == -1) {
		forget_all(&l);
		return;
	}
	forget_all(&l);
	if (c->store != NULL && !a->names &&
	    store_missing(c->store, miss, sizeof(miss))) {
		/* a typo in --db: say so, whatever else there is to say
		 * (--names is for completion: it lists, and says nothing) */
		answer_say(ans, MSG_NOTICE, "%s", miss);
		if (a->key != NULL)
			ans->rc = EXIT_REFUSED;
	} else if (a->key != NULL && a->locked && l.locks == 0) {
		answer_say_key(ans, MSG_NOTICE, a->key, a->keylen,
		    ": not locked out");
		ans->rc = EXIT_REFUSED;
	} else if (a->key != NULL && !a->names && l.limits == 0 &&
	    l.leases == 0 && l.locks == 0) {
		answer_say_key(ans, MSG_NOTICE, a->key, a->keylen,
		    ": no state (never used, reset, or forgotten)");
		ans->rc = EXIT_REFUSED;
	}
}

const struct cmd_entry cmd_inspect_entry = {
	.name = "inspect",
	.args = "[KEY] [--names | --locked]",
	.summary = "show a key's limit, state, lockout and live leases "
		   "(without KEY: every key); exit 1 if it has none",
	.options = CMDOPT_NAMES | CMDOPT_LOCKED,
	.min_args = 0,
	.max_args = 1,
	.operand_is_key = 1,
	.in_batch = 1,
	.reads_only = 1,
	.exec = inspect_exec,
};
