/*
 * test-parse.c: durations, limits, counts and THROTTLE_NOW times, good and
 * bad, straight through parse.c.
 */
#include <string.h>

#include "throttle.h"
#include "unit.h"

#define S INT64_C(1000000)

static const struct {
	const char *in;
	int64_t us;
} good_durations[] = {
	{ "90s", 90 * S },
	{ "60", 60 * S },
	{ "0", 0 },
	{ "m", 60 * S },
	{ "h", 3600 * S },
	{ "ms", 1000 },
	{ "15m", 900 * S },
	{ "1h30m", 5400 * S },
	{ "1d", 86400 * S },
	{ "1w", 604800 * S },
	{ "250ms", 250000 },
	{ "1.5h", 5400 * S },
	{ "0.5s", 500000 },
	{ "0.000001s", 1 },
	{ "1m0.5s", 60500000 },
	{ "1d2h3m4s5ms", (86400 + 7200 + 180 + 4) * S + 5000 },
	{ "007s", 7 * S },
	{ "1000000w", INT64_C(604800000000000000) },
	{ "1.25", 1250000 },
	{ ".5s", 500000 },
	/* a fraction's trailing zeros carry nothing, however many */
	{ "1.00000000000000000000000000000000000000000000s", S },
	{ "0.000001000000000000000000000000000000000s", 1 },
	{ "1000000000000.000001s", INT64_C(1000000000000000001) },
	{ "4596479999999.999999s", INT64_C(4596479999999999999) },
	/* the units' words, as people write "10/hour;100/day" */
	{ "hour", 3600 * S },
	{ "day", 86400 * S },
	{ "2days", 2 * 86400 * S },
	{ "1week", 604800 * S },
	{ "15min", 900 * S },
	{ "5minutes", 300 * S },
	{ "1hour30min", 5400 * S },
	{ "2hours", 7200 * S },
	{ "90sec", 90 * S },
	{ "1second", S },
	{ "3secs", 3 * S },
};

static const char *const bad_durations[] = {
	"",
	"s1",
	"abc",
	"5x",
	"-5s",
	"+5s",
	"5 s",
	" 5s",
	"5s ",
	"1m1h",
	"1s1s",
	"1.s",
	".",
	"1..5s",
	"0.0000001s",
	"0.0005ms",
	"1h30",
	"99999999999999999999s",
	"9223372036854775808",
	"0.000000000000000000000000000000000000000000001w",
	"1.0000000000000000000000000000000000000001s",
	"8000000w",
	"1e3s",
	"5S",
	"ms5",
	"1mm",
	"1.5.5s",
	"1month",
	"1hr",
	"1 hour",
	"1Hour",
	"1minm",
	"1mins1min",
};

static const struct {
	const char *in;
	int64_t count, period;
} good_limits[] = {
	{ "3/60s", 3, 60 * S },
	{ "5/15m", 5, 900 * S },
	{ "100/m", 100, 60 * S },
	{ "1000/1d", 1000, 86400 * S },
	{ "1/1ms", 1, 1000 },
	{ "9223372036854775807/1s", INT64_MAX, S },
	{ "7/1h30m", 7, 5400 * S },
};

static const char *const bad_limits[] = {
	"",
	"5",
	"/5s",
	"5/",
	"0/1s",
	"5/0s",
	"5/0",
	"-1/1s",
	"a/1s",
	"18446744073709551615/1ms",
	"9223372036854775808/1s",
	"5/1x",
	"5//1s",
	"1/1000000000w",
	"5 /1s",
};

static const struct {
	const char *in;
	int64_t us;
} good_times[] = {
	{ "0", 0 },
	{ "1000", 1000 * S },
	{ "1000.5", 1000 * S + 500000 },
	{ "1.0000019", S + 1 },
	{ "1700000000.123456789", INT64_C(1700000000123456) },
	{ "253402300799", INT64_C(253402300799) * S },
	{ "5.", 5 * S },
	/* as ".5s" is a duration */
	{ ".25", 250000 },
};

/* a negative number is below 0; what only begins like one is no number */
static const struct {
	const char *in, *why;
} bad_fractions[] = {
	{ "-1", "below 0" },
	{ "-.5", "below 0" },
	{ "-x", "not a number" },
	{ "-1x", "not a number" },
	{ "--1", "not a number" },
};

static const char *const bad_times[] = {
	"",
	"-1",
	"-0.5",
	"abc",
	"1e5",
	"10 ",
	" 10",
	"253402300800",
	"99999999999999999999",
	"1.2.3",
	"0x10",
	".",
	".x",
};

/* Split line as batch does and compare with the NULL-terminated want. */
static int
words_are(const char *line, const char *const *want)
{
	char buf[256], *w[16];
	const char *err;
	int n, i;

	snprintf(buf, sizeof(buf), "%s", line);
	if ((n = parse_words(buf, w, 16, &err)) == -1)
		return 0;
	for (i = 0; i < n; i++)
		if (want[i] == NULL || strcmp(w[i], want[i]) != 0)
			return 0;
	return want[n] == NULL;
}

static int
words_fail(const char *line, int max)
{
	char buf[256], *w[16];
	const char *err = NULL;

	snprintf(buf, sizeof(buf), "%s", line);
	return parse_words(buf, w, max, &err) == -1 && err != NULL;
}

static void
words_tests(void)
{
	static const char *const plain[] = { "consume", "k", "--limit", "5/1m",
		NULL };
	static const char *const quoted[] = { "consume", "a key", "it's",
		"x\\\\y", NULL };
	static const char *const dq[] = { "say \"hi\" $x\\n", NULL };
	static const char *const empty[] = { "", "b", NULL };
	static const char *const joined[] = { "ab'c d'e", NULL };
	static const char *const none[] = { NULL };
	static const char *const cr[] = { "\rconsume", "x\ry", NULL };

	CHECK(words_are("  consume k\t--limit 5/1m \n", plain),
	    "words: blanks separate");
	CHECK(words_are("consume 'a key' it\\'s 'x\\\\y'", quoted),
	    "words: single quotes and backslashes");
	CHECK(words_are("\"say \\\"hi\\\" \\$x\\\\n\"", dq),
	    "words: double quotes keep a backslash before other characters");
	CHECK(words_are("'' b", empty), "words: '' is an empty word");
	CHECK(words_are("ab\\'c\\ d'e", joined) == 0 &&
		words_are("ab\"'c d'\"e", joined),
	    "words: quotes join with their neighbours");
	CHECK(words_are("", none) && words_are("  # a comment", none) &&
		words_are("# consume k", none),
	    "words: empty lines and comments have no words");
	CHECK(words_fail("consume 'k", 16) && words_fail("consume \"k", 16) &&
		words_fail("consume k\\", 16),
	    "words: an open quote or a last backslash is refused");
	CHECK(words_are("\rconsume x\ry", cr),
	    "words: a carriage return is no blank, as in a shell");
	CHECK(words_fail("a b c", 2) && !words_fail("a b", 2),
	    "words: more than max words is refused");
}

int
main(void)
{
	const char *err;
	int64_t v, c, p;
	size_t i;
	enum format f;
	enum on_error e;

	for (i = 0; i < sizeof(good_durations) / sizeof(*good_durations); i++) {
		v = -1;
		err = NULL;
		CHECK(parse_duration(good_durations[i].in, &v, &err) == 0 &&
			v == good_durations[i].us,
		    "duration '%s' is %lld us", good_durations[i].in,
		    (long long)good_durations[i].us);
	}
	for (i = 0; i < sizeof(bad_durations) / sizeof(*bad_durations); i++) {
		err = NULL;
		CHECK(parse_duration(bad_durations[i], &v, &err) == -1 &&
			err != NULL && strlen(err) > 0,
		    "duration '%s' is refused (%s)", bad_durations[i],
		    err ? err : "");
	}
	for (i = 0; i < sizeof(good_limits) / sizeof(*good_limits); i++) {
		CHECK(parse_limit(good_limits[i].in, &c, &p, &err) == 0 &&
			c == good_limits[i].count && p == good_limits[i].period,
		    "limit '%s'", good_limits[i].in);
	}
	for (i = 0; i < sizeof(bad_limits) / sizeof(*bad_limits); i++) {
		err = NULL;
		CHECK(parse_limit(bad_limits[i], &c, &p, &err) == -1 &&
			err != NULL,
		    "limit '%s' is refused (%s)", bad_limits[i],
		    err ? err : "");
	}
	for (i = 0; i < sizeof(good_times) / sizeof(*good_times); i++) {
		CHECK(parse_time(good_times[i].in, &v, &err) == 0 &&
			v == good_times[i].us,
		    "time '%s'", good_times[i].in);
	}
	for (i = 0; i < sizeof(bad_times) / sizeof(*bad_times); i++) {
		err = NULL;
		CHECK(parse_time(bad_times[i], &v, &err) == -1 && err != NULL,
		    "time '%s' is refused (%s)", bad_times[i], err ? err : "");
	}
	/* the message names what is wrong, not a neighbour's fault */
	CHECK(parse_limit("5/", &c, &p, &err) == -1 &&
		strstr(err, "no period") != NULL,
	    "'5/' has no period (%s)", err);
	CHECK(parse_fraction("0.75", &v, &err) == 0 && v == 750000,
	    "fraction 0.75");
	for (i = 0; i < sizeof(bad_fractions) / sizeof(*bad_fractions); i++) {
		err = NULL;
		CHECK(parse_fraction(bad_fractions[i].in, &v, &err) == -1 &&
			err != NULL &&
			strstr(err, bad_fractions[i].why) != NULL,
		    "fraction '%s' %s (%s)", bad_fractions[i].in,
		    bad_fractions[i].why, err ? err : "");
	}
	CHECK(parse_fraction("-0", &v, &err) == 0 && v == 0,
	    "fraction -0 is 0");
	CHECK(parse_count("0", COUNT_MAX, &v, &err) == 0 && v == 0, "count 0");
	CHECK(parse_count("9223372036854775807", COUNT_MAX, &v, &err) == 0 &&
		v == INT64_MAX,
	    "count INT64_MAX");
	CHECK(parse_count("9223372036854775808", COUNT_MAX, &v, &err) == -1,
	    "count INT64_MAX + 1 is refused");
	CHECK(parse_count("1.5", COUNT_MAX, &v, &err) == -1, "count 1.5");
	CHECK(parse_count("-1", COUNT_MAX, &v, &err) == -1, "count -1");
	CHECK(parse_count("", COUNT_MAX, &v, &err) == -1, "count empty");
	CHECK(parse_format("json", &f) == 0 && f == FORMAT_JSON, "json");
	CHECK(parse_format("JSON", &f) == -1, "format names are exact");
	CHECK(parse_on_error("deny", &e) == 0 && e == ON_ERROR_DENY, "deny");
	CHECK(parse_on_error("open", &e) == -1, "on-error open is refused");
	words_tests();
	return unit_done();
}
