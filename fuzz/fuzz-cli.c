/*
 * fuzz-cli.c: libFuzzer harness for the command-line parser.  The input is
 * an argument vector, the arguments separated by NUL bytes; it goes
 * through cmd_parse() and, for a command that takes limits, cmd_settle(),
 * which is everything between argv and a command's work that does not
 * touch the environment or a store (run with ASan and UBSan).
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
	const struct cmd_entry *c;
	struct opts o;
	int argc = 0;

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

	cmd_defaults(&o);
	if (cmd_parse(argc, argv, &o, &c) == PARSE_RUN &&
	    (c->options & CMDOPT_LIMIT))
		cmd_settle(&o, c->name);
	cmd_free(&o);
	while (argc > 0)
		free(argv[--argc]);
	return 0;
}
