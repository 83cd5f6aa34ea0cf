/*
 * concurrency.c: the concurrency limiter on a store (the key's leases are
 * its slots), for acquire, run, renew, release and inspect; with
 * priorities and a reserve for critical work (lease.c has the pure rules).
 *
 *	1. Every take first looks at the key's leases: a lease whose TTL has
 *	   passed, or whose owner on this host is gone (a pid that no longer
 *	   runs, or runs as another process, or a boot that has ended, and
 *	   for a run job its whole process group), is deleted in the same
 *	   transaction.  So a slot lost to a kill -9 or a reboot comes back at
 *	   the next take, not when its TTL runs out.
 *	2. Counting the live leases and adding one is one transaction: two
 *	   callers never both take the last slot.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

struct scan {
	const struct host *me;
	int64_t now;
	const char *find; /* a lease id to look for */
	struct slots_seen *seen;
	char (*dead)[LEASE_ID_LEN + 1];
	size_t ndead, cap;
	struct lease *moved; /* taken with the clock ahead (lease_carry()) */
	size_t nmoved, capmoved;
};

static int
scan_one(const char *key, size_t keylen, const struct lease *stored, void *arg)
{
	struct scan *sc = arg;
	struct slots_seen *s = sc->seen;
	struct lease m = *stored, *l = &m;
	int moved = lease_carry(&m, sc->now);

	(void)key;
	(void)keylen;
	if (!lease_live(l, sc->now, host_owner_state(sc->me, l))) {
		if (sc->ndead == sc->cap) {
			sc->cap = sc->cap ? sc->cap * 2 : 8;
			sc->dead =
			    xrealloc(sc->dead, sc->cap * sizeof(*sc->dead));
		}
		memcpy(sc->dead[sc->ndead++], l->id, LEASE_ID_LEN + 1);
		return 0;
	}
	/* a live lease moved: saved so (a dead one is deleted, not saved) */
	if (moved) {
		if (sc->nmoved == sc->capmoved) {
			sc->capmoved = sc->capmoved ? sc->capmoved * 2 : 4;
			sc->moved = xrealloc(sc->moved,
			    sc->capmoved * sizeof(*sc->moved));
		}
		sc->moved[sc->nmoved++] = m;
	}
	s->active++;
	if (l->expires != 0 && (s->soonest == 0 || l->expires < s->soonest))
		s->soonest = l->expires;
	if (!s->has_oldest || l->acquired < s->oldest.acquired) {
		s->oldest = *l;
		s->has_oldest = 1;
	}
	if (sc->find != NULL && strcmp(l->id, sc->find) == 0) {
		s->found = *l;
		s->has_found = 1;
	}
	return 0;
}

/*
 * In a transaction: count the live leases of key into *seen, delete the
 * dead ones (when write), and look for lease id find.  0, or -1 with the
 * answer set... by the caller: -1 means store_error() says why.
 */
int
concurrency_scan(struct ctx *c, const char *key, size_t keylen, int write,
    const char *find, struct slots_seen *seen)
{
	struct host me;
	struct scan sc;
	size_t i;
	int rc = 0;

	host_self(&me);
	memset(&sc, 0, sizeof(sc));
	memset(seen, 0, sizeof(*seen));
	sc.me = &me;
	sc.now = c->now;
	sc.find = find;
	sc.seen = seen;
	seen->now = c->now;
	if (store_lease_list(c->store, key, keylen, scan_one, &sc) == -1)
		rc = -1;
	for (i = 0; rc == 0 && write && i < sc.ndead; i++)
		if (store_lease_del(c->store, key, keylen, sc.dead[i]) == -1)
			rc = -1;
	/* saved, or the next call moves them again, from a later now */
	for (i = 0; rc == 0 && write && i < sc.nmoved; i++)
		if (store_lease_put(c->store, key, keylen, &sc.moved[i]) == -1)
			rc = -1;
	free(sc.dead);
	free(sc.moved);
	return rc;
}

/* Check the lease options that go together: 0, or -1 with a usage error. */
int
concurrency_check(const struct args *a, const char *cmd, struct answer *ans)
{
	if (!a->has_concurrency)
		return answer_usage(ans,
		    "%s: --concurrency is missing; give the number of "
		    "slots, as in --concurrency 2",
		    cmd);
	if (a->has_reserve && !a->reserve_percent &&
	    a->reserve > a->concurrency)
		return answer_usage(ans,
		    "--reserve: %lld is more than the %lld slots of "
		    "--concurrency",
		    (long long)a->reserve, (long long)a->concurrency);
	return 0;
}

static void
held_line(const struct args *, const struct slots_seen *, char *, size_t);

/* The slots --reserve keeps for critical work. */
static int64_t
reserve_of(const struct args *a)
{
	return a->has_reserve
	    ? lease_reserve(a->concurrency, a->reserve, a->reserve_percent)
	    : 0;
}

/* --lease names no lease acquire could have printed: none is held. */
void
lease_bad(const struct args *a, struct answer *ans)
{
	answer_say_key(ans, MSG_NOTICE, a->key, a->keylen,
	    ": no such lease: --lease takes the %d lower-case hex digits "
	    "acquire printed",
	    LEASE_ID_LEN);
	ans->rc = EXIT_REFUSED;
}

/* Whether the key was locked out when its slots were counted. */
int
concurrency_locked(const struct slots_seen *s)
{
	return s->lk.until > s->now;
}

/* Whether a's request could ever take a slot: not when --reserve keeps
 * every one from its priority. */
int
concurrency_possible(const struct args *a)
{
	return lease_admit(0, a->concurrency, reserve_of(a), a->priority);
}

struct take {
	const struct args *a;
	const struct lease *who;
	int64_t ttl;
	struct lease *l;
	struct slots_seen *seen;
	int taken;
	int gone; /* the owner ended before the lease was taken */
};

static int
take_body(struct ctx *c, void *arg, struct answer *ans)
{
	struct take *t = arg;
	const struct args *a = t->a;
	struct lease *l = t->l;
	struct host me;
	int64_t reserve = reserve_of(a);

	t->taken = t->gone = 0;
	if (ctx_now(c, ans) == -1)
		return -1;
	if (concurrency_scan(c, a->key, a->keylen, 1, NULL, t->seen) == -1 ||
	    store_lockout_get(c->store, a->key, a->keylen, &t->seen->lk) == -1)
		return ctx_fail(c, ans);
	/* a key locked out refuses every request, a slot's too: as a
	 * decision reads the lockout now (not saved: the key's next
	 * decision moves it as well) */
	lockout_carry(&t->seen->lk, c->now);
	if (concurrency_locked(t->seen) ||
	    !lease_admit(t->seen->active, a->concurrency, reserve, a->priority))
		return 0;
	host_self(&me);
	memset(l, 0, sizeof(*l));
	host_new_id(l->id, sizeof(l->id));
	l->priority = a->priority;
	l->acquired = c->now;
	l->ttl = t->ttl;
	l->expires = t->ttl > 0 ? c->now + t->ttl : 0;
	l->pid = t->who->pid;
	l->pgid = t->who->pgid;
	l->pgid_start = t->who->pgid_start;
	if (l->pid > 0 && host_pid_start(l->pid, &l->pid_start) == -1) {
		t->gone = 1; /* it ended since the command looked */
		return TXN_ROLLBACK;
	}
	snprintf(l->host, sizeof(l->host), "%s", me.name);
	snprintf(l->boot_id, sizeof(l->boot_id), "%s", me.boot_id);
	if (store_lease_put(c->store, a->key, a->keylen, l) == -1)
		return ctx_fail(c, ans);
	t->seen->active++;
	t->taken = 1;
	return 0;
}

/*
 * Try to take a slot of a's key, owned by who->pid (0: none; and, while it
 * lives, who->pgid's process group) with a time to live of ttl (0: none).
 * 1 taken (*l filled), 0 all held, or -1 with the answer set.
 */
int
concurrency_take(struct ctx *c, const struct args *a, const struct lease *who,
    int64_t ttl, struct lease *l, struct slots_seen *seen, struct answer *ans)
{
	struct take t = { a, who, ttl, l, seen, 0, 0 };

	if (txn_run(c, 1, take_body, &t, ans) == -1)
		return -1;
	if (t.gone)
		return answer_usage(ans,
		    "--owner: no process %lld on this host",
		    (long long)who->pid);
	return t.taken;
}

/* Once a wait: what it waits for, and at most how long. */
static void
say_wait(const struct args *a, const char *what)
{
	char m[32];

	if (a->wait_max >= 0)
		output_bound(m, sizeof(m), a->wait_max);
	log_key(a->key, a->keylen, " %s%s%s%s", what,
	    a->wait_max >= 0 ? " (--wait at most " : "",
	    a->wait_max >= 0 ? m : "", a->wait_max >= 0 ? ")" : "");
}

/*
 * concurrency_take(), and with --wait, again until a slot is free or
 * --wait=MAX has passed: sleeping until the soonest lease expiry if one is
 * known, else polling, each with a little jitter so waiters do not all
 * wake at once.  As concurrency_take(); 128 + N (with nothing in the
 * answer) if signal N cut the wait short.
 */
int
concurrency_wait(struct ctx *c, const struct args *a, const struct lease *who,
    int64_t ttl, struct lease *l, struct slots_seen *seen, struct answer *ans)
{
	int64_t start = c->now, mono0 = clock_monotonic(), waited, nap;
	char what[HOST_MAX + 256], m[32];
	int taken, sig, said = 0, said_lock = 0;

	for (;;) {
		taken = concurrency_take(c, a, who, ttl, l, seen, ans);
		/* a request no slot is ever free for fails at once */
		if (taken != 0 || !a->has_wait || !concurrency_possible(a))
			return taken;
		waited = clock_monotonic() - mono0;
		if (concurrency_locked(seen)) {
			/* as a rate's wait: a lockout that ends within
			 * --wait is waited out, then the slot tried; one
			 * until reset, or longer, refuses at once */
			nap = seen->lk.until - c->now;
			if (seen->lk.until == LOCKOUT_NEVER ||
			    (a->wait_max >= 0 && nap > a->wait_max - waited))
				return 0;
			if (!said_lock && !c->quiet) {
				output_human(m, sizeof(m), nap);
				snprintf(what, sizeof(what),
				    "locked out, waiting %s for it", m);
				say_wait(a, what);
				said_lock = 1;
			}
			if ((sig = clock_sleep(nap)) != 0)
				return 128 + sig;
			c->now = start + (clock_monotonic() - mono0);
			continue;
		}
		if (a->wait_max >= 0 && waited >= a->wait_max)
			return 0;
		/* a release may come any time: a short poll, or the
		 * soonest expiry if that comes first (a wait of 1s at most
		 * let a slot stand free for up to a second) */
		nap = 250000;
		if (seen->soonest > c->now && seen->soonest - c->now < nap)
			nap = seen->soonest - c->now;
		nap += (int64_t)(host_random() % (uint64_t)(nap / 10 + 10000));
		if (a->wait_max >= 0 && nap > a->wait_max - waited)
			nap = a->wait_max - waited;
		if (!said && !c->quiet) {
			held_line(a, seen, what, sizeof(what));
			snprintf(what + strlen(what),
			    sizeof(what) - strlen(what),
			    ", waiting for a slot");
			say_wait(a, what);
			said = 1;
		}
		if ((sig = clock_sleep(nap)) != 0)
			return 128 + sig;
		c->now = start + (clock_monotonic() - mono0);
	}
}

/*
 * Who holds the oldest lease, for a refusal line: "pid 4242 on web1, for
 * 3m2s" or "lease 3e58..., no owner, for 12s".
 */
static void
holder(const struct slots_seen *s, char *buf, size_t len)
{
	const struct lease *l = &s->oldest;
	char host[HOST_MAX + 8], held[32];
	struct host me;

	host_self(&me);
	host[0] = 0;
	if (l->pid > 0 && l->host[0] != 0 && strcmp(l->host, me.name) != 0)
		snprintf(host, sizeof(host), " on %s", l->host);
	output_human(held, sizeof(held),
	    s->now > l->acquired ? s->now - l->acquired : 0);
	if (l->pid > 0 && l->pgid > 0 && host[0] == '\0' &&
	    kill((pid_t)l->pid, 0) == -1 && errno == ESRCH)
		/* a run job whose wrapper is gone: its group holds it */
		snprintf(buf, len, "process group %lld, for %s",
		    (long long)l->pgid, held);
	else if (l->pid > 0)
		snprintf(buf, len, "pid %lld%s, for %s", (long long)l->pid,
		    host, held);
	else
		snprintf(buf, len, "lease %s, no owner, for %s", l->id, held);
}

/* "has all 2 slots held (longest: pid 4242, for 3m2s)" */
static void
held_line(const struct args *a, const struct slots_seen *s, char *buf,
    size_t len)
{
	char who[HOST_MAX + 96];

	if (a->priority != PRIO_CRITICAL && s->active < a->concurrency)
		snprintf(buf, len,
		    "has %lld of %lld slots held and the rest reserved "
		    "for critical work",
		    (long long)s->active, (long long)a->concurrency);
	else if (a->concurrency == 1)
		snprintf(buf, len, "has its one slot held");
	else
		snprintf(buf, len, "has all %lld slots held",
		    (long long)a->concurrency);
	if (s->has_oldest) {
		holder(s, who, sizeof(who));
		snprintf(buf + strlen(buf), len - strlen(buf), " (%s%s)",
		    s->active > 1 ? "longest: " : "", who);
	}
}

/*
 * The refusal line, one shape with consume's ("KEY throttled, retry in
 * 12.5s"): "KEY has its one slot held (pid 4242, for 3m2s), retry later",
 * naming the lease held longest; then "; not running CMD" for run.
 */
void
concurrency_refused(const struct args *a, const struct slots_seen *s,
    const char *cmd, struct answer *ans)
{
	char what[HOST_MAX + 256], retry[48], t[32], tail[256];

	tail[0] = 0;
	if (cmd != NULL)
		snprintf(tail, sizeof(tail), "; not running %.200s", cmd);
	if (concurrency_locked(s)) {
		/* a decision's words for it (rate.c) */
		if (s->lk.until == LOCKOUT_NEVER)
			answer_say_key(ans, MSG_INFO, a->key, a->keylen,
			    " " LOCKED_FOR_GOOD "%s", tail);
		else {
			output_human(t, sizeof(t), s->lk.until - s->now);
			answer_say_key(ans, MSG_INFO, a->key, a->keylen,
			    " locked out, retry in %s%s", t, tail);
		}
		return;
	}
	if (!concurrency_possible(a)) {
		answer_say_key(ans, MSG_INFO, a->key, a->keylen,
		    " keeps all %lld of its slots for critical work "
		    "(--reserve), so %s work never takes one; give "
		    "--priority critical, or a smaller --reserve%s",
		    (long long)a->concurrency, priority_name(a->priority),
		    tail);
		return;
	}
	held_line(a, s, what, sizeof(what));
	if (s->soonest > s->now) {
		output_human(t, sizeof(t), s->soonest - s->now);
		snprintf(retry, sizeof(retry), "retry in %s", t);
	} else
		snprintf(retry, sizeof(retry), "retry later");
	answer_say_key(ans, MSG_INFO, a->key, a->keylen, " %s, %s%s", what,
	    retry, tail);
}

struct free_one {
	const char *key;
	size_t keylen;
	const char *id;
	int found;
};

static int
free_body(struct ctx *c, void *arg, struct answer *ans)
{
	struct free_one *f = arg;

	if ((f->found = store_lease_del(c->store, f->key, f->keylen, f->id)) ==
	    -1)
		return ctx_fail(c, ans);
	return 0;
}

/*
 * Free lease id of key, touching no other lease: 1 if it was held, 0 if
 * there was no such lease, -1 with the answer set.
 */
int
concurrency_free(struct ctx *c, const char *key, size_t keylen, const char *id,
    struct answer *ans)
{
	struct free_one f = { key, keylen, id, 0 };

	if (txn_run(c, 1, free_body, &f, ans) == -1)
		return -1;
	return f.found;
}

struct renewal {
	const char *key;
	size_t keylen;
	const char *id;
	int64_t ttl; /* -1: the lease's own */
	struct slots_seen *seen;
	int forever; /* --ttl 0 on a lease without an owner */
};

static int
renew_body(struct ctx *c, void *arg, struct answer *ans)
{
	struct renewal *rn = arg;
	struct lease *l = &rn->seen->found;

	if (ctx_now(c, ans) == -1)
		return -1;
	if (concurrency_scan(c, rn->key, rn->keylen, 1, rn->id, rn->seen) == -1)
		return ctx_fail(c, ans);
	if (!rn->seen->has_found)
		return 0; /* the dead leases the scan found are still freed */
	if (rn->ttl >= 0)
		l->ttl = rn->ttl;
	if (l->ttl == 0 && l->pid == 0) {
		rn->forever = 1;
		return TXN_ROLLBACK;
	}
	l->expires = l->ttl > 0 ? c->now + l->ttl : 0;
	if (store_lease_put(c->store, rn->key, rn->keylen, l) == -1)
		return ctx_fail(c, ans);
	return 0;
}

/*
 * Extend lease id of key, if it is live, to ttl from now (-1: its own
 * TTL); the lease as renewed in seen->found.  1 if renewed, 0 if it is
 * not live (released, expired, or its owner gone: it may be another's
 * slot now), 2 if ttl 0 was asked of a lease with no owner, -1 with the
 * answer set.
 */
int
concurrency_renew(struct ctx *c, const char *key, size_t keylen, const char *id,
    int64_t ttl, struct slots_seen *seen, struct answer *ans)
{
	struct renewal rn = { key, keylen, id, ttl, seen, 0 };

	memset(seen, 0, sizeof(*seen));
	if (txn_run(c, 1, renew_body, &rn, ans) == -1)
		return -1;
	if (rn.forever)
		return 2;
	return seen->has_found;
}
