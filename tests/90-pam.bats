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

# service LIMIT LOCKOUT: install the guard around pam_unix (nodelay: no
# 2s pause after a wrong password, so the test can keep time; stdout: show
# the guard's messages)
service() {
	local guard="/usr/bin/env THROTTLE_BIN=$THROTTLE THROTTLE_LOGIN_LIMIT=$1 THROTTLE_LOGIN_LOCKOUT=$2 $BATS_TEST_DIRNAME/../examples/pam/throttle-login"
	chmod 755 "$TMP"
	cat >"/etc/pam.d/$PAM_SERVICE_NAME" <<-EOF
	auth requisite pam_exec.so stdout $guard preauth --db $TMP/state.db
	auth [success=1 default=ignore] pam_unix.so nodelay
	auth [default=die] pam_exec.so stdout $guard authfail --db $TMP/state.db
	auth required pam_exec.so stdout $guard authsucc --db $TMP/state.db
	account required pam_permit.so
	EOF
	id "$PAM_USER_NAME" >/dev/null 2>&1 ||
	    useradd -M -s /usr/sbin/nologin "$PAM_USER_NAME"
	echo "$PAM_USER_NAME:right-pass" | chpasswd
}

login() {
	echo "$1" | pamtester "$PAM_SERVICE_NAME" "$PAM_USER_NAME" authenticate
}

@test "pam: wrong passwords are counted, then even the right one is refused until the lockout passes" {
	needs_pam
	service 2/2s 4s
	run login wrong
	[ "$status" -ne 0 ]
	run login wrong
	[ "$status" -ne 0 ]
	run "$THROTTLE" inspect "login:$PAM_USER_NAME" --db "$TMP/state.db" --format json
	[ "$(field remaining "$output")" = 0 ]
	# the limit is reached: the right password is refused, and the
	# refusal starts a 4s lockout
	run login right-pass
	[ "$status" -ne 0 ]
	[[ "$output" == *"throttle-login: login:$PAM_USER_NAME is locked out"* ]]
	# 2.5s on, the rate alone would allow it; the lockout does not
	sleep 2.5
	run login right-pass
	[ "$status" -ne 0 ]
	sleep 2
	run login right-pass
	[ "$status" -eq 0 ]
	[[ "$output" == *"successfully authenticated"* ]]
}

@test "pam: a success resets the count" {
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

@test "pam: the guard fails closed when the state file is unusable" {
	needs_pam
	service 2/1h 1h
	echo "not a database" >"$TMP/state.db"
	run login right-pass
	[ "$status" -ne 0 ]
	[[ "$output" == *"refusing (--on-error deny)"* ]]
}

@test "pam: the guard script is POSIX sh" {
	run sh -n "$BATS_TEST_DIRNAME/../examples/pam/throttle-login"
	[ "$status" -eq 0 ]
	if command -v dash >/dev/null; then
		run env PAM_USER=x THROTTLE_BIN="$THROTTLE" dash "$BATS_TEST_DIRNAME/../examples/pam/throttle-login" preauth --db "$TMP/d.db"
		[ "$status" -eq 0 ]
	fi
}
