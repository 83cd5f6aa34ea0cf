/*
 * log.c: messages on stderr, the usage exit, and the --on-error mapping.
 * Messages read "throttle: <object>: <problem>", lowercase, no period.
 */
#include <stdarg.h>
#include <stdlib.h>

#include "throttle.h"

static void vlog(const char *, va_list) __attribute__((format(printf, 1, 0)));

/* The last message, for a batch answer that must carry it. */
static char last[8192];

static void
vlog(const char *fmt, va_list ap)
{
	va_list copy;

	va_copy(copy, ap);
	vsnprintf(last, sizeof(last), fmt, copy);
	va_end(copy);
	fprintf(stderr, "throttle: %s\n", last);
}

/* The last message logged ("" after log_forget()). */
const char *
log_last(void)
{
	return last;
}

/* Forget the last message. */
void
log_forget(void)
{
	last[0] = '\0';
}

/* Print one message on stderr. */
void
log_msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

/* Print "throttle: KEY" and the rest of a message about a key, escaped. */
void
log_key(const char *key, size_t keylen, const char *fmt, ...)
{
	va_list ap;

	fputs("throttle: ", stderr);
	output_escape_text(stderr, key, keylen);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/*
 * Report a usage error found while running a command: on stderr, or in
 * batch mode only in o->err, for the request's answer.  Returns 2.
 */
int
cmd_usage(struct opts *o, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(o->err, sizeof(o->err), fmt, ap);
	va_end(ap);
	if (!o->batch)
		log_msg("%s", o->err);
	return EXIT_USAGE;
}

/* Report a usage error or invalid input and exit 2. */
void
die_usage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
	exit(EXIT_USAGE);
}

/* Keep a usage error in o->err for the caller to report; -1. */
int
usage_error(struct opts *o, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(o->err, sizeof(o->err), fmt, ap);
	va_end(ap);
	return -1;
}

/*
 * Report a state store error and return the exit code --on-error maps it
 * to: 3 (fail), 0 (allow) or 1 (deny).
 */
int
state_error(const struct opts *o, const char *msg)
{
	switch (o->on_error) {
	case ON_ERROR_ALLOW:
		log_msg("%s; allowing anyway (--on-error allow)", msg);
		output_mapped_error(o, 1, msg);
		return EXIT_ALLOWED;
	case ON_ERROR_DENY:
		log_msg("%s; refusing (--on-error deny)", msg);
		output_mapped_error(o, 0, msg);
		return EXIT_REFUSED;
	case ON_ERROR_FAIL:
		break;
	}
	log_msg("%s", msg);
	return EXIT_STATE;
}
