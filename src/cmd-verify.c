/*
 * cmd-verify.c: check a whole store, for a file copied from elsewhere or a
 * cron job that wants to know before a decision does.  A decision reads
 * only the pages of its key, and SQLite checks those as it reads them; a
 * corruption elsewhere in the file is found here: SQLite's integrity_check
 * (--quick: quick_check) of every page, then every record read as a
 * command would read it.  Reads only; exit 0 if all is well, 3 if not.
 */
#include <string.h>

#include "throttle.h"

struct tally {
	int64_t keys, leases;
};

static int
count_key(const struct keyrec *rec, void *arg)
{
	struct tally *t = arg;

	t->keys += rec->idx == 0;
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

static int
verify_exec(struct opts *o)
{
	struct store *st;
	struct tally t = { 0, 0 };
	int rc;

	if ((st = cmd_open(o, &rc)) == NULL)
		return rc;
	if (store_begin(st, 0) == -1 || store_verify(st, o->quick) == -1 ||
	    store_list(st, count_key, &t) == -1 ||
	    store_lease_list(st, NULL, 0, count_lease, &t) == -1)
		return cmd_fail(o, st, store_error(st));
	store_rollback(st);
	store_close(st);
	if (o->format == FORMAT_TEXT) {
		if (!o->quiet)
			printf("%s: ok, %lld key%s and %lld lease%s\n",
			    o->dbname, (long long)t.keys,
			    t.keys == 1 ? "" : "s", (long long)t.leases,
			    t.leases == 1 ? "" : "s");
	} else {
		struct field f[] = {
			{ "db", FIELD_STR, o->dbname, strlen(o->dbname), 0 },
			{ "ok", FIELD_BOOL, NULL, 0, 1 },
			{ "keys", FIELD_INT, NULL, 0, t.keys },
			{ "leases", FIELD_INT, NULL, 0, t.leases },
		};
		output_fields(o, f, sizeof(f) / sizeof(f[0]));
	}
	return EXIT_ALLOWED;
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
	.exec = verify_exec,
};
