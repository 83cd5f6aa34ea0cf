/*
 * fuzz-cli.c: libFuzzer harness for the command-line parser.  The input is
 * an argument vector, the arguments separated by NUL bytes; it goes
 * through args_parse() and, for a command that takes limits,
 * limit_settle(), which is everything between argv and a command's work
 * that does not touch the environment or a store (run with ASan and
 * UBSan); and a policy's options through policy_merge().
 */
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define ARGS_MAX 64

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf, *argv[ARGS_MAX + 1], *p, *end;
	struct args a;
	char err[1024], spec[256];
	int argc = 0, n;

	if (size > 4096)
		return 0;
	/* each argument its own allocation, so ASan sees any overread */
	buf = malloc(size + 1);
	memcpy(buf, data, size);
	buf[size] = '\0';
	argv[argc++] = strdup("throttle");
	for (p = buf, end = buf + size; p <= end && argc < ARGS_MAX;
	     p += strlen(p) + 1)
		argv[argc++] = strdup(p);
	argv[argc] = NULL;
	free(buf);

	args_init(&a);
	if (args_parse(argc, argv, cmd_table, &a) == PARSE_RUN) {
		/* the last argument, read as a policy's options */
		snprintf(spec, sizeof(spec), "%s", argv[argc - 1]);
		policy_merge(&a, spec);
		if (a.cmd->options & CMDOPT_LIMIT)
			limit_settle(&a.ls, a.cmd->name, a.limits, &n, err,
			    sizeof(err));
	}
	args_free(&a);
	while (argc > 0)
		free(argv[--argc]);
	return 0;
}
