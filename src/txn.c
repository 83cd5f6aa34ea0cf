/*
 * txn.c: the one loop that runs a transaction, for every command and for
 * batch: begin, the command's body, commit; again from the start when a
 * store that checks at commit lost a race (STORE_RETRY, which that store
 * bounds by --lock-timeout); and one mapping of failures into the answer.
 *
 *	1. Nothing a body does is kept unless the commit succeeds; a body
 *	   that fails, or a read (write 0), is rolled back.
 *	2. A body runs again from the start after a lost race: it must read
 *	   everything it decides on inside the transaction, and take its time
 *	   with ctx_now() there too.
 *	3. A body's answer is written only from a run that committed: a body
 *	   run again starts from the answer as it was before it.
 */
#include "throttle.h"

/*
 * Run body(c, arg, a) in a transaction on the context's store (write: one
 * that may change it).  The body returns 0 to commit, TXN_ROLLBACK to keep
 * nothing, or -1 with the answer set (ctx_fail() for a store error).
 * 0, or -1 with the answer set.
 */
int
txn_run(struct ctx *c, int write,
    int (*body)(struct ctx *, void *, struct answer *), void *arg,
    struct answer *a)
{
	struct store *st;
	int r;

	if ((st = ctx_store(c, a)) == NULL)
		return -1;
	for (;;) {
		if (store_begin(st, write) == -1)
			return ctx_fail(c, a);
		if ((r = body(c, arg, a)) == -1) {
			store_rollback(st);
			return -1;
		}
		if (r == TXN_ROLLBACK || !write) {
			store_rollback(st);
			return 0;
		}
		if ((r = store_commit(st)) == -1) {
			store_rollback(st);
			return ctx_fail(c, a);
		}
		if (r != STORE_RETRY)
			return 0;
	}
}
