/*
 * cmd-acquire.c: take one of N slots of a concurrency limit (seed 004's
 * concurrent requests limiter), with priorities and a reserve for critical
 * work (its fleet usage load shedder).  Also the lease scan that acquire,
 * renew, inspect and run share.
 *
 * Every acquire first looks at the key's leases: a lease whose TTL has
 * passed, or whose owner on this host is gone (a pid that no longer runs,
 * or runs as another process, or a boot that has ended), is deleted in the
 * same transaction.  So a slot lost to a kill -9 or a reboot comes back at
 * the next acquire, not when its TTL runs out.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "throttle.h"

struct scan {
	const struct host *me;
	int64_t now;
	int64_t active; /* live leases */
	int64_t soonest; /* earliest expiry of a live lease; 0: none */
	char (*dead)[LEASE_ID_LEN + 1];
	size_t ndead, cap;
	const char *find; /* a lease id to look for */
	struct lease found;
	int has_found; /* found and live */
};

static int
scan_one(const char *key, size_t keylen, const struct lease *l, void *arg)
{
	struct scan *sc = arg;

	(void)key;
	(void)keylen;
	if (!lease_live(l, sc->now, host_owner_state(sc->me, l))) {
		if (sc->ndead == sc->cap) {
			sc->cap = sc->cap ? sc->cap * 2 : 8;
			sc->dead =
			    realloc(sc->dead, sc->cap * sizeof(*sc->dead));
			if (sc->dead == NULL) {
				fputs("throttle: out of memory\n", stderr);
				exit(EXIT_STATE);
			}
		}
		memcpy(sc->dead[sc->ndead++], l->id, LEASE_ID_LEN + 1);
		return 0;
	}
	sc->active++;
	if (l->expires != 0 && (sc->soonest == 0 || l->expires < sc->soonest))
		sc->soonest = l->expires;
	if (sc->find != NULL && strcmp(l->id, sc->find) == 0) {
		sc->found = *l;
		sc->has_found = 1;
	}
	return 0;
}

/*
 * Count the live leases of the command's key, delete the dead ones (when
 * write), and look for lease id find.  *active, *soonest and *found may be
 * NULL.  0, or -1 with the store's error.
 */
int
cmd_acquire_scan(const struct opts *o, struct store *st, int write,
    const char *find, int64_t *active, int64_t *soonest, struct lease *found)
{
	struct host me;
	struct scan sc;
	size_t i;
	int rc = 0;

	host_self(&me);
	memset(&sc, 0, sizeof(sc));
	sc.me = &me;
	sc.now = o->now;
	sc.find = find;
	if (store_lease_list(st, o->key, o->keylen, scan_one, &sc) == -1)
		rc = -1;
	for (i = 0; rc == 0 && write && i < sc.ndead; i++)
		if (store_lease_del(st, o->key, o->keylen, sc.dead[i]) == -1)
			rc = -1;
	free(sc.dead);
	if (active != NULL)
		*active = sc.active;
	if (soonest != NULL)
		*soonest = sc.soonest;
	if (found != NULL) {
		memset(found, 0, sizeof(*found));
		if (sc.has_found)
			*found = sc.found;
	}
	return rc == 0 ? sc.has_found : -1;
}

/*
 * Try to take a slot for the command's key, owned by who->pid (0: none;
 * and while it lives, who->pgid's process group) with a time to live of
 * ttl (0: none).  1 taken (*l filled), 0 all held, or -1 with the exit
 * code of an error already reported in *rc.
 */
int
cmd_acquire_take(struct opts *o, const struct lease *who, int64_t ttl,
    struct lease *l, int64_t *active, int64_t *soonest, int *rc)
{
	struct store *st;
	struct host me;
	char err[STORE_ERR_MAX];
	int64_t reserve, pid = who->pid;
	int taken, r;

	reserve = o->has_reserve
	    ? lease_reserve(o->concurrency, o->reserve, o->reserve_percent)
	    : 0;
	if ((st = cmd_open(o, rc)) == NULL)
		return -1;
	host_self(&me);
	for (;;) {
		if (store_begin(st, 1) == -1) {
			*rc = cmd_fail(o, st, store_error(st));
			return -1;
		}
		if (cmd_now(o, st, err, sizeof(err)) == -1) {
			*rc = cmd_fail(o, st, err);
			return -1;
		}
		if (cmd_acquire_scan(o, st, 1, NULL, active, soonest, NULL) ==
		    -1) {
			*rc = cmd_fail(o, st, store_error(st));
			return -1;
		}
		taken =
		    lease_admit(*active, o->concurrency, reserve, o->priority);
		if (taken) {
			memset(l, 0, sizeof(*l));
			host_new_id(l->id, sizeof(l->id));
			l->priority = o->priority;
			l->acquired = o->now;
			l->ttl = ttl;
			l->expires = ttl > 0 ? o->now + ttl : 0;
			l->pid = pid;
			l->pgid = who->pgid;
			l->pgid_start = who->pgid_start;
			if (pid > 0 &&
			    host_pid_start(pid, &l->pid_start) == -1) {
				/* it ended since acquire looked */
				store_rollback(st);
				store_close(st);
				*rc = cmd_usage(o,
				    "--owner: no process %lld on this host",
				    (long long)pid);
				return -1;
			}
			snprintf(l->host, sizeof(l->host), "%s", me.name);
			snprintf(l->boot_id, sizeof(l->boot_id), "%s",
			    me.boot_id);
			if (store_lease_put(st, o->key, o->keylen, l) == -1) {
				*rc = cmd_fail(o, st, store_error(st));
				return -1;
			}
			(*active)++;
		}
		if ((r = store_commit(st)) == -1) {
			*rc = cmd_fail(o, st, store_error(st));
			return -1;
		}
		if (r != STORE_RETRY)
			break;
	}
	store_close(st);
	return taken;
}

/*
 * cmd_acquire_take(), and with --wait, again until a slot is free or
 * --wait=MAX has passed: sleeping until the soonest lease expiry if one is
 * known, else polling, each with a little jitter so waiters do not all
 * wake at once.
 */
int
cmd_acquire_wait(struct opts *o, const struct lease *who, int64_t ttl,
    struct lease *l, int64_t *active, int64_t *soonest, int *rc)
{
	int64_t start = o->now, mono0 = clock_monotonic(), waited, nap;
	int taken, sig;

	for (;;) {
		taken = cmd_acquire_take(o, who, ttl, l, active, soonest, rc);
		if (taken != 0 || !o->has_wait)
			return taken;
		waited = clock_monotonic() - mono0;
		if (o->wait_max >= 0 && waited >= o->wait_max)
			return 0;
		nap = *soonest > o->now ? *soonest - o->now : 250000;
		if (nap > US_PER_SEC)
			nap = US_PER_SEC; /* a release may come any time */
		nap += (int64_t)(host_random() % (uint64_t)(nap / 10 + 10000));
		if (o->wait_max >= 0 && nap > o->wait_max - waited)
			nap = o->wait_max - waited;
		if ((sig = clock_sleep(nap)) != 0) {
			*rc = 128 + sig;
			return -1;
		}
		o->now = start + (clock_monotonic() - mono0);
	}
}

/* Check the lease options that go together: 0, or 2 (reported). */
int
cmd_acquire_check(struct opts *o, const char *cmd)
{
	if (!o->has_concurrency)
		return cmd_usage(o,
		    "%s: --concurrency is missing; give the number of "
		    "slots, as in --concurrency 2",
		    cmd);
	if (o->has_reserve && !o->reserve_percent &&
	    o->reserve > o->concurrency)
		return cmd_usage(o,
		    "--reserve: %lld is more than the %lld slots of "
		    "--concurrency",
		    (long long)o->reserve, (long long)o->concurrency);
	return 0;
}

/* The refusal line: all slots held. */
void
cmd_acquire_refused(const struct opts *o, int64_t active)
{
	if (o->quiet)
		return;
	if (o->priority != PRIO_CRITICAL && active < o->concurrency)
		log_key(o->key, o->keylen,
		    ": %lld of %lld slots are held and the rest are "
		    "reserved for critical work, retry later",
		    (long long)active, (long long)o->concurrency);
	else if (o->concurrency == 1)
		log_key(o->key, o->keylen,
		    ": its one slot is held, retry later");
	else
		log_key(o->key, o->keylen,
		    ": all %lld slots are held, retry later",
		    (long long)o->concurrency);
}

static int
acquire_exec(struct opts *o)
{
	struct lease l, who;
	int64_t active, soonest;
	int taken, rc = 0;

	if ((rc = cmd_acquire_check(o, "acquire")) != 0)
		return rc;
	if (o->has_ttl && o->ttl == 0 && !o->has_owner)
		return cmd_usage(o,
		    "--ttl: 0 (no expiry) needs --owner, or a slot could "
		    "be held forever");
	if (o->has_owner) {
		int64_t start;

		if (host_pid_start(o->owner, &start) == -1)
			return cmd_usage(o,
			    "--owner: no process %lld on this host",
			    (long long)o->owner);
	}
	memset(&who, 0, sizeof(who));
	who.pid = o->has_owner ? o->owner : 0;
	taken = cmd_acquire_wait(o, &who, o->ttl, &l, &active, &soonest, &rc);
	if (taken < 0)
		return rc;
	if (taken && o->format == FORMAT_TEXT) {
		printf("%s\n", l.id);
		return EXIT_ALLOWED;
	}
	if (taken) {
		struct field f[] = {
			{ "key", FIELD_STR, o->key, o->keylen, 0 },
			{ "allowed", FIELD_BOOL, NULL, 0, 1 },
			{ "lease", FIELD_STR, l.id, strlen(l.id), 0 },
			{ "active", FIELD_INT, NULL, 0, active },
			{ "limit", FIELD_INT, NULL, 0, o->concurrency },
			{ "expires_after", FIELD_SECS, NULL, 0,
			    lease_expires_after(&l, o->now) },
		};
		output_fields(o, f, sizeof(f) / sizeof(f[0]));
		return EXIT_ALLOWED;
	}
	if (o->format != FORMAT_TEXT) {
		struct field f[] = {
			{ "key", FIELD_STR, o->key, o->keylen, 0 },
			{ "allowed", FIELD_BOOL, NULL, 0, 0 },
			{ "active", FIELD_INT, NULL, 0, active },
			{ "limit", FIELD_INT, NULL, 0, o->concurrency },
			{ "retry_after", FIELD_SECS, NULL, 0,
			    soonest ? soonest - o->now : -1 },
		};
		output_fields(o, f, sizeof(f) / sizeof(f[0]));
	}
	cmd_acquire_refused(o, active);
	return EXIT_REFUSED;
}

const struct cmd_entry cmd_acquire_entry = {
	.name = "acquire",
	.args = "KEY --concurrency N [--ttl DURATION] [--owner PID] "
		"[--priority LEVEL] [--reserve R] [--wait[=MAX]]",
	.summary = "take one of N slots and print its lease id (exit 0), or "
		   "exit 1 when all are held",
	.options =
	    CMDOPT_CONCURRENCY | CMDOPT_TTL | CMDOPT_PRIORITY | CMDOPT_WAIT,
	.uses_policy = 1,
	.min_args = 1,
	.max_args = 1,
	.operand_is_key = 1,
	.in_batch = 1,
	.exec = acquire_exec,
};
