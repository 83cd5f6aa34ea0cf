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
 * held the lock for GROUP_US; between groups the lock is let go for
 * GROUP_GAP_US so that other processes waiting on it get their turn.  An
 * interactive caller (coproc) is answered as soon as each line arrives.
 *
 * What a request cannot do here: run, wait (--wait), gc, policy, help,
 * or set --db, --format or --lock-timeout, which belong to the batch.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "throttle.h"

#define GROUP_US 5000
#define GROUP_GAP_US 500
#define GROUP_MAX 2000
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
	int skip; /* skipping the rest of a line that is too long */
	int toolong; /* the line just returned was too long */
	size_t linelen; /* bytes in the line just returned */
};

/* An answer waiting for its group's COMMIT. */
struct answer {
	char *text; /* the JSON line, "\n" included */
	size_t len;
	char *key; /* for an error line if the group fails */
	size_t keylen;
	int rc;
};

struct group {
	struct answer *a;
	int n, cap;
};

static char *dup_bytes(const char *, size_t);

/*
 * The next complete line (its newline cut off), or NULL: at EOF, or with
 * block 0 if no complete line is buffered.  A last line without a newline
 * counts at EOF.  A line longer than LINE_MAX_BYTES comes back as "" with
 * r->toolong set, and the rest of it is skipped.
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
			if (nl != NULL)
				r->skip = 0;
			if (nl != NULL || r->eof)
				continue;
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
			if (r->off > r->len)
				r->off = r->len;
			(*lineno)++;
			return line;
		}
		if (r->eof || !block)
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
		if (got < 0)
			log_msg("batch: standard input: %s", strerror(errno));
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
	struct pollfd p = { STDIN_FILENO, POLLIN, 0 };

	if (r->len > r->off &&
	    memchr(r->buf + r->off, '\n', r->len - r->off) != NULL)
		return 1;
	return !r->eof && poll(&p, 1, 0) == 1;
}

static void
add_answer(struct group *g, char *text, size_t len, const char *key,
    size_t keylen, int rc)
{
	struct answer *a;

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
}

/* Answer with an error line (or, msg NULL, just the exit code). */
static void
answer_error(struct group *g, const char *key, size_t keylen, const char *msg,
    int rc)
{
	char *text = NULL;
	size_t len = 0;
	FILE *fp;

	if ((fp = open_memstream(&text, &len)) == NULL) {
		log_msg("batch: out of memory");
		exit(EXIT_STATE);
	}
	output_batch_error(fp, key, keylen, msg, rc);
	fclose(fp);
	add_answer(g, text, len, key, keylen, rc);
}

/* Why a command (or an option) cannot be a batch request, or NULL. */
static const char *
refused_here(const struct opts *o, const struct cmd_entry *c)
{
	int i;

	if (!c->in_batch)
		return "is not a batch request (throttle(1) lists those that "
		       "are); run it on its own";
	for (i = 0; i < o->ngiven; i++) {
		const char *n = option_name(o->given[i]);

		if (strcmp(n, "db") == 0 || strcmp(n, "format") == 0 ||
		    strcmp(n, "lock-timeout") == 0)
			return "takes --db, --format and --lock-timeout once, "
			       "on the batch command, not per request";
	}
	if (o->has_wait)
		return "cannot --wait in a batch: a request would hold up "
		       "every other one; retry it after its retry_after";
	if (strcmp(c->name, "inspect") == 0 && (o->key == NULL || o->names))
		return "inspect in a batch shows one key; give the key";
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

/*
 * Decide one request inside the open group; its answer goes into g.  The
 * command writes its answer into mem, the batch's one memory stream
 * (*membuf its bytes once flushed), from where it is copied.
 */
static void
request(const struct opts *base, char *line, long lineno, struct group *g,
    FILE *mem, char **membuf)
{
	char *words[WORDS_MAX + 2], *text,
	    msgbuf[sizeof(((struct opts *)0)->err)];
	const struct cmd_entry *c;
	const char *err, *why, *msg;
	struct opts o;
	long start, end;
	size_t len;
	int n, rc;

	n = parse_words(line, words + 1, WORDS_MAX, &err);
	if (n == 0)
		return; /* a blank line or a comment */
	if (n == -1) {
		log_msg("batch: line %ld %s", lineno, err);
		snprintf(msgbuf, sizeof(msgbuf), "the line %s", err);
		answer_error(g, "", 0, msgbuf, EXIT_USAGE);
		return;
	}
	cmd_defaults(&o);
	o.batch = 1;
	o.store = base->store;
	o.db = base->db;
	o.format = FORMAT_JSON;
	o.quiet = base->quiet;
	o.on_error = base->on_error;
	o.lock_timeout = base->lock_timeout;
	words[0] = (char *)"throttle";
	words[n + 1] = NULL;
	rc = cmd_parse(n + 1, words, &o, &c);
	if (rc == PARSE_RUN && (why = refused_here(&o, c)) != NULL) {
		snprintf(o.err, sizeof(o.err), "%s %s", c->name, why);
		rc = -1;
	} else if (rc != PARSE_RUN && rc != -1) {
		snprintf(o.err, sizeof(o.err),
		    "give a request, as in consume KEY --limit 5/1m");
		rc = -1;
	}
	if (rc == -1) {
		log_msg("batch: line %ld: %s", lineno, o.err);
		answer_error(g, o.key ? o.key : "", o.key ? o.keylen : 0, o.err,
		    EXIT_USAGE);
		cmd_free(&o);
		return;
	}
	log_forget();
	start = ftell(mem);
	output_to(mem);
	if (cmd_finish(&o, c, &rc) == 0)
		rc = c->exec(&o);
	output_to(NULL);
	if (fflush(mem) == EOF || (end = ftell(mem)) < start) {
		log_msg("batch: out of memory");
		exit(EXIT_STATE);
	}
	text = *membuf + start;
	len = (size_t)(end - start);
	if (len >= 2 && text[len - 2] == '}' && text[len - 1] == '\n') {
		/* the command's own answer, with its exit code */
		char tail[32];
		int tl = snprintf(tail, sizeof(tail), ",\"exit\":%d}\n", rc);
		char *full = xmalloc(len - 2 + (size_t)tl + 1);

		memcpy(full, text, len - 2);
		memcpy(full + len - 2, tail, (size_t)tl + 1);
		add_answer(g, full, len - 2 + (size_t)tl, o.key ? o.key : "",
		    o.keylen, rc);
	} else {
		msg = rc == EXIT_USAGE ? o.err : log_last();
		if (rc == EXIT_USAGE)
			log_msg("batch: line %ld: %s", lineno, o.err);
		if (rc == EXIT_ALLOWED && *msg == '\0')
			msg = NULL; /* done, with nothing to say (reset) */
		answer_error(g, o.key ? o.key : "", o.keylen, msg, rc);
	}
	cmd_free(&o);
}

/* The exit code --on-error gives a store error. */
static int
mapped(const struct opts *o)
{
	return o->on_error == ON_ERROR_ALLOW ? EXIT_ALLOWED
	    : o->on_error == ON_ERROR_DENY   ? EXIT_REFUSED
					     : EXIT_STATE;
}

/*
 * Write the group's answers, once its COMMIT is done; if it failed
 * (committed is 0), every answer that touched the store becomes an error
 * line: none of those decisions was kept.  Sets *state_failed if an answer
 * says exit 3.  -1 if standard output cannot be written.
 */
static int
flush_group(const struct opts *o, struct group *g, int committed,
    const char *msg, int *state_failed)
{
	int i, rc;

	for (i = 0; i < g->n; i++) {
		struct answer *a = &g->a[i];

		if (committed || a->rc == EXIT_USAGE) {
			fwrite(a->text, 1, a->len, stdout);
			rc = a->rc;
		} else {
			rc = mapped(o);
			output_batch_error(stdout, a->key, a->keylen, msg, rc);
		}
		if (rc == EXIT_STATE)
			*state_failed = 1;
		free(a->text);
		free(a->key);
	}
	g->n = 0;
	return fflush(stdout) == EOF ? -1 : 0;
}

static void
gap(void)
{
	struct timespec ts = { 0, GROUP_GAP_US * 1000L };

	nanosleep(&ts, NULL);
}

static int
batch_exec(struct opts *o)
{
	struct reader r = { 0 };
	struct group g = { 0 };
	struct store *st;
	char err[STORE_ERR_MAX], *line, *membuf = NULL;
	size_t memlen = 0;
	FILE *mem;
	long lineno = 0;
	int64_t start, now;
	const char *cerr;
	int rc, n, full, failed, state_failed = 0;

	if (o->format != FORMAT_JSON && o->format != FORMAT_TEXT)
		return cmd_usage(o,
		    "batch: answers are JSON lines; leave "
		    "--format out");
	if ((st = cmd_open(o, &rc)) == NULL)
		return rc;
	if ((mem = open_memstream(&membuf, &memlen)) == NULL) {
		store_close(st);
		log_msg("batch: out of memory");
		return EXIT_STATE;
	}
	o->store = st;
	while ((line = next_line(&r, 1, &lineno)) != NULL) {
		if (!r.toolong && line[strspn(line, " \t\r")] == '\0' &&
		    memchr(line, '\0', r.linelen) == NULL)
			continue; /* blank: no answer, no transaction */
		if (store_group_begin(st) == -1) {
			/* the lock or the file: answer this line, go on */
			snprintf(err, sizeof(err), "%s", store_error(st));
			log_msg("%s", err);
			answer_error(&g, "", 0, err, mapped(o));
			if (flush_group(o, &g, 1, NULL, &state_failed) == -1)
				break;
			continue;
		}
		start = clock_monotonic();
		n = 0;
		rewind(mem);
		for (;;) {
			if (r.toolong) {
				r.toolong = 0;
				log_msg("batch: line %ld is longer than %zu "
					"bytes; it was skipped",
				    lineno, LINE_MAX_BYTES);
				answer_error(&g, "", 0, "the line is too long",
				    EXIT_USAGE);
			} else if (memchr(line, '\0', r.linelen) != NULL) {
				/* it would read as the line cut short there */
				log_msg("batch: line %ld holds a NUL byte; it "
					"was not decided",
				    lineno);
				answer_error(&g, "", 0,
				    "the line holds a NUL byte, which no "
				    "request "
				    "can; it was not decided",
				    EXIT_USAGE);
			} else
				request(o, line, lineno, &g, mem, &membuf);
			n++;
			full = n >= GROUP_MAX ||
			    clock_monotonic() - start >= GROUP_US;
			if (full || !pending(&r) ||
			    (line = next_line(&r, 0, &lineno)) == NULL)
				break;
		}
		/* what single decisions do one write in TIDY_EVERY, a group
		 * does once: forget rows at rest, so the file stays bounded */
		failed = clock_now(&now, &cerr) == 0 &&
		    store_tidy(st, now, TIDY_ROWS) == -1;
		if (failed)
			store_group_end(st, 0);
		if (failed || store_group_end(st, 1) == -1) {
			snprintf(err, sizeof(err), "%s", store_error(st));
			log_msg("%s; none of the last %d requests was kept",
			    err, g.n);
			if (flush_group(o, &g, 0, err, &state_failed) == -1)
				break;
		} else if (flush_group(o, &g, 1, NULL, &state_failed) == -1)
			break;
		if (full)
			gap(); /* let a waiting process have the lock */
	}
	/* every request was answered; exit 3 if any answer says a store
	 * error kept it from being decided */
	rc = state_failed ? EXIT_STATE : EXIT_ALLOWED;
	o->store = NULL;
	store_close(st);
	fclose(mem);
	free(membuf);
	free(r.buf);
	free(g.a);
	return rc;
}

const struct cmd_entry cmd_batch_entry = {
	.name = "batch",
	.args = "",
	.summary = "answer requests read one per line from standard input, "
		   "each with a JSON line",
	.options = 0,
	.min_args = 0,
	.max_args = 0,
	.operand_is_key = 0,
	.exec = batch_exec,
};
