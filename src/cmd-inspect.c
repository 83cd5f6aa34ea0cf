/*
 * cmd-inspect.c: show a key's state (or every key's) under the limit it
 * was last used with: remaining units as it stands, how long until one
 * more unit is allowed, and how long until it is back at rest.  Reads in
 * a read transaction and never writes.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "throttle.h"

struct inspect_ctx {
	const struct opts *o;
	struct host me;
	int leases; /* live leases shown */
	char err[STORE_ERR_MAX];
};

static int
show(const struct keyrec *rec, void *arg)
{
	struct inspect_ctx *ctx = arg;
	struct decision now, one;
	struct kstate next = { 0 };
	struct kstate cur = { 0 };
	struct result r;

	/* the key as it reads now (moved back if the clock was ahead) */
	cur.slots = xcalloc(rec->state.nslots + 1, sizeof(*cur.slots));
	next.slots = xcalloc(rec->state.nslots + 2, sizeof(*next.slots));
	limit_carry(&rec->limit, rec, 1, ctx->o->now, &cur);
	rec->limit.algo->decide(&rec->limit, &cur, ctx->o->now, 0, &now, &next);
	next.nslots = 0;
	rec->limit.algo->decide(&rec->limit, &cur, ctx->o->now, 1, &one, &next);
	free(next.slots);
	free(cur.slots);
	memset(&r, 0, sizeof(r));
	r.key = rec->key;
	r.keylen = rec->keylen;
	r.limit = &rec->limit;
	r.inspect = 1;
	r.remaining = now.remaining;
	r.retry_after = one.retry_after;
	r.reset_after = now.reset_after;
	output_result(ctx->o, &r);
	return 0;
}

/* Print one live lease; dead ones are left for the next acquire. */
static int
show_lease(const char *key, size_t keylen, const struct lease *l, void *arg)
{
	struct inspect_ctx *ctx = arg;
	const struct opts *o = ctx->o;
	const char *prio = priority_name(l->priority);

	if (!lease_live(l, o->now, host_owner_state(&ctx->me, l)))
		return 0;
	ctx->leases++;
	if (o->format == FORMAT_SHELL)
		return 0; /* shell shows the rate state; leases are many */
	struct field f[] = {
		{ "key", FIELD_STR, key, keylen, 0 },
		{ "lease", FIELD_STR, l->id, strlen(l->id), 0 },
		{ "priority", FIELD_STR, prio, strlen(prio), 0 },
		{ "owner", FIELD_INT, NULL, 0, l->pid },
		{ "host", FIELD_STR, l->host, strlen(l->host), 0 },
		{ "age", FIELD_SECS, NULL, 0,
		    o->now > l->acquired ? o->now - l->acquired : 0 },
		{ "expires_after", FIELD_SECS, NULL, 0,
		    lease_expires_after(l, o->now) },
	};
	output_fields(o, f, sizeof(f) / sizeof(f[0]));
	return 0;
}

/* One key name per line; names a line cannot hold are left out. */
static int
show_name(const char *key, size_t keylen, void *arg)
{
	(void)arg;
	if (memchr(key, '\n', keylen) == NULL &&
	    memchr(key, '\r', keylen) == NULL) {
		fwrite(key, 1, keylen, stdout);
		putchar('\n');
	}
	return 0;
}

static int
inspect_exec(struct opts *o)
{
	struct inspect_ctx ctx;
	struct store *st;
	struct keyrec rec = { 0 };
	int found = 0, idx, rc;

	if (o->key == NULL && o->format == FORMAT_SHELL)
		return cmd_usage(o,
		    "inspect: --format shell shows one key; give a key, "
		    "or use --format json for all of them");
	memset(&ctx, 0, sizeof(ctx));
	ctx.o = o;
	host_self(&ctx.me);
	if (o->names && o->key != NULL)
		return cmd_usage(o,
		    "inspect: --names lists every key; leave the key out");
	if ((st = cmd_open(o, &rc)) == NULL)
		return rc;
	if (store_begin(st, 0) == -1)
		return cmd_fail(o, st, store_error(st));
	if (o->names) {
		if (store_names(st, show_name, NULL) == -1)
			return cmd_fail(o, st, store_error(st));
		store_rollback(st);
		store_close(st);
		return EXIT_ALLOWED;
	}
	if (o->key == NULL) {
		if (store_list(st, show, &ctx) == -1 ||
		    store_lease_list(st, NULL, 0, show_lease, &ctx) == -1)
			return cmd_fail(o, st,
			    ctx.err[0] ? ctx.err : store_error(st));
	} else {
		/* each of the key's limits, then its leases */
		for (idx = 0; idx < LIMITS_MAX; idx++) {
			rc = cmd_load(o, st, idx, &rec, ctx.err,
			    sizeof(ctx.err));
			if (rc == 1 && show(&rec, &ctx) == -1)
				rc = -1;
			free(rec.state.slots);
			rec.state.slots = NULL;
			if (rc == -1)
				return cmd_fail(o, st, ctx.err);
			if (rc == 0)
				break;
			found++;
		}
		if (store_lease_list(st, o->key, o->keylen, show_lease, &ctx) ==
		    -1)
			return cmd_fail(o, st, store_error(st));
	}
	store_rollback(st);
	store_close(st);
	if (o->key != NULL && !found && ctx.leases == 0) {
		log_key(o->key, o->keylen,
		    ": no state (never used, reset, or forgotten)");
		return EXIT_REFUSED;
	}
	return EXIT_ALLOWED;
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
