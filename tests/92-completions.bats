#!/usr/bin/env bats
# The completions, loaded into the real shells: what a TAB offers.

load lib

ROOT=$BATS_TEST_DIRNAME/..

setup() {
	TMP=$(mktemp -d "${BATS_TMPDIR:-/tmp}/throttle-test.XXXXXX")
	export THROTTLE_DB="$TMP/state.db"
	unset THROTTLE_NOW THROTTLE_FORMAT XDG_STATE_HOME
	# the completions run `throttle inspect --names` from PATH
	mkdir "$TMP/bin"
	ln -s "$THROTTLE" "$TMP/bin/throttle"
	export PATH="$TMP/bin:$PATH"
	# an hour, not a second: a key at rest may be forgotten by any later
	# consume (one in 16 tidies), and the shells take seconds to start
	throttle consume login:alice --limit 1/1h
	throttle consume login:bob --limit 1/1h
	throttle consume other --limit 1/1h
}

# bash_offers LINE: the words bash-completion's throttle completion offers
bash_offers() {
	bash -c '
		source /usr/share/bash-completion/bash_completion
		source "$0"
		complete -p throttle | grep -q -- "-F _throttle" || exit 3
		# split as readline does: at blanks, and around each ":"
		# (COMP_WORDBREAKS), so login:a is "login" ":" "a"
		read -ra blank <<<"$1"
		[[ $1 == *" " ]] && blank+=("")
		COMP_WORDS=()
		for w in "${blank[@]}"; do
			while [[ $w == *:* ]]; do
				[[ -n ${w%%:*} ]] && COMP_WORDS+=("${w%%:*}")
				COMP_WORDS+=(":")
				w=${w#*:}
			done
			[[ -n $w || ${#COMP_WORDS[@]} -eq 0 || $w == "${blank[-1]}" ]] && COMP_WORDS+=("$w")
		done
		# bash gives a completion the line without the VAR=value
		# words before the command
		line=$1
		while [[ $line =~ ^[A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*[[:space:]]+(.*)$ ]]; do
			line=${BASH_REMATCH[1]}
			COMP_WORDS=("${COMP_WORDS[@]:1}")
		done
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		COMP_LINE=$line
		COMP_POINT=${#line}
		_throttle
		printf "%s\n" "${COMPREPLY[@]}" | sort' "$ROOT/completions/throttle.bash" "$1"
}

fish_offers() {
	fish -c "source $ROOT/completions/throttle.fish; complete -C'$1'" | cut -f1 | sort
}

zsh_offers() {
	timeout 30 "$ROOT/tests/zsh-complete" "$ROOT/completions" "$1"
}

# offers_is SHELL LINE WANT: what SHELL offers after LINE, the words
# joined by spaces, is WANT ("" for nothing)
offers_is() {
	run "${1}_offers" "$2"
	[ "$(echo $output)" = "$3" ] || { echo "$1: after '$2' offered: $output"; return 1; }
}

check_all_four() {
	local shell=$1
	run "${shell}_offers" "throttle "
	[[ "$output" == *consume* && "$output" == *acquire* && "$output" == *policy* ]] || { echo "$shell: commands: $output"; return 1; }
	offers_is "$shell" "throttle consume --al" "--algorithm"
	offers_is "$shell" "throttle consume --algorithm " "fixed-window gcra hybrid sliding-window token-bucket"
	offers_is "$shell" "throttle consume lo" "login:alice login:bob"
	# THROTTLE_FORMAT is the user's for their scripts: keys still come
	THROTTLE_FORMAT=shell offers_is "$shell" "throttle consume lo" "login:alice login:bob"
	offers_is "$shell" "throttle consume k --lockout " "never"
	# each command is offered only the options it takes
	offers_is "$shell" "throttle check k --w" ""
	offers_is "$shell" "throttle acquire k --w" "--wait"
	offers_is "$shell" "throttle release k --lo" "--lock-timeout"
	offers_is "$shell" "throttle policy set login --c" "--concurrency"
	# policy list, show and delete take no limit options; inspect's
	# --names and --locked do not go together
	offers_is "$shell" "throttle policy list --li" ""
	offers_is "$shell" "throttle policy show login --l" "--lock-timeout"
	offers_is "$shell" "throttle policy delete login --con" ""
	offers_is "$shell" "throttle inspect --names --lo" "--lock-timeout"
	offers_is "$shell" "throttle inspect --locked --na" ""
	offers_is "$shell" "throttle inspect --lo" "--lock-timeout --locked"
}

# check_more SHELL COLON: keys holding ':' (bash offers what follows the
# last ':', as readline then replaces only that), commands after run's
# --, and the keys of the store --db or THROTTLE_DB names on the line
check_more() {
	local shell=$1 colon=$2
	offers_is "$shell" "throttle consume login:a" "$colon"
	run "${shell}_offers" "throttle run k --limit 1/1d -- tru"
	[[ "$(echo $output)" == *true* && "$output" != *login* ]] || { echo "$shell: after --: $output"; return 1; }
	# a command found on PATH, not a shell's builtin (zsh's \$commands)
	run "${shell}_offers" "throttle run k --limit 1/1d -- slee"
	[[ "$(echo $output)" == *sleep* ]] || { echo "$shell: a PATH command after --: $output"; return 1; }
	run "${shell}_offers" "throttle run --limit 1/1d -- -k -- tru"
	[[ "$(echo $output)" == *true* && "$output" != *login* ]] || { echo "$shell: after -- -KEY --: $output"; return 1; }
	run "${shell}_offers" "throttle run --limit 1/1d -- -job:nightly -- tru"
	[[ "$(echo $output)" == *true* && "$output" != *login* ]] || { echo "$shell: after -- -KEY:WITH:COLONS --: $output"; return 1; }
	THROTTLE_DB=$TMP/other.db throttle consume elsewhere:x --limit 1/1h
	offers_is "$shell" "throttle --db $TMP/other.db consume el" "elsewhere:x"
	offers_is "$shell" "throttle consume --db=$TMP/other.db el" "elsewhere:x"
	# (bash takes the VAR=value off the line it gives a completion)
	if [ "$shell" != bash ]; then
		run "${shell}_offers" "THROTTLE_DB=$TMP/other.db throttle consume el"
		[ "$(echo $output)" = "elsewhere:x" ] || { echo "$shell: THROTTLE_DB=: $output"; return 1; }
	fi
	offers_is "$shell" "THROTTLE_DB=$TMP/other.db throttle con" "consume"
	# a key that begins with - is offered only after --, where it is no
	# option; after -- no option is offered
	throttle consume --limit 1/1h -- -dash
	run "${shell}_offers" "throttle consume "
	[[ "$output" == *login:alice* && "$output" != *-dash* ]] || { echo "$shell: dash key before --: $output"; echo "the store has: $(throttle inspect --names)"; return 1; }
	offers_is "$shell" "throttle inspect -- -" "-dash"
	offers_is "$shell" "throttle run --limit 1/1d -- -d" "-dash"
	# a key named like a command is no command; one key, no second
	offers_is "$shell" "throttle consume run --c" "--cost"
	run "${shell}_offers" "throttle consume login:alice "
	[[ "$output" != *login:* ]] || { echo "$shell: a second key: $output"; return 1; }
	run "${shell}_offers" "throttle help consume "
	[[ "$output" != *check* ]] || { echo "$shell: help consume: $output"; return 1; }
	# options may stand before the command
	offers_is "$shell" "throttle --format " "json shell text"
	offers_is "$shell" "throttle --limit 1/1h con" "consume"
	offers_is "$shell" "throttle --limit 1/1h consume lo" "login:alice login:bob"
	# --wait's bound is no key, however it is written
	for b in 2 1h30m m; do
		run "${shell}_offers" "throttle consume --wait $b lo"
		[ "$(echo $output)" = "login:alice login:bob" ] || { echo "$shell: consume --wait $b lo: $output"; return 1; }
	done
	offers_is "$shell" "throttle run --limit 1/1h --wait 1h30m -- lo" "login:alice login:bob"
	# a key after --, and no second
	run "${shell}_offers" "throttle inspect -- -dash "
	[[ "$output" != *login:* ]] || { echo "$shell: a second key after --: $output"; return 1; }
	# --wait's bound is no key: run [options] -- KEY -- COMMAND
	offers_is "$shell" "throttle run --limit 1/1h --wait 1m -- lo" "login:alice login:bob"
	run "${shell}_offers" "throttle run --limit 1/1h --wait 1m -- kk -- tru"
	[[ "$(echo $output)" == *true* && "$output" != *login* ]] || { echo "$shell: run --wait 1m -- KEY -- : $output"; return 1; }
	# a plain key in run's -- KEY -- form: the command after the second
	run "${shell}_offers" "throttle run --concurrency 1 -- k -- tru"
	[[ "$(echo $output)" == *true* && "$output" != *login* ]] || { echo "$shell: run -- KEY -- : $output"; return 1; }
}

@test "bash (with bash-completion) completes commands, options, values and keys" {
	[ -f /usr/share/bash-completion/bash_completion ] || skip "needs bash-completion (apt-get install bash-completion)"
	check_all_four bash
	check_more bash alice
	# each command is offered the options it takes, once
	run bash_offers "throttle run k --"
	[ "$(printf '%s\n' "$output" | grep -c -- '^--wait$')" -eq 1 ]
	# run's command's own options are not throttle's
	run bash_offers "throttle run k -- sort --format "
	[[ "$(echo $output)" != "json shell text" ]]
	run bash_offers "throttle run k -- sort --algorithm="
	[[ "$output" != *gcra* ]]
	# one key, one command to help with: no second offered
	run bash_offers "throttle consume login:alice "
	[ -z "$output" ]
	run bash_offers "throttle reset k --limit 1/1h "
	[ -z "$output" ]
	run bash_offers "throttle help consume "
	[ -z "$output" ]
	run bash_offers "throttle consume --limit 1/1h "
	[[ "$output" == *login:alice* ]]
	# a key with a space or a '$' comes back as one word, quoted
	throttle consume 'alice smith' --limit 1/1h
	throttle consume 'x$HOME' --limit 1/1h
	run bash_offers "throttle consume ali"
	[ "$output" = 'alice\ smith' ]
	run bash_offers "throttle consume x"
	[ "$output" = 'x\$HOME' ]
	# a backslash is offered so that the shell reads the key back
	throttle consume 'back\slash' --limit 1/1h
	run bash_offers "throttle consume bac"
	[ "$output" = 'back\\slash' ]
	run bash_offers "throttle acquire k --priority "
	[ "$(echo $output)" = "critical high low normal" ]
	# readline breaks words at '=' as at ':': what follows the last
	throttle consume user=bob --limit 1/1h
	run bash_offers "throttle consume user=b"
	[ "$output" = "bob" ]
	run bash_offers "throttle --format=j"
	[ "$output" = "json" ]
	run bash_offers "throttle consume k --wait=5"
	[ -z "$output" ]
	# a --db name with a space is one, and a folder is offered as one
	mkdir "$TMP/my dir"
	: >"$TMP/my dir/x.db"
	run bash_offers "throttle --db $TMP/my"
	[ "$output" = "$TMP/my dir" ]
}

@test "zsh completes commands, options, values and keys" {
	command -v zsh >/dev/null || skip "needs zsh (apt-get install zsh)"
	check_all_four zsh
	check_more zsh login:alice
}

@test "fish completes commands, options, values and keys" {
	command -v fish >/dev/null || skip "needs fish (apt-get install fish)"
	check_all_four fish
	check_more fish login:alice
	# a command word being typed that begins with -- is no error
	run fish -c "source $ROOT/completions/throttle.fish; complete -C'throttle run k -- --'"
	[[ "$output" != *"requires an argument"* && "$output" != *"Invalid"* ]]
}

@test "a store that does not answer costs a TAB about a second, in every shell" {
	command -v python3 >/dev/null || skip "needs python3 for a server that never answers"
	# a port that takes connections and never replies
	python3 -c 'import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
time.sleep(600)' "$TMP/port" 3>&- &
	track $!
	for _ in $(seq 50); do [ -s "$TMP/port" ] && break; sleep 0.1; done
	export THROTTLE_DB="redis://127.0.0.1:$(cat "$TMP/port")"
	for shell in bash zsh fish; do
		case $shell in
		bash) [ -f /usr/share/bash-completion/bash_completion ] || continue ;;
		*) command -v "$shell" >/dev/null || continue ;;
		esac
		t0=$(date +%s%N)
		run "${shell}_offers" "throttle consume lo"
		took=$((($(date +%s%N) - t0) / 1000000))
		[ -z "$output" ] || { echo "$shell: $output"; return 1; }
		# the shell's own start is in it too; --lock-timeout's 5s is not
		[ "$took" -lt 3500 ] || { echo "$shell took $took ms"; return 1; }
	done
}
