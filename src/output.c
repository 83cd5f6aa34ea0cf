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

/* Seconds, rounded up to the millisecond, without trailing zeros. */
size_t
output_seconds(char *buf, size_t len, int64_t us)
{
	int64_t ms = us <= 0 ? 0 : us / 1000 + (us % 1000 != 0);
	int n;

	if (ms % 1000 == 0)
		n = snprintf(buf, len, "%lld", (long long)(ms / 1000));
	else if (ms % 100 == 0)
		n = snprintf(buf, len, "%lld.%01lld", (long long)(ms / 1000),
		    (long long)(ms % 1000 / 100));
	else if (ms % 10 == 0)
		n = snprintf(buf, len, "%lld.%02lld", (long long)(ms / 1000),
		    (long long)(ms % 1000 / 10));
	else
		n = snprintf(buf, len, "%lld.%03lld", (long long)(ms / 1000),
		    (long long)(ms % 1000));
	return n < 0 ? 0 : (size_t)n;
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
	fprintf(fp, ",\"%s\":%s", name, t);
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

	fputs(",\"limits\":[", stdout);
	for (i = 0; i < r->nworks; i++) {
		l = &r->works[i].lim;
		printf("%s{\"limit\":%lld", i ? "," : "", (long long)l->count);
		json_seconds(stdout, "period", l->period);
		printf(",\"burst\":%lld,\"allowed\":%s,\"remaining\":%lld",
		    (long long)l->burst,
		    r->works[i].d.allowed ? "true" : "false",
		    (long long)r->works[i].d.remaining);
		json_seconds(stdout, "retry_after", r->works[i].d.retry_after);
		json_seconds(stdout, "reset_after", r->works[i].d.reset_after);
		putchar('}');
	}
	putchar(']');
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
		output_escape_text(stdout, r->key, r->keylen);
		output_duration(t, sizeof(t), l->period);
		printf(" algorithm=%s limit=%lld/%s burst=%lld", l->algo->name,
		    (long long)l->count, t, (long long)l->burst);
		if (l->algo->takes_granularity) {
			output_duration(t, sizeof(t), l->granularity);
			printf(" granularity=%s", t);
		}
		printf(" remaining=%lld", (long long)r->remaining);
		output_seconds(t, sizeof(t), r->retry_after);
		printf(" retry_after=%ss", t);
		output_seconds(t, sizeof(t), r->reset_after);
		printf(" reset_after=%ss\n", t);
		break;
	case FORMAT_JSON:
		fputs("{\"key\":", stdout);
		json_string(stdout, r->key, r->keylen);
		if (!r->inspect)
			printf(",\"allowed\":%s",
			    r->allowed ? "true" : "false");
		printf(",\"algorithm\":\"%s\",\"limit\":%lld", l->algo->name,
		    (long long)l->count);
		json_seconds(stdout, "period", l->period);
		printf(",\"burst\":%lld", (long long)l->burst);
		if (l->algo->takes_granularity)
			json_seconds(stdout, "granularity", l->granularity);
		if (!r->inspect)
			printf(",\"cost\":%lld", (long long)r->cost);
		printf(",\"remaining\":%lld", (long long)r->remaining);
		json_seconds(stdout, "retry_after", r->retry_after);
		json_seconds(stdout, "reset_after", r->reset_after);
		if (r->works != NULL)
			json_limits(r);
		fputs("}\n", stdout);
		break;
	case FORMAT_SHELL:
		fputs("THROTTLE_KEY=", stdout);
		shell_string(stdout, r->key, r->keylen);
		fputc('\n', stdout);
		if (!r->inspect)
			printf("THROTTLE_ALLOWED=%d\n", r->allowed ? 1 : 0);
		printf("THROTTLE_ALGORITHM=%s\nTHROTTLE_LIMIT=%lld\n",
		    l->algo->name, (long long)l->count);
		shell_seconds(stdout, "PERIOD", l->period);
		printf("THROTTLE_BURST=%lld\n", (long long)l->burst);
		if (l->algo->takes_granularity)
			shell_seconds(stdout, "GRANULARITY", l->granularity);
		if (!r->inspect)
			printf("THROTTLE_COST=%lld\n", (long long)r->cost);
		printf("THROTTLE_REMAINING=%lld\n", (long long)r->remaining);
		shell_seconds(stdout, "RETRY_AFTER", r->retry_after);
		shell_seconds(stdout, "RESET_AFTER", r->reset_after);
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
		fputs("{\"key\":", stdout);
		json_string(stdout, o->key ? o->key : "", o->keylen);
		printf(",\"allowed\":%s,\"error\":",
		    allowed ? "true" : "false");
		json_string(stdout, msg, strlen(msg));
		fputs("}\n", stdout);
		break;
	case FORMAT_SHELL:
		fputs("THROTTLE_KEY=", stdout);
		shell_string(stdout, o->key ? o->key : "", o->keylen);
		printf("\nTHROTTLE_ALLOWED=%d\nTHROTTLE_ERROR=", allowed);
		shell_string(stdout, msg, strlen(msg));
		fputc('\n', stdout);
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
	fputs("THROTTLE_", stdout);
	for (; *name != '\0'; name++)
		putchar(*name >= 'a' && *name <= 'z' ? *name - 32 : *name);
	fputs(suffix, stdout);
}

/* A duration field; negative means never. */
static void
field_secs(const struct opts *o, const struct field *f)
{
	char t[32];

	if (f->v < 0) {
		if (o->format == FORMAT_JSON)
			fputs("null", stdout);
		else if (o->format == FORMAT_TEXT)
			fputs("never", stdout);
		else {
			putchar('\n');
			shell_name(f->name, "_SECS=");
		}
		return;
	}
	output_seconds(t, sizeof(t), f->v);
	fputs(t, stdout);
	if (o->format == FORMAT_TEXT)
		putchar('s');
	else if (o->format == FORMAT_SHELL) {
		putchar('\n');
		shell_name(f->name, "_SECS=");
		printf("%lld", secs_up(f->v));
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
			printf("%s\"%s\":", i == 0 ? "{" : ",", f[i].name);
		else if (o->format == FORMAT_SHELL)
			shell_name(f[i].name, "=");
		else if (i > 0)
			printf(" %s=", f[i].name);
		switch (f[i].kind) {
		case FIELD_STR:
			if (o->format == FORMAT_JSON)
				json_string(stdout, f[i].s, f[i].n);
			else if (o->format == FORMAT_SHELL)
				shell_string(stdout, f[i].s, f[i].n);
			else
				output_escape_text(stdout, f[i].s, f[i].n);
			break;
		case FIELD_INT:
			printf("%lld", (long long)f[i].v);
			break;
		case FIELD_BOOL:
			if (o->format == FORMAT_JSON)
				fputs(f[i].v ? "true" : "false", stdout);
			else
				putchar(f[i].v ? '1' : '0');
			break;
		case FIELD_MICRO:
			output_micro(t, sizeof(t), f[i].v);
			fputs(t, stdout);
			break;
		case FIELD_SECS:
			field_secs(o, &f[i]);
			break;
		}
		if (o->format == FORMAT_SHELL)
			putchar('\n');
	}
	if (o->format == FORMAT_JSON)
		fputs("}\n", stdout);
	else if (o->format == FORMAT_TEXT)
		putchar('\n');
}
