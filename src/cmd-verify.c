/*
 * cmd-verify.c: check a whole store, for a file copied from elsewhere or a
 * cron job that wants to know before a decision does.  A decision reads
 * only the pages of its key, and SQLite checks those as it reads them; a
 * corruption elsewhere in the file is found here: SQLite's integrity_check
 * (--quick: quick_check) of every page, then every record read as a
 * command would read it.  Reads only; exit 0 if all is well, 3 if not, 1
 * if there is no state file at all.
 */
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

struct tally {
	const struct args *a;
	int64_t keys, leases, policies;
	char bad[KEY_MAX + 1]; /* a policy no command could use, or "" */
	char last[KEY_MAX + 1]; /* the key of the last limit counted */
	size_t lastlen;
};

/* A key's limits come together: a key is counted at the first of them
 * (which is not always index 0: gc forgets a limit at rest alone). */
static int
count_key(const struct keyrec *rec, void *arg)
{
	struct tally *t = arg;

	if (t->keys > 0 && rec->keylen == t->lastlen &&
	    memcmp(rec->key, t->last, rec->keylen) == 0)
		return 0;
	t->keys++;
	memcpy(t->last, rec->key, rec->keylen);
	t->lastlen = rec->keylen;
	return 0;
}

static int
count_lease(const char *key, size_t keylen, const struct lease *l, void *arg)
{
	struct tally *t = arg;

	(void)key;
	(void)keylen;
	(void)l;
	t->leases++;
	return 0;
}

/*
 * Whether policy set would take a policy's options (spec) as they are:
 * they parse as its command line, their limits settle, and they pass its
 * own checks (policy_set_check()), as when the policy was set.
 */
static int
settable(const char *spec)
{
	char copy[POLICY_MAX], *argv[4 + POLICY_MAX / 2 + 1], *w, *save = NULL;
	struct limit lims[LIMITS_MAX];
	struct answer scratch;
	struct args a;
	char err[256];
	int argc = 0, n, ok;

	snprintf(copy, sizeof(copy), "%s", spec);
	argv[argc++] = (char *)"throttle";
	argv[argc++] = (char *)"policy";
	argv[argc++] = (char *)"set";
	argv[argc++] = (char *)"p";
	for (w = strtok_r(copy, " ", &save); w != NULL;
	     w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	argv[argc] = NULL;
	if (argc == 4)
		return 1; /* none: a key takes nothing from it */
	args_init(&a);
	answer_init(&scratch);
	ok = args_parse(argc, argv, cmd_table, &a) == PARSE_RUN &&
	    (a.ls.n == 0 ||
		limit_settle(&a.ls, "policy set", lims, &n, err, sizeof(err)) ==
		    0) &&
	    policy_set_check(&a, &scratch) == 0;
	answer_free(&scratch);
	args_free(&a);
	return ok;
}

/* A policy read as a key that uses it would read it. */
static int
check_policy(const char *name, const char *spec, void *arg)
{
	struct tally *t = arg;
	char copy[POLICY_MAX];

	t->policies++;
	snprintf(copy, sizeof(copy), "%s", spec);
	if (t->bad[0] == '\0' && (policy_valid(copy) == -1 || !settable(spec)))
		snprintf(t->bad, sizeof(t->bad), "%s", name);
	return 0;
}

static int
verify_body(struct ctx *c, void *arg, struct answer *ans)
{
	struct tally *t = arg;
	const struct args *a = t->a;

	int rc;

	t->keys = t->leases = t->policies = 0;
	t->bad[0] = '\0';
	if ((rc = store_verify(c->store, a->quick)) == -2) {
		/* nothing to check is not a damaged store: exit 1 */
		answer_say(ans, MSG_NOTICE, "%s", store_error(c->store));
		ans->rc = EXIT_REFUSED;
		return -1;
	}
	if (rc == -1 || store_list(c->store, count_key, t) == -1 ||
	    store_lease_list(c->store, NULL, 0, count_lease, t) == -1 ||
	    /* lockouts and shedders: read and checked, not counted */
	    store_lockout_list(c->store, NULL, NULL) == -1 ||
	    store_shed_list(c->store, NULL, NULL) == -1 ||
	    store_policy_list(c->store, check_policy, t) == -1)
		return ctx_fail(c, ans);
	if (t->bad[0] != '\0') {
		char msg[STORE_ERR_MAX], *shown;

		shown = escape_text_dup(t->bad, strlen(t->bad));
		snprintf(msg, sizeof(msg),
		    "%.1000s: the policy '%.200s' holds options this throttle "
		    "cannot use (set the policy afresh with throttle policy "
		    "set)",
		    c->dbname, shown);
		free(shown);
		return answer_state(ans, msg);
	}
	return 0;
}

static void
verify_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct tally t = { a, 0, 0, 0, "", "", 0 };
	struct record *r;
	char *shown;

	if (txn_run(c, 0, verify_body, &t, ans) == -1)
		return;
	r = answer_record(ans, c->quiet ? TEXT_NONE : TEXT_LINE);
	/* one line, whatever bytes the path holds: escaped as keys are */
	shown = escape_text_dup(c->dbname, strlen(c->dbname));
	rec_line(ans, r, "%s: ok, %lld key%s and %lld lease%s", shown,
	    (long long)t.keys, t.keys == 1 ? "" : "s", (long long)t.leases,
	    t.leases == 1 ? "" : "s");
	free(shown);
	if (c->quiet)
		r->text = TEXT_NONE;
	/* not in shell: eval-ing THROTTLE_DB would change the file later
	 * calls use (a Redis URL shown without its password, at that) */
	rec_str(ans, r, "db", c->dbname, strlen(c->dbname), SHOW_JSON);
	rec_bool(r, "ok", 1, 0);
	rec_int(r, "keys", t.keys, 0);
	rec_int(r, "leases", t.leases, 0);
}

const struct cmd_entry cmd_verify_entry = {
	.name = "verify",
	.args = "[--quick]",
	.summary = "check every page and record of the store; exit 3 if any "
		   "is corrupt or unusable",
	.options = CMDOPT_QUICK,
	.min_args = 0,
	.max_args = 0,
	.reads_only = 1,
	.runs_long = 1,
	.exec = verify_exec,
};
