# fish completion for throttle(1)

set -l commands consume check release inspect reset help
function __throttle_keys
	throttle inspect 2>/dev/null | string replace -r ' algorithm=.*' ''
end

complete -c throttle -f
complete -c throttle -n "not __fish_seen_subcommand_from $commands" -a consume -d 'take units if the limit allows it now'
complete -c throttle -n "not __fish_seen_subcommand_from $commands" -a check -d 'answer what consume would, changing nothing'
complete -c throttle -n "not __fish_seen_subcommand_from $commands" -a release -d 'give units back'
complete -c throttle -n "not __fish_seen_subcommand_from $commands" -a inspect -d "show a key's limit and state"
complete -c throttle -n "not __fish_seen_subcommand_from $commands" -a reset -d 'forget a key'
complete -c throttle -n "not __fish_seen_subcommand_from $commands" -a help -d 'show how to use throttle'
complete -c throttle -n "__fish_seen_subcommand_from help" -a "$commands"
complete -c throttle -n "__fish_seen_subcommand_from consume check release inspect reset" -a '(__throttle_keys)'

complete -c throttle -l db -r -F -d 'state file'
complete -c throttle -l format -x -a 'text json shell' -d 'output format'
complete -c throttle -s q -l quiet -d 'no message when throttled'
complete -c throttle -l lock-timeout -x -d 'how long to wait for the lock'
complete -c throttle -l on-error -x -a 'fail allow deny' -d 'what a store error becomes'
complete -c throttle -l help -d 'show help'
complete -c throttle -l version -d 'show the version'
complete -c throttle -n "__fish_seen_subcommand_from consume check release" -l limit -x -d 'N units per PERIOD'
complete -c throttle -n "__fish_seen_subcommand_from consume check release" -l burst -x -d 'units that may be taken at once'
complete -c throttle -n "__fish_seen_subcommand_from consume check release" -l algorithm -x -a 'gcra token-bucket fixed-window sliding-window hybrid' -d 'the limiter'
complete -c throttle -n "__fish_seen_subcommand_from consume check release" -l granularity -x -d 'sliding-window sub-window'
complete -c throttle -n "__fish_seen_subcommand_from consume check release" -l cost -x -d 'units this request takes'
