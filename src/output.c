/*
 * output.c: the text, json and shell encoders; the only writer of results
 * to stdout, and the one place that turns microseconds into seconds.
 *
 * Invariants:
 *	1. Durations shown to a user are rounded up (to the millisecond in
 *	   text and json, to the second in the _SECS shell variables), so
 *	   waiting the time shown always succeeds.  Counts are rounded down.
 *	2. json output is one object per line and always valid UTF-8: bytes
 *	   of a key that are not UTF-8 become U+FFFD.  Shell output is safe
 *	   to eval: every value is a number, a fixed word, or single-quoted.
 *	3. Keys written to a terminal in messages have control characters
 *	   and backslashes escaped (\n, \x1b, \\), so a key cannot forge a
 *	   line or drive the terminal.
 */
#include <string.h>

#include "throttle.h"

/* Where results go: stdout, or a batch's buffer (output_to()). */
static FILE *out_fp;
#define OUT (out_fp != NULL ? out_fp : stdout)

/* Send results to fp from now on; NULL for stdout again. */
void
output_to(FILE *fp)
{
	out_fp = fp;
}

/*
 * v in decimal into buf, which has room for 21 bytes; its length.  (Not
 * printf: a batch writes these by the million.)
 */
static size_t
fmt_int(char *buf, int64_t v)
{
	char t[24];
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	size_t n = 0, i = 0;

	do {
		t[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (v < 0)
		buf[i++] = '-';
	while (n > 0)
		buf[i++] = t[--n];
	buf[i] = '\0';
	return i;
}

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
	n = fmt_int(buf, ms / 1000);
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

/* A duration as a user would write it: 15m, 1h30m, 250ms, 0.000125s. */
size_t
output_duration(char *buf, size_t len, int64_t us)
{
	const struct duration_unit *u;
	size_t n = 0;
	int w;

	if (us % 1000 != 0) {
		w = snprintf(buf, len, "%lld.%06llds",
		    (long long)(us / US_PER_SEC), (long long)(us % US_PER_SEC));
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

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t
utf8_len(const unsigned char *s, size_t n)
{
	size_t len, i;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	else if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		cp = s[0] & 0x07;
	} else
		return 0;
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
	    (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* Write s as text for a terminal, escaping what could disturb it. */
void
output_escape_text(FILE *fp, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i, l;

	for (i = 0; i < n; i += l) {
		l = utf8_len(p + i, n - i);
		if (l > 1) {
			fwrite(p + i, 1, l, fp);
			continue;
		}
		l = 1;
		if (p[i] == '\\')
			fputs("\\\\", fp);
		else if (p[i] == '\n')
			fputs("\\n", fp);
		else if (p[i] == '\t')
			fputs("\\t", fp);
		else if (p[i] < 0x20 || p[i] >= 0x7f)
			fprintf(fp, "\\x%02x", p[i]);
		else
			fputc(p[i], fp);
	}
}

static void
json_string(FILE *fp, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i, l;

	fputc('"', fp);
	for (i = 0; i < n; i += l) {
		/* a run that needs no escaping, in one write */
		for (l = 0; i + l < n && p[i + l] >= 0x20 && p[i + l] < 0x7f &&
		     p[i + l] != '"' && p[i + l] != '\\';
		     l++)
			;
		if (l > 0) {
			fwrite(p + i, 1, l, fp);
			continue;
		}
		l = utf8_len(p + i, n - i);
		if (l == 0) {
			fputs("\\ufffd", fp);
			l = 1;
		} else if (l > 1)
			fwrite(p + i, 1, l, fp);
		else if (p[i] == '"' || p[i] == '\\')
			fprintf(fp, "\\%c", p[i]);
		else if (p[i] == '\n')
			fputs("\\n", fp);
		else if (p[i] == '\t')
			fputs("\\t", fp);
		else if (p[i] < 0x20 || p[i] == 0x7f)
			fprintf(fp, "\\u%04x", p[i]);
		else
			fputc(p[i], fp);
	}
	fputc('"', fp);
}

static void
shell_string(FILE *fp, const char *s, size_t n)
{
	size_t i;

	fputc('\'', fp);
	for (i = 0; i < n; i++) {
		if (s[i] == '\'')
			fputs("'\\''", fp);
		else
			fputc(s[i], fp);
	}
	fputc('\'', fp);
}

static void
json_seconds(FILE *fp, const char *name, int64_t us)
{
	char t[32];

	output_seconds(t, sizeof(t), us);
	fputs(",\"", fp);
	fputs(name, fp);
	fputs("\":", fp);
	fputs(t, fp);
}

/* ,"name":v */
static void
json_int(FILE *fp, const char *name, int64_t v)
{
	char t[24];

	fmt_int(t, v);
	fputs(",\"", fp);
	fputs(name, fp);
	fputs("\":", fp);
	fputs(t, fp);
}

static void
shell_seconds(FILE *fp, const char *name, int64_t us)
{
	char t[32];

	output_seconds(t, sizeof(t), us);
	fprintf(fp, "THROTTLE_%s=%s\nTHROTTLE_%s_SECS=%lld\n", name, t, name,
	    secs_up(us));
}

/* The "limits" array of a compound limit: each limit's own numbers. */
static void
json_limits(const struct result *r)
{
	const struct limit *l;
	int i;

	fputs(",\"limits\":[", OUT);
	for (i = 0; i < r->nworks; i++) {
		l = &r->works[i].lim;
		fprintf(OUT, "%s{\"limit\":%lld", i ? "," : "",
		    (long long)l->count);
		json_seconds(OUT, "period", l->period);
		fprintf(OUT,
		    ",\"burst\":%lld,\"allowed\":%s,\"remaining\":%lld",
		    (long long)l->burst,
		    r->works[i].d.allowed ? "true" : "false",
		    (long long)r->works[i].d.remaining);
		json_seconds(OUT, "retry_after", r->works[i].d.retry_after);
		json_seconds(OUT, "reset_after", r->works[i].d.reset_after);
		fputc('}', OUT);
	}
	fputc(']', OUT);
}

/* Write one result in the chosen format (text writes nothing). */
void
output_result(const struct opts *o, const struct result *r)
{
	const struct limit *l = r->limit;
	char t[64];

	switch (o->format) {
	case FORMAT_TEXT:
		if (!r->inspect)
			return;
		output_escape_text(OUT, r->key, r->keylen);
		output_duration(t, sizeof(t), l->period);
		fprintf(OUT, " algorithm=%s limit=%lld/%s burst=%lld",
		    l->algo->name, (long long)l->count, t, (long long)l->burst);
		if (l->algo->takes_granularity) {
			output_duration(t, sizeof(t), l->granularity);
			fprintf(OUT, " granularity=%s", t);
		}
		fprintf(OUT, " remaining=%lld", (long long)r->remaining);
		output_seconds(t, sizeof(t), r->retry_after);
		fprintf(OUT, " retry_after=%ss", t);
		output_seconds(t, sizeof(t), r->reset_after);
		fprintf(OUT, " reset_after=%ss\n", t);
		break;
	case FORMAT_JSON:
		fputs("{\"key\":", OUT);
		json_string(OUT, r->key, r->keylen);
		if (!r->inspect)
			fputs(r->allowed ? ",\"allowed\":true"
					 : ",\"allowed\":false",
			    OUT);
		fputs(",\"algorithm\":\"", OUT);
		fputs(l->algo->name, OUT);
		fputc('"', OUT);
		json_int(OUT, "limit", l->count);
		json_seconds(OUT, "period", l->period);
		json_int(OUT, "burst", l->burst);
		if (l->algo->takes_granularity)
			json_seconds(OUT, "granularity", l->granularity);
		if (!r->inspect)
			json_int(OUT, "cost", r->cost);
		json_int(OUT, "remaining", r->remaining);
		json_seconds(OUT, "retry_after", r->retry_after);
		json_seconds(OUT, "reset_after", r->reset_after);
		if (r->works != NULL)
			json_limits(r);
		fputs("}\n", OUT);
		break;
	case FORMAT_SHELL:
		fputs("THROTTLE_KEY=", OUT);
		shell_string(OUT, r->key, r->keylen);
		fputc('\n', OUT);
		if (!r->inspect)
			fprintf(OUT, "THROTTLE_ALLOWED=%d\n",
			    r->allowed ? 1 : 0);
		fprintf(OUT, "THROTTLE_ALGORITHM=%s\nTHROTTLE_LIMIT=%lld\n",
		    l->algo->name, (long long)l->count);
		shell_seconds(OUT, "PERIOD", l->period);
		fprintf(OUT, "THROTTLE_BURST=%lld\n", (long long)l->burst);
		if (l->algo->takes_granularity)
			shell_seconds(OUT, "GRANULARITY", l->granularity);
		if (!r->inspect)
			fprintf(OUT, "THROTTLE_COST=%lld\n",
			    (long long)r->cost);
		fprintf(OUT, "THROTTLE_REMAINING=%lld\n",
		    (long long)r->remaining);
		shell_seconds(OUT, "RETRY_AFTER", r->retry_after);
		shell_seconds(OUT, "RESET_AFTER", r->reset_after);
		break;
	}
}

/* The one line on stderr that says a request was throttled. */
void
output_throttled(const struct opts *o, const struct result *r)
{
	char t[32];

	if (o->quiet)
		return;
	output_seconds(t, sizeof(t), r->retry_after);
	log_key(r->key, r->keylen, " throttled, retry in %ss", t);
}

/*
 * After a store error mapped by --on-error to allowed or refused, tell a
 * script reading json or shell output what happened.
 */
void
output_mapped_error(const struct opts *o, int allowed, const char *msg)
{
	switch (o->format) {
	case FORMAT_TEXT:
		break;
	case FORMAT_JSON:
		fputs("{\"key\":", OUT);
		json_string(OUT, o->key ? o->key : "", o->keylen);
		fprintf(OUT,
		    ",\"allowed\":%s,\"error\":", allowed ? "true" : "false");
		json_string(OUT, msg, strlen(msg));
		fputs("}\n", OUT);
		break;
	case FORMAT_SHELL:
		fputs("THROTTLE_KEY=", OUT);
		shell_string(OUT, o->key ? o->key : "", o->keylen);
		fprintf(OUT, "\nTHROTTLE_ALLOWED=%d\nTHROTTLE_ERROR=", allowed);
		shell_string(OUT, msg, strlen(msg));
		fputc('\n', OUT);
		break;
	}
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
shell_name(const char *name, const char *suffix)
{
	fputs("THROTTLE_", OUT);
	for (; *name != '\0'; name++)
		fputc(*name >= 'a' && *name <= 'z' ? *name - 32 : *name, OUT);
	fputs(suffix, OUT);
}

/* A duration field; negative means never. */
static void
field_secs(const struct opts *o, const struct field *f)
{
	char t[32];

	if (f->v < 0) {
		if (o->format == FORMAT_JSON)
			fputs("null", OUT);
		else if (o->format == FORMAT_TEXT)
			fputs("never", OUT);
		else {
			fputc('\n', OUT);
			shell_name(f->name, "_SECS=");
		}
		return;
	}
	output_seconds(t, sizeof(t), f->v);
	fputs(t, OUT);
	if (o->format == FORMAT_TEXT)
		fputc('s', OUT);
	else if (o->format == FORMAT_SHELL) {
		fputc('\n', OUT);
		shell_name(f->name, "_SECS=");
		fprintf(OUT, "%lld", secs_up(f->v));
	}
}

/*
 * Write one record of named fields: a json object, shell variables
 * (THROTTLE_NAME, with THROTTLE_NAME_SECS for durations), or in text
 * "KEY name=value ..." where the first field is the key.
 */
void
output_fields(const struct opts *o, const struct field *f, size_t n)
{
	char t[32];
	size_t i;

	for (i = 0; i < n; i++) {
		if (o->format == FORMAT_JSON)
			fprintf(OUT, "%s\"%s\":", i == 0 ? "{" : ",",
			    f[i].name);
		else if (o->format == FORMAT_SHELL)
			shell_name(f[i].name, "=");
		else if (i > 0)
			fprintf(OUT, " %s=", f[i].name);
		switch (f[i].kind) {
		case FIELD_STR:
			if (o->format == FORMAT_JSON)
				json_string(OUT, f[i].s, f[i].n);
			else if (o->format == FORMAT_SHELL)
				shell_string(OUT, f[i].s, f[i].n);
			else
				output_escape_text(OUT, f[i].s, f[i].n);
			break;
		case FIELD_INT:
			fprintf(OUT, "%lld", (long long)f[i].v);
			break;
		case FIELD_BOOL:
			if (o->format == FORMAT_JSON)
				fputs(f[i].v ? "true" : "false", OUT);
			else
				fputc(f[i].v ? '1' : '0', OUT);
			break;
		case FIELD_MICRO:
			output_micro(t, sizeof(t), f[i].v);
			fputs(t, OUT);
			break;
		case FIELD_SECS:
			field_secs(o, &f[i]);
			break;
		}
		if (o->format == FORMAT_SHELL)
			fputc('\n', OUT);
	}
	if (o->format == FORMAT_JSON)
		fputs("}\n", OUT);
	else if (o->format == FORMAT_TEXT)
		fputc('\n', OUT);
}

/*
 * A batch answer that is not a command's own: {"key":...,"error":...,
 * "exit":N}, the key left out if there is none and the error if msg is
 * NULL.
 */
void
output_batch_error(FILE *fp, const char *key, size_t keylen, const char *msg,
    int rc)
{
	const char *sep = "{";

	if (keylen > 0) {
		fputs("{\"key\":", fp);
		json_string(fp, key, keylen);
		sep = ",";
	}
	if (msg != NULL) {
		fprintf(fp, "%s\"error\":", sep);
		json_string(fp, msg, strlen(msg));
		sep = ",";
	}
	fprintf(fp, "%s\"exit\":%d}\n", sep, rc);
}
