#!/usr/bin/env bats
# pam_throttle.so through a real PAM stack: pamtester against a service
# file under /etc/pam.d, pam_unix and a throwaway local user, on a file
# and on a Redis server shared by two "hosts".  Needs root and the module
# (built when libpam0g-dev is installed).

load lib

MODULE=$BATS_TEST_DIRNAME/../pam_throttle.so

setup_file() {
	[ "$(id -u)" -eq 0 ] || return 0
	command -v pamtester >/dev/null || return 0
	export PAM_USER_NAME="thrmod$$"
	export PAM_SERVICE_NAME="throttle-module-$$"
}

teardown_file() {
	[ -n "${PAM_SERVICE_NAME:-}" ] || return 0
	rm -f "/etc/pam.d/$PAM_SERVICE_NAME"
	userdel "$PAM_USER_NAME" 2>/dev/null || true
}

needs_module() {
	[ "$(id -u)" -eq 0 ] || skip "needs root to add a user and a PAM service"
	command -v pamtester >/dev/null || skip "needs pamtester (apt-get install pamtester)"
	command -v useradd >/dev/null || skip "needs useradd"
	[ -f "$MODULE" ] || skip "pam_throttle.so is not built (apt-get install libpam0g-dev, then make)"
}

# service OPTIONS...: pam_faillock's stack with pam_throttle.so, its
# syslog lines going to $TMP/log.sock
service() {
	local m="$MODULE syslog=$TMP/log.sock conf=$TMP/throttle.conf $*"
	chmod 755 "$TMP"
	touch "$TMP/throttle.conf"
	cat >"/etc/pam.d/$PAM_SERVICE_NAME" <<-EOF
	auth requisite $m preauth
	auth [success=1 default=bad] pam_unix.so nodelay
	auth [default=die] $m authfail
	auth sufficient $m authsucc
	account required pam_permit.so
	EOF
	id "$PAM_USER_NAME" >/dev/null 2>&1 ||
	    useradd -M -s /usr/sbin/nologin "$PAM_USER_NAME"
	echo "$PAM_USER_NAME:right-pass" | chpasswd
}

# login PASSWORD [USER] [RHOST]
login() {
	echo "$1" | pamtester ${3:+-I rhost="$3"} "$PAM_SERVICE_NAME" \
	    "${2:-$PAM_USER_NAME}" authenticate
}

@test "pam module: never unloaded, since it hooks the host's SQLite" {
	# the hooks (store-sqlite.c) must not point into a module that
	# pam_end() unloaded, in a host that goes on using SQLite
	[ -f "$MODULE" ] || skip "pam_throttle.so is not built (apt-get install libpam0g-dev, then make)"
	command -v readelf >/dev/null || skip "needs readelf (binutils)"
	run readelf -d "$MODULE"
	[[ "$output" == *"Flags: NODELETE"* ]]
}

@test "pam module: never asks for a scheduler slice: the host's scheduling is its own" {
	[ -f "$MODULE" ] || skip "pam_throttle.so is not built (apt-get install libpam0g-dev, then make)"
	command -v objdump >/dev/null || skip "needs objdump (binutils)"
	objdump -d "$MODULE" >dis
	# its code names its functions (not stripped), and no call is to
	# slice_short (only the binary's main() makes one)
	grep -q '<slice_short>:' dis
	run grep -c 'call.*<slice_short>' dis
	[ "$output" = 0 ]
}

@test "pam module: never forks to look a Redis host up: no fork in the host's process" {
	# the man page promises no fork: only the binary's main() turns on
	# the lookup in a child (resolve.c), and the module never calls it
	[ -f "$MODULE" ] || skip "pam_throttle.so is not built (apt-get install libpam0g-dev, then make)"
	command -v objdump >/dev/null || skip "needs objdump (binutils)"
	"$THROTTLE" --version | grep -q redis || skip "built without Redis"
	objdump -d "$MODULE" >dis
	grep -q '<resolve_fork>:' dis
	run grep -c 'call.*<resolve_fork>' dis
	[ "$output" = 0 ]
}

@test "pam module: never gives SQLite the pool: the host's SQLite keeps its own allocator" {
	# sqlite3_config() is process-wide, and the host (sshd, login) may use
	# SQLite itself: only cmd_main(), the binary's, installs the pool,
	# and nothing in the module calls cmd_main()
	[ -f "$MODULE" ] || skip "pam_throttle.so is not built (apt-get install libpam0g-dev, then make)"
	command -v objdump >/dev/null || skip "needs objdump (binutils)"
	objdump -d "$MODULE" >dis
	grep -q '<store_sqlite_pool>:' dis
	run awk '/^[0-9a-f]+ <.*>:$/ { f = $2 } /call.*<store_sqlite_pool>/ { print f }' dis
	[ "$output" = "<cmd_main>:" ]
	run grep -c 'call.*<cmd_main>' dis
	[ "$output" = 0 ]
}

@test "pam module: 5 wrong, then the right password refused, minutes left told" {
	needs_module
	service "db=$TMP/state.db"
	for n in 1 2 3 4 5; do
		run login wrong
		[[ "$output" == *"Authentication failure"* ]]
	done
	run login right-pass
	[ "$status" -ne 0 ]
	[[ "$output" == *"The account is locked out, 15 minutes left."* ]]
	[[ "$output" == *"Authentication failure"* ]]
	# the same keys and state as the CLI's
	run "$THROTTLE" inspect --locked --db "$TMP/state.db"
	[[ "$output" == "login:$PAM_USER_NAME lockout_after="* ]]
}

@test "pam module: silent tells the user nothing; a success resets" {
	needs_module
	service "db=$TMP/state.db" limit=2/1h lockout=1h silent
	login wrong || true
	login wrong || true
	run login right-pass
	[ "$status" -ne 0 ]
	[[ "$output" != *"locked out"* ]]
	"$THROTTLE" reset "login:$PAM_USER_NAME" --db "$TMP/state.db"
	run login right-pass
	[ "$status" -eq 0 ]
	run login wrong
	run login right-pass
	[ "$status" -eq 0 ]
}

@test "pam module: a success gives the host its unit back on the limit preauth charged" {
	needs_module
	service "db=$TMP/state.db"
	# the limit on the preauth line only, as the man page's EXAMPLES
	# write it: authsucc, knowing only the default 5/15m, released the
	# host under that, which a unit of 3/1h leaves at none, and the
	# next right password from the host was refused and locked it out
	m="$MODULE syslog=$TMP/log.sock conf=$TMP/throttle.conf db=$TMP/state.db"
	cat >"/etc/pam.d/$PAM_SERVICE_NAME" <<-EOF
	auth requisite $m preauth limit=3/1h lockout=15m
	auth [success=1 default=bad] pam_unix.so nodelay
	auth [default=die] $m authfail
	auth sufficient $m authsucc
	account required pam_permit.so
	EOF
	for i in 1 2 3 4 5; do
		run login right-pass "$PAM_USER_NAME" 192.0.2.30
		[ "$status" -eq 0 ] || { echo "login $i: $output"; return 1; }
	done
	run --separate-stderr "$THROTTLE" inspect rhost:192.0.2.30 --db "$TMP/state.db" --format json
	[[ "$output" == *'"limit":3,"period":3600,'*'"remaining":3,'* ]] || { echo "$output"; return 1; }
}

@test "pam module: options from the config file, the PAM line wins" {
	needs_module
	service "db=$TMP/state.db"
	printf '# as faillock.conf\nlimit = 1/1h\nlockout = 1h\n' >"$TMP/throttle.conf"
	login wrong || true
	run login right-pass
	[ "$status" -ne 0 ]
	service "db=$TMP/other.db" limit=3/1h
	printf 'limit = 1/1h\n' >"$TMP/throttle.conf"
	login wrong || true
	run login right-pass
	[ "$status" -eq 0 ]
	printf 'bogus = 1\n' >"$TMP/throttle.conf"
	run login right-pass
	[ "$status" -ne 0 ]
}

@test "pam module: a host locked out, names with spaces and globs, the ignore list" {
	needs_module
	service "db=$TMP/state.db" limit=2/1h lockout=1h ignore=10.0.0.0/8
	syslog
	for u in a b; do login wrong "guess$u" 192.0.2.7 || true; done
	run login right-pass "$PAM_USER_NAME" 192.0.2.7
	[ "$status" -ne 0 ]
	# the host is what is locked, and the user is told so
	[[ "$output" == *"This host is locked out, 60 minutes left."* ]]
	run login right-pass "$PAM_USER_NAME" 198.51.100.1
	[ "$status" -eq 0 ]
	for n in 1 2 3; do login wrong "nobody rhost:198.51.100.1" || true; done
	run login right-pass "$PAM_USER_NAME" 198.51.100.1
	[ "$status" -eq 0 ]
	login wrong '/usr/*/*' || true
	run "$THROTTLE" inspect --names --db "$TMP/state.db"
	[[ "$output" == *'login:/usr/*/*'* ]]
	for n in 1 2 3; do login wrong "$PAM_USER_NAME" 10.9.9.9 || true; done
	run login right-pass "$PAM_USER_NAME" 10.9.9.9
	[ "$status" -eq 0 ]
	syslog_wait "^<85>pam_throttle: authentication failure for user guessa from 192.0.2.7"
	# an IPv4 address written as IPv6 is that address: ignored by its
	# network, and the same host's key (locked out above)
	for n in 1 2 3; do login wrong "$PAM_USER_NAME" ::ffff:10.9.9.9 || true; done
	run login right-pass "$PAM_USER_NAME" ::FFFF:10.9.9.9
	[ "$status" -eq 0 ]
	run login right-pass "$PAM_USER_NAME" ::ffff:192.0.2.7
	[ "$status" -ne 0 ]
	[[ "$output" == *"This host is locked out"* ]]
}

@test "pam module: a user locked out from elsewhere does not lock out the host they retry from" {
	needs_module
	service "db=$TMP/state.db" limit=2/1h lockout=1h
	# (from three hosts: one host's third try would lock the host)
	for n in 66 67 68; do login wrong "$PAM_USER_NAME" "192.0.2.$n" || true; done
	for n in 1 2 3 4; do
		run login right-pass "$PAM_USER_NAME" 198.51.100.50
		[ "$status" -ne 0 ]
		[[ "$output" == *"The account is locked out"* ]]
	done
	run "$THROTTLE" check rhost:198.51.100.50 --limit 2/1h --cost 0 --db "$TMP/state.db" --format json
	[ "$(field remaining "$output")" = 2 ] || { echo "$output"; return 1; }
	run "$THROTTLE" inspect --locked --db "$TMP/state.db" --format json
	[[ "$output" == *"\"key\":\"login:$PAM_USER_NAME\""* ]] || { echo "$output"; return 1; }
	[[ "$output" != *rhost:* ]] || { echo "$output"; return 1; }
	# a host whose password was tried is charged as ever; the third,
	# refused by the lockout it started, was given its unit back
	run "$THROTTLE" check rhost:192.0.2.66 --limit 2/1h --cost 0 --db "$TMP/state.db" --format json
	[ "$(field remaining "$output")" = 1 ]
	run "$THROTTLE" check rhost:192.0.2.68 --limit 2/1h --cost 0 --db "$TMP/state.db" --format json
	[ "$(field remaining "$output")" = 2 ]
}

@test "pam module: a user locked out never locks out the host, however many attempts run at once" {
	needs_module
	service "db=$TMP/state.db" limit=5/1h lockout=1h
	locked_user_spares_host || return 1
	# a host locked out is told so, not that the account is
	for n in $(seq 6); do "$THROTTLE" --db "$TMP/state.db" -q consume rhost:203.0.113.6 --limit 5/1h --lockout 1h || true; done
	run login right-pass "$PAM_USER_NAME" 203.0.113.6
	[ "$status" -ne 0 ]
	[[ "$output" == *"This host is locked out"* ]] || { echo "$output"; return 1; }
}

@test "pam module: even_deny_root on the preauth line alone: root's successes still reset it" {
	needs_module
	touch "$TMP/throttle.conf"
	chmod 755 "$TMP"
	# pam_permit stands for root's right password
	cat >"/etc/pam.d/$PAM_SERVICE_NAME" <<-EOF
	auth requisite $MODULE syslog=$TMP/log.sock conf=$TMP/throttle.conf db=$TMP/state.db preauth even_deny_root limit=3/1h
	auth [success=1 default=bad] pam_permit.so
	auth [default=die] $MODULE syslog=$TMP/log.sock conf=$TMP/throttle.conf db=$TMP/state.db authfail
	auth sufficient $MODULE syslog=$TMP/log.sock conf=$TMP/throttle.conf db=$TMP/state.db authsucc
	EOF
	for n in $(seq 6); do
		run login x root
		[ "$status" -eq 0 ] || { echo "login $n: $output"; return 1; }
	done
}

@test "pam module: THROTTLE_SLICE from the caller's environment is not read" {
	needs_module
	service "db=$TMP/state.db"
	echo right-pass | THROTTLE_SLICE=bogus pamtester "$PAM_SERVICE_NAME" "$PAM_USER_NAME" authenticate
}

@test "pam module: a config line too long is refused, a long comment is one line" {
	needs_module
	echo "not a database" >"$TMP/bad.db"
	service "db=$TMP/bad.db"
	syslog
	# a comment's tail past the buffer once set on_error=allow: the store
	# error above then let this login in
	python3 -c 'import sys; sys.stdout.write(("# old: db = redis://:" + "x" * 2000)[:1087] + "on_error=allow\n")' >"$TMP/throttle.conf" ||
	    skip "needs python3"
	run login right-pass
	[ "$status" -ne 0 ]
	syslog_wait "state.db: is not a throttle state file\|bad.db: is not a throttle state file"
	# a long line that is no comment: a misconfiguration, not cut short
	{ printf 'ignore = '; printf 'user%d, ' $(seq 300); echo; } >"$TMP/throttle.conf"
	run login right-pass
	[ "$status" -ne 0 ]
	syslog_wait "throttle.conf:1: the line is longer than 1086 bytes"
}

@test "pam module: a Redis password others may read is said at each attempt (a 0644 config file, a PAM line)" {
	needs_module
	service
	syslog
	# (a password may hold '/' and '@' as they are; the server is not
	# there, and on_error=allow lets the login through: said, not refused,
	# so a host upgraded with the old example's 0644 file still logs in)
	printf 'db = redis://:se/cr@t@127.0.0.1:1/0\non_error = allow\n' >"$TMP/throttle.conf"
	chmod 644 "$TMP/throttle.conf"
	run login right-pass
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	syslog_wait "throttle.conf holds a Redis password (db=) and others may read it (mode 0644), who could lift every lockout with it; chmod 600 it"
	# readable by root alone: nothing said
	chmod 600 "$TMP/throttle.conf"
	: >"$TMP/syslog"
	run login right-pass
	[ "$status" -eq 0 ]
	syslog_wait "allowing user $PAM_USER_NAME (on_error=allow)"
	if grep -q "others may read it" "$TMP/syslog"; then return 1; fi
	# on the PAM line, which every user may read
	: >"$TMP/throttle.conf"
	service "db=redis://127.0.0.1:1/0?password=secret" on_error=allow
	run login right-pass
	[ "$status" -eq 0 ]
	syslog_wait "db= on the PAM line holds a Redis password, and every user may read the files of /etc/pam.d"
}

@test "pam module: 30 parallel wrong passwords, at most the limit checked" {
	needs_module
	service "db=$TMP/state.db" limit=5/1h lockout=1h
	syslog
	pids=()
	for n in $(seq 30); do
		(set +e; login wrong >"$TMP/out$n" 2>&1; echo $? >"$TMP/rc$n") &
		pids+=($!)
	done
	track "${pids[@]}"
	wait "${pids[@]}"
	syslog_wait "authentication failure for user $PAM_USER_NAME\|is locked out" 30 || true
	checked=$(grep -c "authentication failure for user $PAM_USER_NAME" "$TMP/syslog" || true)
	[ "$checked" -le 5 ] || { echo "$checked passwords checked"; return 1; }
	[ "$(grep -c "is locked out" "$TMP/syslog")" -eq $((30 - checked)) ]
}

@test "pam module: a store error fails closed, unless on_error=allow" {
	needs_module
	echo "not a database" >"$TMP/state.db"
	service "db=$TMP/state.db"
	syslog
	run login right-pass
	[ "$status" -ne 0 ]
	syslog_wait "state.db: is not a throttle state file"
	service "db=$TMP/state.db" on_error=allow
	run login right-pass
	[ "$status" -eq 0 ]
}

@test "pam module: a misconfiguration refuses every attempt but root's, and is logged" {
	needs_module
	syslog
	# a stack where the module alone decides: root passes (the module
	# steps aside), anyone else is refused
	bare() {
		cat >"/etc/pam.d/$PAM_SERVICE_NAME" <<-EOF
		auth requisite $MODULE syslog=$TMP/log.sock conf=$TMP/throttle.conf db=$TMP/state.db $*
		auth required pam_permit.so
		account required pam_permit.so
		EOF
	}
	service "db=$TMP/state.db"
	printf 'limit = 5/15m\n' >"$TMP/throttle.conf"
	bare preauth
	run login x
	[ "$status" -eq 0 ]
	for bad in "preauth frobnicate" "" "preauth ignore=10.0.0.0/33" \
	    "preauth ignore=10.0.0.0/8,192.168.1.0/x"; do
		bare "$bad"
		run login x
		[ "$status" -ne 0 ] || { echo "user let in with: $bad"; return 1; }
		run login x root
		[ "$status" -eq 0 ] || { echo "root refused with: $bad"; return 1; }
	done
	syslog_wait "unknown option 'frobnicate'"
	syslog_wait "no mode: give preauth, authfail or authsucc"
	syslog_wait "ignore: '10.0.0.0/33' is not an IPv4 network"
	# a config file others can write could set ignore= or on_error=allow
	bare preauth
	chmod 666 "$TMP/throttle.conf"
	run login x
	[ "$status" -ne 0 ]
	syslog_wait "throttle.conf can be written by others (owner 0, mode 0666); chown root and chmod go-w it"
	chmod 644 "$TMP/throttle.conf"
	run login x
	[ "$status" -eq 0 ]
}

@test "pam module: misconfigured in the documented stack, root still logs in and others do not" {
	needs_module
	syslog
	# pam_faillock's stack as pam_throttle(8) gives it, the password
	# check's success a jump over authfail (which PAM counts as no
	# success: authsucc's answer decides); pam_permit and pam_deny
	# stand for a right and a wrong password of root's
	stack() {
		local check=$1 m="$MODULE syslog=$TMP/log.sock conf=$TMP/throttle.conf db=$TMP/state.db $2"
		cat >"/etc/pam.d/$PAM_SERVICE_NAME" <<-EOF
		auth requisite $m preauth
		auth [success=1 default=bad] $check
		auth [default=die] $m authfail
		auth sufficient $m authsucc
		account required pam_permit.so
		EOF
	}
	service "db=$TMP/state.db"
	: >"$TMP/throttle.conf"
	for bad in frobnicate limit=bogus lockout=soon "ignore=10.0.0.0/33"; do
		stack pam_permit.so "$bad"
		for host in "" 192.0.2.50; do
			run login x root "$host"
			[ "$status" -eq 0 ] || { echo "root refused with $bad from '$host': $output"; return 1; }
			run login x "$PAM_USER_NAME" "$host"
			[ "$status" -ne 0 ] || { echo "user let in with $bad"; return 1; }
		done
		stack pam_deny.so "$bad"
		run login x root
		[ "$status" -ne 0 ] || { echo "root let in on a wrong password with $bad"; return 1; }
	done
	syslog_wait "unknown option 'frobnicate'"
	syslog_wait "bogus"
	# a config file others can write
	stack pam_permit.so ""
	chmod 666 "$TMP/throttle.conf"
	run login x root 192.0.2.50
	[ "$status" -eq 0 ]
	run login x
	[ "$status" -ne 0 ]
	chmod 644 "$TMP/throttle.conf"
	# nothing was charged by a module that could not know its limit
	[ ! -e "$TMP/state.db" ]
}

@test "pam module: root is exempt unless even_deny_root" {
	needs_module
	service "db=$TMP/state.db" limit=1/1h
	for n in 1 2 3; do login wrong root || true; done
	run "$THROTTLE" inspect login:root --db "$TMP/state.db"
	[ "$status" -eq 1 ]
	service "db=$TMP/state.db" limit=1/1h even_deny_root
	for n in 1 2 3; do login wrong root || true; done
	run "$THROTTLE" inspect login:root --locked --db "$TMP/state.db"
	[ "$status" -eq 0 ]
}

@test "pam module: two hosts on one Redis server share the lockout" {
	needs_module
	command -v redis-server >/dev/null || skip "needs redis-server (apt-get install redis-server)"
	redis-server --port 0 --unixsocket "$TMP/redis.sock" --save '' \
	    --appendonly no --daemonize yes --pidfile "$TMP/redis.pid" \
	    --logfile "$TMP/redis.log"
	for _ in $(seq 50); do [ -s "$TMP/redis.pid" ] && [ -S "$TMP/redis.sock" ] && break; sleep 0.1; done
	track "$(cat "$TMP/redis.pid")"
	# each pamtester is a bastion of its own: nothing shared but Redis
	service "db=unix://$TMP/redis.sock" limit=2/1h lockout=1h
	login wrong || true
	login wrong || true
	run login right-pass
	[ "$status" -ne 0 ]
	run "$THROTTLE" --db "unix://$TMP/redis.sock" inspect --locked
	[[ "$output" == "login:$PAM_USER_NAME "* ]]
	kill "$(cat "$TMP/redis.pid")"
}

# doc_service HASH OPTIONS...: the stack an example shows, pasted as is
# but for the module's path (made this build's, with OPTIONS) and pam_unix
# told not to pause after a wrong password
doc_service() {
	local stack m="$MODULE syslog=$TMP/log.sock conf=$TMP/throttle.conf"
	stack=$(doc "$1") || return 1
	shift
	m="$m $*"
	stack=$(printf '%s\n' "$stack" |
	    sed -E "s|[^ ]*pam_throttle\.so|$m|; s|pam_unix\.so|pam_unix.so nodelay|")
	chmod 755 "$TMP"
	touch "$TMP/throttle.conf"
	printf '%s\naccount required pam_permit.so\n' "$stack" >"/etc/pam.d/$PAM_SERVICE_NAME"
	id "$PAM_USER_NAME" >/dev/null 2>&1 ||
	    useradd -M -s /usr/sbin/nologin "$PAM_USER_NAME"
	echo "$PAM_USER_NAME:right-pass" | chpasswd
}

@test "README PAM, pam_throttle(8) EXAMPLES: the module stacks as pasted" {
	needs_module
	for h in a59945c81609 db7b3bbb2b6d; do
		rm -f "$TMP/state.db"*
		doc_service "$h" "db=$TMP/state.db"
		for n in 1 2 3 4 5; do login wrong || true; done
		run login right-pass
		[ "$status" -ne 0 ] || { echo "$h: not locked out"; return 1; }
		[[ "$output" == *"15 minutes left"* ]]
		# who is locked out, and lifting it (pam_throttle(8) EXAMPLES)
		lift=$(doc 166d242c25ca)
		mkdir -p "$TMP/bin" && ln -sf "$THROTTLE" "$TMP/bin/throttle"
		run env PATH="$TMP/bin:$PATH" THROTTLE_DB="$TMP/state.db" bash -c "${lift//login:alice/login:$PAM_USER_NAME}"
		[ "$status" -eq 0 ]
		[[ "$output" == "login:$PAM_USER_NAME lockout_after="* ]]
		run login right-pass
		[ "$status" -eq 0 ] || { echo "$h: not lifted"; return 1; }
	done
}

@test "pam_throttle(8) EXAMPLES: the bastions' config file, on a Redis server of our own" {
	needs_module
	command -v redis-server >/dev/null || skip "needs redis-server (apt-get install redis-server)"
	port=$("$BATS_TEST_DIRNAME/redis-fleet" port)
	redis-server --port "$port" --bind 127.0.0.1 --requirepass secret --save '' \
	    --appendonly no --daemonize yes --pidfile "$TMP/redis.pid" --logfile "$TMP/redis.log"
	for _ in $(seq 50); do [ -s "$TMP/redis.pid" ] && break; sleep 0.1; done
	track "$(cat "$TMP/redis.pid")"
	for _ in $(seq 50); do redis-cli -p "$port" -a secret --no-auth-warning ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
	conf=$(doc d89ab7e82f43)
	service
	printf '%s\n' "${conf//10.0.0.5:6379/127.0.0.1:$port}" >"$TMP/throttle.conf"
	# mode 0600, as the page says: it holds the password
	chmod 600 "$TMP/throttle.conf"
	# the ignored network is never limited
	for n in $(seq 12); do login wrong "$PAM_USER_NAME" 10.1.2.3 || true; done
	run login right-pass "$PAM_USER_NAME" 10.1.2.3
	[ "$status" -eq 0 ]
	# others: 10 an hour, then locked out for an hour, on the shared server
	for n in $(seq 10); do login wrong "$PAM_USER_NAME" 192.0.2.1 || true; done
	run login right-pass "$PAM_USER_NAME" 192.0.2.1
	[ "$status" -ne 0 ]
	[[ "$output" == *"60 minutes left"* || "$output" == *"locked out"* ]]
	run "$THROTTLE" --db "redis://:secret@127.0.0.1:$port/0" inspect --locked
	[[ "$output" == *"rhost:192.0.2.1 lockout_after="* ]] || { echo "locked: $output"; return 1; }
}
