/*
 * contend.c: P processes each run a command N times in a row, all at once,
 * and report how long each call took and how it ended.
 *
 *	contend -p P -n N COMMAND...
 *
 * "{w}" in an argument becomes the worker's number (0..P-1), for one key
 * per worker.  The workers start together (a pipe each waits on).  Prints
 * one line, times in milliseconds:
 *
 *	p50=.. p99=.. max=.. mean=.. rate=CALLS/S exit0=.. exit1=.. exit3=..
 *	other=.. cpu_ms=CPU PER CALL
 *
 * cpu_ms is the user and system time of the commands (and of the workers
 * that start them) over the calls made.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct call {
	double ms;
	int status; /* exit status, or 256 + signal */
};

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
cmp(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

/* argv with "{w}" made w, in a copy (the strings leak: a worker exits). */
static char **
for_worker(char **argv, int argc, int w)
{
	char **v = calloc((size_t)argc + 1, sizeof(*v)), *p;
	int i;

	for (i = 0; i < argc; i++) {
		if ((p = strstr(argv[i], "{w}")) == NULL) {
			v[i] = argv[i];
			continue;
		}
		v[i] = malloc(strlen(argv[i]) + 16);
		sprintf(v[i], "%.*s%d%s", (int)(p - argv[i]), argv[i], w, p + 3);
	}
	return v;
}

static void
worker(char **argv, int n, struct call *out, int gate)
{
	char c;
	pid_t pid;
	int i, st, fd;
	double t0;

	if (read(gate, &c, 1) < 0) /* EOF: go */
		_exit(2);
	for (i = 0; i < n; i++) {
		t0 = now();
		if ((pid = fork()) == 0) {
			fd = open("/dev/null", O_WRONLY);
			dup2(fd, 1);
			dup2(fd, 2);
			execvp(argv[0], argv);
			_exit(127);
		}
		while (waitpid(pid, &st, 0) == -1)
			;
		out[i].ms = (now() - t0) * 1e3;
		out[i].status =
		    WIFEXITED(st) ? WEXITSTATUS(st) : 256 + WTERMSIG(st);
	}
	_exit(0);
}

int
main(int argc, char **argv)
{
	int p = 8, n = 100, i, w, gate[2], cnt[4] = { 0, 0, 0, 0 }, total;
	struct call *calls;
	struct rusage ru;
	double t0, wall, *ms, sum = 0, cpu;

	for (i = 1; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (strcmp(argv[i], "-p") == 0)
			p = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "-n") == 0)
			n = atoi(argv[i + 1]);
		else
			break;
	}
	if (i >= argc || p < 1 || n < 1) {
		fprintf(stderr, "usage: contend -p P -n N COMMAND...\n");
		return 2;
	}
	total = p * n;
	calls = mmap(NULL, (size_t)total * sizeof(*calls),
	    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (calls == MAP_FAILED || pipe(gate) == -1) {
		perror("contend");
		return 2;
	}
	for (w = 0; w < p; w++) {
		pid_t pid = fork();

		if (pid == -1) {
			perror("contend: fork");
			return 2;
		}
		if (pid == 0) {
			close(gate[1]);
			worker(for_worker(argv + i, argc - i, w), n,
			    calls + (size_t)w * (size_t)n, gate[0]);
		}
	}
	close(gate[0]);
	t0 = now();
	close(gate[1]); /* go */
	while (wait(NULL) > 0)
		;
	wall = now() - t0;
	getrusage(RUSAGE_CHILDREN, &ru);
	cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	ms = calloc((size_t)total, sizeof(*ms));
	for (i = 0; i < total; i++) {
		ms[i] = calls[i].ms;
		sum += ms[i];
		cnt[calls[i].status == 0 ? 0
			: calls[i].status == 1 ? 1
			: calls[i].status == 3 ? 2
					       : 3]++;
	}
	qsort(ms, (size_t)total, sizeof(*ms), cmp);
	printf("p50=%.2f p99=%.2f max=%.2f mean=%.2f rate=%.0f exit0=%d "
	       "exit1=%d exit3=%d other=%d cpu_ms=%.3f\n",
	    ms[(total - 1) / 2], ms[(int)((total - 1) * 0.99 + 0.5)],
	    ms[total - 1], sum / total, total / wall, cnt[0], cnt[1], cnt[2],
	    cnt[3], cpu * 1e3 / total);
	free(ms);
	return 0;
}
