/*
 * pair.c: compare the wall time of two commands as a paired ratio.  Each
 * round runs both, in alternating order (A then B, then B then A), each
 * call timed from fork to exit; the ratio of the round is A's time over
 * B's.  On a shared, noisy machine the two commands of a round see the
 * same load, so the median of the rounds' ratios holds where the ratio of
 * two separately measured medians does not.
 *
 *	pair [-n ROUNDS] [-k CALLS] A-COMMAND... ::: B-COMMAND...
 *
 * Each "call" of a command in a round is CALLS runs of it in a row (default
 * 1).  Prints one line:
 *
 *	ratio=MEDIAN p10=P10 p90=P90 min=MIN max=MAX a_ms=MEDIAN_A b_ms=MEDIAN_B
 *
 * where the times are the medians of one run (a call divided by CALLS).
 * A command that exits with 126, 127 or a signal stops the run (exit 2).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Run argv to its end, output to /dev/null: its wall time in seconds. */
static double
timed(char **argv)
{
	double t0 = now();
	pid_t pid;
	int st, fd;

	if ((pid = fork()) == -1) {
		perror("pair: fork");
		exit(2);
	}
	if (pid == 0) {
		fd = open("/dev/null", O_WRONLY);
		dup2(fd, 1);
		dup2(fd, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) == -1)
		;
	if (WIFSIGNALED(st) ||
	    (WIFEXITED(st) &&
		(WEXITSTATUS(st) == 126 || WEXITSTATUS(st) == 127))) {
		fprintf(stderr, "pair: %s did not run (status %d)\n", argv[0],
		    st);
		exit(2);
	}
	return now() - t0;
}

static int
cmp(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

/* The q-quantile (0..1) of n sorted values. */
static double
quantile(const double *v, int n, double q)
{
	int i = (int)(q * (n - 1) + 0.5);

	return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

int
main(int argc, char **argv)
{
	int rounds = 100, calls = 1, i, j, k, sep = -1;
	char **a, **b;
	double *ra, *rb, *ratio, ta, tb;

	for (i = 1; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (strcmp(argv[i], "-n") == 0)
			rounds = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "-k") == 0)
			calls = atoi(argv[i + 1]);
		else
			break;
	}
	for (j = i; j < argc; j++)
		if (strcmp(argv[j], ":::") == 0)
			sep = j;
	if (sep <= i || sep + 1 >= argc || rounds < 1 || calls < 1) {
		fprintf(stderr, "usage: pair [-n ROUNDS] [-k CALLS] A... ::: "
				"B...\n");
		return 2;
	}
	argv[sep] = NULL;
	a = argv + i;
	b = argv + sep + 1;
	ra = calloc((size_t)rounds, sizeof(double));
	rb = calloc((size_t)rounds, sizeof(double));
	ratio = calloc((size_t)rounds, sizeof(double));
	if (ra == NULL || rb == NULL || ratio == NULL)
		return 2;
	for (j = 0; j < rounds; j++) {
		ta = tb = 0;
		if (j % 2 == 0) {
			for (k = 0; k < calls; k++)
				ta += timed(a);
			for (k = 0; k < calls; k++)
				tb += timed(b);
		} else {
			for (k = 0; k < calls; k++)
				tb += timed(b);
			for (k = 0; k < calls; k++)
				ta += timed(a);
		}
		ra[j] = ta / calls;
		rb[j] = tb / calls;
		ratio[j] = ta / tb;
	}
	qsort(ra, (size_t)rounds, sizeof(double), cmp);
	qsort(rb, (size_t)rounds, sizeof(double), cmp);
	qsort(ratio, (size_t)rounds, sizeof(double), cmp);
	printf("ratio=%.3f p10=%.3f p90=%.3f min=%.3f max=%.3f a_ms=%.3f "
	       "b_ms=%.3f\n",
	    quantile(ratio, rounds, 0.5), quantile(ratio, rounds, 0.1),
	    quantile(ratio, rounds, 0.9), ratio[0], ratio[rounds - 1],
	    quantile(ra, rounds, 0.5) * 1e3, quantile(rb, rounds, 0.5) * 1e3);
	free(ra);
	free(rb);
	free(ratio);
	return 0;
}
