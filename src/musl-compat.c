/*
 * musl-compat.c: what Debian's static libsqlite3.a and libhiredis.a call
 * that musl does not define, for the throttle linked with musl (make
 * LIBC=musl; see the Makefile).  Those archives were compiled against
 * glibc's headers, which send fcntl() to fcntl64() and, with
 * _FORTIFY_SOURCE, memcpy(), memset() and the printf family to their
 * checking variants.  Every other function they call musl has, with the
 * same calling convention and, on Linux, the kernel's own structures
 * (struct stat, struct flock, the O_ and F_ numbers).  One difference is
 * left, as nothing linked meets it: musl's tolower()/toupper() tables,
 * which hiredis's sdstolower()/sdstoupper() would read, map bytes past
 * 127 to 0 where glibc's keep them; throttle calls neither.
 *
 * The checking variants check as glibc's do: a copy longer than the
 * object the compiler saw is an overflow, and the process aborts rather
 * than write past it.
 *
 * Built only for musl: under glibc's headers fcntl() is fcntl64() itself.
 */
#if defined(THROTTLE_MUSL)

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fcntl64(int fd, int cmd, ...);
void *__memcpy_chk(void *dst, const void *src, size_t n, size_t dstlen);
void *__memset_chk(void *dst, int c, size_t n, size_t dstlen);
int __vsnprintf_chk(char *s, size_t n, int flag, size_t slen, const char *fmt,
    va_list ap);
int
__snprintf_chk(char *s, size_t n, int flag, size_t slen, const char *fmt, ...);
int __sprintf_chk(char *s, int flag, size_t slen, const char *fmt, ...);

/* glibc's message for the same fault, then abort(), as glibc does. */
static _Noreturn void
overflow(void)
{
	static const char msg[] = "*** buffer overflow detected ***: "
				  "terminated\n";

	(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
	abort();
}

/* The argument, when a command takes one, is an int or a pointer: read
 * as an unsigned long it carries either, as musl's own fcntl() reads it. */
int
fcntl64(int fd, int cmd, ...)
{
	unsigned long arg;
	va_list ap;

	va_start(ap, cmd);
	arg = va_arg(ap, unsigned long);
	va_end(ap);
	return fcntl(fd, cmd, arg);
}

void *
__memcpy_chk(void *dst, const void *src, size_t n, size_t dstlen)
{
	if (n > dstlen)
		overflow();
	return memcpy(dst, src, n);
}

void *
__memset_chk(void *dst, int c, size_t n, size_t dstlen)
{
	if (n > dstlen)
		overflow();
	return memset(dst, c, n);
}

int
__vsnprintf_chk(char *s, size_t n, int flag, size_t slen, const char *fmt,
    va_list ap)
{
	(void)flag;
	if (n > slen)
		overflow();
	/* musl's vsnprintf() refuses a size past INT_MAX (EOVERFLOW); no
	 * output is that long, so the bound changes nothing else */
	return vsnprintf(s, n > INT_MAX ? INT_MAX : n, fmt, ap);
}

int
__snprintf_chk(char *s, size_t n, int flag, size_t slen, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = __vsnprintf_chk(s, n, flag, slen, fmt, ap);
	va_end(ap);
	return r;
}

/* slen is the size of the object s points into, or SIZE_MAX where the
 * compiler could not see it; a result that does not fit is an overflow. */
int
__sprintf_chk(char *s, int flag, size_t slen, const char *fmt, ...)
{
	va_list ap;
	int r;

	(void)flag;
	va_start(ap, fmt);
	if (slen == SIZE_MAX)
		r = vsprintf(s, fmt, ap);
	else
		r = vsnprintf(s, slen > INT_MAX ? INT_MAX : slen, fmt, ap);
	va_end(ap);
	if (r >= 0 && slen != SIZE_MAX && (size_t)r >= slen)
		overflow();
	return r;
}

#else
/* ISO C wants a translation unit to declare something. */
typedef int musl_compat_unused;
#endif
