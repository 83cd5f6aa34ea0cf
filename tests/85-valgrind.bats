#!/usr/bin/env bats
# valgrind --leak-check=full over one call of each command: no errors, no
# leaks (definite or indirect).

load lib

# valgrind cannot follow the mallocs of a binary linked statically with
# libc (the default build): make check gives the same objects linked
# dynamically as THROTTLE_DYNAMIC.
VG_THROTTLE=${THROTTLE_DYNAMIC:-$THROTTLE}

vg() {
	valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect \
	    --error-exitcode=99 "$VG_THROTTLE" "$@"
}

# Each line: the exit status the command must have, then the command.
# A valgrind error or leak is status 99; anything but the status given
# means the command did not do its job under valgrind.
@test "valgrind: every command runs clean and does its job" {
	command -v valgrind >/dev/null || skip "needs valgrind (apt-get install valgrind)"
	# make asan's build carries ASan's runtime, which valgrind cannot run
	if grep -q __asan_init "$VG_THROTTLE" 2>/dev/null; then
		skip "a sanitized build (make asan): valgrind cannot run it"
	fi
	if ! readelf -l "$VG_THROTTLE" 2>/dev/null | grep -q INTERP; then
		skip "a static binary: valgrind cannot follow its mallocs (make check gives a dynamic one)"
	fi
	export THROTTLE_NOW=100
	while read -r want line; do
		eval "set -- $line"
		run vg "$@"
		[ "$status" -eq "$want" ] || { echo "valgrind on: $line: status $status, want $want"; echo "$output"; return 1; }
	done <<-EOF
	0 consume k --limit 3/60s
	0 consume k --limit 3/60s --format json
	0 check k --limit 3/60s --format shell
	0 consume s --limit 3/60s --algorithm sliding-window --cost 2
	0 consume h --limit '2/1s;5/1m' --algorithm hybrid
	0 consume l --limit 1/1h --lockout 10m
	1 consume l --limit 1/1h --lockout 10m
	0 release k
	0 inspect
	0 inspect k --format json
	0 inspect --names
	0 reset k
	0 acquire c --concurrency 2 --ttl 10s
	0 shed w --utilization 0.5 --seed 1
	0 policy set login --limit 5/15m --lockout 15m
	0 policy list
	0 consume login:x
	0 verify
	0 gc
	0 run r --limit 1/1h -- true
	75 run r --limit 1/1h -- true
	0 run c2 --concurrency 1 -- true
	2 consume k --limit 0/1s
	0 help consume
	0 --version
	EOF
	id=$("$THROTTLE" acquire c --concurrency 2)
	run vg renew c --lease "$id"
	[ "$status" -eq 0 ]
	run vg release c --lease "$id"
	[ "$status" -eq 0 ]
	run vg consume k --limit 1/1s --db "$TMP/not-a-dir/x/../state.db"
	[ "$status" -eq 0 ]
	printf '%s\n' "consume b --limit 1/1s" "consume b --limit 1/1s" "inspect b" >"$TMP/batch"
	run --separate-stderr vg batch <"$TMP/batch"
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 3 ]
}
