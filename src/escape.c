/*
 * escape.c: bytes written so that the reader of each form gets them back
 * and nothing else: a terminal (text), a JSON parser, and a POSIX shell's
 * eval.  Keys are any bytes, so every path that shows one goes through
 * here.
 *
 * Invariants:
 *	1. Text has control characters (C1 too) and backslashes escaped (\n,
 *	   \t, \x1b, \\); other valid UTF-8 passes through.  A key cannot
 *	   forge a line or drive a terminal.
 *	2. JSON is always valid UTF-8: bytes that are not become U+FFFD.
 *	3. Shell is one single-quoted word, safe to eval.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "throttle.h"

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

/* Length of the UTF-8 sequence at s a terminal shows as a character:
 * as utf8_len(), but 0 for a C1 control (U+0080 to U+009F, such as CSI,
 * which some terminals act on as ESC [ ). */
static size_t
shown_len(const unsigned char *s, size_t n)
{
	size_t l = utf8_len(s, n);

	return l == 2 && s[0] == 0xc2 && s[1] < 0xa0 ? 0 : l;
}

/*
 * n bytes of s for a terminal: control characters (C0, DEL and C1) and
 * bytes that are not UTF-8 escaped (\n, \t, \x1b, \xc2\x9b), and
 * backslashes too if backslash.
 */
static void
escape_bytes(FILE *fp, const char *s, size_t n, int backslash)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i, l;

	for (i = 0; i < n; i += l) {
		l = shown_len(p + i, n - i);
		if (l > 1) {
			fwrite(p + i, 1, l, fp);
			continue;
		}
		l = 1;
		if (p[i] == '\\' && backslash)
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

/* n bytes of s as text for a terminal. */
void
escape_text(FILE *fp, const char *s, size_t n)
{
	escape_bytes(fp, s, n, 1);
}

/* Nonzero if escape_text() would write n bytes of s as they are but for
 * backslashes: no control characters, nothing that is not UTF-8. */
int
text_plain(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i, l;

	for (i = 0; i < n; i += l)
		if ((l = shown_len(p + i, n - i)) == 0 ||
		    (l == 1 && (p[i] < 0x20 || p[i] == 0x7f)))
			return 0;
	return 1;
}

/*
 * A message for stderr, as built: what escape_text() would escape is
 * escaped, but backslashes pass through (the keys in it are escaped
 * already).  Whatever part of a message came from a command line or a
 * store unescaped (a policy's name, a command, a subcommand), it cannot
 * drive the terminal either.
 */
void
escape_message(FILE *fp, const char *s)
{
	escape_bytes(fp, s, strlen(s), 0);
}

/* n bytes of s as escape_text() writes them, in a new string. */
char *
escape_text_dup(const char *s, size_t n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);

	if (fp == NULL) {
		buf = xmalloc(1); /* "" */
		buf[0] = '\0';
		return buf;
	}
	escape_text(fp, s, n);
	if (fclose(fp) != 0 || buf == NULL) {
		free(buf);
		buf = xmalloc(1);
		buf[0] = '\0';
	}
	return buf;
}

/* n bytes of s as a JSON string, quotes included. */
void
escape_json(FILE *fp, const char *s, size_t n)
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

/* n bytes of s as one single-quoted shell word. */
void
escape_shell(FILE *fp, const char *s, size_t n)
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
