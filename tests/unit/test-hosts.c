/*
 * test-hosts.c: what a Redis host's addresses are without asking anyone
 * (hosts.c): an address is itself; a name is found in a hosts file's
 * text in any case, past comments and blanks, as the last name on its
 * line or any other; IPv4 comes before IPv6; an address given twice is
 * tried once; a link-local address keeps its zone; a name only in a
 * comment, or an address that is none, is not found.
 */
#include <string.h>

#include "throttle.h"
#include "unit.h"

static const char *const file =
    "# a hosts file\n"
    "127.0.0.1\tlocalhost\n"
    "::1     localhost ip6-localhost ip6-loopback\n"
    "10.0.0.7 Redis-Main.corp redis-main # the limiter's server\n"
    "  10.0.0.8\t redis-main\r\n"
    "fe80::1%eth0 linklocal\n"
    "fe80::2% nozone\n"
    "fe80::3%e/th0 badzone\n"
    "10.0.0.9 # redis-main commented out\n"
    "not-an-address redis-main\n"
    "10.0.0.7 redis-main\n"
    "2001:db8::5 redis-main\n"
    "10.0.0.10 lastline";

static int
is(const struct addrs *a, int n, const char *const *want)
{
	int i;

	if (a->n != n)
		return 0;
	for (i = 0; i < n; i++)
		if (strcmp(a->a[i], want[i]) != 0)
			return 0;
	return 1;
}

int
main(void)
{
	struct addrs a;
	char big[ADDRS_MAX * 40 + 64];
	size_t len = 0;
	int i;

	CHECK(addrs_numeric("127.0.0.1", &a) == 1 && a.n == 1 &&
		strcmp(a.a[0], "127.0.0.1") == 0,
	    "an IPv4 address is itself");
	CHECK(addrs_numeric("2001:db8::5", &a) == 1 && a.n == 1,
	    "an IPv6 address is itself");
	CHECK(addrs_numeric("redis-main", &a) == 0 && a.n == 0,
	    "a name is no address");
	CHECK(addrs_numeric("127.0.0.1.example", &a) == 0,
	    "a name that starts as an address is none");
	CHECK(addrs_numeric("1111:2222:3333:4444:5555:6666:7777:8888:9999",
		  &a) == 0,
	    "too long to be an address");

	{
		static const char *const want[] = { "10.0.0.7", "10.0.0.8",
			"2001:db8::5" };

		CHECK(hosts_lookup(file, strlen(file), "redis-main", &a) == 3 &&
			is(&a, 3, want),
		    "a name's addresses: IPv4 first, in the file's order, "
		    "each once, past comments and what is no address");
		CHECK(hosts_lookup(file, strlen(file), "REDIS-MAIN", &a) == 3 &&
			is(&a, 3, want),
		    "a name asked in capitals");
	}
	{
		static const char *const want[] = { "10.0.0.7" };

		CHECK(hosts_lookup(file, strlen(file), "redis-main.corp", &a) ==
			    1 &&
			is(&a, 1, want),
		    "a name written in capitals in the file");
	}
	{
		static const char *const want[] = { "127.0.0.1", "::1" };

		CHECK(hosts_lookup(file, strlen(file), "localhost", &a) == 2 &&
			is(&a, 2, want),
		    "localhost: both");
	}
	{
		static const char *const want[] = { "10.0.0.10" };

		CHECK(hosts_lookup(file, strlen(file), "lastline", &a) == 1 &&
			is(&a, 1, want),
		    "the last line, with no newline after it");
	}
	CHECK(hosts_lookup(file, strlen(file), "the", &a) == 0,
	    "a word of a comment is no name");
	{
		static const char *const want[] = { "fe80::1%eth0" };

		CHECK(hosts_lookup(file, strlen(file), "linklocal", &a) == 1 &&
			is(&a, 1, want),
		    "a link-local address keeps its zone");
	}
	CHECK(hosts_lookup(file, strlen(file), "nozone", &a) == 0 &&
		hosts_lookup(file, strlen(file), "badzone", &a) == 0,
	    "an empty zone, or one no interface could be named, is none");
	CHECK(addrs_numeric("10.0.0.1%eth0", &a) == 0,
	    "an IPv4 address has no zone");
	CHECK(hosts_lookup(file, strlen(file), "redis", &a) == 0,
	    "a part of a name is none");
	CHECK(hosts_lookup(file, strlen(file), "ip6-loopback", &a) == 1,
	    "the last name of a line");
	CHECK(hosts_lookup("", 0, "localhost", &a) == 0, "an empty file");
	CHECK(hosts_lookup(file, strlen("# a hosts file\n127.0.0.1\tlocal"),
		  "localhost", &a) == 0,
	    "only the length given is read");

	for (i = 0; i < ADDRS_MAX + 3; i++)
		len += (size_t)snprintf(big + len, sizeof(big) - len,
		    "10.1.0.%d many\n", i);
	CHECK(hosts_lookup(big, len, "many", &a) == ADDRS_MAX &&
		strcmp(a.a[0], "10.1.0.0") == 0,
	    "at most %d addresses, the first ones", ADDRS_MAX);
	return unit_done();
}
