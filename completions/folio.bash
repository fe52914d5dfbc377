# bash completion for folio and foliod. Commands, options and which options take a value are read
# from the programs' own --help, so they follow the installed version; collection names come from
# the running daemon (`folio stats`), if it answers within a second.

_folio_collections() {
    timeout 1 folio "$@" --json stats 2>/dev/null |
        grep -o '"collections":{[^}]*}' | grep -o '"[^"]*":[0-9]' | sed 's/^"\(.*\)":[0-9]$/\1/'
}

# Options of `folio COMMAND --help`, and of those the ones followed by a VALUE.
_folio_options() { folio "$@" --help 2>/dev/null | grep -oE -- '(^|[[ ])--?[a-z][a-z-]*([] =]|$)' | sed 's/^[[ ]//; s/[] =]$//' | sort -u; }
_folio_valued() { folio "$@" --help 2>/dev/null | grep -oE -- '--?[a-z][a-z-]* [A-Z]' | sed 's/ .*//' | sort -u; }

_folio() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    local socket=() command="" position=0 i valued=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        --socket) socket=(--socket "${COMP_WORDS[i + 1]}"); ((i++)) ;;
        --json) ;;
        -*)
            if [[ -n $command && " $valued " == *" ${COMP_WORDS[i]} "* ]]; then ((i++)); fi ;;
        *)
            if [[ -z $command ]]; then
                command=${COMP_WORDS[i]}
                valued=$(_folio_valued "$command" | tr '\n' ' ')
            else
                ((position++))
            fi ;;
        esac
    done
    case $prev in
    --socket) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --collection) COMPREPLY=($(compgen -W "$(_folio_collections "${socket[@]}")" -- "$cur")); return ;;
    esac
    if [[ -z $command ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--socket --json --help --version" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$(folio --help 2>/dev/null | awk '/^  [a-z]+( |$)/ { print $1 }' | sort -u)" -- "$cur"))
        fi
        return
    fi
    if [[ " $valued " == *" $prev "* ]]; then return; fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_folio_options "$command") --help" -- "$cur"))
        return
    fi
    case $command:$position in
    view:0) COMPREPLY=($(compgen -W "define list drop" -- "$cur")) ;;
    schema:0) COMPREPLY=($(compgen -W "define get list drop" -- "$cur")) ;;
    file:0) COMPREPLY=($(compgen -W "put get info ls rm orphans prune" -- "$cur")) ;;
    file:1) [[ ${COMP_WORDS[COMP_CWORD - 1]} == put ]] && COMPREPLY=($(compgen -f -- "$cur")) ;;
    create:0 | get:0 | update:0 | delete:0 | history:0 | list:0 | count:0 | links:0 | backlinks:0 | schema:1)
        COMPREPLY=($(compgen -W "$(_folio_collections "${socket[@]}")" -- "$cur")) ;;
    view:2) [[ ${COMP_WORDS[COMP_CWORD - 2]} == define ]] && COMPREPLY=($(compgen -W "$(_folio_collections "${socket[@]}")" -- "$cur")) ;;
    backup:0) COMPREPLY=($(compgen -d -- "$cur")) ;;
    batch:*) COMPREPLY=($(compgen -f -- "$cur")) ;;
    esac
}

_foliod() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    case $prev in
    --data | --backup-dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --config | --socket | --metrics-socket) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --durability) COMPREPLY=($(compgen -W "full relaxed none" -- "$cur")); return ;;
    --log-level) COMPREPLY=($(compgen -W "error notice info" -- "$cur")); return ;;
    esac
    if [[ $prev == --* && $prev != --help && $prev != --version && $cur != -* ]]; then return; fi
    if [[ $cur == -* || $COMP_CWORD -gt 1 ]]; then
        COMPREPLY=($(compgen -W "$(foliod --help 2>/dev/null | grep -oE -- '^  --[a-z][a-z-]*' | sed 's/^ *//' | sort -u) --help --version" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "rebuild verify import" -- "$cur"))
    fi
}

complete -o default -F _folio folio
complete -o default -F _foliod foliod
