/*
 * main.c: throttle decides whether an action keyed by a string may happen
 * now, under a limit whose state it keeps in a file shared by every caller.
 */
#include <errno.h>
#include <string.h>

#include "throttle.h"

int
main(int argc, char **argv)
{
	int rc;

	rc = cmd_main(argc, argv);
	/*
	 * A decision is committed before it is printed; if stdout cannot be
	 * written, say so, but keep the exit code: it is still the truth.
	 */
	if (fflush(stdout) == EOF || ferror(stdout))
		log_msg("standard output: %s", strerror(errno));
	return rc;
}
