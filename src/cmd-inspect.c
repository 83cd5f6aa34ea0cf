/*
 * cmd-inspect.c: show a key's state (or every key's) under the limit it
 * was last used with: remaining units as it stands, how long until one
 * more unit is allowed, and how long until it is back at rest; its
 * lockout, if it is locked; its live leases; and its shedder.  --locked
 * lists only the keys locked out now.  Reads in a read transaction and
 * never writes.  The list of every key is printed as it is read
 * (answer_flush()), however long.  A key whose lockout has ended shows as
 * it will be used next: afresh, with its whole allowance.
 *
 * In text, a table a person reads: a row per limit, the key last so that
 * rows stream aligned whatever the keys' lengths, and the columns of a
 * key's lockout and live leases; then, for one key, its leases one per
 * line.  In json and shell a key's limits are one record, as a decision
 * answers: the binding limit's numbers, and in json each limit's in
 * "limits".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

#define HEADER                                                                 \
	"ALGORITHM      LIMIT        REMAINING  RETRY      RESET      "        \
	"LOCKOUT    LEASES  KEY"

/* A key's lockout, gathered before a listing of every key. */
struct locked {
	char *key;
	size_t keylen;
	struct lockout lk;
	int shown; /* with a limit of its key */
};

/* A key's live leases, counted before a listing of every key (text). */
struct counted {
	char *key;
	size_t keylen;
	int64_t n;
	int shown;
};

struct look {
	struct ctx *c;
	const struct args *a;
	struct answer *ans;
	struct host me;
	int limits; /* limits shown */
	int leases; /* live leases shown */
	int locks; /* lockouts shown */
	int sheds; /* shedders shown */
	int header; /* the text table's header is out */
	struct lockout lk; /* the key's, when one key is shown */
	struct locked *all; /* every key's, sorted, for a listing */
	size_t nall, capall;
	struct counted *held; /* live leases per key, sorted (text) */
	size_t nheld, capheld;
	/* the limits of the key being gathered, shown as one record */
	char key[KEY_MAX];
	size_t keylen;
	int n;
	struct limit lim[LIMITS_MAX];
	struct decision d[LIMITS_MAX];
	struct lockout klk;
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
	lockout_carry(&e->lk, l->c->now); /* as a decision reads it now */
	e->shown = 0;
	return 0;
}

/* The lockout of key as gathered, or one that is none. */
static struct lockout
lockout_of(const struct look *l, const char *key, size_t keylen)
{
	struct locked want = { (char *)(uintptr_t)key, keylen, { 0, 0, 0 }, 0 },
		      *e;
	struct lockout none = { 0, 0, 0 };

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

/* A wait as the table shows it: "-" for none, "never" for no end. */
static void
cell_wait(char *buf, size_t len, int64_t us)
{
	if (us <= 0)
		snprintf(buf, len, "-");
	else if (us >= DURATION_MAX)
		snprintf(buf, len, "never");
	else
		output_human(buf, len, us);
}

/* The cells of a key's lockout and live leases. */
static void
cell_key(const struct look *l, const struct lockout *lk, int64_t held,
    char *lock, char *leases, size_t len)
{
	int64_t now = l->c->now;

	if (lk->until <= now)
		snprintf(lock, len, "-");
	else
		cell_wait(lock, len,
		    lk->until == LOCKOUT_NEVER ? DURATION_MAX
					       : lk->until - now);
	if (held <= 0)
		snprintf(leases, len, "-");
	else
		snprintf(leases, len, "%lld", (long long)held);
}

/*
 * One row of the text table (its header first): the cells, then the key,
 * escaped, last.  Each cell starts at its column if the cells before it
 * leave room, one space after them if not: a cell wider than its column
 * (a limit of 1000000000/1d) pushes the next ones right only as far as
 * it must, and the row is back in line at the first cell narrow enough.
 */
static void
text_row(struct look *l, const char *const cell[7], const char *key,
    size_t keylen)
{
	static const int col[8] = { 0, 15, 28, 39, 50, 61, 72, 80 };
	char *shown = escape_text_dup(key, keylen), line[512];
	struct record *r;
	int i, at = 0, n, w;

	if (!l->header) {
		r = answer_record(l->ans, TEXT_LINE);
		r->line = HEADER;
		l->header = 1;
	}
	for (i = 0; i < 7; i++) {
		w = col[i + 1] - 1 - at; /* to the next column, if room */
		n = snprintf(line + at, sizeof(line) - (size_t)at, "%-*s ",
		    w > 0 ? w : 0, cell[i]);
		if (n < 0 || (size_t)n >= sizeof(line) - (size_t)at)
			break; /* (cells are numbers and short words) */
		at += n;
	}
	r = answer_record(l->ans, TEXT_LINE);
	rec_line(l->ans, r, "%.*s%s", at, line, shown);
	free(shown);
	answer_flush(l->ans);
}

static int
cmp_counted(const void *x, const void *y)
{
	const struct counted *a = x, *b = y;
	size_t n = a->keylen < b->keylen ? a->keylen : b->keylen;
	int c = memcmp(a->key, b->key, n);

	return c != 0 ? c : (a->keylen > b->keylen) - (a->keylen < b->keylen);
}

/* The live leases of key counted for a listing (text), marked shown. */
static int64_t
held_of(struct look *l, const char *key, size_t keylen)
{
	struct counted want = { (char *)(uintptr_t)key, keylen, 0, 0 }, *e;

	if (l->nheld == 0)
		return 0;
	e = bsearch(&want, l->held, l->nheld, sizeof(*l->held), cmp_counted);
	if (e == NULL)
		return 0;
	e->shown = 1;
	return e->n;
}

/* Count a live lease of a key, for a listing in text. */
static int
count_lease(const char *key, size_t keylen, const struct lease *le, void *arg)
{
	struct look *l = arg;
	struct counted *e;

	if (!lease_live(le, l->c->now, host_owner_state(&l->me, le)))
		return 0;
	l->leases++;
	if (l->nheld > 0 && l->held[l->nheld - 1].keylen == keylen &&
	    memcmp(l->held[l->nheld - 1].key, key, keylen) == 0) {
		l->held[l->nheld - 1].n++;
		return 0;
	}
	if (l->nheld == l->capheld) {
		l->capheld = l->capheld ? l->capheld * 2 : 16;
		l->held = xrealloc(l->held, l->capheld * sizeof(*l->held));
	}
	e = &l->held[l->nheld++];
	e->key = xmalloc(keylen + 1);
	memcpy(e->key, key, keylen);
	e->keylen = keylen;
	e->n = 1;
	e->shown = 0;
	return 0;
}

/* A key with no limit to show: a row of its lockout and leases (text). */
static void
text_bare(struct look *l, const char *key, size_t keylen,
    const struct lockout *lk, int64_t held)
{
	char lock[40], leases[24];
	const char *cell[7] = { "-", "-", "-", "-", "-", lock, leases };

	cell_key(l, lk, held, lock, leases, sizeof(lock));
	text_row(l, cell, key, keylen);
}

/* A key locked out now, with nothing else to show: its lockout alone. */
static void
show_lockout(struct look *l, const char *key, size_t keylen,
    const struct lockout *k)
{
	struct record *r;

	if (k->until <= l->c->now)
		return;
	l->locks++;
	if (l->c->format == FORMAT_TEXT && !l->a->locked) {
		text_bare(l, key, keylen, k, held_of(l, key, keylen));
		return;
	}
	r = answer_record(l->ans, TEXT_FIELDS);
	rec_str(l->ans, r, "key", key, keylen, 0);
	keystate_lockout(l->ans, r, k, l->c->now);
	answer_flush(l->ans);
}

static int
show_locked(const char *key, size_t keylen, const struct lockout *k, void *arg)
{
	struct look *l = arg;
	struct lockout now = *k;

	lockout_carry(&now, l->c->now); /* as a decision reads it now */
	show_lockout(l, key, keylen, &now);
	return 0;
}

/*
 * The limits gathered of one key, shown: in text a row each; in json and
 * shell one record, the binding limit's numbers with each limit's in
 * "limits", as a decision answers.
 */
static void
flush_key(struct look *l)
{
	char c[5][64], lock[40], leases[24];
	const char *cell[7] = { c[0], c[1], c[2], c[3], c[4], lock, leases };
	struct decision all;
	struct record *r, *sub;
	int i, bind;

	if (l->n == 0)
		return;
	if (l->c->format == FORMAT_TEXT) {
		cell_key(l, &l->klk, held_of(l, l->key, l->keylen), lock,
		    leases, sizeof(lock));
		for (i = 0; i < l->n; i++) {
			snprintf(c[0], sizeof(c[0]), "%s",
			    l->lim[i].algo->name);
			output_duration(c[4], sizeof(c[4]), l->lim[i].period);
			snprintf(c[1], sizeof(c[1]), "%lld/%.30s",
			    (long long)l->lim[i].count, c[4]);
			snprintf(c[2], sizeof(c[2]), "%lld",
			    (long long)l->d[i].remaining);
			cell_wait(c[3], sizeof(c[3]), l->d[i].retry_after);
			cell_wait(c[4], sizeof(c[4]), l->d[i].reset_after);
			text_row(l, cell, l->key, l->keylen);
		}
	} else {
		bind = limit_combine(l->d, l->n, &all);
		/* inspect charges nothing: the wait is one more unit's */
		all.retry_after = l->d[bind].retry_after;
		r = keystate_numbers(l->ans, l->key, l->keylen, &l->lim[bind],
		    &all, 0, 0);
		keystate_lockout(l->ans, r, &l->klk, l->c->now);
		for (i = 0; l->n > 1 && i < l->n; i++) {
			sub = rec_sub(r);
			rec_int(sub, "limit", l->lim[i].count, 0);
			rec_secs(sub, "period", l->lim[i].period, 0);
			rec_int(sub, "burst", l->lim[i].burst, 0);
			rec_int(sub, "remaining", l->d[i].remaining, 0);
			/* (as the binding limit's: "never" is -1) */
			rec_secs(sub, "retry_after",
			    l->d[i].retry_after >= DURATION_MAX
				? -1
				: l->d[i].retry_after,
			    0);
			rec_secs(sub, "reset_after",
			    l->d[i].reset_after >= DURATION_MAX
				? -1
				: l->d[i].reset_after,
			    0);
		}
		answer_flush(l->ans);
	}
	l->limits += l->n;
	l->n = 0;
}

/* One limit of a key, as it reads now (moved back if the clock was ahead). */
static int
show(const struct keyrec *rec, void *arg)
{
	struct look *l = arg;
	struct decision now, one;
	struct kstate cur = { 0 }, next = { 0 };
	struct lockout lk;
	int64_t ahead;

	if (l->n > 0 &&
	    (l->keylen != rec->keylen ||
		memcmp(l->key, rec->key, rec->keylen) != 0))
		flush_key(l);
	if (l->n == LIMITS_MAX)
		return 0; /* more than a key can have: shown already */
	lk = lockout_of(l, rec->key, rec->keylen);
	cur.slots = xcalloc(rec->state.nslots + 1, sizeof(*cur.slots));
	next.slots = xcalloc(rec->state.nslots + 2, sizeof(*next.slots));
	/* an ended lockout: the key starts afresh when next used */
	limit_carry(&rec->limit, rec, lk.until == 0 || lk.until > l->c->now,
	    l->c->now, &cur, &ahead);
	rec->limit.algo->decide(&rec->limit, &cur, l->c->now, 0, &now, &next);
	next.nslots = 0;
	rec->limit.algo->decide(&rec->limit, &cur, l->c->now, 1, &one, &next);
	free(next.slots);
	free(cur.slots);
	now.retry_after = one.retry_after;
	if (lk.until > l->c->now) {
		/* locked: refused until the lockout ends, and nothing can be
		 * taken meanwhile (as a decision answers) */
		now.retry_after = now.reset_after =
		    lockout_left(&lk, l->c->now);
		now.remaining = 0;
	}
	if (l->n == 0) {
		memcpy(l->key, rec->key, rec->keylen);
		l->keylen = rec->keylen;
		l->klk = lk;
	}
	l->lim[l->n] = rec->limit;
	l->d[l->n++] = now;
	return 0;
}

/* One live lease; dead ones are left for the next acquire. */
static int
show_lease(const char *key, size_t keylen, const struct lease *stored,
    void *arg)
{
	struct look *l = arg;
	const char *prio = priority_name(stored->priority);
	int64_t now = l->c->now;
	struct record *r;
	struct lease m = *stored, *le = &m;

	lease_carry(&m, now); /* as the next acquire reads it */
	if (!lease_live(le, now, host_owner_state(&l->me, le)))
		return 0;
	l->leases++;
	if (l->c->format == FORMAT_SHELL)
		return 0; /* shell shows the rate state; leases are many */
	r = answer_record(l->ans, TEXT_FIELDS);
	rec_str(l->ans, r, "key", key, keylen, 0);
	rec_str(l->ans, r, "lease", le->id, strlen(le->id), 0);
	rec_str(l->ans, r, "priority", prio, strlen(prio), 0);
	/* no owner: none (json null), never a pid 0 */
	if (le->pid == 0)
		rec_none(r, "owner", 0);
	else
		rec_int(r, "owner", le->pid, 0);
	rec_str(l->ans, r, "host", le->host, strlen(le->host), 0);
	rec_secs(r, "age", now > le->acquired ? now - le->acquired : 0, 0);
	rec_secs(r, "expires_after", lease_expires_after(le, now), 0);
	answer_flush(l->ans);
	return 0;
}

/* A key's shedder: how much it sheds now, and since when. */
static int
show_shed(const char *key, size_t keylen, int64_t amount, int64_t changed_at,
    void *arg)
{
	struct look *l = arg;
	struct record *r;
	char level[40];
	const char *cell[7] = { "shedder", level, "-", "-", "-", "-", "-" };

	l->sheds++;
	if (l->c->format == FORMAT_TEXT) {
		/* its shedding amount where a limit would be: s=0.450,
		 * rounded to the nearest thousandth as json's is to the
		 * millionth, its sign kept (s=-0.000: not shedding) */
		int64_t micro = shed_micro(amount);
		int64_t milli = (micro < 0 ? -micro + 500 : micro + 500) / 1000;

		snprintf(level, sizeof(level), "s=%s%lld.%03lld",
		    amount < 0 ? "-" : "", (long long)(milli / 1000),
		    (long long)(milli % 1000));
		text_row(l, cell, key, keylen);
		return 0;
	}
	if (l->c->format == FORMAT_SHELL && (l->limits > 0 || l->locks > 0))
		return 0; /* shell: one key's one set of variables */
	r = answer_record(l->ans, TEXT_FIELDS);
	rec_str(l->ans, r, "key", key, keylen, 0);
	rec_micro(r, "shedding_amount", shed_micro(amount), 0);
	rec_secs(r, "changed_ago",
	    l->c->now > changed_at ? l->c->now - changed_at : 0, 0);
	answer_flush(l->ans);
	return 0;
}

/*
 * One key name per line, as it is, for a shell to complete: a name with a
 * control character (a newline among them) or bytes that are not UTF-8
 * is left out, since no completion could type it back, and escaping it
 * would offer another key (escaped backslashes were read as two).
 */
static int
show_name(const char *key, size_t keylen, void *arg)
{
	struct look *l = arg;
	struct record *r;

	if (l->c->format == FORMAT_JSON) {
		/* an object a line, as json is: every key, escaped */
		rec_str(l->ans, answer_record(l->ans, TEXT_NONE), "key", key,
		    keylen, 0);
		answer_flush(l->ans);
		return 0;
	}
	if (!text_plain(key, keylen))
		return 0;
	r = answer_record(l->ans, TEXT_RAW);
	r->line = answer_keep(l->ans, key, keylen);
	answer_flush(l->ans);
	return 0;
}

/*
 * Every key: its limits in key order, then keys locked out whose rate
 * state is gone, then (text) keys holding only leases, or (json) every
 * live lease, then the shedders.
 */
static int
look_all(struct ctx *c, struct look *l, struct answer *ans)
{
	size_t i;

	if (store_lockout_list(c->store, gather, l) == -1)
		return ctx_fail(c, ans);
	if (l->nall > 0)
		qsort(l->all, l->nall, sizeof(*l->all), cmp_locked);
	if (c->format == FORMAT_TEXT) {
		if (store_lease_list(c->store, NULL, 0, count_lease, l) == -1)
			return ctx_fail(c, ans);
		if (l->nheld > 0)
			qsort(l->held, l->nheld, sizeof(*l->held), cmp_counted);
	}
	if (store_list(c->store, show, l) == -1)
		return ctx_fail(c, ans);
	flush_key(l);
	for (i = 0; i < l->nall; i++)
		if (!l->all[i].shown)
			show_lockout(l, l->all[i].key, l->all[i].keylen,
			    &l->all[i].lk);
	if (c->format == FORMAT_TEXT) {
		struct lockout none = { 0, 0, 0 };

		for (i = 0; i < l->nheld; i++)
			if (!l->held[i].shown)
				text_bare(l, l->held[i].key, l->held[i].keylen,
				    &none, l->held[i].n);
	} else if (store_lease_list(c->store, NULL, 0, show_lease, l) == -1)
		return ctx_fail(c, ans);
	return store_shed_list(c->store, show_shed, l) == -1 ? ctx_fail(c, ans)
							     : 0;
}

static int
look_body(struct ctx *c, void *arg, struct answer *ans)
{
	struct look *l = arg;
	const struct args *a = l->a;
	struct keyrec rec;
	int64_t amount, changed;
	int idx, found;

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
	if (a->key == NULL)
		return look_all(c, l, ans);
	if (store_lockout_get(c->store, a->key, a->keylen, &l->lk) == -1)
		return ctx_fail(c, ans);
	lockout_carry(&l->lk, c->now); /* as a decision reads it now */
	if (a->locked) {
		show_lockout(l, a->key, a->keylen, &l->lk);
		return 0;
	}
	/* the table counts the key's leases; their lines come after it */
	if (c->format == FORMAT_TEXT &&
	    store_lease_list(c->store, a->key, a->keylen, count_lease, l) == -1)
		return ctx_fail(c, ans);
	/* each of the key's limits (one at rest may be gone from before
	 * the others: gc forgets them one by one), then its leases and
	 * shedder */
	for (idx = 0; idx < LIMITS_MAX; idx++) {
		memset(&rec, 0, sizeof(rec));
		if ((found = store_load(c->store, a->key, a->keylen, idx,
			 &rec)) == -1)
			return ctx_fail(c, ans);
		if (found)
			show(&rec, l);
		free(rec.state.slots);
		if (!rec.more)
			break;
	}
	flush_key(l);
	if (l->limits == 0) /* its rate state forgotten, its lockout not */
		show_lockout(l, a->key, a->keylen, &l->lk);
	if (c->format == FORMAT_TEXT && l->limits == 0 && l->locks == 0 &&
	    l->nheld > 0)
		text_bare(l, a->key, a->keylen, &l->lk, l->held[0].n);
	/* in text the shedder is a row of the table, and the lease lines
	 * come after the whole table */
	if (c->format != FORMAT_TEXT &&
	    store_lease_list(c->store, a->key, a->keylen, show_lease, l) == -1)
		return ctx_fail(c, ans);
	if ((found = store_shed_load(c->store, a->key, a->keylen, &amount,
		 &changed)) == -1)
		return ctx_fail(c, ans);
	if (found)
		show_shed(a->key, a->keylen, amount, changed, l);
	if (c->format == FORMAT_TEXT &&
	    store_lease_list(c->store, a->key, a->keylen, show_lease, l) == -1)
		return ctx_fail(c, ans);
	if (c->format == FORMAT_SHELL && l->limits == 0 && l->locks == 0 &&
	    l->sheds == 0 && l->leases > 0) {
		/* a key holding only leases: its key and how many, so a
		 * script can tell it is in use */
		struct record *r = answer_record(ans, TEXT_NONE);

		rec_str(ans, r, "key", a->key, a->keylen, 0);
		rec_int(r, "leases", l->leases, 0);
	}
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
	for (i = 0; i < l->nheld; i++)
		free(l->held[i].key);
	free(l->held);
	l->held = NULL;
	l->nheld = l->capheld = 0;
}

static void
inspect_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	char miss[STORE_ERR_MAX + 200];
	struct look l;

	if (a->key == NULL && c->format == FORMAT_SHELL) {
		/* (the format may be THROTTLE_FORMAT's: name the one given) */
		answer_usage(ans,
		    "inspect: %s shows one key; give a key, or use "
		    "--format json for all of them",
		    a->has_format ? "--format shell" : "THROTTLE_FORMAT=shell");
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
	    l.leases == 0 && l.locks == 0 && l.sheds == 0) {
		answer_say_key(ans, MSG_NOTICE, a->key, a->keylen,
		    ": no state (never used, reset, or forgotten)");
		ans->rc = EXIT_REFUSED;
	}
}

const struct cmd_entry cmd_inspect_entry = {
	.name = "inspect",
	.args = "[KEY] [--names | --locked]",
	.summary = "show a key's limit, state, lockout and live leases "
		   "(without KEY: every key); exit 1 if KEY has none",
	.options = CMDOPT_NAMES | CMDOPT_LOCKED,
	.min_args = 0,
	.max_args = 1,
	.operand_is_key = 1,
	.in_batch = 1,
	.reads_only = 1,
	.exec = inspect_exec,
};
