#!/bin/sh
# The server's per-push pieces seq8 changed, CPU per run (docs/PERFORMANCE.md at b45f87f,
# "Sequenced claims, git's share").
#
#   bench/seqclaim-pieces.sh BASE_TALLY NEW_TALLY [N]
#
# Installs each build's server hooks in a bare repository of its own, then,
# in three alternated rounds of N (default 200) runs each: each build's
# pre-receive shim fed one request-only command (the path a sequenced claim
# takes: the routing read, then exit without tally), git for-each-ref of the
# repository (what rev-list --alternate-refs ran under receive-pack) and
# /usr/bin/true (what core.alternateRefsCommand=true runs instead). Prints
# the user+system CPU per run. Needs git and GNU time.
set -e
base=$(realpath "$1") new=$(realpath "$2") n=${3:-200}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
export HOME=$d GIT_CONFIG_NOSYSTEM=1
for b in base new; do
	git init -q --bare "$d/$b.git"
	eval "bin=\$$b"
	(cd "$d/$b.git" && "$bin" hooks install --server >/dev/null)
done
zero=0000000000000000000000000000000000000000
printf '%s %s refs/for/tally/claim-next\n' $zero 1111111111111111111111111111111111111111 >"$d/input"
for r in 1 2 3; do
	for what in base new for-each-ref true; do
		case $what in
		base | new) dir=$d/$what.git cmd="./hooks/pre-receive <'$d/input'" ;;
		for-each-ref) dir=$d/new.git cmd="git --git-dir=. for-each-ref '--format=%(objectname)' >/dev/null" ;;
		true) dir=$d/new.git cmd="/usr/bin/true ." ;;
		esac
		(cd "$dir" && /usr/bin/time -f "$r $what %U %S" sh -c "i=0; while [ \$i -lt $n ]; do $cmd || exit 1; i=\$((i+1)); done") 2>&1 |
			awk -v n="$n" 'NF == 4 {printf "round %s %-13s %.2f ms\n", $1, $2, ($3 + $4) * 1000 / n}'
	done
done
