/*
 * log.c: messages on stderr that are not part of a command's answer (the
 * run wrapper's notes, batch's line numbers), and the usage exit.
 * Messages read "throttle: <object>: <problem>", lowercase, no period.
 */
#include <stdarg.h>
#include <stdlib.h>

#include "throttle.h"

/* Print one message on stderr. */
void
log_msg(const char *fmt, ...)
{
	va_list ap;

	fputs("throttle: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Print "throttle: KEY" and the rest of a message about a key, escaped. */
void
log_key(const char *key, size_t keylen, const char *fmt, ...)
{
	va_list ap;

	fputs("throttle: ", stderr);
	escape_text(stderr, key, keylen);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Report a usage error or invalid input and exit 2. */
void
die_usage(const char *fmt, ...)
{
	va_list ap;

	fputs("throttle: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_USAGE);
}
