# tests/lib.bash: shared by every suite.  Each test runs in its own
# temporary folder with its own state file; the binary is $THROTTLE.

bats_require_minimum_version 1.5.0

THROTTLE=${THROTTLE:-$BATS_TEST_DIRNAME/../throttle}

setup() {
	TRACKED=()
	TMP=$(mktemp -d "${BATS_TMPDIR:-/tmp}/throttle-test.XXXXXX")
	export THROTTLE_DB="$TMP/state.db"
	# THROTTLE_TEST_REDIS=redis://host:port runs the suite on that server,
	# each test under a prefix of its own
	if [ -n "${THROTTLE_TEST_REDIS:-}" ]; then
		THROTTLE_DB="$THROTTLE_TEST_REDIS?prefix=test:${TMP##*.}:"
	fi
	unset THROTTLE_NOW THROTTLE_FORMAT XDG_STATE_HOME
	cd "$TMP" || return 1
}

# only_throttled FILE...: the files hold no line but "throttled" messages
# (a function, so that a failure fails the test wherever it stands: a bare
# "! cmd" that is not a test's last line never does).
only_throttled() {
	if grep -hv 'throttled, retry in' "$@"; then
		return 1
	fi
}

# sqlite_ok [FILE]: the state file passes SQLite's integrity check; on the
# Redis pass there is no file, and nothing to check.
sqlite_ok() {
	[ -n "${THROTTLE_TEST_REDIS:-}" ] && return 0
	[ "$(sqlite3 "${1:-$TMP/state.db}" 'PRAGMA integrity_check')" = ok ]
}

# needs_unshare: a test that mounts in a namespace of its own skips where
# that is not allowed (not root, or a container without CAP_SYS_ADMIN).
needs_unshare() {
	[ "$(id -u)" -eq 0 ] || skip "needs root to mount in a namespace"
	command -v unshare >/dev/null || skip "needs unshare (util-linux)"
	unshare -m sh -c 'mount -t tmpfs none /mnt' 2>/dev/null ||
	    skip "cannot mount in a new namespace here (unshare -m)"
}

# For a test about the SQLite file itself: skip it on the Redis pass.
needs_sqlite() {
	if [ -n "${THROTTLE_TEST_REDIS:-}" ]; then
		skip "about the SQLite state file (this pass runs on Redis)"
	fi
}


# track PID...: processes this test started in the background, killed in
# teardown whatever happened (a test never finds processes by name).
track() {
	TRACKED+=("$@")
}

teardown() {
	local pid docfail=
	[ -s "$TMP/.doc-missing" ] && docfail=$(cat "$TMP/.doc-missing")
	for pid in "${TRACKED[@]}"; do
		kill -9 "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	TRACKED=()
	cd /
	chmod -R u+w "$TMP" 2>/dev/null
	rm -rf "$TMP"
	[ -z "$docfail" ] || { echo "$docfail"; return 1; }
}

# throttle with the clock pinned: at SECONDS ARGS...
at() {
	local t=$1
	shift
	THROTTLE_NOW=$t "$THROTTLE" "$@"
}

# The value of a field in a one-line JSON object on stdin.
jget() {
	sed -n "s/.*\"$1\":\\(\"[^\"]*\"\\|[^,}]*\\).*/\\1/p"
}

# The value of one top-level field of a JSON result: field NAME JSON
# (a compound limit's "limits" array, which comes last, is left out).
field() {
	printf '%s\n' "$2" | sed 's/,"limits":\[.*\]}$/}/' | jget "$1"
}

# unpriv DIR: make DIR a folder an unprivileged user owns, and set UNPRIV to
# the words that run a command as that user: nothing when the tests
# already run unprivileged, setpriv(1) to user nobody when they run as root.
# UTHROTTLE is the binary as that user can run it: a copy in $TMP, since
# the checkout may sit in a folder nobody cannot enter (root's /root, a
# mktemp -d folder).
unpriv() {
	mkdir -p "$1"
	UTHROTTLE=$THROTTLE
	if [ "$(id -u)" -ne 0 ]; then
		UNPRIV=()
		return 0
	fi
	command -v setpriv >/dev/null || skip "needs setpriv (util-linux) to drop root"
	chmod 755 "$TMP"
	chown 65534:65534 "$1"
	mkdir -p "$TMP/bin"
	cp "$THROTTLE" "$TMP/bin/throttle"
	chmod 755 "$TMP/bin" "$TMP/bin/throttle"
	UTHROTTLE=$TMP/bin/throttle
	UNPRIV=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
}

# The SQLite file keeps every record in one table, rec(key, kind, id, data,
# expires); kind 1 is a limit's state (id "0".."7", which limit), 2 a
# lockout, 3 a lease (id the lease id), 4 a shedder, 5 a policy (key its
# name).  A limit's data is "ALGO N PERIOD BURST GRAN S1 S2 S3 REST
# WRITTEN", then for a sliding window a newline and its sub-windows.
#
# limit_rec KEY [FILE]: the text fields of KEY's first limit
limit_rec() {
	sqlite3 "${2:-state.db}" "SELECT CAST(CASE WHEN instr(data, X'0A') > 0
	    THEN substr(data, 1, instr(data, X'0A') - 1) ELSE data END AS TEXT)
	    FROM rec WHERE key = CAST('$1' AS BLOB) AND kind = 1
	    AND id = CAST('0' AS BLOB)"
}

# limit_edit KEY FIELD VALUE: set one field of KEY's first limit (1 the
# algorithm, 2 N, 3 the period, 4 burst, 5 granularity, 6-8 the state,
# 9 rest, 10 written), keeping its sub-windows
limit_edit() {
	local new
	new=$(limit_rec "$1" | awk -v n="$2" -v v="$3" '{ $n = v; print }')
	[ -n "$new" ] || return 1
	sqlite3 state.db "UPDATE rec SET data = CAST('$new' AS BLOB) ||
	    CASE WHEN instr(data, X'0A') > 0 THEN substr(data, instr(data, X'0A'))
	    ELSE X'' END WHERE key = CAST('$1' AS BLOB) AND kind = 1
	    AND id = CAST('0' AS BLOB)"
}

# slots_set KEY HEX: replace the sub-windows of KEY's first limit
slots_set() {
	local head
	head=$(limit_rec "$1")
	sqlite3 state.db "UPDATE rec SET data = CAST('$head' AS BLOB) || X'0A'
	    || X'$2' WHERE key = CAST('$1' AS BLOB) AND kind = 1
	    AND id = CAST('0' AS BLOB)"
}

# records [KIND]: every record (of one kind), one per line, as text
records() {
	sqlite3 state.db "SELECT CAST(key AS TEXT), kind, CAST(id AS TEXT),
	    hex(data), expires FROM rec ${1:+WHERE kind = $1} ORDER BY 1, 2, 3"
}

# lease_edit LINE EXPR [KEY]: set one line of every lease (of KEY) to the
# awk expression EXPR, in which $0 is the line as it stands (1 priority,
# 2 acquired, 3 ttl, 4 expires, 5 pid, 6 pid start, 7 boot id, 8 host,
# 9 pgid, 10 pgid start)
lease_edit() {
	local where="kind = 3${3:+ AND key = CAST('$3' AS BLOB)}" id data new
	for id in $(sqlite3 state.db "SELECT CAST(id AS TEXT) FROM rec WHERE $where"); do
		data=$(sqlite3 state.db "SELECT CAST(data AS TEXT) FROM rec
		    WHERE $where AND id = CAST('$id' AS BLOB)")
		new=$(printf '%s\n' "$data" |
		    awk -v n="$1" "NR == n { \$0 = $2 } { print }")
		sqlite3 state.db "UPDATE rec SET data = CAST('$new' AS BLOB)
		    WHERE $where AND id = CAST('$id' AS BLOB)" || return 1
	done
}

# doc HASH: the text of the README's or a man page's example with that
# hash, as a reader sees it (tests/doc-examples), for a test to run as
# pasted; tests/lint-docs checks every example is named by a test.  An
# example that changed is not found: update the test that runs it.
doc() {
	if ! sh "$BATS_TEST_DIRNAME/doc-examples" -p "$1"; then
		# fail the test even where $(doc ...) is nested or piped
		echo "doc $1: no such example any more" >>"$TMP/.doc-missing"
		return 1
	fi
}

# wait_until CMD [ARG...]: until CMD succeeds (a background process has
# got where the test needs it), at most 10 seconds; a fixed sleep is
# either too long or, on a busy machine, too short
wait_until() {
	local _
	for _ in $(seq 200); do
		"$@" && return 0
		sleep 0.05
	done
	return 1
}

# wait_lease KEY: until KEY has a live lease (a job started in the
# background has taken its slot), at most 10 seconds
has_lease() {
	"$THROTTLE" inspect "$1" --format json 2>/dev/null | grep -q '"lease":'
}
wait_lease() {
	wait_until has_lease "$1" || { echo "no lease on $1 after 10s"; return 1; }
}

# is_free KEY: KEY holds nothing now (inspect exits 1).  A run wrapper
# that has exited keeps its slot while its job's process group still has
# a process, and a killed one may take a moment to go: wait_until is_free.
is_free() {
	local rc=0
	"$THROTTLE" inspect "$1" >/dev/null 2>&1 || rc=$?
	[ "$rc" -eq 1 ]
}

# Servers for a whole file (96-cluster, 97-sentinel): fleet_start KIND in
# setup_file starts a tests/redis-fleet of KIND (cluster, sentinel) once,
# fleet_stop in teardown_file stops exactly what it started, and
# fleet_setup in setup skips or fails as the file's tests need, and gives
# each test TMP, URL, PFX (a prefix of its own) and THROTTLE_DB.  On a
# server pass they skip: the first pass ran them.
fleet_start() {
	[ -z "${THROTTLE_TEST_REDIS:-}" ] || return 0
	command -v redis-server >/dev/null && command -v redis-cli >/dev/null || return 0
	"$THROTTLE" --version | grep -q redis || return 0
	FLEET=$(mktemp -d "${BATS_TMPDIR:-/tmp}/throttle-$1.XXXXXX")
	export FLEET
	"$BATS_TEST_DIRNAME/redis-fleet" "$1" "$FLEET" >/dev/null 2>"$FLEET/error" || true
}

fleet_stop() {
	[ -n "${FLEET:-}" ] || return 0
	"$BATS_TEST_DIRNAME/redis-fleet" stop "$FLEET"
	rm -rf "$FLEET"
}

fleet_setup() {
	TRACKED=()
	[ -z "${THROTTLE_TEST_REDIS:-}" ] || skip "runs in the first pass (it starts servers of its own)"
	command -v redis-server >/dev/null || skip "needs redis-server (apt-get install redis-server)"
	command -v redis-cli >/dev/null || skip "needs redis-cli (apt-get install redis-tools)"
	"$THROTTLE" --version | grep -q redis || skip "this throttle was built without Redis (make REDIS=1)"
	[ -s "$FLEET/url" ] || { cat "$FLEET/error"; return 1; }
	TMP=$(mktemp -d "${BATS_TMPDIR:-/tmp}/throttle-test.XXXXXX")
	cd "$TMP" || return 1
	unset THROTTLE_NOW THROTTLE_FORMAT XDG_STATE_HOME
	URL=$(cat "$FLEET/url")
	PFX="t$BATS_TEST_NUMBER.${TMP##*.}:"
	export THROTTLE_DB="$URL?prefix=$PFX"
}

# fleet_port NAME: the port of the fleet's server NAME (m1, s2, master...).
fleet_port() {
	sed -n "s/^$1 //p" "$FLEET/ports"
}

# syslog: receive what the PAM guard or module sends to syslog, one line
# each, in $TMP/syslog (a datagram socket, as /dev/log is)
syslog() {
	perl -MSocket -MIO::Socket::UNIX -e '
	    my $s = IO::Socket::UNIX->new(Type => SOCK_DGRAM, Local => $ARGV[0])
	        or die "socket: $!";
	    open(my $f, ">>", $ARGV[1]) or die;
	    $f->autoflush(1);
	    while (defined $s->recv(my $m, 8192)) { print $f "$m\n" }
	' "$TMP/log.sock" "$TMP/syslog" &
	track $!
	wait_until test -S "$TMP/log.sock"
}

# syslog_wait PATTERN [N]: until at least N (1) lines of $TMP/syslog match
# the grep PATTERN, at most 10 seconds: a datagram sent is not yet a line
# written, on a busy machine
syslog_has() {
	local n
	n=$(grep -c -- "$1" "$TMP/syslog" 2>/dev/null)
	[ "${n:-0}" -ge "${2:-1}" ]
}
syslog_wait() {
	wait_until syslog_has "$1" "${2:-1}" && return 0
	echo "syslog: fewer than ${2:-1} lines match $1:"
	cat "$TMP/syslog"
	return 1
}

# hold_lock FILE: a sqlite3 shell takes FILE's write lock and keeps it
# until let_go.
hold_lock() {
	mkfifo "$TMP/hold"
	(sqlite3 "$1" <"$TMP/hold" >/dev/null 2>&1 &)
	exec 7>"$TMP/hold"
	# (it waits for the probe below, which takes the lock for a moment)
	printf '.timeout 5000\nBEGIN IMMEDIATE; SELECT 1;\n' >&7
	# until the lock is held (a loaded machine may start sqlite3 late,
	# and a reader racing its open is not what the tests are about)
	local _
	for _ in $(seq 100); do
		sqlite3 "$1" 'BEGIN IMMEDIATE; ROLLBACK;' >/dev/null 2>&1 || return 0
		sleep 0.05
	done
	echo "the lock on $1 was never taken"
	return 1
}

let_go() {
	echo 'COMMIT;' >&7
	exec 7>&-
	sleep 0.2
}

# locked_user_spares_host: with a login guard at 5/1h, lockout 1h, on
# $TMP/state.db (the file's own `login PASSWORD USER RHOST`): a user locked
# out is refused before its host is charged, by 60 attempts at once and,
# told apart without a race, by one from a host whose allowance is used up
locked_user_spares_host() {
	local n pids
	for n in $(seq 6); do "$THROTTLE" --db "$TMP/state.db" -q consume "login:$PAM_USER_NAME" --limit 5/1h --lockout 1h || true; done
	pids=()
	for n in $(seq 60); do
		(login right-pass "$PAM_USER_NAME" 203.0.113.5 >/dev/null 2>&1 || true) &
		pids+=($!)
	done
	track "${pids[@]}"
	wait "${pids[@]}"
	# no password was tried: the host was never charged, nor locked
	run "$THROTTLE" check rhost:203.0.113.5 --limit 5/1h --cost 0 --db "$TMP/state.db" --format json
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	[ "$(field remaining "$output")" = 5 ] || { echo "$output"; return 1; }
	# the same, told apart without a race: a host with its allowance
	# used up (not locked) and an attempt on the locked user is refused
	# for the user, not charged to (and so locking out) the host
	for n in $(seq 5); do "$THROTTLE" --db "$TMP/state.db" -q consume rhost:203.0.113.7 --limit 5/1h --lockout 1h; done
	login right-pass "$PAM_USER_NAME" 203.0.113.7 >/dev/null 2>&1 || true
	run "$THROTTLE" inspect rhost:203.0.113.7 --locked --db "$TMP/state.db"
	[ "$status" -eq 1 ] || { echo "the host was locked out: $output"; return 1; }
}
