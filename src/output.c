/*
 * output.c: the encoders of answers (answer.c) in text, json and shell;
 * the only writer of results to stdout, and the one place that turns
 * microseconds into seconds.
 *
 * Invariants:
 *	1. Durations shown to a user are rounded up (to the millisecond in
 *	   text and json, to the second in the _SECS shell variables), so
 *	   waiting the time shown always succeeds.  Counts are rounded down.
 *	2. json output is one object per line and always valid UTF-8 (see
 *	   escape.c).  Shell output is safe to eval: every value is a number,
 *	   a fixed word, or single-quoted.
 *	3. Text escapes what could disturb a terminal.
 */
#include <errno.h>
#include <string.h>

#include "throttle.h"

/*
 * Seconds, rounded up to the millisecond, without trailing zeros, into buf
 * (len >= 32); its length.
 */
size_t
output_seconds(char *buf, size_t len, int64_t us)
{
	int64_t ms = us <= 0 ? 0 : us / 1000 + (us % 1000 != 0);
	int64_t frac = ms % 1000;
	size_t n;
	int digits = 3;

	if (len < 32) {
		if (len > 0)
			buf[0] = '\0';
		return 0;
	}
	n = record_int(buf, ms / 1000);
	if (frac == 0)
		return n;
	while (frac % 10 == 0) {
		frac /= 10;
		digits--;
	}
	buf[n++] = '.';
	for (; digits > 0; digits--) {
		int64_t p = digits == 3 ? 100 : digits == 2 ? 10 : 1;

		buf[n++] = (char)('0' + frac / p % 10);
	}
	buf[n] = '\0';
	return n;
}

/* Whole seconds, rounded up. */
static long long
secs_up(int64_t us)
{
	return us <= 0 ? 0
		       : (long long)(us / US_PER_SEC + (us % US_PER_SEC != 0));
}

/*
 * "retry in T" for a refusal's text, T as output_human() writes it; a wait
 * of the longest duration or more (only limits near it make one) is
 * "retry never", as json's null.
 */
void
output_retry(char *buf, size_t len, int64_t us)
{
	char t[32];

	if (us >= DURATION_MAX || us < 0) {
		snprintf(buf, len, "retry never");
		return;
	}
	output_human(t, sizeof(t), us);
	snprintf(buf, len, "retry in %s", t);
}

/*
 * A wait as a person reads it, into buf (len >= 32); its length.  Under a
 * minute, seconds rounded up to the millisecond ("0.25s", "12.5s");
 * longer, whole days, hours, minutes and seconds, the fraction of a
 * second dropped ("23h59m59s" for 86399.833s, as issue 18 asks), where it
 * no longer matters to a person; json and shell, for scripts, round up.
 */
size_t
output_human(char *buf, size_t len, int64_t us)
{
	static const struct {
		int64_t s;
		char unit;
	} parts[] = { { 86400, 'd' }, { 3600, 'h' }, { 60, 'm' }, { 1, 's' } };
	int64_t s;
	size_t n = 0, i;
	int w;

	if (len < 32) {
		if (len > 0)
			buf[0] = '\0';
		return 0;
	}
	if (us < 60 * US_PER_SEC) {
		n = output_seconds(buf, len, us);
		buf[n++] = 's';
		buf[n] = '\0';
		return n;
	}
	s = us / US_PER_SEC;
	for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		if (s < parts[i].s)
			continue;
		w = snprintf(buf + n, len - n, "%lld%c",
		    (long long)(s / parts[i].s), parts[i].unit);
		if (w < 0 || (size_t)w >= len - n)
			break;
		n += (size_t)w;
		s %= parts[i].s;
	}
	return n;
}

/*
 * A bound on a wait (--wait's, or what run has left of it), into buf
 * (len >= 32): as a person reads a wait where that is exact (5s, 1m30s,
 * 0.25s), else as a duration is written (59.999999s), never rounded to
 * what it is not.
 */
size_t
output_bound(char *buf, size_t len, int64_t us)
{
	if (us < 60 * US_PER_SEC ? us % 1000 == 0 : us % US_PER_SEC == 0)
		return output_human(buf, len, us);
	return output_duration(buf, len, us);
}

/* A duration as a user would write it: 15m, 1h30m, 250ms, 0.000125s. */
size_t
output_duration(char *buf, size_t len, int64_t us)
{
	const struct duration_unit *u;
	size_t n = 0;
	int w;

	if (us % 1000 != 0) {
		int64_t f = us % US_PER_SEC;
		int d = 6;

		/* 59.9999s, not 59.999900s: as few digits as are exact */
		while (f % 10 == 0) {
			f /= 10;
			d--;
		}
		w = snprintf(buf, len, "%lld.%0*llds",
		    (long long)(us / US_PER_SEC), d, (long long)f);
		return w < 0 ? 0 : (size_t)w;
	}
	for (u = duration_units; u->name != NULL && n < len; u++) {
		if (us < u->us)
			continue;
		w = snprintf(buf + n, len - n, "%lld%s",
		    (long long)(us / u->us), u->name);
		if (w < 0)
			break;
		n += (size_t)w;
		us %= u->us;
	}
	if (n == 0 && len > 0)
		n = (size_t)snprintf(buf, len, "0s");
	return n;
}

/* A millionths value as a decimal: 750000 is 0.75, -233334 is -0.233334. */
size_t
output_micro(char *buf, size_t len, int64_t v)
{
	uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	int n;

	n = snprintf(buf, len, "%s%llu.%06llu", v < 0 ? "-" : "",
	    (unsigned long long)(a / 1000000),
	    (unsigned long long)(a % 1000000));
	if (n < 0 || (size_t)n >= len)
		return 0;
	while (n > 0 && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n > 0 && buf[n - 1] == '.')
		buf[--n] = '\0';
	return (size_t)n;
}

/* A field's shell variable name: THROTTLE_, the name upper-cased, suffix. */
static void
shell_name(FILE *fp, const char *name, const char *suffix)
{
	fputs("THROTTLE_", fp);
	for (; *name != '\0'; name++)
		fputc(*name >= 'a' && *name <= 'z' ? *name - 32 : *name, fp);
	fputs(suffix, fp);
}

/* One field's value in format fmt (shell: the line after NAME=). */
static void
value(FILE *fp, enum format fmt, const struct field *f)
{
	char t[64];

	switch (f->kind) {
	case FIELD_STR:
		if (fmt == FORMAT_JSON)
			escape_json(fp, f->s, f->n);
		else if (fmt == FORMAT_SHELL)
			escape_shell(fp, f->s, f->n);
		else
			escape_text(fp, f->s, f->n);
		break;
	case FIELD_INT:
		record_int(t, f->v); /* not printf: a batch writes millions */
		fputs(t, fp);
		break;
	case FIELD_LIMIT:
		if (fmt != FORMAT_TEXT) {
			record_int(t, f->v);
			fputs(t, fp);
			break;
		}
		output_duration(t, sizeof(t), f->u);
		fprintf(fp, "%lld/%s", (long long)f->v, t);
		break;
	case FIELD_BOOL:
		if (fmt == FORMAT_JSON)
			fputs(f->v ? "true" : "false", fp);
		else
			fputc(f->v ? '1' : '0', fp);
		break;
	case FIELD_MICRO:
		output_micro(t, sizeof(t), f->v);
		fputs(t, fp);
		break;
	case FIELD_NONE:
		if (fmt != FORMAT_SHELL)
			fputs(fmt == FORMAT_JSON ? "null" : "none", fp);
		break;
	case FIELD_SECS:
	case FIELD_DUR:
		if (f->v < 0) {
			if (fmt == FORMAT_JSON)
				fputs("null", fp);
			else if (fmt == FORMAT_TEXT)
				fputs("never", fp);
			else {
				fputc('\n', fp);
				shell_name(fp, f->name, "_SECS=");
			}
			break;
		}
		if (fmt == FORMAT_TEXT && f->kind == FIELD_DUR) {
			output_duration(t, sizeof(t), f->v);
			fputs(t, fp);
			break;
		}
		if (fmt == FORMAT_TEXT) {
			output_human(t, sizeof(t), f->v);
			fputs(t, fp);
			break;
		}
		output_seconds(t, sizeof(t), f->v);
		fputs(t, fp);
		if (fmt == FORMAT_SHELL) {
			fputc('\n', fp);
			shell_name(fp, f->name, "_SECS=");
			fprintf(fp, "%lld", secs_up(f->v));
		}
		break;
	}
}

static int
shows(const struct field *f, enum format fmt)
{
	int bit = fmt == FORMAT_TEXT ? SHOW_TEXT
	    : fmt == FORMAT_JSON     ? SHOW_JSON
				     : SHOW_SHELL;

	return f->show == 0 || (f->show & bit);
}

/*
 * A JSON line is built in memory and written with one fwrite: a batch
 * writes these by the million, and a stdio call per piece cost a fifth of
 * its time.
 */
struct jline {
	FILE *fp;
	size_t n;
	char b[2048];
};

static void
jl_flush(struct jline *j)
{
	if (j->n > 0)
		fwrite(j->b, 1, j->n, j->fp);
	j->n = 0;
}

static void
jl_put_long(struct jline *j, const char *s, size_t n)
{
	jl_flush(j);
	if (n > sizeof(j->b))
		fwrite(s, 1, n, j->fp);
	else {
		memcpy(j->b, s, n);
		j->n = n;
	}
}

/* inline: a batch's JSON line is some fifty of these, most of one byte */
static inline void
jl_put(struct jline *j, const char *s, size_t n)
{
	if (j->n + n > sizeof(j->b)) {
		jl_put_long(j, s, n);
		return;
	}
	memcpy(j->b + j->n, s, n);
	j->n += n;
}

static void
jl_str(struct jline *j, const char *s)
{
	jl_put(j, s, strlen(s));
}

static void
jl_int(struct jline *j, int64_t v)
{
	char t[24];
	size_t n = record_int(t, v);

	jl_put(j, t, n);
}

/* A JSON string: as it is if nothing in it needs escaping. */
static void
jl_json(struct jline *j, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] < 0x20 || p[i] >= 0x7f || p[i] == '"' || p[i] == '\\')
			break;
	if (i < n) {
		jl_flush(j);
		escape_json(j->fp, s, n);
		return;
	}
	jl_put(j, "\"", 1);
	jl_put(j, s, n);
	jl_put(j, "\"", 1);
}

/* One field's value in JSON (as value() writes it for FORMAT_JSON). */
static void
json_value(struct jline *j, const struct field *f)
{
	char t[64];
	size_t n;

	switch (f->kind) {
	case FIELD_STR:
		jl_json(j, f->s, f->n);
		break;
	case FIELD_INT:
	case FIELD_LIMIT:
		jl_int(j, f->v);
		break;
	case FIELD_BOOL:
		jl_str(j, f->v ? "true" : "false");
		break;
	case FIELD_MICRO:
		n = output_micro(t, sizeof(t), f->v);
		jl_put(j, t, n);
		break;
	case FIELD_NONE:
		jl_str(j, "null");
		break;
	case FIELD_SECS:
	case FIELD_DUR:
		if (f->v < 0)
			jl_str(j, "null");
		else {
			n = output_seconds(t, sizeof(t), f->v);
			jl_put(j, t, n);
		}
		break;
	}
}

/* The fields of r as a JSON object's members, without the braces. */
static void
json_members(struct jline *j, const struct record *r)
{
	int i, n = 0;

	for (i = 0; i < r->nf; i++) {
		if (!shows(&r->f[i], FORMAT_JSON))
			continue;
		if (n++ > 0)
			jl_put(j, ",", 1);
		jl_put(j, "\"", 1);
		jl_str(j, r->f[i].name);
		jl_put(j, "\":", 2);
		json_value(j, &r->f[i]);
	}
	if (r->nsub > 0) {
		jl_str(j, ",\"limits\":[");
		for (i = 0; i < r->nsub; i++) {
			jl_str(j, i ? ",{" : "{");
			json_members(j, &r->sub[i]);
			jl_put(j, "}", 1);
		}
		jl_put(j, "]", 1);
	}
}

/* One record as a JSON line, with "exit":rc added when rc >= 0 (batch). */
void
output_json(FILE *fp, const struct record *r, int rc)
{
	output_json_one(fp, &r, 1, rc);
}

/*
 * A batch's answer to one request, one line however many records it has
 * (inspect KEY: its limits, each lease, its shedder): the first record's
 * object, the others in its array "more", then "exit":rc if rc >= 0.
 */
void
output_json_one(FILE *fp, const struct record *const *r, int n, int rc)
{
	struct jline j;
	int i, any = r[0]->nf > 0;

	j.fp = fp;
	j.n = 0;
	jl_put(&j, "{", 1);
	json_members(&j, r[0]);
	if (n > 1) {
		jl_str(&j, any ? ",\"more\":[" : "\"more\":[");
		for (i = 1; i < n; i++) {
			jl_put(&j, i > 1 ? ",{" : "{", i > 1 ? 2 : 1);
			json_members(&j, r[i]);
			jl_put(&j, "}", 1);
		}
		jl_put(&j, "]", 1);
		any = 1;
	}
	if (rc >= 0) {
		jl_str(&j, any ? ",\"exit\":" : "\"exit\":");
		jl_int(&j, rc);
	}
	jl_put(&j, "}\n", 2);
	jl_flush(&j);
}

/*
 * The errno of the first write to a stream that failed (output_check()):
 * a stream keeps only its error flag, and musl's drops what it held, so
 * a later flush has nothing to fail on and cannot say why.
 */
static int out_errno;

/* After writing to fp: note its first failure. */
void
output_check(FILE *fp)
{
	if (out_errno == 0 && ferror(fp))
		out_errno = errno != 0 ? errno : EIO;
}

/* The errno of the first failed write output_check() saw, or 0. */
int
output_failed(void)
{
	return out_errno;
}

/* One record in format fmt. */
void
output_record(FILE *fp, enum format fmt, const struct record *r)
{
	int i, n = 0;

	if (r->text == TEXT_RAW) {
		fprintf(fp, "%s\n", r->line);
		return;
	}
	switch (fmt) {
	case FORMAT_JSON:
		output_json(fp, r, -1);
		break;
	case FORMAT_SHELL:
		for (i = 0; i < r->nf; i++) {
			if (!shows(&r->f[i], FORMAT_SHELL))
				continue;
			shell_name(fp, r->f[i].name, "=");
			value(fp, FORMAT_SHELL, &r->f[i]);
			fputc('\n', fp);
		}
		break;
	case FORMAT_TEXT:
		switch (r->text) {
		case TEXT_NONE:
			return;
		case TEXT_LINE:
		case TEXT_RAW:
			fprintf(fp, "%s\n", r->line);
			return;
		case TEXT_VALUE:
			value(fp, FORMAT_TEXT, &r->f[r->text_field]);
			fputc('\n', fp);
			return;
		case TEXT_FIELDS:
			for (i = 0; i < r->nf; i++) {
				if (!shows(&r->f[i], FORMAT_TEXT))
					continue;
				if (n++ > 0)
					fprintf(fp, " %s=", r->f[i].name);
				value(fp, FORMAT_TEXT, &r->f[i]);
			}
			fputc('\n', fp);
			return;
		}
	}
}

/*
 * Print an answer: its records on stdout in the context's format, its
 * message on stderr ("throttle: ..."), unless -q silences an MSG_INFO one.
 * A store error the driver has mapped through --on-error says so.
 */
void
output_answer(const struct ctx *c, struct answer *a)
{
	int i;

	for (i = 0; i < a->nrec; i++) {
		output_record(stdout, c->format, a->rec[i]);
		output_check(stdout);
	}
	switch (a->msg_kind) {
	case MSG_NONE:
		break;
	case MSG_INFO:
		if (!c->quiet)
			log_line(a->msg, "");
		break;
	case MSG_NOTICE:
	case MSG_USAGE:
		log_line(a->msg, "");
		break;
	case MSG_STATE:
		log_line(a->msg, ctx_state_note(c));
		break;
	}
}
