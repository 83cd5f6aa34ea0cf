/*
 * cmd-batch.c: many requests in one process, for volume.
 *
 * Each line of standard input is one request, written as on the command
 * line after "throttle" and quoted as a shell would quote it:
 *
 *	consume 'login:alice smith' --limit 5/15m
 *
 * Each gets one JSON line on standard output, in order: the command's own
 * --format json answer with "exit" (what the command would have exited
 * with) added, or {"key":...,"error":...,"exit":N}.  Blank lines and
 * comments get no answer.
 *
 * Group commit: the requests already waiting on standard input are
 * decided in one write transaction (one lock, one COMMIT), and their
 * answers are written only after the COMMIT, so no answer ever reports a
 * decision that was not stored.  A request that fails before it changed
 * anything fails alone; one that fails after (an I/O error, a full disk)
 * loses its group, and every answer of the group says so.  A group ends
 * when no more input is waiting, after GROUP_MAX requests, or once it has
 * held the lock for GROUP_US; where the store can tell whether another
 * process waits for the lock, it goes on past GROUP_US while none does,
 * up to GROUP_QUIET_US (a long group writes each page it changed once,
 * not once per short group).  Between groups the lock is let go until the
 * process waiting for it has taken it, or for GROUP_GAP_US (pass_turn()).
 * An interactive caller (coproc) is answered as soon as each line
 * arrives.
 *
 * What a request cannot do here: run, wait (--wait), gc, policy, help,
 * or set --db, --format or --lock-timeout, which belong to the batch.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "throttle.h"

#define GROUP_US 10000
#define GROUP_QUIET_US 50000
#define GROUP_GAP_US 500
#define GROUP_MAX 10000
/* and no more lines read ahead than this many bytes: 10,000 lines of
 * 1 MiB would be 10 GB */
#define GROUP_BYTES ((size_t)16 * 1024 * 1024)
#define WAITING_EVERY 16 /* requests between looks for a waiting process */
#define REMOTE_GROUP_MAX 500 /* a group read ahead, on a server (Redis) */
#define WORDS_MAX 128
#define READ_SIZE 65536
#define LINE_MAX_BYTES ((size_t)1 << 20)

/* Standard input, a line at a time, and whether more is waiting. */
struct reader {
	char *buf;
	size_t len; /* bytes in buf */
	size_t off; /* start of the next line */
	size_t cap;
	int eof;
	int failed; /* standard input could not be read (said) */
	int skip; /* skipping the rest of a line that is too long */
	int toolong; /* the line just returned was too long */
	size_t linelen; /* bytes in the line just returned */
};

/* A reply waiting for its group's COMMIT. */
struct reply {
	char *text; /* the JSON line, "\n" included */
	size_t len;
	char *key; /* for an error line if the group fails */
	size_t keylen;
	int rc;
	int decides; /* --on-error maps its store error (ctx_init()) */
	char *fb; /* under --on-error allow|deny: the members of the answer */
	size_t fblen; /* a store error gets (but its error), or NULL */
};

/* A line read and not yet decided. */
struct line {
	char *text;
	size_t len;
	long lineno;
	int toolong;
};

/*
 * The group being decided: its lines, its answers and its messages, both
 * held until its COMMIT (a store that checks at commit may make it decide
 * the group again).
 */
struct group {
	struct reply *a;
	int n, cap;
	struct line *l;
	int nl, capl;
	size_t bytes; /* the lines' bytes */
	FILE *notes; /* messages for stderr */
	char *notebuf;
	size_t notelen;
	char *said; /* the last message written to stderr, and how many */
	size_t saidlen; /* times since it was said again, not repeated */
	long again;
	char *words; /* the line being decided, cut into words */
	size_t capwords;
};

static char *dup_bytes(const char *, size_t);

/* Can standard input be read now without blocking? */
static int
input_waiting(void)
{
	struct pollfd p = { STDIN_FILENO, POLLIN, 0 };

	return poll(&p, 1, 0) == 1;
}

/*
 * The next complete line (its newline cut off), or NULL: at EOF, or with
 * block 0 if no complete line is buffered and no more input is waiting
 * (a group takes in all that is waiting, not one read's worth).  A last
 * line without a newline counts at EOF.  A line longer than
 * LINE_MAX_BYTES comes back as "" with r->toolong set, and the rest of
 * it is skipped.
 */
static char *
next_line(struct reader *r, int block, long *lineno)
{
	char *nl, *line;
	ssize_t got;

	for (;;) {
		nl = r->len > r->off
		    ? memchr(r->buf + r->off, '\n', r->len - r->off)
		    : NULL;
		if (r->skip) {
			/* the rest of a line too long to answer */
			r->off =
			    nl != NULL ? (size_t)(nl - r->buf) + 1 : r->len;
			if (nl != NULL || r->eof) {
				/* its end: at EOF too, or it spins */
				r->skip = 0;
				continue;
			}
		} else if ((nl != NULL ? (size_t)(nl - (r->buf + r->off))
				       : r->len - r->off) > LINE_MAX_BYTES) {
			/* too long to answer: skip it, through its newline */
			r->toolong = 1;
			if (nl != NULL)
				r->off = (size_t)(nl - r->buf) + 1;
			else {
				r->off = r->len;
				r->skip = !r->eof;
			}
			(*lineno)++;
			return (char *)"";
		} else if (nl != NULL || (r->eof && r->off < r->len)) {
			line = r->buf + r->off;
			if (nl == NULL)
				nl = r->buf + r->len; /* cap > len */
			*nl = '\0';
			r->linelen = (size_t)(nl - line);
			r->off = (size_t)(nl - r->buf) + 1;
			/* a line that ends in CR LF (a file from Windows)
			 * ends before its CR; a CR anywhere else is part of
			 * a word, as in a shell */
			if (r->linelen > 0 && line[r->linelen - 1] == '\r')
				line[--r->linelen] = '\0';
			if (r->off > r->len)
				r->off = r->len;
			(*lineno)++;
			return line;
		}
		/* not blocking: read on only if more is waiting now */
		if (r->eof || (!block && !input_waiting()))
			return NULL;
		if (r->off > 0) {
			memmove(r->buf, r->buf + r->off, r->len - r->off);
			r->len -= r->off;
			r->off = 0;
		}
		if (r->cap - r->len < READ_SIZE + 1) {
			r->cap = r->cap * 2 + READ_SIZE + 1;
			if ((r->buf = realloc(r->buf, r->cap)) == NULL) {
				log_msg("batch: out of memory");
				exit(EXIT_STATE);
			}
		}
		got = read(STDIN_FILENO, r->buf + r->len, READ_SIZE);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			log_msg("batch: standard input: %s", strerror(errno));
			r->failed = 1;
		}
		if (got <= 0)
			r->eof = 1;
		else
			r->len += (size_t)got;
	}
}

/* Is another request waiting, without blocking? */
static int
pending(const struct reader *r)
{
	if (r->len > r->off &&
	    memchr(r->buf + r->off, '\n', r->len - r->off) != NULL)
		return 1;
	return !r->eof && input_waiting();
}

static void
add_reply(struct group *g, char *text, size_t len, const char *key,
    size_t keylen, int rc)
{
	struct reply *a;

	if (g->n == g->cap) {
		g->cap = g->cap ? g->cap * 2 : 64;
		g->a = realloc(g->a, (size_t)g->cap * sizeof(*g->a));
		if (g->a == NULL) {
			log_msg("batch: out of memory");
			exit(EXIT_STATE);
		}
	}
	a = &g->a[g->n++];
	a->text = text;
	a->len = len;
	a->keylen = keylen;
	a->key = dup_bytes(key, keylen);
	a->rc = rc;
	a->decides = 0;
	a->fb = NULL;
	a->fblen = 0;
}

/*
 * Under --on-error allow|deny: the group's last reply keeps what its
 * request would answer if the group's commit failed, as a single call
 * answers a store error (allowed, the limit's fields), but for the error,
 * which the commit's failure gives: the members alone, in a->fb.
 */
static void
keep_fallback(struct group *g, const struct ctx *c, const struct args *a,
    FILE *mem, char **membuf)
{
	struct reply *r = &g->a[g->n - 1];
	struct answer f;
	long start, end;

	if (c->on_error == ON_ERROR_FAIL)
		return;
	answer_init(&f);
	/* as --on-error maps an outage (flush_group() uses it only then):
	 * the store cannot say yet how its commit would fail */
	ctx_fail_answer_as(c, a, &f,
	    c->on_error == ON_ERROR_ALLOW ? EXIT_ALLOWED : EXIT_REFUSED);
	if (f.nrec == 1 && f.rec[0]->nf > 1) {
		f.rec[0]->nf--; /* "error": the commit's, at its failure */
		start = ftell(mem);
		output_json(mem, f.rec[0], -1);
		/* without the braces and the newline */
		if (fflush(mem) == EOF || (end = ftell(mem)) < start + 3) {
			log_msg("batch: out of memory");
			exit(EXIT_STATE);
		}
		r->fblen = (size_t)(end - start - 3);
		r->fb = dup_bytes(*membuf + start + 1, r->fblen);
	}
	answer_free(&f);
}

/*
 * A reply that is not a command's own: {"key":...,"error":...,"exit":N},
 * the key left out if there is none and the error if msg is NULL.
 */
static void
error_line(FILE *fp, const char *key, size_t keylen, const char *msg, int rc)
{
	const char *sep = "{";

	if (keylen > 0) {
		fputs("{\"key\":", fp);
		escape_json(fp, key, keylen);
		sep = ",";
	}
	if (msg != NULL) {
		fprintf(fp, "%s\"error\":", sep);
		escape_json(fp, msg, strlen(msg));
		sep = ",";
	}
	fprintf(fp, "%s\"exit\":%d}\n", sep, rc);
}

/* Reply with an error line (or, msg NULL, just the exit code). */
static void
reply_error(struct group *g, const char *key, size_t keylen, const char *msg,
    int rc)
{
	char *text = NULL;
	size_t len = 0;
	FILE *fp;

	if ((fp = open_memstream(&text, &len)) == NULL) {
		log_msg("batch: out of memory");
		exit(EXIT_STATE);
	}
	error_line(fp, key, keylen, msg, rc);
	fclose(fp);
	add_reply(g, text, len, key, keylen, rc);
}

/* Why a command (or an option) cannot be a batch request, or NULL. */
static const char *
refused_here(const struct args *a)
{
	const struct cmd_entry *c = a->cmd;
	int i;

	if (!c->in_batch)
		return "is not a batch request (throttle(1) lists those that "
		       "are); run it on its own";
	for (i = 0; i < a->ngiven; i++) {
		const char *n = args_option_name(a->given[i]);

		/* (a request's --on-error deny under a batch's allow
		 * would fail open unsaid: refused, as the others) */
		if (strcmp(n, "db") == 0 || strcmp(n, "format") == 0 ||
		    strcmp(n, "lock-timeout") == 0 ||
		    strcmp(n, "on-error") == 0 || strcmp(n, "quiet") == 0)
			return "takes --db, --format, --lock-timeout, "
			       "--on-error and -q once, on the batch command, "
			       "not per request";
	}
	if (a->has_wait)
		return "cannot --wait in a batch: a request would hold up "
		       "every other one; retry it after its retry_after";
	if (strcmp(c->name, "inspect") == 0 && a->names)
		return "--names lists every key, which a batch does not; run "
		       "it on its own";
	if (strcmp(c->name, "inspect") == 0 && a->key == NULL)
		return "in a batch shows one key; give the key";
	return NULL;
}

/* A copy of len bytes of s. */
static char *
dup_bytes(const char *s, size_t len)
{
	char *d = xmalloc(len + 1);

	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

/* A message for stderr, written when the group's answers are. */
static void
note(struct group *, const char *, ...) __attribute__((format(printf, 2, 3)));

static void
note(struct group *g, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	log_line_to(g->notes, buf, "");
}

/* Say on stderr what a request's answer says, as a command would. */
static void
tell(const struct ctx *c, struct group *g, const struct answer *ans,
    long lineno)
{
	switch (ans->msg_kind) {
	case MSG_NONE:
		break;
	case MSG_INFO:
		if (!c->quiet)
			note(g, "%s", ans->msg);
		break;
	case MSG_NOTICE:
		note(g, "%s", ans->msg);
		break;
	case MSG_USAGE:
		note(g, "batch: line %ld: %s", lineno, ans->msg);
		break;
	case MSG_STATE:
		/* as a single call says it (output.c) */
		note(g, "%s%s", ans->msg, ctx_state_note(c));
		break;
	}
}

/*
 * Decide one request inside the open group; its reply goes into g: the
 * command's own records as JSON, the last with "exit" added, or an error
 * line.  mem is the batch's one memory stream (*membuf its bytes once
 * flushed), from where a reply is copied.
 */
static void
request(const struct ctx *base, char *line, long lineno, struct group *g,
    FILE *mem, char **membuf)
{
	char *words[WORDS_MAX + 2], msgbuf[1100];
	const char *err, *why;
	struct args a;
	struct ctx c;
	struct answer ans;
	long start, end;
	int n, rc;

	n = parse_words(line, words + 1, WORDS_MAX, &err);
	if (n == 0)
		return; /* a blank line or a comment */
	if (n == -1) {
		note(g, "batch: line %ld %s", lineno, err);
		snprintf(msgbuf, sizeof(msgbuf), "the line %s", err);
		reply_error(g, "", 0, msgbuf, EXIT_USAGE);
		return;
	}
	args_init(&a);
	words[0] = (char *)"throttle";
	words[n + 1] = NULL;
	rc = args_parse(n + 1, words, cmd_table, &a);
	if (rc == PARSE_RUN && (why = refused_here(&a)) != NULL) {
		snprintf(a.err, sizeof(a.err), "%s %s", a.cmd->name, why);
		rc = -1;
	} else if (rc != PARSE_RUN && rc != -1) {
		snprintf(a.err, sizeof(a.err),
		    "give a request, as in consume KEY --limit 5/1m");
		rc = -1;
	}
	if (rc == -1) {
		/* parsing stopped before the key was taken: the word after
		 * the command, if it is no option, is the key a reader
		 * matches the answer by (consume KEY --limti 1/1m) */
		const struct cmd_entry *e = n >= 2 ? cmd_find(words[1]) : NULL;
		const char *key = a.key;
		size_t keylen = a.keylen;

		if (key == NULL && e != NULL && e->operand_is_key &&
		    words[2][0] != '-') {
			key = words[2];
			keylen = strlen(key);
		}
		note(g, "batch: line %ld: %s", lineno, a.err);
		reply_error(g, key ? key : "", key ? keylen : 0, a.err,
		    EXIT_USAGE);
		args_free(&a);
		return;
	}
	/* the batch's context: its store, in its group; JSON answers;
	 * --on-error for a request that decides, as on its own */
	c = *base;
	c.format = FORMAT_JSON;
	if (!a.cmd->decides)
		c.on_error = ON_ERROR_FAIL;
	answer_init(&ans);
	cmd_answer(&c, &a, &ans);
	free(c.policy_err); /* the request's own (base has none) */
	c.policy_err = NULL;
	tell(&c, g, &ans, lineno);
	rc = ans.rc;
	if (ans.msg_kind == MSG_STATE)
		rc = ctx_fail_answer(&c, &a, &ans);
	if (ans.nrec == 0)
		/* only a request not decided has an error: a note on one
		 * that was (a reset in a file not there, a key with no state,
		 * a lease not held) is said on stderr only, and its answer
		 * is the command's own {"key":...} */
		reply_error(g, a.key ? a.key : "", a.keylen,
		    ans.msg_kind == MSG_USAGE || ans.msg_kind == MSG_STATE
			? ans.msg
			: NULL,
		    rc);
	else {
		/* one line, whatever the records (inspect KEY: its leases
		 * and shedder too): a reader takes a line a request */
		start = ftell(mem);
		output_json_one(mem, (const struct record *const *)ans.rec,
		    ans.nrec, rc);
		if (fflush(mem) == EOF || (end = ftell(mem)) < start) {
			log_msg("batch: out of memory");
			exit(EXIT_STATE);
		}
		add_reply(g, dup_bytes(*membuf + start, (size_t)(end - start)),
		    (size_t)(end - start), a.key ? a.key : "", a.keylen, rc);
		keep_fallback(g, &c, &a, mem, membuf);
	}
	g->a[g->n - 1].decides = a.cmd->decides;
	answer_free(&ans);
	args_free(&a);
}

/* Forget the group's answers and messages (to decide it again). */
static void
drop_replies(struct group *g)
{
	int i;

	for (i = 0; i < g->n; i++) {
		free(g->a[i].text);
		free(g->a[i].key);
		free(g->a[i].fb);
	}
	g->n = 0;
	rewind(g->notes);
}

/* If the last message was held back, say how many times. */
static void
said_again(struct group *g)
{
	if (g->again > 0)
		fprintf(stderr,
		    "throttle: batch: the same message for %ld more "
		    "request%s\n",
		    g->again, g->again == 1 ? "" : "s");
	g->again = 0;
}

/*
 * Write the group's messages, len bytes of lines: a line the same as the
 * one before it is counted, not written again (a server out of reach, a
 * state file that cannot be written: each request's answer says so, and
 * stderr would hold the message a hundred thousand times).
 */
static void
write_notes(struct group *g, size_t len)
{
	const char *p = g->notebuf, *end = p + len, *nl;
	size_t n;

	for (; p < end; p += n) {
		nl = memchr(p, '\n', (size_t)(end - p));
		n = nl != NULL ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		if (g->said != NULL && n == g->saidlen &&
		    memcmp(p, g->said, n) == 0) {
			g->again++;
			continue;
		}
		said_again(g);
		fwrite(p, 1, n, stderr);
		free(g->said);
		g->said = dup_bytes(p, n);
		g->saidlen = n;
	}
}

/*
 * Write the group's messages and answers, once its COMMIT is done; if it
 * failed (committed is 0), every answer that touched the store becomes an
 * error line: none of those decisions was kept.  Sets *state_failed if an
 * answer says exit 3.  -1 if standard output cannot be written.
 */
static int
flush_group(const struct ctx *c, struct group *g, int committed,
    const char *msg, int unsure, int *state_failed)
{
	long notes = ftell(g->notes);
	int i, rc;

	if (fflush(g->notes) == 0 && notes > 0)
		write_notes(g, (size_t)notes);
	else if (notes == 0) {
		/* a group with nothing to say: what was said is over (a
		 * server back), and if it comes again it is said again */
		said_again(g);
		free(g->said);
		g->said = NULL;
	}
	if (!committed) {
		/* what --on-error makes of it, if a request decides */
		struct ctx said = *c;

		for (i = 0;
		     i < g->n && (!g->a[i].decides || g->a[i].rc == EXIT_USAGE);
		     i++)
			;
		if (i == g->n)
			said.on_error = ON_ERROR_FAIL;
		said_again(g);
		if (unsure) /* the connection went as the commit was sent */
			log_msg("%s; the last %d requests were sent to be "
				"saved and no answer came: the server may "
				"have kept them, or not%s",
			    msg, g->n, ctx_state_note(&said));
		else
			log_msg("%s; none of the last %d requests was kept%s",
			    msg, g->n, ctx_state_note(&said));
		free(g->said);
		g->said = NULL;
	}
	for (i = 0; i < g->n; i++) {
		struct reply *a = &g->a[i];

		if (committed || a->rc == EXIT_USAGE) {
			fwrite(a->text, 1, a->len, stdout);
			rc = a->rc;
		} else if ((rc = a->decides ? ctx_map(c, EXIT_STATE)
					    : EXIT_STATE) != EXIT_STATE &&
		    a->fb != NULL) {
			/* as a single call answers a store error */
			fputc('{', stdout);
			fwrite(a->fb, 1, a->fblen, stdout);
			fputs(",\"error\":", stdout);
			escape_json(stdout, msg, strlen(msg));
			fprintf(stdout, ",\"exit\":%d}\n", rc);
		} else
			error_line(stdout, a->key, a->keylen, msg, rc);
		if (rc == EXIT_STATE)
			*state_failed = 1;
		output_check(stdout);
	}
	drop_replies(g);
	/* a write that failed, here or inside an fwrite above: -1, errno
	 * its reason */
	if (fflush(stdout) == EOF || ferror(stdout)) {
		output_check(stdout);
		errno = output_failed() != 0 ? output_failed() : EIO;
		return -1;
	}
	return 0;
}

/*
 * Between two groups: let a process that waits for the lock have it.  If
 * the store can tell that one waits, only until it has taken the lock
 * (it no longer waits), GROUP_GAP_US at most; otherwise GROUP_GAP_US, for
 * a writer the store cannot see (the sqlite3 shell) to get its turn.
 */
static void
pass_turn(struct store *st)
{
	struct timespec ts = { 0, 20 * 1000L };
	int64_t end = clock_monotonic() + GROUP_GAP_US;

	if (st == NULL || store_waiting(st) != 1) {
		ts.tv_nsec = GROUP_GAP_US * 1000L;
		nanosleep(&ts, NULL);
		return;
	}
	while (store_waiting(st) == 1 && clock_monotonic() < end)
		nanosleep(&ts, NULL);
}

/* Answer one line of the group: a request, or why it cannot be one. */
static void
one_line(struct ctx *c, const struct line *l, struct group *g, FILE *mem,
    char **membuf)
{
	if (l->toolong) {
		note(g,
		    "batch: line %ld is longer than %zu bytes; it was skipped",
		    l->lineno, LINE_MAX_BYTES);
		reply_error(g, "", 0, "the line is too long", EXIT_USAGE);
	} else if (memchr(l->text, '\0', l->len) != NULL) {
		/* it would read as the line cut short there */
		note(g, "batch: line %ld holds a NUL byte; it was not decided",
		    l->lineno);
		reply_error(g, "", 0,
		    "the line holds a NUL byte, which no request can; it was "
		    "not decided",
		    EXIT_USAGE);
	} else {
		/* parsing cuts the line into words: the group may be
		 * decided again, so a copy is cut, in one buffer kept for
		 * every line (nothing points into it once it is answered) */
		if (l->len + 1 > g->capwords) {
			g->capwords = l->len + 1 > 2 * g->capwords
			    ? l->len + 1
			    : 2 * g->capwords;
			free(g->words);
			g->words = xmalloc(g->capwords);
		}
		memcpy(g->words, l->text, l->len);
		g->words[l->len] = '\0';
		request(c, g->words, l->lineno, g, mem, membuf);
	}
}

/* Is the line just read blank (no answer, no transaction)? */
static int
blank(const struct reader *r, const char *line)
{
	return !r->toolong && line[strspn(line, " \t\r")] == '\0' &&
	    memchr(line, '\0', r->linelen) == NULL;
}

/* Keep a line read for the group. */
static void
add_line(struct group *g, struct reader *r, const char *text, long lineno)
{
	struct line *l;

	if (g->nl == g->capl) {
		g->capl = g->capl ? g->capl * 2 : 64;
		g->l = realloc(g->l, (size_t)g->capl * sizeof(*g->l));
		if (g->l == NULL) {
			log_msg("batch: out of memory");
			exit(EXIT_STATE);
		}
	}
	l = &g->l[g->nl++];
	l->len = r->toolong ? 0 : r->linelen;
	l->text = dup_bytes(text, l->len);
	g->bytes += l->len;
	l->lineno = lineno;
	l->toolong = r->toolong;
	r->toolong = 0;
}

/* Forget the first n lines of the group: they were answered. */
static void
drop_lines(struct group *g, int n)
{
	int i;

	if (n == 0)
		return; /* (g->l may be none yet: no line was ever read) */
	for (i = 0; i < n; i++) {
		g->bytes -= g->l[i].len;
		free(g->l[i].text);
	}
	memmove(g->l, g->l + n, (size_t)(g->nl - n) * sizeof(*g->l));
	g->nl -= n;
}

/*
 * For a store that reads keys faster together (Redis), read the keys of
 * the group's first max requests ahead, in one round trip.  Lines that are not
 * requests are left to be answered as they are.  The number of lines the
 * group may take: max, or fewer when the store takes the keys of fewer
 * (a cluster's group is the requests of one hash slot).
 */
static int
prefetch(struct store *st, struct group *g, int max)
{
	char **keys, *words[WORDS_MAX + 2], *copy;
	size_t *lens;
	struct args a;
	const char *err;
	int i, n = 0, w, taken, *line;

	if (!store_can_prefetch(st))
		return max;
	keys = xcalloc((size_t)g->nl + 1, sizeof(*keys));
	lens = xcalloc((size_t)g->nl + 1, sizeof(*lens));
	line = xcalloc((size_t)g->nl + 1, sizeof(*line));
	for (i = 0; i < g->nl && i < max; i++) {
		if (g->l[i].toolong ||
		    memchr(g->l[i].text, '\0', g->l[i].len) != NULL)
			continue;
		copy = dup_bytes(g->l[i].text, g->l[i].len);
		w = parse_words(copy, words + 1, WORDS_MAX, &err);
		args_init(&a);
		words[0] = (char *)"throttle";
		if (w > 0) {
			words[w + 1] = NULL;
			if (args_parse(w + 1, words, cmd_table, &a) ==
				PARSE_RUN &&
			    a.key != NULL) {
				keys[n] = dup_bytes(a.key, a.keylen);
				line[n] = i;
				lens[n++] = a.keylen;
			}
		}
		args_free(&a);
		free(copy);
	}
	taken = store_prefetch(st, keys, lens, n);
	/* the lines up to the first request whose key was not taken */
	if (taken >= 0 && taken < n && line[taken] > 0)
		max = line[taken];
	for (i = 0; i < n; i++)
		free(keys[i]);
	free(keys);
	free(lens);
	free(line);
	return max;
}

/*
 * Does the line leave the store unwritten: a request that only reads
 * (check, inspect), a comment, or a line refused before it reaches the
 * store (too long, a NUL, a first word that is no request)?  By its first
 * word alone, as it is written: a word with quotes or escapes in it (which
 * may spell a command), or an option before the command (--cost 2
 * consume ...), is taken as one that writes.
 */
static int line_is(const struct line *, int);

static int
line_reads(const struct line *l)
{
	return line_is(l, 0);
}

/*
 * Does the line leave a state file that is not there unmade: one that
 * reads, or a request that never makes one (reset, release, renew, gc:
 * nothing to undo in a file not there), as a single call would.
 */
static int
line_makes_none(const struct line *l)
{
	return line_is(l, 1);
}

/* line_reads(), or with makes_none, line_makes_none(). */
static int
line_is(const struct line *l, int makes_none)
{
	char name[16];
	const char *p = l->text, *end = l->text + l->len, *w;
	const struct cmd_entry *e;

	if (l->toolong || memchr(l->text, '\0', l->len) != NULL)
		return 1; /* answered as refused, not decided */
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p < end && *p == '#')
		return 1; /* a comment */
	if (p < end && *p == '-')
		return 0; /* options before the command: which, not told */
	for (w = p; p < end && *p != ' ' && *p != '\t'; p++)
		if (strchr("'\"\\$`", *p) != NULL)
			return 0;
	if (p == w || (size_t)(p - w) >= sizeof(name))
		return 1; /* nothing, or longer than any command's name */
	memcpy(name, w, (size_t)(p - w));
	name[p - w] = '\0';
	return (e = cmd_find(name)) == NULL || !e->in_batch || e->reads_only ||
	    (makes_none && e->makes_no_file);
}

/*
 * Decide the group's lines in one transaction, from the first: until
 * none is left, or the group is full (GROUP_MAX requests, or GROUP_US
 * holding the lock), then write their answers and forget them.  A store
 * that lost a race at commit has the same lines decided again.  Lines that
 * only read (check, inspect) at the head of the queue are a group of their
 * own, in a read transaction: they wait for no writer's lock, and take
 * none.  1 if the group was full, 0 if not, -1 if standard output failed.
 */
static int
decide_group(struct ctx *c, struct store *st, struct group *g, FILE *mem,
    char **membuf, int *state_failed)
{
	char err[STORE_ERR_MAX];
	const char *cerr;
	int64_t start, now, held;
	/* a store that reads ahead holds no lock: no time bound, no gap */
	int remote = st != NULL && store_can_prefetch(st);
	int max = remote ? REMOTE_GROUP_MAX : GROUP_MAX, lim, n, r, full, tell;
	/* no state file there (opened to read as none): the lines at the
	 * head that make none are read, as their single calls would be */
	int missing = !remote && st != NULL && store_missing(st, NULL, 0);
	int reading = !remote && st != NULL &&
	    (missing ? line_makes_none(&g->l[0]) : line_reads(&g->l[0]));
	int64_t bound;

	for (;;) {
		if (st == NULL) {
			/* the store could not be opened: every line is
			 * answered as it would be (a bad one as a usage
			 * error, a request with the store's error, mapped by
			 * --on-error) */
			rewind(mem);
			for (n = 0; n < g->nl; n++)
				one_line(c, &g->l[n], g, mem, membuf);
			drop_lines(g, g->nl);
			return flush_group(c, g, 1, NULL, 0, state_failed);
		}
		if (store_group_begin(st, !reading) == -1) {
			/* the lock or the file: the first line is answered as
			 * a request that met this error (its key, and what
			 * --on-error makes of it; a bad line is a usage
			 * error), as when the store could not be opened; the
			 * next group tries again */
			struct ctx failed = *c;

			snprintf(err, sizeof(err), "%s", store_error(st));
			failed.store = NULL;
			failed.open_err = err;
			failed.open_unavailable = store_unavailable(st);
			rewind(mem);
			one_line(&failed, &g->l[0], g, mem, membuf);
			drop_lines(g, 1);
			return flush_group(c, g, 1, NULL, 0, state_failed);
		}
		lim = prefetch(st, g, max);
		for (n = 1; reading && n < g->nl && n < lim &&
		     (missing ? line_makes_none(&g->l[n])
			      : line_reads(&g->l[n]));
		     n++)
			;
		if (reading)
			lim = n; /* the reads at the head, no further */
		rewind(mem);
		tell = !remote && store_waiting(st) != -1;
		bound = tell ? GROUP_QUIET_US : GROUP_US;
		start = clock_monotonic();
		n = 0;
		do
			one_line(c, &g->l[n++], g, mem, membuf);
		while (n < g->nl && n < lim &&
		    (remote ||
			((held = clock_monotonic() - start) < bound &&
			    !(tell && held >= GROUP_US &&
				n % WAITING_EVERY == 0 &&
				store_waiting(st) == 1))));
		/* (a group of reads ended by a line that writes is not full:
		 * that line is the next group's) */
		full = !remote && (n < g->nl || n >= max) &&
		    !(reading && n == lim && n < max);
		/* what single decisions do one write in TIDY_EVERY, a group
		 * does once: forget rows at rest, so the file stays bounded */
		r = !reading && clock_now(&now, &cerr) == 0 &&
			store_tidy(st, now, TIDY_ROWS) == -1
		    ? -1
		    : 0;
		if (r == -1)
			store_group_end(st, 0);
		else
			r = store_group_end(st, 1);
		if (r == STORE_RETRY) {
			drop_replies(g);
			continue;
		}
		drop_lines(g, n);
		if (r == -1) {
			snprintf(err, sizeof(err), "%s", store_error(st));
			r = flush_group(c, g, 0, err, store_unsure(st),
			    state_failed);
		} else
			r = flush_group(c, g, 1, NULL, 0, state_failed);
		return r == -1 ? -1 : full;
	}
}

/*
 * The state file opened to read if it is not there (a store with no
 * keys), with c->read_only left set; else NULL, with c as it was before
 * any open (a file that is there, or one that cannot be told, is opened
 * to write by the caller, as before).
 */
static struct store *
open_if_missing(struct ctx *c)
{
	struct answer scratch;
	struct store *st;

	answer_init(&scratch);
	c->read_only = 1;
	if ((st = ctx_store(c, &scratch)) != NULL &&
	    store_missing(st, NULL, 0)) {
		answer_free(&scratch);
		return st;
	}
	store_close(st);
	c->store = NULL;
	free(c->open_err);
	c->open_err = NULL;
	c->read_only = 0;
	answer_free(&scratch);
	return NULL;
}

/*
 * While no state file is there, the batch's store is opened to read (a
 * store with no keys), and looked at again before each group: if the
 * group writes, or the file has been made meanwhile, it is opened to
 * write, as a single call would.  The store for the group, or NULL (said
 * on stderr).
 */
static struct store *
lazy_store(struct ctx *c, struct store *st, struct group *g)
{
	struct answer scratch;

	store_close(st);
	c->store = NULL;
	if (line_makes_none(&g->l[0]) && (st = open_if_missing(c)) != NULL)
		return st; /* still none: read as none */
	c->read_only = 0;
	answer_init(&scratch);
	if ((st = ctx_store(c, &scratch)) == NULL) {
		note(g, "%s", c->open_err);
		fflush(g->notes);
		write_notes(g, (size_t)ftell(g->notes));
		rewind(g->notes);
	}
	answer_free(&scratch);
	return st;
}

static void
batch_exec(struct ctx *c, const struct args *a, struct answer *ans)
{
	struct reader r = { 0 };
	struct group g = { 0 };
	struct store *st;
	char *line, *membuf = NULL;
	size_t memlen = 0;
	FILE *mem;
	long lineno = 0;
	int full, state_failed = 0, out_of_reach = 0, tried = 0;

	/* THROTTLE_FORMAT, for single calls (shell, to eval), does not
	 * apply: only a --format given to batch itself is refused */
	if (a->has_format && c->format != FORMAT_JSON &&
	    c->format != FORMAT_TEXT) {
		answer_usage(ans,
		    "batch: answers are JSON lines; leave --format out");
		return;
	}
	/* a state file not there yet is made by the first request that
	 * writes, not by a batch that only reads: opened to read until then
	 * (a file that is there is opened to write at once) */
	st = store_is_remote(c->db) ? NULL : open_if_missing(c);
	if (st == NULL && (st = ctx_store(c, ans)) == NULL) {
		/* said once here, and each request still gets its answer
		 * line (the error, mapped by --on-error), as it would if the
		 * store failed later: a co-process reading an answer a
		 * request must not be left with none.  A server out of
		 * reach is tried again for each group. */
		out_of_reach = c->open_unavailable && store_is_remote(c->db);
		tried = 1; /* for the first group: not again at once */
		answer_free(ans);
		answer_init(ans);
	}
	if ((mem = open_memstream(&membuf, &memlen)) == NULL ||
	    (g.notes = open_memstream(&g.notebuf, &g.notelen)) == NULL) {
		log_msg("batch: out of memory");
		ans->rc = EXIT_STATE;
		return;
	}
	if (st == NULL) {
		/* as the requests' own messages are, so that theirs, the
		 * same, are not repeated */
		note(&g, "%s", c->open_err);
		fflush(g.notes);
		write_notes(&g, g.notelen);
		rewind(g.notes);
	}
	c->batch = 1; /* its requests share the store */
	for (;;) {
		/* a line (waiting for one if none is left), then those
		 * already waiting; a blank one gets no answer */
		if (g.nl == 0) {
			if ((line = next_line(&r, 1, &lineno)) == NULL)
				break;
			if (!blank(&r, line))
				add_line(&g, &r, line, lineno);
		}
		while (g.nl < GROUP_MAX && g.bytes < GROUP_BYTES &&
		    pending(&r) && (line = next_line(&r, 0, &lineno)) != NULL)
			if (!blank(&r, line))
				add_line(&g, &r, line, lineno);
		if (g.nl == 0)
			continue;
		if (st == NULL && out_of_reach && !tried) {
			/* a server out of reach when the batch began: try it
			 * again for each group, as a store opened is (but the
			 * first, for which it was just tried: one
			 * --lock-timeout a group) */
			struct answer scratch;

			answer_init(&scratch);
			free(c->open_err);
			c->open_err = NULL;
			st = ctx_store(c, &scratch);
			answer_free(&scratch);
		}
		tried = 0;
		/* a state file removed or moved aside while the batch ran:
		 * the next group decides on what is at the path now (a new
		 * file, as a single call would make), not on the old one */
		if (st != NULL && (c->read_only || store_replaced(st)))
			st = lazy_store(c, st, &g);
		full = decide_group(c, st, &g, mem, &membuf, &state_failed);
		if (full == -1) {
			/* standard output failed: say why now, as musl's
			 * stdout keeps no error but its flag (unless the
			 * reader left), and drop what it still holds, so
			 * main() does not say it again */
			if (errno != EPIPE)
				log_msg("standard output: %s", strerror(errno));
			__fpurge(stdout);
			clearerr(stdout);
			break;
		}
		if (full)
			pass_turn(st); /* let a waiting process have the lock */
	}
	/* every request was answered; exit 3 if any answer says a store
	 * error kept it from being decided */
	ans->rc = state_failed || r.failed ? EXIT_STATE : EXIT_ALLOWED;
	said_again(&g);
	free(g.said);
	c->batch = 0; /* the driver closes the store */
	fclose(mem);
	fclose(g.notes);
	free(membuf);
	free(g.notebuf);
	free(r.buf);
	free(g.a);
	free(g.words);
	drop_lines(&g, g.nl);
	free(g.l);
}

const struct cmd_entry cmd_batch_entry = {
	.name = "batch",
	.decides = 1,
	.args = "",
	.summary = "answer requests read one per line from standard input, "
		   "each with a JSON line",
	.options = 0,
	.min_args = 0,
	.max_args = 0,
	.operand_is_key = 0,
	.runs_long = 1,
	.exec = batch_exec,
};
