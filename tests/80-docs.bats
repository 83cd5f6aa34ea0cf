#!/usr/bin/env bats
# The man page, --help and the completions agree; install puts each file
# where its tool looks, and uninstall takes them away.

load lib

ROOT=$BATS_TEST_DIRNAME/..

@test "the man page lints clean (mandoc -Tlint, warnings and above)" {
	command -v mandoc >/dev/null || skip "needs mandoc (apt-get install mandoc)"
	run mandoc -Tlint -W warning "$ROOT/man/throttle.1" "$ROOT/man/pam_throttle.8"
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
}

@test "man renders both pages at 80 columns without a warning" {
	command -v man >/dev/null || skip "needs man (apt-get install man-db)"
	for page in throttle.1 pam_throttle.8; do
		MANWIDTH=80 man -l "$ROOT/man/$page" >/dev/null 2>"$TMP/err"
		[ ! -s "$TMP/err" ] || { echo "$page:"; cat "$TMP/err"; return 1; }
	done
}

@test "every command and option in --help is in the man page and each completion" {
	command -v mandoc >/dev/null || skip "needs mandoc (apt-get install mandoc)"
	run sh "$ROOT/tests/lint-names"
	[ "$status" -eq 0 ]
}

@test "the man page documents every exit status and environment variable" {
	for w in 'THROTTLE_DB' 'THROTTLE_FORMAT' 'THROTTLE_NOW' 'THROTTLE_PROC' 'EXAMPLES' 'FILES'; do
		grep -q "$w" "$ROOT/man/throttle.1" || { echo "no $w"; return 1; }
	done
	# each status throttle can exit with is an item of EXIT STATUS
	statuses=$(awk '/^\.Sh EXIT STATUS/ { on = 1; next } /^\.Sh / { on = 0 }
	    on && /^\.It / { sub(/^\.It /, ""); gsub(/ , /, " "); print }' "$ROOT/man/throttle.1")
	for code in 0 1 2 3 75 126 127; do
		printf '%s\n' $statuses | grep -qx "$code" || { echo "EXIT STATUS has no $code"; return 1; }
	done
}

@test "make install honours DESTDIR and PREFIX; make uninstall removes it all" {
	run make -C "$ROOT" install DESTDIR="$TMP/stage" PREFIX=/usr
	[ "$status" -eq 0 ]
	for f in usr/bin/throttle usr/libexec/throttle-login \
	    usr/share/man/man1/throttle.1 \
	    usr/share/bash-completion/completions/throttle \
	    usr/share/zsh/site-functions/_throttle \
	    usr/share/fish/vendor_completions.d/throttle.fish; do
		[ -f "$TMP/stage/$f" ] || { echo "missing $f"; return 1; }
	done
	[ -x "$TMP/stage/usr/bin/throttle" ]
	# the installed guard knows where its throttle is
	grep -q "^installed_throttle='/usr/bin/throttle'$" "$TMP/stage/usr/libexec/throttle-login"
	if [ -f "$ROOT/pam_throttle.so" ]; then
		[ -f "$TMP/stage/usr/lib/security/pam_throttle.so" ]
		[ -f "$TMP/stage/usr/share/man/man8/pam_throttle.8" ]
	fi
	run env THROTTLE_NOW=1 "$TMP/stage/usr/bin/throttle" consume k --limit 1/1s
	[ "$status" -eq 0 ]
	run make -C "$ROOT" uninstall DESTDIR="$TMP/stage" PREFIX=/usr
	[ "$status" -eq 0 ]
	[ -z "$(find "$TMP/stage" -type f)" ]
}

@test "throttle help COMMAND prints each command's usage" {
	for c in $("$THROTTLE" --help | awk '/^  [a-z]+ / { print $1 }'); do
		run "$THROTTLE" help "$c"
		[ "$status" -eq 0 ]
		[[ "${lines[0]}" == "usage: throttle $c"* ]] || { echo "$c: ${lines[0]}"; return 1; }
	done
}

@test "the lint catches a drift between --help, the man page and completions" {
	command -v mandoc >/dev/null || skip "needs mandoc (apt-get install mandoc)"
	cp -r "$ROOT/man" "$ROOT/completions" "$ROOT/tests" "$TMP/"
	sed -i '/-l lockout/d' "$TMP/completions/throttle.fish"
	run env THROTTLE="$THROTTLE" sh "$TMP/tests/lint-names"
	[ "$status" -eq 1 ]
	[[ "$output" == *"completions/throttle.fish does not offer --lockout"* ]]
}

@test "the test lint refuses a bare '!' line and a process found by name" {
	mkdir -p "$TMP/t/tests/slow"
	cp "$ROOT/tests/lint-bats" "$TMP/t/tests/"
	printf '@test "x" {\n\t! false\n\ttrue\n}\n' >"$TMP/t/tests/10-x.bats"
	run sh "$TMP/t/tests/lint-bats"
	[ "$status" -eq 1 ]
	[[ "$output" == *"a bare '!' line never fails the test"* ]]
	# the offending word is built, so this file itself finds nothing
	printf '@test "x" {\n\tp%s -f sleep\n}\n' grep >"$TMP/t/tests/10-x.bats"
	run sh "$TMP/t/tests/lint-bats"
	[ "$status" -eq 1 ]
	[[ "$output" == *"finds processes by name"* ]]
	printf '@test "x" {\n\trun ! false\n}\n' >"$TMP/t/tests/10-x.bats"
	run sh "$TMP/t/tests/lint-bats"
	[ "$status" -eq 0 ]
}

@test "the docs lint fails an example no test runs, and a test naming a gone one" {
	mkdir -p "$TMP/t"
	cp -r "$ROOT/README.md" "$ROOT/man" "$ROOT/tests" "$TMP/t/"
	run sh "$TMP/t/tests/lint-docs"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	# an example changed in the README, its test not
	sed -i 's|throttle consume login:alice --limit 5/15m |throttle consume login:alice --limit 6/15m |' "$TMP/t/README.md"
	run sh "$TMP/t/tests/lint-docs"
	[ "$status" -eq 1 ]
	[[ "$output" == *"README.md:9: no test runs this example (doc "* ]]
	[[ "$output" == *"tests name example e864af544843, which no doc holds any more"* ]]
}
