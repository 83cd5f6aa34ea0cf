/*
 * policy.c: named policies.  A policy is the limit and lease options an
 * administrator sets once (throttle policy set NAME ...), kept in the
 * store as its options normalized to "--name value ...".  A key uses the
 * policy named like it, or like its longest prefix before a ':' ("login"
 * governs "login:alice"), whatever its command line gives: options on the
 * command line override the policy's one by one (policy_merge()).
 *
 * policy_merge() and policy_spec() are pure (unit-tested); policy_find()
 * reads the store.
 */
#include <string.h>

#include "throttle.h"

/* The options a policy may hold, by their own name. */
static int
policy_option(const char *name)
{
	static const char *const held[] = { "limit", "burst", "algorithm",
		"granularity", "lockout", "concurrency", "reserve", "ttl",
		NULL };
	int i;

	for (i = 0; held[i] != NULL; i++)
		if (strcmp(held[i], name) == 0)
			return 1;
	return 0;
}

/*
 * Nonzero if the policy's option name gives way to the command line: the
 * command line gave it; the command does not take it (a rate policy's
 * --limit for acquire); or it is measured against one the command line
 * gave: --burst and --granularity belong with the limit and algorithm
 * they were set for, --reserve with its --concurrency.
 */
static int
overridden(const struct args *a, const char *name)
{
	if (args_given(a, name) || !args_takes(a, name))
		return 1;
	if (strcmp(name, "burst") == 0 || strcmp(name, "granularity") == 0)
		return args_given(a, "limit") || args_given(a, "algorithm");
	if (strcmp(name, "reserve") == 0)
		return args_given(a, "concurrency");
	return 0;
}

/*
 * Merge a policy's options (spec, "--name value ...", changed in place)
 * into a, option by option: each one the command line does not override
 * (overridden()).  The options taken go into a->policy_took as "--name
 * value ...", for a message that must say where a value came from.  0,
 * or -1 if the policy holds something throttle would not store.
 */
int
policy_merge(struct args *a, char *spec)
{
	char *name, *value, *save = NULL;
	size_t n = 0;
	int w;

	a->policy_took[0] = '\0';
	for (name = strtok_r(spec, " ", &save); name != NULL;
	     name = strtok_r(NULL, " ", &save)) {
		if (strncmp(name, "--", 2) != 0 || !policy_option(name + 2) ||
		    (value = strtok_r(NULL, " ", &save)) == NULL)
			return -1;
		if (overridden(a, name + 2))
			continue;
		if (args_apply(a, name + 2, value) == -1)
			return -1;
		w = snprintf(a->policy_took + n, sizeof(a->policy_took) - n,
		    "%s%s %s", n ? " " : "", name, value);
		if (w > 0 && (size_t)w < sizeof(a->policy_took) - n)
			n += (size_t)w;
	}
	return 0;
}

/*
 * Whether a stored policy's options (spec, changed in place) are ones a
 * command could take from it: each an option a policy holds, with a value
 * its parser accepts (policy_merge() checks the same when a key uses
 * it).  0 or -1.
 */
int
policy_valid(char *spec)
{
	struct args a;
	char *name, *value, *save = NULL;

	args_init(&a);
	for (name = strtok_r(spec, " ", &save); name != NULL;
	     name = strtok_r(NULL, " ", &save)) {
		if (strncmp(name, "--", 2) != 0 || !policy_option(name + 2) ||
		    (value = strtok_r(NULL, " ", &save)) == NULL ||
		    args_apply(&a, name + 2, value) == -1)
			return -1;
	}
	return 0; /* none: a key takes nothing from it, as merged */
}

/*
 * The options of a's command line that a policy holds, normalized into
 * buf as "--name value ...".  0, or -1 and why (an option a policy
 * cannot hold, a value with a space, nothing to hold, too long).
 */
int
policy_spec(const struct args *a, char *buf, size_t len, const char **why)
{
	const char *name, *v;
	size_t n = 0;
	int i, w;

	buf[0] = '\0';
	for (i = 0; i < a->ngiven; i++) {
		name = args_option_name(a->given[i]);
		v = a->given_values[i];
		if (!(args_option_flag(a->given[i]) & CMDOPT_POLICY))
			continue;
		if (strcmp(name, "owner") == 0) {
			*why = "--owner names one process; it cannot be part "
			       "of a policy";
			return -1;
		}
		/* a limit's blanks (around each of several) mean nothing:
		 * left out, as the value is kept as one word */
		if (v == NULL ||
		    (strcmp(name, "limit") != 0 &&
			strpbrk(v, " \t\n") != NULL)) {
			*why = "a value has a space; policy values cannot";
			return -1;
		}
		w = snprintf(buf + n, len - n, "%s--%s ", n ? " " : "", name);
		if (w < 0 || (size_t)w >= len - n) {
			*why = "the options are too long";
			return -1;
		}
		n += (size_t)w;
		for (; *v != '\0'; v++) {
			if (*v == ' ' || *v == '\t' || *v == '\n')
				continue;
			if (n + 1 >= len) {
				*why = "the options are too long";
				return -1;
			}
			buf[n++] = *v;
		}
		buf[n] = '\0';
	}
	if (n == 0) {
		*why = "give the options the policy holds, as in --limit 5/15m";
		return -1;
	}
	return 0;
}

struct lookup {
	const struct args *a;
	char *spec;
	char *name;
	int found;
};

/* In a read transaction: the policy named like the key or a prefix. */
static int
lookup(struct ctx *c, void *arg, struct answer *ans)
{
	struct lookup *l = arg;

	if ((l->found = store_policy_find(c->store, l->a->key, l->a->keylen,
		 l->name, l->spec, POLICY_MAX)) == -1)
		return ctx_fail(c, ans);
	return 0;
}

/*
 * Look up the policy of a's key, in c's open store, and merge it into a.
 * 0 (a->policy names the policy, if one was found), or -1 with the answer
 * set.
 */
int
policy_find(struct ctx *c, struct args *a, struct answer *ans)
{
	static char spec[POLICY_MAX], name[KEY_MAX + 1];
	struct lookup l = { a, spec, name, 0 };

	/* in a batch, inside its group's transaction (a read of its own
	 * would end the group's); else a read of its own in the store the
	 * command then decides in (cmd_prepare() opened it) */
	if ((c->batch ? lookup(c, &l, ans) : txn_run(c, 0, lookup, &l, ans)) ==
	    -1)
		return -1;
	if (!l.found)
		return 0;
	a->policy = name;
	if (policy_merge(a, spec) == -1) {
		char msg[STORE_ERR_MAX];

		snprintf(msg, sizeof(msg),
		    "%.1000s: the policy '%.64s' holds options this throttle "
		    "cannot use (set the policy afresh with throttle policy "
		    "set)",
		    c->dbname, name);
		return answer_state(ans, msg);
	}
	return 0;
}
