/*
 * answer.c: a command's answer, as data.  A command fills one struct
 * answer: its exit status, the records it prints (each a list of named
 * fields), and at most one message for standard error.  It prints nothing
 * itself: output.c encodes the answer for the terminal, a script (json,
 * shell) or a batch line, and the driver maps a store error through
 * --on-error.  Strings a record shows are copied into memory the answer
 * owns, so they outlive the buffers they came from.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

/* A new, empty answer: exit 0, nothing to print. */
void
answer_init(struct answer *a)
{
	/* not all of it: a batch starts an answer for each request */
	memset(a, 0, offsetof(struct answer, first));
	a->msg[0] = '\0';
}

static void
free_records(struct answer *a)
{
	int i;

	for (i = 0; i < a->nrec; i++) {
		free(a->rec[i]->sub);
		if (a->rec[i] != &a->first)
			free(a->rec[i]);
	}
	a->nrec = 0;
	a->first_used = 0;
}

/* Free what an answer holds; it can be filled again after answer_init(). */
void
answer_free(struct answer *a)
{
	int i;

	free_records(a);
	free(a->rec);
	for (i = 0; i < a->nblocks; i++)
		free(a->blocks[i]);
	free(a->blocks);
	a->rec = NULL;
	a->blocks = NULL;
	a->cap = a->nblocks = a->capblocks = 0;
}

/* A new record at the end of the answer, shown in text as style says. */
struct record *
answer_record(struct answer *a, enum text_style style)
{
	struct record *r;

	if (a->nrec == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 4;
		a->rec =
		    xrealloc(a->rec, (size_t)a->cap * sizeof(struct record *));
	}
	if (!a->first_used) {
		/* the fields past nf are set as they are added */
		r = &a->first;
		memset(r, 0, offsetof(struct record, f));
		r->nsub = 0;
		r->sub = NULL;
		a->first_used = 1;
	} else
		r = xcalloc(1, sizeof(*r));
	r->text = style;
	a->rec[a->nrec++] = r;
	return r;
}

/* A copy of n bytes of s that lives as long as the answer (NUL added). */
const char *
answer_keep(struct answer *a, const char *s, size_t n)
{
	char *c = xmalloc(n + 1);

	memcpy(c, s, n);
	c[n] = '\0';
	if (a->nblocks == a->capblocks) {
		a->capblocks = a->capblocks ? a->capblocks * 2 : 8;
		a->blocks = xrealloc(a->blocks,
		    (size_t)a->capblocks * sizeof(*a->blocks));
	}
	a->blocks[a->nblocks++] = c;
	return c;
}

static struct field *
add(struct record *r, const char *name, enum field_kind kind, int show)
{
	struct field *f;

	if (r->nf == RECORD_FIELDS) {
		fputs("throttle: internal error: a record with too many "
		      "fields\n",
		    stderr);
		abort();
	}
	f = &r->f[r->nf++];
	memset(f, 0, sizeof(*f));
	f->name = name;
	f->kind = kind;
	f->show = show;
	return f;
}

/* Add a string field (n bytes of s, copied); show: SHOW_* or 0 (all). */
void
rec_str(struct answer *a, struct record *r, const char *name, const char *s,
    size_t n, int show)
{
	struct field *f = add(r, name, FIELD_STR, show);

	f->s = answer_keep(a, s, n);
	f->n = n;
}

/* Add a whole number. */
void
rec_int(struct record *r, const char *name, int64_t v, int show)
{
	add(r, name, FIELD_INT, show)->v = v;
}

/* Add a boolean. */
void
rec_bool(struct record *r, const char *name, int v, int show)
{
	add(r, name, FIELD_BOOL, show)->v = v != 0;
}

/* Add a time span of us microseconds (< 0: never). */
void
rec_secs(struct record *r, const char *name, int64_t us, int show)
{
	add(r, name, FIELD_SECS, show)->v = us;
}

/* Add a time span shown in text as a duration a user would write (1h30m). */
void
rec_dur(struct record *r, const char *name, int64_t us, int show)
{
	add(r, name, FIELD_DUR, show)->v = us;
}

/* Add a number of millionths, shown as a decimal (0.75). */
void
rec_micro(struct record *r, const char *name, int64_t v, int show)
{
	add(r, name, FIELD_MICRO, show)->v = v;
}

/* Add a field that has no value (a lease with no owner). */
void
rec_none(struct record *r, const char *name, int show)
{
	add(r, name, FIELD_NONE, show);
}

/* Add a limit: count per period us (text "5/15m", elsewhere the count). */
void
rec_limit(struct record *r, const char *name, int64_t count, int64_t period,
    int show)
{
	struct field *f = add(r, name, FIELD_LIMIT, show);

	f->v = count;
	f->u = period;
}

/* A new sub-record of r (one limit of a compound limit). */
struct record *
rec_sub(struct record *r)
{
	struct record *s;

	r->sub = xrealloc(r->sub, (size_t)(r->nsub + 1) * sizeof(*r->sub));
	s = &r->sub[r->nsub++];
	memset(s, 0, sizeof(*s));
	return s;
}

/* The record's text is this line (TEXT_LINE). */
void
rec_line(struct answer *a, struct record *r, const char *fmt, ...)
{
	char buf[KEY_MAX * 4 + 4096]; /* an escaped key, and more */
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(buf))
		n = (int)sizeof(buf) - 1;
	r->text = TEXT_LINE;
	r->line = answer_keep(a, buf, (size_t)n);
}

static void vsay(struct answer *, enum msg_kind, FILE *, const char *, va_list)
    __attribute__((format(printf, 4, 0)));

static void
vsay(struct answer *a, enum msg_kind kind, FILE *fp, const char *fmt,
    va_list ap)
{
	if (fp == NULL)
		vsnprintf(a->msg, sizeof(a->msg), fmt, ap);
	else
		vfprintf(fp, fmt, ap);
	a->msg_kind = kind;
}

/* Say something on standard error with the answer (MSG_INFO: unless -q). */
void
answer_say(struct answer *a, enum msg_kind kind, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(a, kind, NULL, fmt, ap);
	va_end(ap);
}

/* Say something about a key: the key, escaped, then the rest. */
void
answer_say_key(struct answer *a, enum msg_kind kind, const char *key,
    size_t keylen, const char *fmt, ...)
{
	va_list ap;
	FILE *fp;

	if ((fp = fmemopen(a->msg, sizeof(a->msg), "w")) == NULL) {
		a->msg[0] = '\0';
		a->msg_kind = kind;
		return;
	}
	escape_text(fp, key, keylen);
	va_start(ap, fmt);
	vsay(a, kind, fp, fmt, ap);
	va_end(ap);
	fclose(fp);
	/* glibc ends a message cut short with a NUL; not every libc does */
	a->msg[sizeof(a->msg) - 1] = '\0';
}

/* A usage error or invalid input: exit 2 and the message.  -1. */
int
answer_usage(struct answer *a, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(a, MSG_USAGE, NULL, fmt, ap);
	va_end(ap);
	a->rc = EXIT_USAGE;
	return -1;
}

/* A store error (exit 3, or what --on-error maps it to).  -1. */
int
answer_state(struct answer *a, const char *msg)
{
	snprintf(a->msg, sizeof(a->msg), "%s", msg);
	a->msg_kind = MSG_STATE;
	a->rc = EXIT_STATE;
	return -1;
}

/*
 * Print the records gathered so far and forget them, when the answer
 * streams (a->stream: the listing of every key, which may be long).
 */
void
answer_flush(struct answer *a)
{
	int i;

	if (a->stream == NULL)
		return;
	for (i = 0; i < a->nrec; i++) {
		output_record(stdout, a->stream->format, a->rec[i]);
		output_check(stdout);
	}
	a->streamed += a->nrec;
	free_records(a);
	for (i = 0; i < a->nblocks; i++)
		free(a->blocks[i]);
	a->nblocks = 0;
}
