/*
 * pam_throttle.c: the login guard as a PAM module, pam_throttle.so, built
 * from the same sources as throttle(1) and deciding in the same way on the
 * same keys and state: no fork, no shell.  See pam_throttle(8).
 *
 *	auth requisite			pam_throttle.so preauth
 *	auth [success=1 default=bad]	pam_unix.so
 *	auth [default=die]		pam_throttle.so authfail
 *	auth sufficient			pam_throttle.so authsucc
 *
 *	1. preauth charges the attempt to "login:USER" and, when PAM gives a
 *	   remote host, "rhost:HOST", each in one transaction with its
 *	   decision (throttle consume --limit L --lockout D), so parallel
 *	   attempts never pass more than the limit.  Refused: PAM_AUTH_ERR,
 *	   a line in syslog, and "locked, N minutes left" to the user unless
 *	   silent.  A user locked out already is refused before the host
 *	   is charged; otherwise the host is charged first, so a host
 *	   locked out never charges (nor locks out) the user it guesses at;
 *	   a user refused gives the host its unit back (no password was
 *	   tried), so a user locked out by someone anywhere never locks out
 *	   the host they retry from.
 *	2. authfail logs the failure and returns PAM_AUTH_ERR; the attempt
 *	   was charged at preauth.
 *	3. authsucc resets the user (lockout and all; root when preauth
 *	   charged it) and gives the host its unit back: PAM_SUCCESS.
 *	4. Root is exempt unless even_deny_root; users, hosts and IPv4
 *	   networks on ignore= never count.
 *	5. A store error fails closed (PAM_AUTH_ERR) unless on_error=allow.
 *	6. Options come from /etc/security/throttle.conf (conf= another),
 *	   then the PAM line, which wins, as pam_faillock reads faillock.conf.
 */
#define PAM_SM_AUTH
#include <security/pam_ext.h>
#include <security/pam_modules.h>
#include <security/pam_modutil.h>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <ctype.h>
#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <unistd.h>

#include "throttle.h"

#define CONF_DEFAULT "/etc/security/throttle.conf"
#define DB_DEFAULT "/var/lib/throttle/state.db" /* root's, as the CLI's */
#define VALUE_MAX 1024
#define MSG_LEN (STORE_ERR_MAX + 256) /* as struct answer's */

struct conf {
	char limit[64];
	char lockout[64];
	char db[VALUE_MAX];
	char ignore[VALUE_MAX];
	char syslog_path[VALUE_MAX]; /* a socket to log to instead (tests) */
	char conf[VALUE_MAX];
	int even_deny_root;
	int silent;
	int fail_open;
};

/* Log one line: to syslog as authpriv (pam_syslog), or to the socket. */
static void pam_log(pam_handle_t *, const struct conf *, int, const char *, ...)
    __attribute__((format(printf, 4, 5)));

static void
pam_log(pam_handle_t *pamh, const struct conf *cf, int prio, const char *fmt,
    ...)
{
	struct sockaddr_un sa;
	char msg[MSG_LEN + 200], line[MSG_LEN + 300];
	va_list ap;
	int fd, n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (cf->syslog_path[0] == '\0') {
		pam_syslog(pamh, prio, "%s", msg);
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(cf->syslog_path) >= sizeof(sa.sun_path))
		return;
	memcpy(sa.sun_path, cf->syslog_path, strlen(cf->syslog_path) + 1);
	n = snprintf(line, sizeof(line), "<%d>pam_throttle: %s",
	    LOG_AUTHPRIV | prio, msg);
	if (n < 0 || (fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return;
	if (sendto(fd, line, strlen(line), 0, (struct sockaddr *)&sa,
		sizeof(sa)) == -1) {
		/* nothing else to tell */
	}
	close(fd);
}

/* Set option "name=value" (or a bare flag) in cf: 0, or -1 if unknown. */
static int
set_option(struct conf *cf, const char *name, size_t nlen, const char *value)
{
	static const struct {
		const char *name;
		size_t off, len;
	} text[] = {
		{ "limit", offsetof(struct conf, limit), sizeof(cf->limit) },
		{ "lockout", offsetof(struct conf, lockout),
		    sizeof(cf->lockout) },
		{ "db", offsetof(struct conf, db), sizeof(cf->db) },
		{ "ignore", offsetof(struct conf, ignore), sizeof(cf->ignore) },
		{ "syslog", offsetof(struct conf, syslog_path),
		    sizeof(cf->syslog_path) },
		{ "conf", offsetof(struct conf, conf), sizeof(cf->conf) },
	};
	size_t i;

	for (i = 0; i < sizeof(text) / sizeof(text[0]); i++)
		if (strlen(text[i].name) == nlen &&
		    strncmp(text[i].name, name, nlen) == 0 && value != NULL &&
		    value[0] != '\0') {
			if (strlen(value) >= text[i].len)
				return -1; /* too long: never cut short */
			memcpy((char *)cf + text[i].off, value,
			    strlen(value) + 1);
			return 0;
		}
	if (value == NULL && nlen == 14 &&
	    strncmp(name, "even_deny_root", nlen) == 0)
		cf->even_deny_root = 1;
	else if (value == NULL && nlen == 6 && strncmp(name, "silent", 6) == 0)
		cf->silent = 1;
	else if (value != NULL && nlen == 8 &&
	    strncmp(name, "on_error", 8) == 0 &&
	    (strcmp(value, "allow") == 0 || strcmp(value, "deny") == 0))
		cf->fail_open = strcmp(value, "allow") == 0;
	else
		return -1;
	return 0;
}

/* One "name=value" word from the PAM line or a line of the file. */
static int
set_word(struct conf *cf, const char *w)
{
	const char *eq = strchr(w, '=');

	return set_option(cf, w, eq ? (size_t)(eq - w) : strlen(w),
	    eq ? eq + 1 : NULL);
}

/*
 * Nonzero if db is a Redis URL with a password (the server's or
 * Sentinel's), read as the store reads it.  A URL it cannot read is refused
 * as such when it is used.
 */
static int
has_secret(const char *db)
{
#ifdef THROTTLE_REDIS
	struct redis_url u;
	const char *why;

	return store_redis_parse(db, &u, &why) == 0 &&
	    (u.password[0] != '\0' || u.sentinel_password[0] != '\0');
#else
	(void)db;
	return 0; /* no Redis store: db= is a file */
#endif
}

/* Read the config file: "name = value" or "name" lines, # comments. */
static int
read_conf(pam_handle_t *pamh, struct conf *cf, const char *path, int must)
{
	char line[VALUE_MAX + 64], word[VALUE_MAX + 64], *p, *e;
	struct stat sb = { 0 };
	FILE *fp;
	int lineno = 0;

	if ((fp = fopen(path, "re")) == NULL) {
		if (!must && errno == ENOENT)
			return 0;
		pam_log(pamh, cf, LOG_ERR, "cannot read %s: %s", path,
		    strerror(errno));
		return -1;
	}
	/* as root (sshd, login), a file someone else could write could
	 * set ignore=, on_error=allow or db= for every login: refused, as
	 * the state folder is (StrictModes) */
	if (geteuid() == 0 &&
	    (fstat(fileno(fp), &sb) == -1 || sb.st_uid != 0 ||
		(sb.st_mode & 022))) {
		pam_log(pamh, cf, LOG_ERR,
		    "%s %s (owner %ld, mode %04o); chown root and chmod go-w "
		    "it",
		    path,
		    sb.st_uid != 0 ? "is owned by another user than root"
				   : "can be written by others",
		    (long)sb.st_uid, (unsigned)(sb.st_mode & 07777));
		fclose(fp);
		return -1;
	}
	while (fgets(line, sizeof(line), fp) != NULL) {
		lineno++;
		for (p = line; isspace((unsigned char)*p); p++)
			;
		/* a line longer than the buffer: its rest is no line of its
		 * own (a long comment's tail must not set an option) */
		if (strchr(line, '\n') == NULL && !feof(fp)) {
			int ch;

			while ((ch = getc(fp)) != EOF && ch != '\n')
				;
			if (*p != '#') {
				pam_log(pamh, cf, LOG_ERR,
				    "%s:%d: the line is longer than %d bytes; "
				    "no option is that long",
				    path, lineno, (int)sizeof(line) - 2);
				fclose(fp);
				return -1;
			}
		}
		if (*p == '#') /* a comment: only a whole line (a password
				* may hold '#') */
			continue;
		for (e = p + strlen(p); e > p && isspace((unsigned char)e[-1]);)
			*--e = '\0';
		if (*p == '\0')
			continue;
		/* "name = value" as "name=value" */
		if ((e = strchr(p, '=')) != NULL) {
			char *n = e;

			while (n > p && isspace((unsigned char)n[-1]))
				n--;
			for (e++; isspace((unsigned char)*e); e++)
				;
			snprintf(word, sizeof(word), "%.*s=%s", (int)(n - p), p,
			    e);
		} else
			snprintf(word, sizeof(word), "%s", p);
		if (set_word(cf, word) == -1) {
			pam_log(pamh, cf, LOG_ERR, "%s:%d: unknown option '%s'",
			    path, lineno, p);
			fclose(fp);
			return -1;
		}
	}
	fclose(fp);
	/* a Redis password in a file others may read: any local user could
	 * reach the store with it and lift every lockout.  Said at each
	 * attempt, not refused: the man page's example once left the file
	 * 0644, and refusing would lock every user but root out of a host
	 * upgraded as it stood */
	if (geteuid() == 0 && (sb.st_mode & 044) && has_secret(cf->db))
		pam_log(pamh, cf, LOG_ERR,
		    "%s holds a Redis password (db=) and others may read it "
		    "(mode %04o), who could lift every lockout with it; chmod "
		    "600 it",
		    path, (unsigned)(sb.st_mode & 07777));
	return 0;
}

/*
 * The IPv4 network w ("a.b.c.d/N", N from 0 to 32 in 1 or 2 digits; cut
 * at its '/'): its address and mask.  0, or -1 if w is not one.
 */
static int
parse_net(char *w, struct in_addr *net, uint32_t *mask)
{
	char *slash = strchr(w, '/');
	long bits;

	if (slash == NULL)
		return -1;
	*slash = '\0';
	/* "10.0.0.0/" and "10.0.0.0/008" are no networks */
	if (!isdigit((unsigned char)slash[1]) ||
	    (slash[2] != '\0' &&
		(!isdigit((unsigned char)slash[2]) || slash[3] != '\0')))
		return -1;
	bits = strtol(slash + 1, NULL, 10);
	if (inet_pton(AF_INET, w, net) != 1 || bits > 32)
		return -1;
	*mask = bits == 0 ? 0 : htonl(0xffffffffu << (32 - bits));
	return 0;
}

/*
 * 0 if every word of the ignore list with a '/' is an IPv4 network, else
 * -1: a typo there would leave the network limited while the
 * administrator thinks it exempt.
 */
static int
check_ignore(pam_handle_t *pamh, const struct conf *cf)
{
	char list[VALUE_MAX], word[VALUE_MAX], *w, *save = NULL;
	struct in_addr net;
	uint32_t mask;

	snprintf(list, sizeof(list), "%s", cf->ignore);
	for (w = strtok_r(list, ", \t", &save); w != NULL;
	     w = strtok_r(NULL, ", \t", &save)) {
		if (strchr(w, '/') == NULL)
			continue;
		snprintf(word, sizeof(word), "%s", w);
		if (parse_net(w, &net, &mask) == -1) {
			pam_log(pamh, cf, LOG_ERR,
			    "ignore: '%s' is not an IPv4 network (as in "
			    "10.0.0.0/8)",
			    word);
			return -1;
		}
	}
	return 0;
}

/*
 * 0 if limit= and lockout= are ones throttle takes, else -1 (logged): a
 * typo there is a misconfiguration, not a store error each attempt would
 * meet.
 */
static int
check_limit(pam_handle_t *pamh, const struct conf *cf)
{
	const char *argv[] = { "throttle", "consume", "login:x", "--limit",
		cf->limit, "--lockout", cf->lockout, NULL };
	struct args a;
	int rc;

	args_init(&a);
	rc = args_parse(7, (char **)(uintptr_t)argv, cmd_table, &a);
	if (rc != PARSE_RUN)
		pam_log(pamh, cf, LOG_ERR, "%s",
		    a.err[0] != '\0' ? a.err : "limit= or lockout= is wrong");
	args_free(&a);
	return rc == PARSE_RUN ? 0 : -1;
}

/* Nonzero if w is a mode, not an option. */
static int
is_mode(const char *w)
{
	return strcmp(w, "preauth") == 0 || strcmp(w, "authfail") == 0 ||
	    strcmp(w, "authsucc") == 0;
}

/*
 * The settings: defaults, then the file, then the PAM line, where the
 * mode may stand anywhere (*mode).  0, or -1 (logged).
 */
static int
configure(pam_handle_t *pamh, struct conf *cf, int argc, const char **argv,
    const char **mode)
{
	int i;

	*mode = NULL;
	memset(cf, 0, sizeof(*cf));
	snprintf(cf->limit, sizeof(cf->limit), "5/15m");
	snprintf(cf->lockout, sizeof(cf->lockout), "15m");
	/* conf= and syslog= on the line first: they say where to read
	 * and where to log */
	for (i = 0; i < argc; i++)
		if (strncmp(argv[i], "conf=", 5) == 0 ||
		    strncmp(argv[i], "syslog=", 7) == 0)
			set_word(cf, argv[i]);
	if (read_conf(pamh, cf, cf->conf[0] ? cf->conf : CONF_DEFAULT,
		cf->conf[0] != '\0') == -1)
		return -1;
	for (i = 0; i < argc; i++)
		if (is_mode(argv[i]))
			*mode = argv[i];
		else if (set_word(cf, argv[i]) == -1) {
			pam_log(pamh, cf, LOG_ERR, "unknown option '%s'",
			    argv[i]);
			return -1;
		} else if (strncmp(argv[i], "db=", 3) == 0 &&
		    has_secret(argv[i] + 3))
			/* said, not refused: see read_conf() */
			pam_log(pamh, cf, LOG_ERR,
			    "db= on the PAM line holds a Redis password, and "
			    "every user may read the files of /etc/pam.d, and "
			    "lift every lockout with it; put db= in %s, mode "
			    "0600",
			    cf->conf[0] ? cf->conf : CONF_DEFAULT);
	if (*mode == NULL) {
		pam_log(pamh, cf, LOG_ERR,
		    "no mode: give preauth, authfail or authsucc");
		return -1;
	}
	return check_ignore(pamh, cf) == -1 || check_limit(pamh, cf) == -1 ? -1
									   : 0;
}

/* Nonzero if name (a user or host) is on the ignore list. */
static int
ignored(const struct conf *cf, const char *name)
{
	char list[VALUE_MAX], *w, *save = NULL;
	struct in_addr a, net;
	uint32_t mask;
	int is_ip;

	if (name == NULL || cf->ignore[0] == '\0')
		return 0;
	is_ip = inet_pton(AF_INET, name, &a) == 1;
	snprintf(list, sizeof(list), "%s", cf->ignore);
	for (w = strtok_r(list, ", \t", &save); w != NULL;
	     w = strtok_r(NULL, ", \t", &save)) {
		if (strcmp(w, name) == 0)
			return 1;
		/* (configure() refused a list whose networks are not) */
		if (is_ip && parse_net(w, &net, &mask) == 0 &&
		    (a.s_addr & mask) == (net.s_addr & mask))
			return 1;
	}
	return 0;
}

/*
 * Run one throttle command on key: cmd and extra words, with the module's
 * store and failure policy.  The exit status; *left the key's lockout or
 * wait (us, -1 never) when it is refused; msg its message.
 */
static int
decide(const struct conf *cf, const char *cmd, const char *key, int with_limit,
    int64_t *left, char *msg, size_t msglen)
{
	const char *argv[20];
	struct answer ans;
	int argc = 0, rc, i;

	/* nothing from the environment, which may be the user's (su,
	 * sudo): the store, the format, the clock and the scheduling are
	 * the module's */
	clock_real_only();
	slice_ignore_env();
	argv[argc++] = "throttle";
	argv[argc++] = "--db";
	argv[argc++] = cf->db[0] != '\0' ? cf->db : DB_DEFAULT;
	argv[argc++] = "--format";
	argv[argc++] = "json";
	argv[argc++] = "--on-error";
	argv[argc++] = cf->fail_open ? "allow" : "deny";
	argv[argc++] = cmd;
	argv[argc++] = key;
	if (with_limit) {
		argv[argc++] = "--limit";
		argv[argc++] = cf->limit;
	}
	if (with_limit == 2) {
		argv[argc++] = "--lockout";
		argv[argc++] = cf->lockout;
	}
	if (with_limit == 3) { /* the key as it is: refused only if locked */
		argv[argc++] = "--cost";
		argv[argc++] = "0";
	}
	argv[argc] = NULL;
	answer_init(&ans);
	rc = cmd_decide(argc, (char **)(uintptr_t)argv, &ans);
	*left = 0;
	for (i = 0; ans.nrec > 0 && i < ans.rec[0]->nf; i++)
		if (strcmp(ans.rec[0]->f[i].name, "retry_after") == 0)
			*left = ans.rec[0]->f[i].v;
	snprintf(msg, msglen, "%s", ans.msg_kind != MSG_NONE ? ans.msg : "");
	if (ans.msg_kind == MSG_STATE || ans.msg_kind == MSG_USAGE)
		rc = rc == EXIT_ALLOWED && ans.msg_kind == MSG_STATE
		    ? EXIT_ALLOWED
		    : EXIT_STATE;
	answer_free(&ans);
	return rc;
}

/* Tell the user how long the lockout (of the account, or of the host the
 * attempt comes from) lasts, unless silent. */
static void
tell_user(pam_handle_t *pamh, const struct conf *cf, int flags, int64_t left,
    int host)
{
	const char *what = host ? "This host" : "The account";
	int64_t min;

	if (cf->silent || (flags & PAM_SILENT))
		return;
	if (left < 0) {
		pam_error(pamh,
		    "%s is locked out until an administrator resets it.", what);
		return;
	}
	min = (left + 60 * US_PER_SEC - 1) / (60 * US_PER_SEC);
	pam_error(pamh, "%s is locked out, %lld minute%s left.", what,
	    (long long)min, min == 1 ? "" : "s");
}

/*
 * The keys of this attempt, each "" when it does not count.  Root's own
 * counts only with even_deny_root, but a success resets it (reset) when
 * preauth charged it, whatever this line says: a preauth line with
 * even_deny_root would otherwise charge root's successes, and lock root
 * out after the limit's worth of them.
 */
static void
keys(pam_handle_t *pamh, const struct conf *cf, const char *user, int reset,
    char *ukey, char *hkey, size_t len, const char **rhost)
{
	const void *item = NULL;
	struct passwd *pw;
	struct in_addr a4;

	*rhost = NULL;

	if (pam_get_item(pamh, PAM_RHOST, &item) == PAM_SUCCESS && item &&
	    *(const char *)item != '\0')
		*rhost = item;
	/* an IPv4 address written as IPv6 (::ffff:192.0.2.7) is the IPv4
	 * one: one key, and the ignore list's networks apply */
	if (*rhost != NULL && strncasecmp(*rhost, "::ffff:", 7) == 0 &&
	    inet_pton(AF_INET, *rhost + 7, &a4) == 1)
		*rhost += 7;
	snprintf(ukey, len, "login:%s", user);
	hkey[0] = '\0';
	if (*rhost != NULL)
		snprintf(hkey, len, "rhost:%s", *rhost);
	pw = pam_modutil_getpwnam(pamh, user);
	if ((pw != NULL && pw->pw_uid == 0 && !cf->even_deny_root && !reset) ||
	    ignored(cf, user))
		ukey[0] = '\0';
	if (*rhost != NULL && ignored(cf, *rhost))
		ukey[0] = hkey[0] = '\0';
}

/* Charge one key at preauth: PAM_SUCCESS, or PAM_AUTH_ERR (logged). */
static int
charge(pam_handle_t *pamh, const struct conf *cf, int flags, const char *key,
    const char *who)
{
	char msg[MSG_LEN];
	int64_t left;
	int rc;

	rc = decide(cf, "consume", key, 2, &left, msg, sizeof(msg));
	if (rc == EXIT_ALLOWED) {
		if (msg[0] != '\0') /* a store error, failed open */
			pam_log(pamh, cf, LOG_ERR,
			    "%s; allowing %s (on_error=allow)", msg, who);
		return PAM_SUCCESS;
	}
	if (rc == EXIT_STATE) {
		pam_log(pamh, cf, LOG_ERR, "%s; refusing %s (%s)", msg, who,
		    cf->fail_open ? "a misconfiguration is never allowed"
				  : "on_error=deny");
		return PAM_AUTH_ERR;
	}
	pam_log(pamh, cf, LOG_NOTICE,
	    "%s is locked out; refused before the password check", who);
	tell_user(pamh, cf, flags, left >= DURATION_MAX || left < 0 ? -1 : left,
	    strncmp(key, "rhost:", 6) == 0);
	return PAM_AUTH_ERR;
}

static int
preauth(pam_handle_t *pamh, const struct conf *cf, int flags, const char *user,
    const char *ukey, const char *hkey, const char *rhost)
{
	char who[KEY_MAX * 2 + 64], msg[MSG_LEN];
	int64_t left, hleft;

	/* a user locked out already is refused before the host is charged:
	 * no password is tried, and parallel attempts, each holding a unit
	 * of the host's until the user's refusal gives it back, would
	 * otherwise fill the host's allowance and lock it out (a store
	 * error here is met again, and handled, by the charges below) */
	snprintf(who, sizeof(who), "user %s%s%s", user, rhost ? " from " : "",
	    rhost ? rhost : "");
	if (hkey[0] != '\0' && ukey[0] != '\0' &&
	    decide(cf, "check", ukey, 3, &left, msg, sizeof(msg)) ==
		EXIT_REFUSED) {
		/* (a host locked out is told so, as ever, not of the user) */
		int host = decide(cf, "check", hkey, 3, &hleft, msg,
			       sizeof(msg)) == EXIT_REFUSED;

		if (host)
			snprintf(who, sizeof(who), "host %s (user %s)", rhost,
			    user);
		pam_log(pamh, cf, LOG_NOTICE,
		    "%s is locked out; refused before the password check", who);
		left = host ? hleft : left;
		tell_user(pamh, cf, flags,
		    left >= DURATION_MAX || left < 0 ? -1 : left, host);
		return PAM_AUTH_ERR;
	}
	/* the host first: a host locked out is refused before it can
	 * charge (and so lock out) the user it guesses at */
	snprintf(who, sizeof(who), "host %s (user %s)", rhost ? rhost : "",
	    user);
	if (hkey[0] != '\0' &&
	    charge(pamh, cf, flags, hkey, who) != PAM_SUCCESS)
		return PAM_AUTH_ERR;
	snprintf(who, sizeof(who), "user %s%s%s", user, rhost ? " from " : "",
	    rhost ? rhost : "");
	if (ukey[0] != '\0' &&
	    charge(pamh, cf, flags, ukey, who) != PAM_SUCCESS) {
		/* refused before the password check, so no guess: the host
		 * gets its unit back, or a user locked out by someone
		 * anywhere would lock out the host they retry from */
		if (hkey[0] != '\0' &&
		    decide(cf, "release", hkey, 0, &left, msg, sizeof(msg)) !=
			EXIT_ALLOWED)
			pam_log(pamh, cf, LOG_ERR,
			    "giving host %s its unit back: %s", rhost, msg);
		return PAM_AUTH_ERR;
	}
	return PAM_SUCCESS;
}

#define EXPORT __attribute__((visibility("default")))
#define ROOT_CHARGED "pam_throttle_root_charged" /* pam_set_data() */

EXPORT PAM_EXTERN int
pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv)
{
	static const int root_charged = 1;
	char ukey[KEY_MAX + 16], hkey[KEY_MAX + 16], msg[MSG_LEN];
	const char *user = NULL, *rhost, *mode;
	const void *data = NULL;
	struct passwd *pw;
	struct conf cf;
	int64_t left;
	int bad = 0;

	if (configure(pamh, &cf, argc, argv, &mode) == -1) {
		/* misconfigured: fail closed, but never lock root out of
		 * the console it would fix the file from */
		int i;

		if (pam_get_user(pamh, &user, NULL) != PAM_SUCCESS ||
		    user == NULL ||
		    (pw = pam_modutil_getpwnam(pamh, user)) == NULL ||
		    pw->pw_uid != 0)
			return PAM_AUTH_ERR;
		/* root: step aside, but where the stack counts on this
		 * line's success (the password check jumps to authsucc, and
		 * a jump is no success), give what it would have given */
		for (i = 0; i < argc; i++)
			if (strcmp(argv[i], "authsucc") == 0)
				return PAM_SUCCESS;
		return PAM_IGNORE;
	}
	if (pam_get_user(pamh, &user, NULL) != PAM_SUCCESS || user == NULL ||
	    *user == '\0' || strlen(user) > KEY_MAX - 6) {
		pam_log(pamh, &cf, LOG_ERR, "no usable user name");
		return PAM_USER_UNKNOWN;
	}
	keys(pamh, &cf, user,
	    strcmp(mode, "authsucc") == 0 &&
		pam_get_data(pamh, ROOT_CHARGED, &data) == PAM_SUCCESS &&
		data != NULL,
	    ukey, hkey, sizeof(ukey), &rhost);
	if (strcmp(mode, "preauth") == 0) {
		/* root's key charged (even_deny_root on this line): the
		 * success resets it whatever its own line says */
		if (ukey[0] != '\0' &&
		    (pw = pam_modutil_getpwnam(pamh, user)) && pw->pw_uid == 0)
			pam_set_data(pamh, ROOT_CHARGED, (void *)&root_charged,
			    NULL);
		return preauth(pamh, &cf, flags, user, ukey, hkey, rhost);
	}
	if (strcmp(mode, "authfail") == 0) {
		pam_log(pamh, &cf, LOG_NOTICE,
		    "authentication failure for user %s%s%s", user,
		    rhost ? " from " : "", rhost ? rhost : "");
		return PAM_AUTH_ERR;
	}
	if (strcmp(mode, "authsucc") == 0) {
		if (ukey[0] != '\0' &&
		    decide(&cf, "reset", ukey, 0, &left, msg, sizeof(msg)) !=
			EXIT_ALLOWED)
			bad = 1;
		/* on the limit the host's key was charged under, stored
		 * with it: this line's may be the default, and a release
		 * under another limit converts the key (never less strictly:
		 * one unit of 3/1h leaves none of 5/15m) */
		if (hkey[0] != '\0' &&
		    decide(&cf, "release", hkey, 0, &left, msg, sizeof(msg)) !=
			EXIT_ALLOWED)
			bad = 1;
		if (bad)
			pam_log(pamh, &cf, LOG_ERR, "after a success: %s", msg);
		return PAM_SUCCESS;
	}
	return PAM_AUTH_ERR;
}

EXPORT PAM_EXTERN int
pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv)
{
	(void)pamh;
	(void)flags;
	(void)argc;
	(void)argv;
	return PAM_SUCCESS;
}
