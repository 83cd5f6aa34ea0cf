#!/usr/bin/env bats
# The PAM login guard (examples/pam/throttle-login) through a real PAM
# stack: pamtester against a service file under /etc/pam.d, pam_unix and
# a throwaway local user.  Needs root; cleans up what it makes.

load lib

setup_file() {
	[ "$(id -u)" -eq 0 ] || return 0
	command -v pamtester >/dev/null || return 0
	export PAM_USER_NAME="thrtest$$"
	export PAM_SERVICE_NAME="throttle-test-$$"
}

teardown_file() {
	[ -n "${PAM_SERVICE_NAME:-}" ] || return 0
	rm -f "/etc/pam.d/$PAM_SERVICE_NAME"
	userdel "$PAM_USER_NAME" 2>/dev/null || true
}

needs_pam() {
	[ "$(id -u)" -eq 0 ] || skip "needs root to add a user and a PAM service"
	command -v pamtester >/dev/null || skip "needs pamtester (apt-get install pamtester)"
	command -v useradd >/dev/null || skip "needs useradd"
}

GUARD=$BATS_TEST_DIRNAME/../examples/pam/throttle-login

# service LIMIT LOCKOUT [ENV=VALUE...]: install the README's stack around
# pam_unix (nodelay: no 2s pause after a wrong password, so the test can
# keep time), the guard's syslog lines going to $TMP/log.sock.  GUARD_BIN
# (default: the checkout's script, told where throttle is) may name an
# installed guard instead.
service() {
	local limit=$1 lockout=$2
	shift 2
	local guard="/usr/bin/env THROTTLE_LOGIN_LIMIT=$limit THROTTLE_LOGIN_LOCKOUT=$lockout THROTTLE_LOGIN_SYSLOG=$TMP/log.sock THROTTLE_DB=$TMP/state.db $*"
	if [ -n "${GUARD_BIN:-}" ]; then
		guard="$guard $GUARD_BIN"
	else
		guard="$guard THROTTLE_BIN=$THROTTLE $GUARD"
	fi
	chmod 755 "$TMP"
	# the README's stack, as pasted (doc 68f3e021693a), but for where the
	# guard is and pam_unix's pause after a wrong password
	local stack
	stack=$(doc 68f3e021693a) || return 1
	stack=${stack//\/usr\/local\/libexec\/throttle-login/$guard}
	stack=${stack//pam_unix.so/pam_unix.so nodelay}
	printf '%s\naccount required pam_permit.so\n' "$stack" >"/etc/pam.d/$PAM_SERVICE_NAME"
	id "$PAM_USER_NAME" >/dev/null 2>&1 ||
	    useradd -M -s /usr/sbin/nologin "$PAM_USER_NAME"
	echo "$PAM_USER_NAME:right-pass" | chpasswd
}

# login PASSWORD [USER] [RHOST]
login() {
	echo "$1" | pamtester ${3:+-I rhost="$3"} "$PAM_SERVICE_NAME" \
	    "${2:-$PAM_USER_NAME}" authenticate
}

@test "pam: 5 wrong passwords, then even the right one is refused as an authentication failure" {
	needs_pam
	service 5/15m 15m
	for n in 1 2 3 4 5; do
		run login wrong
		[ "$status" -ne 0 ]
		[[ "$output" == *"Authentication failure"* ]]
	done
	run login right-pass
	[ "$status" -ne 0 ]
	[[ "$output" == *"Authentication failure"* ]]
	[[ "$output" != *"System error"* ]]
	run "$THROTTLE" inspect --locked --db "$TMP/state.db" --format json
	[[ "$output" == *"\"key\":\"login:$PAM_USER_NAME\""* ]]
}

@test "pam: a lockout ends, and gives every try back" {
	needs_pam
	service 2/1h 3s
	login wrong || true
	login wrong || true
	run login right-pass
	[ "$status" -ne 0 ]
	sleep 3.2
	run login right-pass
	[ "$status" -eq 0 ]
	[[ "$output" == *"successfully authenticated"* ]]
}

@test "pam: a success resets the user, lockout and all" {
	needs_pam
	service 2/1h 1h
	run login wrong
	[ "$status" -ne 0 ]
	run login right-pass
	[ "$status" -eq 0 ]
	run "$THROTTLE" inspect "login:$PAM_USER_NAME" --db "$TMP/state.db"
	[ "$status" -eq 1 ]
	run login wrong
	run login right-pass
	[ "$status" -eq 0 ]
}

@test "pam: a success gives the host its unit back on the limit preauth charged" {
	needs_pam
	service 5/15m 15m
	# THROTTLE_LOGIN_LIMIT on the preauth line only: authsucc, on the
	# default 5/15m, released the host under that, which a unit of 3/1h
	# leaves at none, and the next right password locked the host out
	sed -i "s|\(THROTTLE_LOGIN_LIMIT=\)5/15m\(.*preauth\)|\13/1h\2|; s|THROTTLE_LOGIN_LIMIT=5/15m ||" "/etc/pam.d/$PAM_SERVICE_NAME"
	grep -q "LIMIT=3/1h.*preauth" "/etc/pam.d/$PAM_SERVICE_NAME"
	[ "$(grep -c LIMIT= "/etc/pam.d/$PAM_SERVICE_NAME")" = 1 ]
	for i in 1 2 3 4 5; do
		run login right-pass "$PAM_USER_NAME" 192.0.2.30
		[ "$status" -eq 0 ] || { echo "login $i: $output"; return 1; }
	done
	run --separate-stderr "$THROTTLE" inspect rhost:192.0.2.30 --db "$TMP/state.db" --format json
	[[ "$output" == *'"limit":3,"period":3600,'*'"remaining":3,'* ]] || { echo "$output"; return 1; }
}

@test "pam: a host that guesses too often is locked out for every user" {
	needs_pam
	service 3/1h 1h
	for u in a b c; do login wrong "guess$u" 192.0.2.7 || true; done
	run login right-pass "$PAM_USER_NAME" 192.0.2.7
	[ "$status" -ne 0 ]
	# another host is not
	run login right-pass "$PAM_USER_NAME" 198.51.100.1
	[ "$status" -eq 0 ]
}

@test "pam: a user locked out from elsewhere does not lock out the host they retry from" {
	needs_pam
	service 2/1h 1h
	# someone anywhere locks the user out
	# (from three hosts: one host's third try would lock the host)
	for n in 66 67 68; do login wrong "$PAM_USER_NAME" "192.0.2.$n" || true; done
	# the user retries, right password, from the office: refused (the
	# account is locked) before any password is tried, so no guess:
	# the office's host key is given its unit back each time
	for n in 1 2 3 4; do
		run login right-pass "$PAM_USER_NAME" 198.51.100.50
		[ "$status" -ne 0 ]
	done
	run "$THROTTLE" check rhost:198.51.100.50 --limit 2/1h --cost 0 --db "$TMP/state.db" --format json
	[ "$status" -eq 0 ]
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

@test "pam: asked by a setuid program (su, sudo), the pasted guard runs as root" {
	needs_pam
	command -v perl >/dev/null || skip "needs perl (perl-base) to start pamtester as su is started"
	service 2/1h 1h
	# as su runs: the real uid the user's who typed it, the effective 0;
	# without seteuid pam_exec ran the guard as that user, who could
	# not write root's state file: every attempt refused
	uid=$(id -u "$PAM_USER_NAME")
	as_su() {
		echo "$1" | perl -e '$< = shift; exec @ARGV or exit 127' "$uid" \
		    pamtester "$PAM_SERVICE_NAME" "$PAM_USER_NAME" authenticate
	}
	run as_su right-pass
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	as_su wrong || true
	as_su wrong || true
	run as_su right-pass
	[ "$status" -ne 0 ]
	# the lockout is in root's file, the one every service shares
	run "$THROTTLE" inspect --locked --db "$TMP/state.db" --format json
	[[ "$output" == *"\"key\":\"login:$PAM_USER_NAME\""* ]]
}

@test "pam: user names are keys as they are: spaces, colons and globs" {
	needs_pam
	service 2/1h 1h
	# a user named to lock out a host locks out only itself
	for n in 1 2 3; do login wrong "nobody rhost:192.0.2.7" || true; done
	run login right-pass "$PAM_USER_NAME" 192.0.2.7
	[ "$status" -eq 0 ]
	run "$THROTTLE" inspect --names --db "$TMP/state.db"
	[[ "$output" == *"login:nobody rhost:192.0.2.7"* ]]
	# a glob is not expanded: one key, one throttle call per attempt
	login wrong '/usr/*/*' || true
	run "$THROTTLE" inspect --names --db "$TMP/state.db"
	[[ "$output" == *'login:/usr/*/*'* ]]
	[ "$(printf '%s\n' "$output" | grep -c '^login:/usr')" -eq 1 ]
	# a success resets the same key the failures charged
	for n in 1 2; do login wrong "$PAM_USER_NAME" || true; done
	run "$THROTTLE" inspect --locked --db "$TMP/state.db"
	[ "$status" -eq 0 ]
}

@test "pam: 30 parallel wrong passwords: at most the limit reach the password check" {
	needs_pam
	service 5/1h 1h
	syslog
	pids=()
	for n in $(seq 30); do
		(set +e; login wrong >"$TMP/out$n" 2>&1; echo $? >"$TMP/rc$n") &
		pids+=($!)
	done
	track "${pids[@]}"
	wait "${pids[@]}"
	[ "$(cat "$TMP"/rc* | grep -c '^0$')" -eq 0 ]
	syslog_wait "authentication failure for user $PAM_USER_NAME\|user $PAM_USER_NAME is locked out" 30 || true
	checked=$(grep -c "authentication failure for user $PAM_USER_NAME" "$TMP/syslog" || true)
	[ "$checked" -le 5 ] || { echo "$checked passwords checked"; return 1; }
	[ "$checked" -ge 1 ]
	refused=$(grep -c "user $PAM_USER_NAME is locked out" "$TMP/syslog" || true)
	[ $((checked + refused)) -eq 30 ]
}

@test "pam: a user locked out never locks out the host, however many attempts run at once" {
	needs_pam
	service 5/1h 1h
	locked_user_spares_host || return 1
	# a host locked out is told so, not that the account is
	syslog
	for n in $(seq 6); do "$THROTTLE" --db "$TMP/state.db" -q consume rhost:203.0.113.6 --limit 5/1h --lockout 1h || true; done
	login right-pass "$PAM_USER_NAME" 203.0.113.6 || true
	syslog_wait "throttle-login: host 203.0.113.6 (user $PAM_USER_NAME) is locked out"
}

@test "pam: THROTTLE_LOGIN_ROOT=1 on the preauth line alone: root's successes still reset it" {
	needs_pam
	chmod 755 "$TMP"
	env="/usr/bin/env THROTTLE_LOGIN_LIMIT=3/1h THROTTLE_DB=$TMP/state.db THROTTLE_BIN=$THROTTLE"
	# pam_permit stands for root's right password
	cat >"/etc/pam.d/$PAM_SERVICE_NAME" <<-EOF
	auth [success=1 default=ignore] pam_exec.so quiet seteuid $env THROTTLE_LOGIN_ROOT=1 $GUARD preauth
	auth requisite pam_deny.so
	auth [success=2 default=ignore] pam_permit.so
	auth optional pam_exec.so quiet seteuid $env $GUARD authfail
	auth requisite pam_deny.so
	auth optional pam_exec.so quiet seteuid $env $GUARD authsucc
	EOF
	for n in $(seq 6); do
		run login x root
		[ "$status" -eq 0 ] || { echo "login $n: $output"; return 1; }
	done
}

@test "pam: messages reach syslog, as authpriv" {
	needs_pam
	service 1/1h 1h
	syslog
	login wrong "$PAM_USER_NAME" 192.0.2.9 || true
	login wrong "$PAM_USER_NAME" 192.0.2.9 || true
	# <85>: authpriv (10) * 8 + notice (5)
	syslog_wait "^<85>.*throttle-login: authentication failure for user $PAM_USER_NAME from 192.0.2.9"
	# the host is charged first, so it is the host that is refused
	syslog_wait "throttle-login: host 192.0.2.9 (user $PAM_USER_NAME) is locked out"
}

@test "pam: root is not locked out unless THROTTLE_LOGIN_ROOT=1" {
	needs_pam
	service 1/1h 1h
	for n in 1 2 3; do login wrong root || true; done
	run "$THROTTLE" inspect login:root --db "$TMP/state.db"
	[ "$status" -eq 1 ]
	service 1/1h 1h THROTTLE_LOGIN_ROOT=1
	for n in 1 2 3; do login wrong root || true; done
	run "$THROTTLE" inspect login:root --locked --db "$TMP/state.db"
	[ "$status" -eq 0 ]
}

@test "pam: users and networks on THROTTLE_LOGIN_IGNORE are never limited" {
	needs_pam
	service 1/1h 1h THROTTLE_LOGIN_IGNORE=backup,10.0.0.0/8
	for n in 1 2 3; do login wrong backup || true; done
	for n in 1 2 3; do login wrong "$PAM_USER_NAME" 10.1.2.3 || true; done
	run login right-pass "$PAM_USER_NAME" 10.1.2.3
	[ "$status" -eq 0 ]
	run "$THROTTLE" inspect --names --db "$TMP/state.db"
	[ -z "$output" ]
	# 11.0.0.1 is outside 10.0.0.0/8
	for n in 1 2; do login wrong "$PAM_USER_NAME" 11.0.0.1 || true; done
	run login right-pass "$PAM_USER_NAME" 11.0.0.1
	[ "$status" -ne 0 ]
	# an IPv4 address written as IPv6 is that address: its network's,
	# and the same host (locked out just above)
	for n in 1 2 3; do login wrong "$PAM_USER_NAME" ::ffff:10.1.2.3 || true; done
	run login right-pass "$PAM_USER_NAME" ::ffff:10.1.2.3
	[ "$status" -eq 0 ]
	run login right-pass "$PAM_USER_NAME" ::ffff:11.0.0.1
	[ "$status" -ne 0 ]
}

@test "pam: a network on THROTTLE_LOGIN_IGNORE that is not one is logged, and exempts no one" {
	needs_pam
	service 1/1h 1h THROTTLE_LOGIN_IGNORE=10.0.0/8
	syslog
	for n in 1 2; do login wrong "$PAM_USER_NAME" 10.1.2.3 || true; done
	run login right-pass "$PAM_USER_NAME" 10.1.2.3
	[ "$status" -ne 0 ]
	syslog_wait "THROTTLE_LOGIN_IGNORE: '10.0.0/8' is not an IPv4 network (as in 10.0.0.0/8); it exempts no one"
}

@test "pam: the guard fails closed when the state file is unusable" {
	needs_pam
	service 2/1h 1h
	syslog
	echo "not a database" >"$TMP/state.db"
	run login right-pass
	[ "$status" -ne 0 ]
	[[ "$output" == *"Authentication failure"* ]]
	syslog_wait "refusing user $PAM_USER_NAME (a store or settings error)"
}

@test "pam: a store error after a right password is logged, and the login goes on" {
	needs_pam
	service 2/1h 1h
	syslog
	# the authsucc line alone on a store it cannot use (a folder)
	mkdir "$TMP/folder.db"
	sed -i "s|throttle-login authsucc\$|throttle-login authsucc --db $TMP/folder.db|" \
	    "/etc/pam.d/$PAM_SERVICE_NAME"
	grep -q "authsucc --db $TMP/folder.db" "/etc/pam.d/$PAM_SERVICE_NAME"
	run login right-pass "$PAM_USER_NAME" 192.0.2.8
	[ "$status" -eq 0 ]
	syslog_wait "throttle-login: after a success: .*folder.db: is not a regular file" 2
	# the attempt stayed charged, as the log says it would
	run "$THROTTLE" check "login:$PAM_USER_NAME" --limit 2/1h --cost 0 --db "$TMP/state.db" --format json
	[ "$(field remaining "$output")" = 1 ]
}

@test "pam: installed with another PREFIX, the guard finds its throttle" {
	needs_pam
	make -C "$BATS_TEST_DIRNAME/.." install PREFIX="$TMP/opt" >/dev/null
	# the test's binary is the one under test
	cp "$THROTTLE" "$TMP/opt/bin/throttle"
	GUARD_BIN=$TMP/opt/libexec/throttle-login service 1/1h 1h
	run login wrong
	[ "$status" -ne 0 ]
	run login right-pass
	[ "$status" -ne 0 ]
	run "$THROTTLE" inspect --locked --db "$TMP/state.db"
	[[ "$output" == *"login:$PAM_USER_NAME"* ]]
}

@test "pam: the guard script is POSIX sh" {
	run sh -n "$GUARD"
	[ "$status" -eq 0 ]
	if command -v dash >/dev/null; then
		run env PAM_USER=x THROTTLE_BIN="$THROTTLE" THROTTLE_LOGIN_SYSLOG="$TMP/none" dash "$GUARD" preauth --db "$TMP/d.db"
		[ "$status" -eq 0 ]
	fi
}

@test "pam: a mistyped mode refuses all but root; a user named 0 is no root" {
	guard() {
		env PAM_USER="$1" THROTTLE_BIN="$THROTTLE" THROTTLE_LOGIN_SYSLOG="$TMP/none" \
		    THROTTLE_LOGIN_LIMIT=1/1h sh "$GUARD" "$2" --db "$TMP/d.db"
	}
	# the module steps aside for root on a misconfiguration; the script
	# refused root too, locking out the console that would fix the line
	run guard root preuath
	[ "$status" -eq 0 ]
	[[ "$output" == *"unknown mode 'preuath'"* ]]
	run guard nobody preuath
	[ "$status" -eq 1 ]
	# id(1) read the name "0" as uid 0: it was exempt as root
	if ! getent passwd -- 0 | grep -q '^0:'; then
		run guard 0 preauth
		[ "$status" -eq 0 ]
		run guard 0 preauth
		[ "$status" -eq 1 ]
		run "$THROTTLE" inspect --names --db "$TMP/d.db"
		[[ "$output" == *login:0* ]]
	fi
}

@test "man EXAMPLES: the man page's guard stack is the README's" {
	readme=$(doc 68f3e021693a)
	man=$(doc e96a7ccb5375)
	[ "$(printf '%s\n' "$readme" | tr -s ' ')" = "$(printf '%s\n' "$man" | tr -s ' ')" ]
}
