# throttle: a plain Makefile.  make; make check; make install.

PREFIX ?=	/usr/local
BINDIR ?=	$(PREFIX)/bin
MANDIR ?=	$(PREFIX)/share/man
BASHCOMPDIR ?=	$(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?=	$(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?=	$(PREFIX)/share/fish/vendor_completions.d
LIBEXECDIR ?=	$(PREFIX)/libexec

CC ?=		cc
PKG_CONFIG ?=	pkg-config
# Warnings are errors in a checkout (development and CI), not in a release
# tarball that a packager builds with a newer compiler: make WERROR= to
# turn them off, WERROR=-Werror to insist.
WERROR ?=	$(if $(wildcard $(CURDIR)/.git),-Werror)
WARNINGS =	-std=c11 -Wall -Wextra -Wpedantic -Wshadow -Wformat=2 \
		-Wmissing-prototypes -Wstrict-prototypes $(WERROR)
CFLAGS ?=	-O2 -g
CPPFLAGS_ALL =	-D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 \
		$(shell $(PKG_CONFIG) --cflags sqlite3 2>/dev/null) $(CPPFLAGS)
# SQLite is linked statically by default: resolving a shared libsqlite3's
# symbols costs more than the decision itself (see bench/).  make
# SQLITE=shared links the shared library, as a distribution may prefer.
SQLITE ?=	static
SQLITE_LIBDIR =	$(shell $(PKG_CONFIG) --variable=libdir sqlite3 2>/dev/null)
SQLITE_A =	$(firstword $(wildcard $(SQLITE_LIBDIR)/libsqlite3.a \
		    /usr/lib/$(shell $(CC) -print-multiarch 2>/dev/null)/libsqlite3.a \
		    /usr/lib/libsqlite3.a /usr/local/lib/libsqlite3.a))
ifeq ($(SQLITE)$(if $(SQLITE_A),,none),static)
# SQLite's own needs (libm; threads and dlopen are in libc), whatever
# pkg-config says or whether it is installed at all: Debian's sqlite3.pc
# also lists -lz, which the library never calls, and a machine with only
# gcc, make and libsqlite3-dev has no zlib to link.
SQLITE_LIBS =	$(SQLITE_A) $(filter-out -lsqlite3 -lz,$(shell $(PKG_CONFIG) \
		    --static --libs-only-l sqlite3 2>/dev/null)) -lm
else
SQLITE_LIBS =	$(shell $(PKG_CONFIG) --libs sqlite3 2>/dev/null || echo -lsqlite3)
endif

# SQLite's full-text search (FTS3/4/5), R*Tree, dbstat and stmt virtual
# tables, which a state file never has (src/sqlite-trim.c): left out of
# throttle where libsqlite3.a holds them in objects of their own, as
# Debian's does; registering them on every open cost a consume 2% of its
# time.  make SQLITE_TRIM=0 links them.
ifeq ($(origin SQLITE_TRIM),undefined)
SQLITE_TRIM :=	$(if $(filter static,$(SQLITE)),$(if $(SQLITE_A),$(shell \
		    $(AR) t $(SQLITE_A) 2>/dev/null | \
		    grep -cxE 'fts3\.o|fts5\.o|rtree\.o|dbstat\.o|stmt\.o' | \
		    sed 's/^5$$/1/;t;s/.*/0/'),0),0)
endif
TRIM_OBJS =	$(if $(filter 1,$(SQLITE_TRIM)),src/sqlite-trim.o)

# The Redis store needs hiredis: on when its headers are found (make
# REDIS=0 leaves it out, REDIS=1 insists).  Linked like SQLite.
HIREDIS_FOUND =	$(shell $(PKG_CONFIG) --exists hiredis 2>/dev/null && echo 1 || \
		    { test -f /usr/include/hiredis/hiredis.h && echo 1; } || echo 0)
REDIS ?=	$(HIREDIS_FOUND)
ifeq ($(REDIS),1)
HIREDIS_LIBDIR = $(shell $(PKG_CONFIG) --variable=libdir hiredis 2>/dev/null)
HIREDIS_A =	$(firstword $(wildcard $(HIREDIS_LIBDIR)/libhiredis.a \
		    /usr/lib/$(shell $(CC) -print-multiarch 2>/dev/null)/libhiredis.a))
REDIS_OBJS =	src/store-redis.o src/resolve.o
REDIS_CPPFLAGS = -DTHROTTLE_REDIS
ifeq ($(SQLITE)$(if $(HIREDIS_A),,none),static)
REDIS_LIBS =	$(HIREDIS_A)
else
REDIS_LIBS =	-lhiredis
endif
endif
CPPFLAGS_ALL +=	$(REDIS_CPPFLAGS)
LIBS_ALL =	$(SQLITE_LIBS) $(REDIS_LIBS) $(LIBS)

# libc is linked statically too, when SQLite is and the toolchain has a
# libc.a (Debian's libc6-dev does): the dynamic loader was a fifth of a
# decision's instructions (bench/).  Static glibc still finds a Redis
# host (getaddrinfo) through /etc/nsswitch.conf, loading the NSS modules
# of the shared glibc; the linker says so in warnings, which are expected
# and are kept in build/link.log rather than shown.  A home folder it
# reads from /etc/passwd itself (NSS_CPPFLAGS, src/store.c).  make
# STATIC=0 links libc dynamically.  valgrind cannot follow a static
# binary's mallocs: make check runs its valgrind suite on
# build/throttle-dynamic, the same objects linked dynamically.
LIBC_A =	$(shell $(CC) -print-file-name=libc.a 2>/dev/null)
STATIC ?=	$(if $(filter static,$(SQLITE)),$(if $(SQLITE_A),$(if \
		    $(filter /%,$(LIBC_A)),1,0),0),0)
ifeq ($(STATIC),1)
STATIC_LDFLAGS = -static
endif

# The binary is linked with musl instead, where Debian's musl-tools is
# installed (musl-gcc), the build is static, the compiler gcc and the
# machine x86_64: static glibc sizes the CPU's caches at every start with
# dozens of cpuid instructions, each a trap to the hypervisor on a virtual
# machine; an empty program took 1.7x as long as with musl, and a consume
# takes 0.78x the time with musl (bench/).  Debian's libsqlite3.a and
# libhiredis.a are compiled against glibc's headers, and link with musl
# given the few glibc functions src/musl-compat.c adds; musl's memcpy()
# and its kin (src/musl-mem.c) and malloc() (src/musl-malloc.c) are
# replaced, as they were slow here.  musl finds users in /etc/passwd (and through nscd), and
# Redis hosts in /etc/hosts and DNS, without NSS modules.  make LIBC=glibc
# keeps glibc.  Only the binary, bench/floor and the unit test of those
# three files are musl's: the PAM module, the other unit tests, the
# sanitized and the valgrind builds stay on glibc.
# (A CC of more than one word, such as "ccache gcc", cannot be musl-gcc's
# REALGCC; and once the link with musl has failed, build/musl-failed says
# so and later builds link glibc until make clean.)
MUSL_GCC ?=	musl-gcc
ifeq ($(origin LIBC),undefined)
LIBC :=		$(if $(and $(filter 1,$(STATIC)),$(filter 1,$(words $(CC))), \
		    $(if $(wildcard build/musl-failed),,1),$(shell command -v \
		    $(MUSL_GCC) 2>/dev/null),$(filter x86_64-%,$(shell \
		    $(CC) -dumpmachine 2>/dev/null)),$(shell $(CC) -v 2>&1 | \
		    grep '^gcc version')),musl,glibc)
endif
ifeq ($(LIBC),musl)
ifneq ($(STATIC),1)
$(error LIBC=musl links statically: it needs STATIC=1 and SQLITE=static)
endif
ifneq ($(words $(CC)),1)
$(error LIBC=musl runs $(MUSL_GCC) with CC as its compiler, which must be one word, not "$(CC)")
endif
ifeq ($(shell $(CC) -v 2>&1 | grep '^gcc version'),)
$(error LIBC=musl needs gcc (musl-gcc's specs file is gcc's), not CC=$(CC))
endif
endif
ifeq ($(LIBC),musl)
MUSL_DIR =	build/musl
MUSL_HEADERS =	$(MUSL_DIR)/include/sqlite3.h \
		$(if $(REDIS_OBJS),$(MUSL_DIR)/include/hiredis/hiredis.h)
BIN_CC =	REALGCC=$(CC) $(MUSL_GCC)
BIN_CPPFLAGS =	-I$(MUSL_DIR)/include -DTHROTTLE_MUSL
# what the musl build adds to musl: the few glibc functions Debian's
# archives call, memcpy() and its kin, and malloc() on a pool
COMPAT_OBJS =	$(MUSL_DIR)/musl-compat.o $(MUSL_DIR)/musl-mem.o \
		$(MUSL_DIR)/musl-malloc.o $(MUSL_DIR)/pool.o
BIN_OBJS =	$(patsubst src/%.o,$(MUSL_DIR)/%.o,$(OBJS) $(TRIM_OBJS)) \
		$(filter-out $(MUSL_DIR)/pool.o,$(COMPAT_OBJS))
else
BIN_CC =	$(CC)
BIN_OBJS =	$(OBJS) $(TRIM_OBJS)
endif

# The one list of sources.  The pure layer (no I/O, no clock, no SQLite:
# the unit tests and the pure fuzzers link only these) is a part of it.
# An algorithm is one file, src/algo-NAME.c, and one row of algo_table[]
# in src/algo.c; the wildcard finds the file.
ALGOS =		$(patsubst %.c,%.o,$(sort $(wildcard src/algo-*.c)))
PURE =		src/algo.o $(ALGOS) src/lease.o src/limit.o src/parse.o \
		src/record.o src/shed.o src/slots.o src/pool.o src/hosts.o
OBJS =		src/main.o src/cmd.o src/args.o src/help.o src/ctx.o \
		src/policy.o src/txn.o src/answer.o src/output.o src/escape.o \
		src/log.o src/keystate.o src/rate.o src/concurrency.o \
		src/cmd-consume.o src/cmd-release.o src/cmd-reset.o \
		src/cmd-inspect.o src/cmd-acquire.o src/cmd-renew.o \
		src/cmd-shed.o src/cmd-run.o src/cmd-gc.o src/cmd-policy.o \
		src/cmd-verify.o src/cmd-batch.o src/clock.o src/host.o \
		src/slice.o src/store.o src/store-sqlite.o src/faultvfs.o \
		src/xmalloc.o $(REDIS_OBJS) $(PURE)
UNIT =		tests/unit/test-parse tests/unit/test-gcra tests/unit/test-windows \
		tests/unit/test-property tests/unit/test-layers \
		tests/unit/test-pool tests/unit/test-hosts

# The PAM module, pam_throttle.so: built when PAM's headers are found
# (libpam0g-dev; make PAM=0 leaves it out, PAM=1 insists), from the same
# sources compiled position-independent in build/pic, with the shared
# SQLite (a static libsqlite3.a is not built for a shared object).  It is
# never unloaded (-z nodelete): it hooks system calls of the host's SQLite
# (store-sqlite.c), which must not point into a module pam_end() unloaded.
PAM_FOUND =	$(shell test -f /usr/include/security/pam_modules.h && echo 1 || echo 0)
PAM ?=		$(PAM_FOUND)
PAMDIR ?=	$(PREFIX)/lib/security
PIC_OBJS =	$(patsubst src/%.o,build/pic/%.o,$(filter-out src/main.o,$(OBJS)))
ifeq ($(PAM),1)
PAM_SO =	pam_throttle.so
endif

all: throttle $(PAM_SO)

build/pic/%.o: src/%.c src/throttle.h
	@mkdir -p build/pic
	$(CC) $(WARNINGS) $(CPPFLAGS_ALL) $(CFLAGS) -fPIC -fvisibility=hidden \
	    -c -o $@ $<

pam_throttle.so: $(PIC_OBJS) build/pic/pam_throttle.o src/pam_throttle.map
	$(CC) $(LDFLAGS) -shared -o $@ build/pic/pam_throttle.o $(PIC_OBJS) \
	    -Wl,--version-script=src/pam_throttle.map -Wl,-z,defs \
	    -Wl,-z,nodelete \
	    $(shell $(PKG_CONFIG) --libs sqlite3 2>/dev/null || echo -lsqlite3) \
	    $(if $(REDIS_OBJS),-lhiredis) -lpam -lm $(LIBS)

# A libsqlite3.a or libhiredis.a of another system may call a glibc
# function that musl lacks and src/musl-compat.c does not give: then the
# link with musl fails, and throttle is linked with glibc instead.
ifeq ($(LIBC),musl)
LINK_FAILED =	{ cat build/link.log >&2; echo "throttle: the link with" \
		    "musl failed (above); linking with glibc instead, now and" \
		    "until make clean (make LIBC=musl tries musl again)" >&2; \
		    touch build/musl-failed; \
		    $(MAKE) --no-print-directory LIBC=glibc throttle; }
else
LINK_FAILED =	{ cat build/link.log >&2; exit 1; }
endif

# build/libc-musl or build/libc-glibc, the libc the binary was last linked
# with: a build for the other one links again, though its objects are old
build/libc-$(LIBC):
	@mkdir -p build
	@rm -f build/libc-*
	@touch $@

throttle: $(BIN_OBJS) build/libc-$(LIBC)
	@mkdir -p build
	$(BIN_CC) $(LDFLAGS) $(STATIC_LDFLAGS) -o $@ $(BIN_OBJS) $(LIBS_ALL) \
	    2>build/link.log || $(LINK_FAILED)
	@# the expected notes on static glibc's NSS calls (above) go only to
	@# build/link.log; anything else the linker says is shown
	@grep -v -e 'statically linked applications requires at runtime' \
	    -e ': in function .*:$$' build/link.log >&2 || true

# the same objects with libc linked dynamically, for valgrind
build/throttle-dynamic: $(OBJS) $(TRIM_OBJS)
	@mkdir -p build
	$(CC) $(LDFLAGS) -o $@ $(OBJS) $(TRIM_OBJS) $(LIBS_ALL)

# musl's objects, in build/musl: musl-gcc searches only musl's headers,
# so SQLite's and hiredis's are linked into build/musl/include from
# where the compiler finds them
ifeq ($(LIBC),musl)
$(MUSL_DIR)/%.o: src/%.c src/throttle.h $(MUSL_HEADERS)
	@mkdir -p $(@D)
	$(BIN_CC) $(WARNINGS) $(CPPFLAGS_ALL) $(BIN_CPPFLAGS) $(CFLAGS) \
	    -c -o $@ $<

$(MUSL_DIR)/include/sqlite3.h:
	@mkdir -p $(@D)
	@h=$$(printf '#include <sqlite3.h>\n' | $(CC) $(CPPFLAGS_ALL) -M -x c - \
	    2>/dev/null | tr -s ' \\' '\n\n' | grep '/sqlite3\.h$$') || { \
	    echo "throttle needs SQLite's headers: apt-get install" \
	        "libsqlite3-dev" >&2; exit 1; }; ln -sf "$$h" $@

$(MUSL_DIR)/include/hiredis/hiredis.h:
	@mkdir -p $(MUSL_DIR)/include
	@h=$$(printf '#include <hiredis/hiredis.h>\n' | $(CC) $(CPPFLAGS_ALL) \
	    -M -x c - 2>/dev/null | tr -s ' \\' '\n\n' | \
	    grep '/hiredis/hiredis\.h$$') || { echo "the Redis store needs" \
	    "hiredis's headers: apt-get install libhiredis-dev, or make" \
	    "REDIS=0" >&2; exit 1; }; ln -sfn "$${h%/hiredis.h}" \
	    $(MUSL_DIR)/include/hiredis
endif

src/store-sqlite.o: src/store-sqlite.c src/throttle.h
	@$(PKG_CONFIG) --exists sqlite3 2>/dev/null || \
	    test -f /usr/include/sqlite3.h || { \
	    echo "throttle needs SQLite's headers: apt-get install" \
	        "libsqlite3-dev (Debian, Ubuntu), dnf install sqlite-devel" \
	        "(Fedora), or brew install sqlite" >&2; exit 1; }
	$(CC) $(WARNINGS) $(CPPFLAGS_ALL) $(CFLAGS) -c -o $@ $<

# Linked statically with glibc, throttle reads /etc/passwd itself rather
# than load NSS modules built for the shared glibc (src/store.c); the PAM
# module's objects (build/pic) keep getpwuid().
NSS_CPPFLAGS =	$(if $(filter 1,$(STATIC)),-DTHROTTLE_NO_NSS)

.c.o:
	$(CC) $(WARNINGS) $(CPPFLAGS_ALL) $(NSS_CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(OBJS): src/throttle.h

# One rule for every unit test of the pure layer.
tests/unit/test-%: tests/unit/test-%.c tests/unit/unit.h $(PURE)
	$(CC) $(WARNINGS) $(CPPFLAGS_ALL) $(CFLAGS) -Isrc -o $@ $< $(PURE)

# musl-compat.c's own test, built with musl as the binary is
ifeq ($(LIBC),musl)
UNIT +=		tests/unit/test-musl-compat
tests/unit/test-musl-compat: tests/unit/test-musl-compat.c tests/unit/unit.h \
    $(COMPAT_OBJS)
	$(BIN_CC) $(WARNINGS) $(CPPFLAGS_ALL) $(BIN_CPPFLAGS) $(CFLAGS) -static \
	    -o $@ $< $(COMPAT_OBJS)
endif

# The C unit tests alone.
unit: $(UNIT)
	@for u in $(UNIT); do ./$$u >/dev/null || { ./$$u | grep -v '^ok'; \
	    exit 1; }; done; echo "unit tests: all passed"

# Every test: C unit tests of the pure layer, then the bats suites through
# the binary.  The last line is "N passed, N failed, N skipped".
check: throttle build/throttle-dynamic $(PAM_SO) $(UNIT)
	@THROTTLE=$(CURDIR)/throttle \
	    THROTTLE_DYNAMIC=$(CURDIR)/build/throttle-dynamic sh tests/run $(UNIT)

LINT_SRCS =	$(filter-out $(if $(REDIS_OBJS),,src/store-redis.c src/resolve.c) \
		    $(if $(PAM_SO),,src/pam_throttle.c),$(wildcard src/*.c))
lint: throttle
	mandoc -Tlint -W warning man/throttle.1 man/pam_throttle.8
	sh tests/lint-names
	sh tests/lint-bats
	sh tests/lint-docs
	clang-format --dry-run -Werror src/*.c src/*.h tests/unit/*.c \
	    tests/unit/*.h fuzz/*.c
	cppcheck --quiet --enable=warning,portability --error-exitcode=1 \
	    $(REDIS_CPPFLAGS) -I src $(LINT_SRCS)
	clang-tidy --quiet --warnings-as-errors='*' $(LINT_SRCS) -- \
	    -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
	    -D_FILE_OFFSET_BITS=64 -Isrc \
	    $(REDIS_CPPFLAGS) $(shell $(PKG_CONFIG) --cflags sqlite3 2>/dev/null)
	@# the musl build's own files, as that build compiles them (with
	@# glibc's headers, in which fcntl() is fcntl64(), clang-tidy would
	@# see musl-compat.c's fcntl64() call itself)
	cppcheck --quiet --enable=warning,portability --error-exitcode=1 \
	    -DTHROTTLE_MUSL -I src src/musl-compat.c src/musl-mem.c \
	    src/musl-malloc.c
	clang-tidy --quiet --warnings-as-errors='*' src/musl-mem.c \
	    src/musl-malloc.c -- -std=c11 -D_POSIX_C_SOURCE=200809L \
	    -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 -DTHROTTLE_MUSL -Isrc

# The whole suite under ASan and UBSan, built in a copy of the tree
# (build/asan), so the normal build is left as it was.  Reports go to
# files, so one cannot hide behind an exit status a test expected; any
# report fails the run.  clang, because gcc's combined runtime writes UBSan
# reports to stderr whatever log_path says.
ASAN_CC ?=	clang
ASAN_DIR =	$(CURDIR)/build/asan
asan:
	rm -rf $(ASAN_DIR) && mkdir -p $(ASAN_DIR)/sanitizer-logs
	tar -cf - Makefile src tests man completions examples README.md | \
	    tar -xf - -C $(ASAN_DIR)
	$(MAKE) -C $(ASAN_DIR) clean >/dev/null
	@# PAM=0: a sanitized module cannot load into an unsanitized pamtester
	ASAN_OPTIONS=log_path=$(ASAN_DIR)/sanitizer-logs/asan \
	UBSAN_OPTIONS=log_path=$(ASAN_DIR)/sanitizer-logs/ubsan:print_stacktrace=1 \
	$(MAKE) -C $(ASAN_DIR) CC=$(ASAN_CC) WERROR="$(WERROR)" PAM=0 STATIC=0 \
	    CFLAGS="-O1 -g -fsanitize=address,undefined \
	    -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	    LDFLAGS="-fsanitize=address,undefined" check
	@# a report says ERROR or runtime error; processes that tests kill
	@# with SIGKILL can leave empty or half-written logs, which are not
	@if grep -l -E 'ERROR|runtime error' $(ASAN_DIR)/sanitizer-logs/* \
	    2>/dev/null; then cat $(ASAN_DIR)/sanitizer-logs/*; \
	    echo "sanitizer reports above"; exit 1; fi
	rm -rf $(ASAN_DIR)

# libFuzzer harnesses of the pure layer (clang), each run FUZZ_SECONDS on
# a copy of its seed corpus; a crash or sanitizer report fails the run.
FUZZ_CC ?=	clang
FUZZ_SECONDS ?=	10
FUZZ_SRCS =	$(PURE:.o=.c)
FUZZ_PURE =	fuzz/fuzz-parse fuzz/fuzz-state
FUZZERS =	$(FUZZ_PURE) fuzz/fuzz-cli
FUZZ_FLAGS =	-g -O1 -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=all -std=c11 -D_POSIX_C_SOURCE=200809L \
		-D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 -Isrc

$(FUZZ_PURE): $(FUZZ_SRCS) src/throttle.h
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $@.c $(FUZZ_SRCS)

# the command line: all of throttle but main(), though it runs no command
fuzz/fuzz-cli: fuzz/fuzz-cli.c $(OBJS:.o=.c) src/throttle.h
	$(FUZZ_CC) $(FUZZ_FLAGS) $(REDIS_CPPFLAGS) -o $@ fuzz/fuzz-cli.c \
	    $(filter-out src/main.c,$(OBJS:.o=.c)) $(LIBS_ALL)

fuzz: $(FUZZERS)
	for f in $(FUZZERS); do \
	    n=$${f#fuzz/fuzz-}; rm -rf fuzz/work/$$n; mkdir -p fuzz/work/$$n; \
	    cp fuzz/corpus/$$n/* fuzz/work/$$n/; \
	    ./$$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=0 \
	        fuzz/work/$$n >fuzz/work/$$n.log 2>&1 || \
	        { tail -40 fuzz/work/$$n.log; exit 1; }; \
	    tail -1 fuzz/work/$$n.log; \
	done

# The README's Quick start, both commands, on a fresh minimal Debian 12
# (needs root, debootstrap and the network; about two minutes).
# FRESH_TREE=worktree tests uncommitted changes; FRESH_CACHE=DIR reuses the
# root it makes.
fresh-check:
	bash tests/fresh-check

# A fixed set of one-line mutants the suite must kill (tests/mutants).
mutants: throttle
	bash tests/mutants

# The soak (minutes, so not in check): 8 x 2000 mixed calls on one file.
soak: throttle
	THROTTLE=$(CURDIR)/throttle bats tests/slow

# Every command against a disk that fails at every call in turn (a test
# VFS, src/faultvfs.c), built apart with ASan and UBSan.
faultcheck: throttle
	$(ASAN_CC) $(WARNINGS) $(CPPFLAGS_ALL) -O1 -g -DTHROTTLE_FAULT \
	    -fsanitize=address,undefined -fno-omit-frame-pointer \
	    -o throttle-fault $(OBJS:.o=.c) $(LIBS_ALL)
	bash tests/faultcheck ./throttle-fault ./throttle

install: throttle
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 \
	    $(DESTDIR)$(LIBEXECDIR) \
	    $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) \
	    $(DESTDIR)$(FISHCOMPDIR)
	install -m 755 throttle $(DESTDIR)$(BINDIR)/throttle
	@# the guard runs with no PATH (pam_exec): tell it where throttle is
	sed "s|^installed_throttle=\$$|installed_throttle='$(BINDIR)/throttle'|" \
	    examples/pam/throttle-login \
	    >$(DESTDIR)$(LIBEXECDIR)/throttle-login
	chmod 755 $(DESTDIR)$(LIBEXECDIR)/throttle-login
	install -m 644 man/throttle.1 $(DESTDIR)$(MANDIR)/man1/throttle.1
	if [ -f pam_throttle.so ]; then \
	    install -d $(DESTDIR)$(PAMDIR) $(DESTDIR)$(MANDIR)/man8 && \
	    install -m 644 pam_throttle.so $(DESTDIR)$(PAMDIR)/pam_throttle.so && \
	    install -m 644 man/pam_throttle.8 \
	        $(DESTDIR)$(MANDIR)/man8/pam_throttle.8; fi
	install -m 644 completions/throttle.bash \
	    $(DESTDIR)$(BASHCOMPDIR)/throttle
	install -m 644 completions/_throttle $(DESTDIR)$(ZSHCOMPDIR)/_throttle
	install -m 644 completions/throttle.fish \
	    $(DESTDIR)$(FISHCOMPDIR)/throttle.fish

uninstall:
	rm -f $(DESTDIR)$(PAMDIR)/pam_throttle.so \
	    $(DESTDIR)$(MANDIR)/man8/pam_throttle.8
	rm -f $(DESTDIR)$(BINDIR)/throttle \
	    $(DESTDIR)$(LIBEXECDIR)/throttle-login \
	    $(DESTDIR)$(MANDIR)/man1/throttle.1 \
	    $(DESTDIR)$(BASHCOMPDIR)/throttle \
	    $(DESTDIR)$(ZSHCOMPDIR)/_throttle \
	    $(DESTDIR)$(FISHCOMPDIR)/throttle.fish

# Benchmarks, on demand only (bench/run says what they measure):
# make bench, or make bench BENCH_ARGS=--write for bench/results.md.
BENCH_BINS =	bench/floor bench/pair bench/contend
bench/floor: bench/floor.c $(MUSL_HEADERS) $(COMPAT_OBJS)
	$(BIN_CC) $(WARNINGS) $(CPPFLAGS_ALL) $(BIN_CPPFLAGS) $(CFLAGS) \
	    $(STATIC_LDFLAGS) -o $@ bench/floor.c $(COMPAT_OBJS) $(LIBS_ALL)
bench/pair bench/contend: bench/pair.c bench/contend.c
	$(CC) $(WARNINGS) $(CPPFLAGS_ALL) $(CFLAGS) -o $@ $@.c
# where throttle is linked with musl: the same objects linked statically
# with glibc, for bench/run to measure what musl gains
build/throttle-glibc: $(OBJS) $(TRIM_OBJS)
	@mkdir -p build
	$(CC) $(LDFLAGS) -static -o $@ $(OBJS) $(TRIM_OBJS) $(LIBS_ALL) \
	    2>build/link-glibc.log || { cat build/link-glibc.log >&2; exit 1; }
bench: throttle build/throttle-dynamic $(BENCH_BINS) \
    $(if $(filter musl,$(LIBC)),build/throttle-glibc)
	bash bench/run $(BENCH_ARGS)

clean:
	rm -f throttle throttle-fault pam_throttle.so $(OBJS) $(UNIT) \
	    tests/unit/test-musl-compat src/sqlite-trim.o src/store-redis.o \
	    src/resolve.o \
	    $(FUZZERS) $(BENCH_BINS)
	rm -rf fuzz/work build

.PHONY: all unit check lint asan fuzz faultcheck soak bench install uninstall clean \
	fresh-check mutants
