#!/usr/bin/env bats
# valgrind --leak-check=full over one call of each command: no errors, no
# leaks (definite or indirect).

load lib

vg() {
	valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect \
	    --error-exitcode=99 "$THROTTLE" "$@"
}

@test "valgrind: every command runs clean" {
	command -v valgrind >/dev/null || skip "needs valgrind (apt-get install valgrind)"
	export THROTTLE_NOW=100
	while read -r line; do
		eval "set -- $line"
		run vg "$@"
		[ "$status" -ne 99 ] || { echo "valgrind on: $line"; echo "$output"; return 1; }
	done <<-EOF
	consume k --limit 3/60s
	consume k --limit 3/60s --format json
	check k --limit 3/60s --format shell
	consume s --limit 3/60s --algorithm sliding-window --cost 2
	consume h --limit '2/1s;5/1m' --algorithm hybrid
	consume l --limit 1/1h --lockout 10m
	release k
	inspect
	inspect k --format json
	inspect --names
	reset k
	acquire c --concurrency 2 --ttl 10s
	shed w --utilization 0.9 --seed 1
	policy set login --limit 5/15m --lockout 15m
	policy list
	consume login:x
	gc
	run r --limit 1/1h -- true
	run c2 --concurrency 1 -- true
	consume k --limit 0/1s
	help consume
	--version
	EOF
	id=$("$THROTTLE" acquire c --concurrency 2)
	run vg renew c --lease "$id"
	[ "$status" -ne 99 ]
	run vg release c --lease "$id"
	[ "$status" -ne 99 ]
	run vg consume k --limit 1/1s --db "$TMP/not-a-dir/x/../state.db"
	[ "$status" -ne 99 ]
}
