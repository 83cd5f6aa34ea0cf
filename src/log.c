/*
 * log.c: messages on stderr that are not part of a command's answer (the
 * run wrapper's notes, batch's line numbers), and the usage exit.
 * Messages read "throttle: <object>: <problem>", lowercase, no period.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "throttle.h"

/* "throttle: " and a message on fp, one line: control bytes in it
 * escaped (escape_message()), then what to add as it is. */
void
log_line_to(FILE *fp, const char *msg, const char *tail)
{
	fputs("throttle: ", fp);
	escape_message(fp, msg);
	fputs(tail, fp);
	fputc('\n', fp);
}

/* The same on stderr. */
void
log_line(const char *msg, const char *tail)
{
	log_line_to(stderr, msg, tail);
}

static void log_va(const char *, va_list) __attribute__((format(printf, 1, 0)));

static void
log_va(const char *fmt, va_list ap)
{
	char buf[4096];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	log_line(buf, "");
}

/* Print one message on stderr. */
void
log_msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_va(fmt, ap);
	va_end(ap);
}

/* Print "throttle: KEY" and the rest of a message about a key, escaped. */
void
log_key(const char *key, size_t keylen, const char *fmt, ...)
{
	char *shown = escape_text_dup(key, keylen), buf[4096];
	va_list ap;
	int n;

	n = snprintf(buf, sizeof(buf), "%s", shown);
	free(shown);
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < sizeof(buf))
		vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	log_line(buf, "");
}

/* Report a usage error or invalid input and exit 2. */
void
die_usage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_va(fmt, ap);
	va_end(ap);
	exit(EXIT_USAGE);
}
