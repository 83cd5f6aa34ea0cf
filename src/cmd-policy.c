/*
 * cmd-policy.c: policy set, list, show and delete (policy.c keeps the
 * rules: what a policy holds and how a key finds its own).
 */
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

struct pol {
	const char *sub, *name;
	char spec[POLICY_MAX];
	struct answer *ans;
	int found;
};

/*
 * The checks policy set makes of the options it is given beyond their
 * parsing (args_parse()): --reserve goes with a --concurrency it fits.
 * verify makes them of a stored policy too.  0, or -1 with the usage
 * message in ans.
 */
int
policy_set_check(const struct args *a, struct answer *ans)
{
	/* as --burst with --limit: a --concurrency on the command line
	 * drops a policy's --reserve, so one alone never applies */
	if (a->has_reserve && !a->has_concurrency) {
		answer_usage(ans,
		    "policy set: --reserve goes with --concurrency; give the "
		    "slot count too");
		return -1;
	}
	if (a->has_concurrency && concurrency_check(a, "policy set", ans) == -1)
		return -1;
	return 0;
}

/* A policy as a record: "name options" in text. */
static void
show_one(struct answer *ans, const char *name, const char *spec)
{
	struct record *r = answer_record(ans, TEXT_LINE);
	char *shown = escape_text_dup(name, strlen(name));

	rec_line(ans, r, "%s %s", shown, spec);
	free(shown);
	rec_str(ans, r, "name", name, strlen(name), 0);
	rec_str(ans, r, "options", spec, strlen(spec), 0);
}

static int
list_one(const char *name, const char *spec, void *arg)
{
	show_one(arg, name, spec);
	return 0;
}

static int
policy_body(struct ctx *c, void *arg, struct answer *ans)
{
	struct pol *p = arg;
	struct store *st = c->store;

	if (strcmp(p->sub, "set") == 0)
		p->found =
		    store_policy_put(st, p->name, p->spec) == -1 ? -1 : 1;
	else if (strcmp(p->sub, "delete") == 0)
		p->found = store_policy_del(st, p->name);
	else if (strcmp(p->sub, "show") == 0)
		p->found =
		    store_policy_get(st, p->name, p->spec, sizeof(p->spec));
	else
		p->found =
		    store_policy_list(st, list_one, p->ans) == -1 ? -1 : 1;
	return p->found == -1 ? ctx_fail(c, ans) : 0;
}

static void
policy_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	char miss[STORE_ERR_MAX + 200];
	struct pol p;
	const char *sub = a->operand, *name = a->operand2, *why;

	memset(&p, 0, sizeof(p));
	p.sub = sub;
	p.name = name;
	p.ans = ans;
	if (strcmp(sub, "list") == 0) {
		if (name != NULL) {
			answer_usage(ans, "policy list: takes no name");
			return;
		}
		if (c->format == FORMAT_SHELL && !c->batch) {
			/* one NAME= per policy: eval would keep the last */
			answer_usage(ans,
			    "policy list: %s shows one policy; use policy "
			    "show NAME, or --format json for all of them",
			    a->has_format ? "--format shell"
					  : "THROTTLE_FORMAT=shell");
			return;
		}
	} else if (strcmp(sub, "set") == 0 || strcmp(sub, "show") == 0 ||
	    strcmp(sub, "delete") == 0) {
		if (name == NULL || *name == '\0') {
			answer_usage(ans,
			    "policy %s: give the policy's name, a key or a key "
			    "prefix such as login",
			    sub);
			return;
		}
		if (strlen(name) > KEY_MAX) {
			answer_usage(ans,
			    "policy %s: the name is %zu bytes, longer than "
			    "the %d a key may be",
			    sub, strlen(name), KEY_MAX);
			return;
		}
	} else {
		answer_usage(ans,
		    "policy: '%s' is not set, list, show or delete", sub);
		return;
	}
	if (strcmp(sub, "set") == 0) {
		if (policy_set_check(a, ans) == -1)
			return;
		if (policy_spec(a, p.spec, sizeof(p.spec), &why) == -1) {
			answer_usage(ans, "policy set: %s", why);
			return;
		}
	} else if (a->ngiven > 0 &&
	    a->ls.n + a->has_concurrency + a->has_lockout + a->has_ttl +
		    a->has_reserve >
		0) {
		answer_usage(ans, "policy %s: takes no limit options", sub);
		return;
	}
	/* nothing to delete in a file not there: none is made */
	if (strcmp(sub, "delete") == 0)
		c->makes_no_file = 1;
	if (txn_run(c, !c->read_only, policy_body, &p, ans) == -1)
		return;
	if ((c->read_only || c->makes_no_file) && c->store != NULL &&
	    store_missing(c->store, miss, sizeof(miss))) {
		/* a typo in --db: say so */
		answer_say(ans, MSG_NOTICE, "%s", miss);
		ans->rc = p.found ? ans->rc : EXIT_REFUSED;
		return;
	}
	if (!p.found) {
		/* the name as keys are shown: control bytes escaped */
		char *shown = escape_text_dup(name, strlen(name));

		answer_say(ans, MSG_NOTICE, "policy %s: no policy named '%s'",
		    sub, shown);
		free(shown);
		ans->rc = EXIT_REFUSED;
		return;
	}
	if (strcmp(sub, "show") == 0)
		show_one(ans, name, p.spec);
	else if (strcmp(sub, "set") == 0) {
		/* said in json, silent in text, as a decision allowed */
		struct record *r = answer_record(ans, TEXT_NONE);

		rec_str(ans, r, "name", name, strlen(name), 0);
		rec_str(ans, r, "options", p.spec, strlen(p.spec), 0);
	} else if (strcmp(sub, "delete") == 0)
		rec_str(ans, answer_record(ans, TEXT_NONE), "name", name,
		    strlen(name), 0);
}

const struct cmd_entry cmd_policy_entry = {
	.name = "policy",
	.args = "set NAME [limit and lease options] | list | show NAME | "
		"delete NAME",
	.summary = "keep limits under a name (login governs login:alice); "
		   "a command line's options override it one by one",
	.options = CMDOPT_POLICY,
	.min_args = 1,
	.max_args = 2,
	.reads_only_with = "list show",
	.exec = policy_exec,
};
