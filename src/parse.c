/*
 * parse.c: pure parsers for durations, limits, counts and times.
 *
 * Each parser has the shape of strtonum(3): it returns 0 and stores the
 * value, or returns -1 and points *errstr at a static phrase that the caller
 * prints after the offending text.  Nothing here prints, exits, allocates or
 * reads the clock.  All results are exact integers of microseconds: a value
 * that cannot be represented exactly (finer than a microsecond) is refused,
 * never rounded.
 */
#include <string.h>

#include "throttle.h"

/* Duration units, largest first; output_duration() writes with these too. */
const struct duration_unit duration_units[] = {
	{ "w", INT64_C(604800000000) },
	{ "d", INT64_C(86400000000) },
	{ "h", INT64_C(3600000000) },
	{ "m", INT64_C(60000000) },
	{ "s", INT64_C(1000000) },
	{ "ms", INT64_C(1000) },
	{ NULL, 0 },
};

static int
isdigit_c(char c)
{
	return c >= '0' && c <= '9';
}

/* The units' words, read as well ("10/hour;100/day"), never written. */
static const struct duration_unit unit_words[] = {
	{ "week", INT64_C(604800000000) },
	{ "weeks", INT64_C(604800000000) },
	{ "day", INT64_C(86400000000) },
	{ "days", INT64_C(86400000000) },
	{ "hour", INT64_C(3600000000) },
	{ "hours", INT64_C(3600000000) },
	{ "min", INT64_C(60000000) },
	{ "mins", INT64_C(60000000) },
	{ "minute", INT64_C(60000000) },
	{ "minutes", INT64_C(60000000) },
	{ "sec", INT64_C(1000000) },
	{ "secs", INT64_C(1000000) },
	{ "second", INT64_C(1000000) },
	{ "seconds", INT64_C(1000000) },
	{ NULL, 0 },
};

/* Read a unit at *sp (the longest name that matches); its size or 0. */
static int64_t
read_unit(const char **sp)
{
	const struct duration_unit *tables[] = { duration_units, unit_words };
	const struct duration_unit *u, *best = NULL;
	size_t n, i;

	for (i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		for (u = tables[i]; u->name != NULL; u++) {
			if (u->name[0] != **sp)
				continue;
			n = strlen(u->name);
			if (strncmp(*sp, u->name, n) == 0 &&
			    (best == NULL || n > strlen(best->name)))
				best = u;
		}
	if (best == NULL)
		return 0;
	*sp += strlen(best->name);
	return best->us;
}

/*
 * One more digit d of a number: 0, or -1 with *errstr set.  A fraction's
 * digits past the 36th are finer than any unit's microsecond could be.
 */
static int
push_digit(int64_t *m, int *sc, int point, int d, const char **errstr)
{
	if (*m > (INT64_MAX - d) / 10) {
		*errstr = "has too many digits";
		return -1;
	}
	if (point && *sc == 36) {
		*errstr = "is finer than a microsecond";
		return -1;
	}
	*m = *m * 10 + d;
	*sc += point;
	return 0;
}

/*
 * Read "DIGITS[.DIGITS]" at *sp as a fraction mant / 10^scale.  Returns -1
 * if there is no number or it is too large to be exact.  A fraction's
 * trailing zeros carry nothing and are not kept (1.000000000000000000000s
 * is one second), nor are leading ones (m stays 0).
 */
static int
read_number(const char **sp, int64_t *mant, int *scale, const char **errstr)
{
	const char *s = *sp;
	int64_t m = 0;
	int sc = 0, point = 0, zeros = 0;

	for (;; s++) {
		if (isdigit_c(*s)) {
			if (point && *s == '0') {
				zeros++; /* they count if a digit follows */
				continue;
			}
			for (; zeros > 0; zeros--)
				if (push_digit(&m, &sc, point, 0, errstr) == -1)
					return -1;
			if (push_digit(&m, &sc, point, *s - '0', errstr) == -1)
				return -1;
		} else if (*s == '.' && !point) {
			point = 1;
			if (!isdigit_c(s[1])) {
				*errstr = "is not a duration (a decimal point "
					  "needs digits after it)";
				return -1;
			}
		} else
			break;
	}
	if (s == *sp) {
		*errstr = "is not a duration (use a number and a unit: ms, s, "
			  "m, h, d, w, as in 90s, 15m or 1h30m)";
		return -1;
	}
	*sp = s;
	*mant = m;
	*scale = sc;
	return 0;
}

/* mant / 10^scale units of unit_us, exactly, into *out. */
static int
scale_exact(int64_t mant, int scale, int64_t unit_us, int64_t *out,
    const char **errstr)
{
	i128 v = (i128)mant * unit_us, p = 1;
	int i;

	for (i = 0; i < scale; i++)
		p *= 10;
	if (v % p != 0) {
		*errstr = "is finer than a microsecond";
		return -1;
	}
	v /= p;
	if (v > DURATION_MAX) {
		*errstr = "is too long (the most is about 146000 years)";
		return -1;
	}
	*out = (int64_t)v;
	return 0;
}

/*
 * Parse a duration: "90s", "1.5h", "1h30m", "250ms", a bare unit meaning one
 * of it ("m"), or a bare number meaning seconds ("60").
 */
int
parse_duration(const char *s, int64_t *out, const char **errstr)
{
	int64_t total = 0, part, mant, unit, last_unit = INT64_MAX;
	int scale, first = 1;

	if (s == NULL || *s == '\0') {
		*errstr = "is empty (give a duration such as 90s or 15m)";
		return -1;
	}
	if ((unit = read_unit(&s)) != 0) {
		if (*s != '\0') {
			*errstr =
			    "is not a duration (use a number and a "
			    "unit: ms, s, m, h, d, w, as in 90s or 1h30m)";
			return -1;
		}
		*out = unit;
		return 0;
	}
	while (*s != '\0') {
		if (read_number(&s, &mant, &scale, errstr) == -1)
			return -1;
		unit = read_unit(&s);
		if (unit == 0) {
			if (*s != '\0' || !first) {
				*errstr =
				    "is not a duration (use a number "
				    "and a unit: ms, s, m, h, d, w, as in "
				    "90s or 1h30m)";
				return -1;
			}
			unit = US_PER_SEC; /* a bare number: seconds */
		}
		if (unit >= last_unit) {
			*errstr = "is not a duration (units go from largest "
				  "to smallest, each once, as in 1h30m)";
			return -1;
		}
		last_unit = unit;
		first = 0;
		if (scale_exact(mant, scale, unit, &part, errstr) == -1)
			return -1;
		if (total > DURATION_MAX - part) {
			*errstr =
			    "is too long (the most is about 146000 years)";
			return -1;
		}
		total += part;
	}
	*out = total;
	return 0;
}

/* Parse a whole number from 0 to max. */
int
parse_count(const char *s, int64_t max, int64_t *out, const char **errstr)
{
	int64_t v = 0;
	const char *p;

	if (s == NULL || *s == '\0') {
		*errstr = "is empty (give a whole number)";
		return -1;
	}
	for (p = s; *p != '\0'; p++) {
		if (!isdigit_c(*p)) {
			*errstr = PARSE_NOT_COUNT;
			return -1;
		}
		if (v > (max - (*p - '0')) / 10) {
			*errstr = PARSE_TOO_LARGE;
			return -1;
		}
		v = v * 10 + (*p - '0');
	}
	*out = v;
	return 0;
}

/* Parse "N/PERIOD": at least one unit per a positive duration. */
int
parse_limit(const char *s, int64_t *count, int64_t *period, const char **errstr)
{
	char buf[64];
	const char *slash;
	size_t n;

	if (s == NULL || (slash = strchr(s, '/')) == NULL) {
		*errstr = "is not a limit (write N/PERIOD, as in 5/15m or "
			  "100/1s)";
		return -1;
	}
	n = (size_t)(slash - s);
	if (n == 0 || n >= sizeof(buf)) {
		*errstr = "is not a limit (write N/PERIOD, as in 5/15m or "
			  "100/1s)";
		return -1;
	}
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (parse_count(buf, COUNT_MAX, count, errstr) == -1) {
		if (strcmp(*errstr, PARSE_TOO_LARGE) == 0)
			*errstr = "has a count that is too large (the most is "
				  "9223372036854775807)";
		else
			*errstr = "is not a limit (N must be a whole number, "
				  "as in 5/15m)";
		return -1;
	}
	if (*count == 0) {
		*errstr = "allows nothing (N must be at least 1)";
		return -1;
	}
	if (slash[1] == '\0') {
		*errstr = "has no period after the '/' (write N/PERIOD, as in "
			  "5/15m or 100/1s)";
		return -1;
	}
	if (parse_duration(slash + 1, period, errstr) == -1)
		return -1;
	if (*period == 0) {
		*errstr = "has a period of zero (give a positive duration)";
		return -1;
	}
	return 0;
}

/*
 * Parse a point in time given as decimal seconds since the epoch, as
 * THROTTLE_NOW is; digits past the microsecond are dropped (floor).
 */
int
parse_time(const char *s, int64_t *out, const char **errstr)
{
	int64_t sec = 0, frac = 0, mult = 100000;
	const char *p = s;

	if (s == NULL || *s == '\0') {
		*errstr = "is empty (give seconds since the epoch)";
		return -1;
	}
	if (*p == '-') {
		*errstr = "is before the epoch (give seconds since 1970, "
			  "not negative)";
		return -1;
	}
	for (; isdigit_c(*p); p++) {
		if (sec > (TIME_MAX / US_PER_SEC) / 10) {
			*errstr = "is too far in the future (after year 9999)";
			return -1;
		}
		sec = sec * 10 + (*p - '0');
	}
	if (p == s && !(*p == '.' && isdigit_c(p[1]))) {
		/* (".25" is a time, as ".5s" is a duration) */
		*errstr = "is not a time (give seconds since the epoch, as "
			  "in 1700000000 or 1700000000.25)";
		return -1;
	}
	if (*p == '.') {
		for (p++; isdigit_c(*p); p++) {
			frac += (*p - '0') * mult;
			mult /= 10;
		}
	}
	if (*p != '\0') {
		*errstr = "is not a time (give seconds since the epoch, as "
			  "in 1700000000 or 1700000000.25)";
		return -1;
	}
	if (sec >= TIME_MAX / US_PER_SEC) {
		*errstr = "is too far in the future (after year 9999)";
		return -1;
	}
	*out = sec * US_PER_SEC + frac;
	return 0;
}

/* Parse an output format name. */
int
parse_format(const char *s, enum format *out)
{
	if (strcmp(s, "text") == 0)
		*out = FORMAT_TEXT;
	else if (strcmp(s, "json") == 0)
		*out = FORMAT_JSON;
	else if (strcmp(s, "shell") == 0)
		*out = FORMAT_SHELL;
	else
		return -1;
	return 0;
}

/* Parse an --on-error policy name. */
int
parse_on_error(const char *s, enum on_error *out)
{
	if (strcmp(s, "fail") == 0)
		*out = ON_ERROR_FAIL;
	else if (strcmp(s, "allow") == 0)
		*out = ON_ERROR_ALLOW;
	else if (strcmp(s, "deny") == 0)
		*out = ON_ERROR_DENY;
	else
		return -1;
	return 0;
}

static const char *const priorities[] = { "critical", "high", "normal", "low" };

/* Parse a priority name. */
int
parse_priority(const char *s, int *out)
{
	int i;

	for (i = 0; i < (int)(sizeof(priorities) / sizeof(*priorities)); i++)
		if (strcmp(s, priorities[i]) == 0) {
			*out = i;
			return 0;
		}
	return -1;
}

/* The name of a priority. */
const char *
priority_name(int p)
{
	return p >= 0 && p < (int)(sizeof(priorities) / sizeof(*priorities))
	    ? priorities[p]
	    : "?";
}

/*
 * Parse a non-negative decimal such as 0.75 or 1.5 into millionths; digits
 * past the millionth are dropped.
 */
int
parse_fraction(const char *s, int64_t *out, const char **errstr)
{
	int64_t whole = 0, frac = 0, mult = 100000;
	const char *p = s;

	for (; isdigit_c(*p); p++) {
		if (whole > 1000000) {
			*errstr = "is too large";
			return -1;
		}
		whole = whole * 10 + (*p - '0');
	}
	if (*p == '.')
		for (p++; isdigit_c(*p); p++) {
			frac += (*p - '0') * mult;
			mult /= 10;
		}
	if (*s == '-' && s[1] != '-' &&
	    parse_fraction(s + 1, out, errstr) == 0) {
		/* a number, but a negative one (-0 is 0) */
		if (*out == 0)
			return 0;
		*errstr = "is below 0 (give a decimal from 0, such as 0.75)";
		return -1;
	}
	if (p == s || *p != '\0' || (p == s + 1 && *s == '.')) {
		*errstr = "is not a number (give a decimal such as 0.75)";
		return -1;
	}
	*out = whole * 1000000 + frac;
	return 0;
}

/* Parse a reserve: a count of slots ("2") or a percentage ("20%"). */
int
parse_reserve(const char *s, int64_t *value, int *percent, const char **errstr)
{
	char buf[32];
	size_t n = strlen(s);

	*percent = n > 0 && s[n - 1] == '%';
	if (!*percent)
		return parse_count(s, COUNT_MAX, value, errstr);
	if (n - 1 >= sizeof(buf)) {
		*errstr = "is too long";
		return -1;
	}
	memcpy(buf, s, n - 1);
	buf[n - 1] = '\0';
	if (parse_count(buf, 100, value, errstr) == -1) {
		*errstr = "is not a percentage from 0% to 100%";
		return -1;
	}
	return 0;
}

/*
 * Split a line into words the way a POSIX shell would quote them, in
 * place: blanks (space, tab, newline) separate words, and a carriage
 * return is a character like any other, as in a shell; '...' keeps
 * everything literally; "..." keeps everything but \" \\ \$ \` (a
 * backslash before anything else stays); outside quotes a backslash keeps
 * the next character; a # that starts a word starts a comment.  No
 * expansion of any kind.  The number of words
 * (at most max, pointers into line), or -1 with *err set.
 */
int
parse_words(char *line, char **words, int max, const char **err)
{
	char *r = line, *w = line;
	int n = 0, in_word = 0;

	for (;;) {
		char c = *r;

		if (c == '\0' || c == ' ' || c == '\t' || c == '\n') {
			if (in_word) {
				*w++ = '\0';
				in_word = 0;
			}
			if (c == '\0')
				return n;
			r++;
			continue;
		}
		if (!in_word) {
			if (c == '#')
				return n;
			if (n == max) {
				*err = "has too many words";
				return -1;
			}
			/* w never passes r, so the word's start is safe to
			 * write from here on */
			words[n++] = w;
			in_word = 1;
		}
		r++;
		if (c == '\'') {
			while (*r != '\'' && *r != '\0')
				*w++ = *r++;
			if (*r == '\0') {
				*err = "has a ' that is not closed";
				return -1;
			}
			r++;
		} else if (c == '"') {
			while (*r != '"' && *r != '\0') {
				if (*r == '\\' && r[1] != '\0' &&
				    strchr("\"\\$`", r[1]) != NULL)
					r++;
				*w++ = *r++;
			}
			if (*r == '\0') {
				*err = "has a \" that is not closed";
				return -1;
			}
			r++;
		} else if (c == '\\') {
			if (*r == '\0') {
				*err = "ends in a \\ that escapes nothing";
				return -1;
			}
			*w++ = *r++;
		} else
			*w++ = c;
	}
}
