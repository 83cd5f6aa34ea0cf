# bash completion for throttle(1)

_throttle_keys()
{
	throttle inspect 2>/dev/null | sed 's/ algorithm=.*//'
}

_throttle()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local commands="consume check release inspect reset help"
	local global="--db --format --quiet -q --lock-timeout --on-error --help --version"
	local decide="--limit --burst --algorithm --granularity --cost"
	local cmd="" w i

	case $prev in
	--algorithm) COMPREPLY=($(compgen -W "gcra token-bucket fixed-window sliding-window hybrid" -- "$cur")); return ;;
	--format) COMPREPLY=($(compgen -W "text json shell" -- "$cur")); return ;;
	--on-error) COMPREPLY=($(compgen -W "fail allow deny" -- "$cur")); return ;;
	--db) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	--limit|--burst|--cost|--lock-timeout|--granularity) return ;;
	esac
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		--db|--format|--lock-timeout|--on-error|--limit|--burst|--algorithm|--granularity|--cost) ((i++)) ;;
		-*) ;;
		*) cmd=$w; break ;;
		esac
	done
	if [[ $cur == -* ]]; then
		case $cmd in
		consume|check|release) COMPREPLY=($(compgen -W "$decide $global" -- "$cur")) ;;
		*) COMPREPLY=($(compgen -W "$global" -- "$cur")) ;;
		esac
		return
	fi
	case $cmd in
	"") COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
	help) COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
	*)
		local IFS=$'\n'
		COMPREPLY=($(compgen -W "$(_throttle_keys)" -- "$cur"))
		;;
	esac
}
complete -F _throttle throttle
