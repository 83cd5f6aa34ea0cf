/*
 * help.c: --help, throttle help COMMAND, and the usage line, written from
 * the command table, the option table (args.c) and the algorithm table, so
 * they cannot disagree with what the parser accepts.
 */
#include <string.h>

#include "throttle.h"

struct which {
	FILE *fp;
	int flags; /* options with any of these CMDOPT_* bits; 0: globals */
	int global;
	int width; /* of the left column: the longest option, measured */
	int measure; /* measuring, not printing */
};

static void
print_option(const char *name, char shortname, const char *arg, int flag,
    const char *help, void *p)
{
	struct which *w = p;
	char left[40], algos[200];

	if (w->global ? flag != 0 : (flag & w->flags) == 0)
		return;
	if (help == NULL) {
		/* --algorithm: the names from the algorithm table */
		algo_described(algos, sizeof(algos));
		help = algos;
	}
	if (shortname)
		snprintf(left, sizeof(left), "-%c, --%s%s%s", shortname, name,
		    arg ? " " : "", arg ? arg : "");
	else
		snprintf(left, sizeof(left), "    --%s%s%s", name,
		    arg ? " " : "", arg ? arg : "");
	if (w->measure) {
		if ((int)strlen(left) > w->width)
			w->width = (int)strlen(left);
		return;
	}
	fprintf(w->fp, "  %-*s  %s\n", w->width, left, help);
}

/* The options of w, in two aligned columns. */
static void
print_options(struct which *w)
{
	int global = w->global;

	/* one width for the command's options and the globals */
	w->measure = 1;
	w->global = 0;
	args_options(print_option, w);
	w->global = 1;
	args_options(print_option, w);
	w->measure = 0;
	w->global = global;
	args_options(print_option, w);
}

/* Everything: every command, every option, the exit statuses. */
void
help_all(FILE *fp, const struct cmd_entry *const *table)
{
	const struct cmd_entry *const *c;
	struct which w = { fp, ~0, 0, 0, 0 };

	fputs("usage: throttle [global options] command [options] [key]\n\n"
	      "Decide whether an action keyed by a string may happen now.\n\n"
	      "commands:\n",
	    fp);
	for (c = table; *c != NULL; c++)
		fprintf(fp, "  %s%s%s\n        %s\n", (*c)->name,
		    (*c)->args[0] != '\0' ? " " : "", (*c)->args,
		    (*c)->summary);
	fputs("\noptions:\n", fp);
	print_options(&w);
	fputs("\nglobal options (before or after the command):\n", fp);
	w.global = 1;
	print_options(&w);
	fputs("\nexit status: 0 allowed or done, 1 throttled, 2 usage error, "
	      "3 state store error\nsee throttle(1) for more\n",
	    fp);
}

/* One command: its usage line, what it does, its options. */
void
help_cmd(FILE *fp, const struct cmd_entry *c)
{
	struct which w = { fp, c->options, 0, 0, 0 };

	fprintf(fp, "usage: throttle %s%s%s\n\n%s\n", c->name,
	    c->args[0] != '\0' ? " " : "", c->args, c->summary);
	if (c->options != 0) {
		fputs("\noptions:\n", fp);
		print_options(&w);
	}
	fputs("\nglobal options: see throttle --help\n", fp);
}
