/*
 * cmd-policy.c: named policies, kept in the state file.  A policy is the
 * limit and lease options an administrator sets once; a key given without
 * limit options uses the policy named like it, or like its longest prefix
 * before a ':' (cmd.c finds it), and options on the command line override
 * the policy's one by one.  A policy is stored as its options, normalized
 * to "--name value ...", and read back by the same parser.
 */
#include <string.h>

#include "throttle.h"

static int
show_one(const struct opts *o, const char *name, const char *spec)
{
	if (o->format == FORMAT_TEXT)
		printf("%s %s\n", name, spec);
	else {
		struct field f[] = {
			{ "name", FIELD_STR, name, strlen(name), 0 },
			{ "options", FIELD_STR, spec, strlen(spec), 0 },
		};
		output_fields(o, f, sizeof(f) / sizeof(f[0]));
	}
	return 0;
}

static int
list_one(const char *name, const char *spec, void *arg)
{
	return show_one(arg, name, spec);
}

/* The options given on the command line that a policy holds. */
static void
build_spec(const struct opts *o, char *buf, size_t len)
{
	size_t n = 0;
	int i, w;

	buf[0] = '\0';
	for (i = 0; i < o->ngiven; i++) {
		if (!(option_flag(o->given[i]) & CMDOPT_POLICY))
			continue;
		if (strcmp(option_name(o->given[i]), "owner") == 0)
			die_usage("policy set: --owner names one process; it "
				  "cannot be part of a policy");
		if (o->given_values[i] == NULL ||
		    strpbrk(o->given_values[i], " \t\n") != NULL)
			die_usage("policy set: --%s: '%s' has a space; policy "
				  "values cannot",
			    option_name(o->given[i]),
			    o->given_values[i] ? o->given_values[i] : "");
		w = snprintf(buf + n, len - n, "%s--%s %s", n ? " " : "",
		    option_name(o->given[i]), o->given_values[i]);
		if (w < 0 || (size_t)w >= len - n)
			die_usage("policy set: the options are too long");
		n += (size_t)w;
	}
	if (n == 0)
		die_usage("policy set: give the options the policy holds, as "
			  "in --limit 5/15m");
}

static int
policy_exec(struct opts *o)
{
	static char spec[POLICY_MAX];
	const char *sub = o->operand, *name = o->operand2;
	struct store *st;
	int rc, found = 0;

	if (strcmp(sub, "list") == 0) {
		if (name != NULL)
			die_usage("policy list: takes no name");
	} else if (strcmp(sub, "set") == 0 || strcmp(sub, "show") == 0 ||
	    strcmp(sub, "delete") == 0) {
		if (name == NULL || *name == '\0' || strlen(name) > KEY_MAX)
			die_usage("policy %s: give the policy's name, a key or "
				  "a key prefix such as login",
			    sub);
	} else
		die_usage("policy: '%s' is not set, list, show or delete", sub);
	if (strcmp(sub, "set") == 0) {
		if (o->has_concurrency &&
		    cmd_acquire_check(o, "policy set") != 0)
			return EXIT_USAGE;
		build_spec(o, spec, sizeof(spec));
	} else if (o->ngiven > 0 &&
	    o->nlimits + o->has_concurrency + o->has_lockout + o->has_ttl +
		    o->has_reserve >
		0)
		die_usage("policy %s: takes no limit options", sub);

	if ((st = cmd_open(o, &rc)) == NULL)
		return rc;
	do {
		if (store_begin(st,
			strcmp(sub, "set") == 0 ||
			    strcmp(sub, "delete") == 0) == -1)
			return cmd_fail(o, st, store_error(st));
		if (strcmp(sub, "set") == 0)
			found = store_policy_put(st, name, spec) == -1 ? -1 : 1;
		else if (strcmp(sub, "delete") == 0)
			found = store_policy_del(st, name);
		else if (strcmp(sub, "show") == 0)
			found = store_policy_get(st, name, spec, sizeof(spec));
		else
			found =
			    store_policy_list(st, list_one, o) == -1 ? -1 : 1;
		if (found == -1)
			return cmd_fail(o, st, store_error(st));
		if (strcmp(sub, "show") == 0 || strcmp(sub, "list") == 0) {
			store_rollback(st);
			rc = 0;
		} else if ((rc = store_commit(st)) == -1)
			return cmd_fail(o, st, store_error(st));
	} while (rc == STORE_RETRY);
	store_close(st);
	if (!found) {
		log_msg("policy %s: no policy named '%s'", sub, name);
		return EXIT_REFUSED;
	}
	if (strcmp(sub, "show") == 0)
		show_one(o, name, spec);
	return EXIT_ALLOWED;
}

const struct cmd_entry cmd_policy_entry = {
	.name = "policy",
	.args = "set NAME [limit and lease options] | list | show NAME | "
		"delete NAME",
	.summary = "keep limits under a name: a key without limit options "
		   "uses the policy named like it or its prefix",
	.options = CMDOPT_POLICY,
	.min_args = 1,
	.max_args = 2,
	.reads_only_with = "list show",
	.exec = policy_exec,
};
