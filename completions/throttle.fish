# fish completion for throttle(1)

set -l commands consume check release inspect reset acquire renew run shed policy gc verify batch help
# The keys of the store the line names: --db FILE or --db=FILE on the
# line, else THROTTLE_DB=... before throttle, else the environment's.
function __throttle_keys
	set -l toks (commandline -opc)
	set -l db
	set -l i 1
	while test $i -le (count $toks)
		switch $toks[$i]
			case --
				break
			case --db
				set i (math $i + 1)
				set db --db $toks[$i]
			case '--db=*'
				set db --db (string replace -- --db= '' $toks[$i])
			case 'THROTTLE_DB=*'
				test -n "$db"; or set db --db (string replace -- THROTTLE_DB= '' $toks[$i])
		end
		set i (math $i + 1)
	end
	# names one a line whatever THROTTLE_FORMAT says, and a store that
	# does not answer costs a TAB a second, not --lock-timeout's 5; a
	# key that begins with - only after --, where it is no option
	if contains -- -- $toks
		throttle $db --format text --lock-timeout 1s inspect --names 2>/dev/null
	else
		throttle $db --format text --lock-timeout 1s inspect --names 2>/dev/null | string match -v -- '-*'
	end
end

# The options that take the next word as their value.
set -g __throttle_valued --db --format --lock-timeout --on-error --limit --burst --algorithm --granularity --cost --lockout --concurrency --ttl --owner --priority --reserve --lease --utilization --seed --good-below --bad-above --delay --ramp --conflict-exit-code

# The index of the word past the option at index $argv[1] on the line:
# past its value too if it takes one (--wait: a duration after it).
function __throttle_past_option
	set -l toks (commandline -opc)
	set -l i $argv[1]
	set -l n (math $i + 1)
	if contains -- $toks[$i] $__throttle_valued
		math $i + 2
	else if test "$toks[$i]" = --wait; and test $n -le (count $toks); and string match -qr '^([0-9.]*(ms|w|d|h|m|s))+$|^[0-9][0-9.]*$' -- $toks[$n]
		math $i + 2
	else
		echo $n
	end
end

# The index of the command word on the line (options and their values,
# which may come first, skipped), or false if none is there yet.
function __throttle_cmd_at
	set -l toks (commandline -opc)
	set -l i 2
	while test $i -le (count $toks)
		if test "$toks[$i]" = --
			set i (math $i + 1)
			test $i -le (count $toks); and echo $i
			return
		else if string match -q -- '-*' $toks[$i]
			set i (__throttle_past_option $i)
		else
			echo $i
			return 0
		end
	end
	return 1
end

# Is the command on the line one of argv?  (A key that is a command's
# name is not: consume run --c offers consume's options.)
function __throttle_cmd_in
	set -l toks (commandline -opc)
	set -l i (__throttle_cmd_at); or return 1
	contains -- $toks[$i] $argv; or return 1
	# policy list, show and delete take no limit options: only set does
	if test "$toks[$i]" = policy
		set -l sub $toks[(math $i + 1)]
		contains -- "$sub" list show delete; and return 1
	end
	return 0
end

# Is a key still to come (none after the command yet)?
function __throttle_wants_key
	set -l toks (commandline -opc)
	set -l i (__throttle_cmd_at); or return 1
	set i (math $i + 1)
	while test $i -le (count $toks)
		if test "$toks[$i]" = --
			# the key is the word after it: wanted if none is there
			test $i -eq (count $toks)
			return
		else if string match -q -- '-*' $toks[$i]
			set i (__throttle_past_option $i)
		else
			return 1
		end
	end
	return 0
end

# run ... KEY -- COMMAND: past the --, complete as for the command
# itself; with no key before the --, run [options] -- KEY -- COMMAND:
# past the second.  The index of the -- the command follows, or false
# while the line has not reached the command.
function __throttle_run_command_at
	set -l toks (commandline -opc)
	set -l i (contains -i -- -- $toks); or return 1
	set -l j (math (contains -i -- run $toks) + 1)
	set -l haskey 0
	while test $j -lt $i
		switch $toks[$j]
			case --db --format --lock-timeout --on-error --limit --burst --algorithm --granularity --cost --lockout --concurrency --ttl --owner --priority --reserve --conflict-exit-code
				set j (math $j + 1)
			case --wait
				# its bound, when the next word is a duration
				set -l n (math $j + 1)
				if test $n -lt $i; and string match -qr '^([0-9.]*(ms|w|d|h|m|s))+$|^[0-9][0-9.]*$' -- $toks[$n]
					set j $n
				end
			case '-*'
			case '*'
				set haskey 1
		end
		set j (math $j + 1)
	end
	if test $haskey = 1
		echo $i
		return 0
	end
	set j (math $i + 2)
	if test (count $toks) -ge $j; and test "$toks[$j]" = --
		echo $j
		return 0
	end
	return 1
end
function __throttle_command
	set -l i (__throttle_run_command_at)
	set -l toks (commandline -opc)
	set -l rest $toks[(math $i + 1)..-1]
	complete --do-complete=(string join ' ' -- $rest (commandline -ct))
end

complete -c throttle -f
complete -c throttle -n "not __throttle_cmd_at >/dev/null" -a consume -d 'take units if the limit allows it now'
complete -c throttle -n "not __throttle_cmd_at >/dev/null" -a check -d 'answer what consume would, changing nothing'
complete -c throttle -n "not __throttle_cmd_at >/dev/null" -a release -d 'give units back'
complete -c throttle -n "not __throttle_cmd_at >/dev/null" -a inspect -d "show a key's limit and state"
complete -c throttle -n "not __throttle_cmd_at >/dev/null" -a reset -d 'forget a key'
complete -c throttle -n "not __throttle_cmd_at >/dev/null" -a acquire -d 'take one of N slots'
complete -c throttle -n "not __throttle_cmd_at >/dev/null" -a renew -d 'extend a lease'
complete -c throttle -n "not __throttle_cmd_at >/dev/null" -a run -d 'run a command under a limit'
complete -c throttle -n "not __throttle_cmd_at >/dev/null" -a shed -d 'shed work while overloaded'
complete -c throttle -n "not __throttle_cmd_at >/dev/null" -a policy -d 'keep limits under a name'
complete -c throttle -n "not __throttle_cmd_at >/dev/null" -a gc -d 'forget keys at rest and ended leases'
complete -c throttle -n "not __throttle_cmd_at >/dev/null" -a verify -d 'check every page and record of the store'
complete -c throttle -n "__throttle_cmd_in verify" -l quick -d 'quick_check, not integrity_check'
complete -c throttle -n "__throttle_cmd_in inspect; and not __fish_seen_argument -l names -l locked" -l names -d 'only the names of the keys'
complete -c throttle -n "__throttle_cmd_in inspect; and not __fish_seen_argument -l names -l locked" -l locked -d 'only the keys locked out now'
complete -c throttle -n "not __throttle_cmd_at >/dev/null" -a batch -d 'answer requests read one per line from stdin'
complete -c throttle -n "not __throttle_cmd_at >/dev/null" -a help -d 'show how to use throttle'
complete -c throttle -n "__throttle_cmd_in policy; and not __fish_seen_subcommand_from set list show delete" -a 'set list show delete'
complete -c throttle -n "__throttle_cmd_in consume check run policy" -l lockout -x -a never -d 'once refused, stay refused this long'
complete -c throttle -n "__throttle_cmd_in consume acquire run" -l wait -d 'wait until allowed (--wait MAX)'
complete -c throttle -n "__throttle_cmd_in help; and __throttle_wants_key" -a "$commands"
complete -c throttle -n "__throttle_cmd_in consume check release inspect reset acquire renew shed; and __throttle_wants_key" -a '(__throttle_keys)'
complete -c throttle -n "__throttle_cmd_in run; and not __throttle_run_command_at >/dev/null" -a '(__throttle_keys)'
complete -c throttle -n "__throttle_cmd_in run; and __throttle_run_command_at >/dev/null" -a '(__throttle_command)'
complete -c throttle -n "__throttle_cmd_in acquire run policy" -l concurrency -x -d 'at most N leases at once'
complete -c throttle -n "__throttle_cmd_in acquire run policy" -l reserve -x -d 'slots kept for critical work'
complete -c throttle -n "__throttle_cmd_in acquire" -l owner -x -a '(__fish_complete_pids)' -d 'the lease ends with this process'
complete -c throttle -n "__throttle_cmd_in acquire renew run policy" -l ttl -x -d 'lease time to live'
complete -c throttle -n "__throttle_cmd_in acquire run shed" -l priority -x -a 'critical high normal low' -d 'priority'
complete -c throttle -n "__throttle_cmd_in release renew" -l lease -x -d 'lease id'
complete -c throttle -n "__throttle_cmd_in run" -l conflict-exit-code -x -d 'exit code when refused'
complete -c throttle -n "__throttle_cmd_in shed" -l utilization -x -a 'auto' -d 'how busy, 0 to 1, or auto'
complete -c throttle -n "__throttle_cmd_in shed" -l seed -x -d 'reproducible draw'
complete -c throttle -n "__throttle_cmd_in shed" -l good-below -x -d 'shed less below'
complete -c throttle -n "__throttle_cmd_in shed" -l bad-above -x -d 'shed more above'
complete -c throttle -n "__throttle_cmd_in shed" -l delay -x -d 'overload before shedding'
complete -c throttle -n "__throttle_cmd_in shed" -l ramp -x -d 'time to shed everything'

complete -c throttle -l db -r -F -d 'state file'
complete -c throttle -l format -x -a 'text json shell' -d 'output format'
complete -c throttle -s q -l quiet -d 'no message when throttled, no summary'
complete -c throttle -l lock-timeout -x -d 'how long to wait for the lock'
complete -c throttle -l on-error -x -a 'fail allow deny' -d 'what a store error becomes'
complete -c throttle -s h -l help -d 'show help'
complete -c throttle -l version -d 'show the version'
complete -c throttle -n "__throttle_cmd_in consume check release run policy" -l limit -x -d 'N units per PERIOD'
complete -c throttle -n "__throttle_cmd_in consume check release run policy" -l burst -x -d 'units that may be taken at once'
complete -c throttle -n "__throttle_cmd_in consume check release run policy" -l algorithm -x -a 'gcra token-bucket fixed-window sliding-window hybrid' -d 'the limiter'
complete -c throttle -n "__throttle_cmd_in consume check release run policy" -l granularity -x -d 'sliding-window sub-window'
complete -c throttle -n "__throttle_cmd_in consume check release run" -l cost -x -d 'units this request takes'
