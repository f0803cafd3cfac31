#!/bin/sh
# Captures one server-side proc-receive run of a sequenced claim, so its
# process (srv-tally) can be replayed alone under callgrind or strace
# (docs/PERFORMANCE.md at b45f87f, "The sequencer's process").
#
#   bench/seqserve-capture.sh TALLY_BIN OUT [CLAIMS]
#
# Runs bench/seqclaim-cpu.sh's scenario with 2 agents (a loopback git
# daemon, TALLY_BIN's server hooks, a 500-cell plan, one claim per clone and
# then CLAIMS, default 6, per clone at once) with the server's tally a
# wrapper that runs one proc-receive at a time (flock): each proc-receive run's stdin goes to OUT/<n>/stdin and the
# repository as it was before that run to OUT/<n>/repo (the server appends
# a 10th pack by merging the small ones: runs 10, 20, ... merge). Replay one
# on a fresh copy each time (the run moves the ledger):
#
#   cp -a OUT/12/repo R && (cd R && GIT_DIR=. GODEBUG=asyncpreemptoff=1 \
#     valgrind --tool=callgrind BIN hook proc-receive <OUT/12/stdin >/dev/null)
#
# (without asyncpreemptoff callgrind can abort on the runtime's preemption
# signals; strace -f -c in place of valgrind counts the system calls).
set -e
if [ "$1" = --hook ]; then # the server's tally: capture, then run the real one
	out=$2 bin=$3
	shift 3
	if [ "$1 $2" = "hook proc-receive" ]; then
		exec 9>"$out/lock" # one run at a time: its number, its copy
		flock 9
		c=$(($(cat "$out/count" 2>/dev/null || echo 0) + 1))
		echo "$c" >"$out/count"
		mkdir -p "$out/$c/repo"
		# not the other pushes' quarantines, which come and go meanwhile
		tar -c --exclude='./objects/tmp_objdir-*' . | tar -x -C "$out/$c/repo"
		tee "$out/$c/stdin" | "$bin" "$@" # git waits for the version line: no cat
		exit $?
	fi
	exec "$bin" "$@"
fi
bin=$(realpath "$1") out=$(realpath "$2") n=${3:-6}
mkdir -p "$out"
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
printf '#!/bin/sh\nexec %s --hook %s %s "$@"\n' "$(realpath "$0")" "$out" "$bin" >"$w/srv-tally"
chmod +x "$w/srv-tally"
sh "$(dirname "$0")/seqclaim-cpu.sh" --scenario "$bin" "$n" "$w/srv-tally" 2
echo "$(cat "$out/count") proc-receive runs captured in $out"
