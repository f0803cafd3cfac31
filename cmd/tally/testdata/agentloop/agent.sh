#!/bin/sh
# agent.sh TALLY WAVE HINT SHARED LOG: one agent of the agent-loop test. It
# drains wave WAVE using nothing but `tally --json` and exit codes (no jq:
# fields are read with sed from tally's one-line JSON objects), and acts on
# every answer by its exit class and error code alone:
#   0 done, go on; 1 retry (the code says how); 2 refused: only the codes
#   below are expected, anything else stops the agent; 3 integrity: stop.
# It ends on its own when claim --next says PLAN-COMPLETE. Every refusal it
# meets is logged to LOG as "met CODE COMMAND".
# HINT is a cell a scheduler suggested and someone else may hold; SHARED is a
# directory the agents share, standing in for the outside world (a job that
# fails on its first run).
set -u
tally=$1 wave=$2 hint=$3 shared=$4 log=$5
failed=""   # cells this agent failed, to requeue when nothing else is left
hb=heartbeat

call() {
	out=$("$tally" --json "$@")
	rc=$?
	code=$(printf '%s' "$out" | sed -n 's/.*"code":"\([A-Z-]*\)".*/\1/p')
}
field() { printf '%s' "$out" | sed -n "s/.*\"$1\":\"*\([^\",}]*\).*/\1/p"; }
met() { echo "met $code $1" >>"$log"; }
stop() { echo "agent $TALLY_ACTOR: $1: exit $rc $out" >&2; exit 1; }

# heartbeat CELL EPOCH: extend the lease. An older tally has no heartbeat
# command: USAGE (exit 2) tells the agent to use renew from then on.
heartbeat() {
	if [ "$hb" = heartbeat ]; then
		call heartbeat "$1" --epoch "$2"
		[ "$rc" -eq 2 ] && [ "$code" = USAGE ] || stop "heartbeat"
		met heartbeat
		hb=renew
	fi
	call renew "$1" --epoch "$2"
}

# work CELL EPOCH: the cell's job, its commit and its receipt.
work() {
	# The claim's answer may be lost in transit; claiming again tells the
	# agent whether it holds the cell: LEASE-OWNED (exit 2, yours) says so
	# and carries the epoch to renew under.
	call claim "$1"
	[ "$rc" -eq 2 ] && [ "$code" = LEASE-OWNED ] || stop "claim again"
	met "claim again"
	epoch=$(field epoch)
	heartbeat "$1" "$epoch"
	[ "$rc" -eq 0 ] || stop "renew"
	name=$(printf '%s' "$1" | tr / -)
	if [ "$name" = "$wave-flaky" ] && mkdir "$shared/flaky-ran" 2>/dev/null; then
		call fail "$1" --epoch "$epoch" --reason "the job failed on its first run"
		[ "$rc" -eq 0 ] || stop "fail"
		failed="$failed $1"
		return
	fi
	echo "$1" >"out-$name"
	git add "out-$name" && git commit -q -m "$1" || { rc=0 out=""; stop "git commit"; }
	call done "$1" --epoch "$epoch"
	[ "$rc" -eq 0 ] || stop "done"
	# A heartbeat already on its way when the receipt landed: CELL-STATE
	# (exit 2) says the cell is finished, so heartbeating stops.
	heartbeat "$1" "$epoch"
	[ "$rc" -eq 2 ] && [ "$code" = CELL-STATE ] || stop "late heartbeat"
	met "late heartbeat"
}

# An agent acts only on a ledger that verifies: a view says which verified
# state it answered from (and refuses, exit 3, on one that does not).
call next --wave "$wave"
[ "$rc" -eq 0 ] && printf '%s' "$out" | grep -q '"verified":{"head":"[0-9a-f]*","through":[0-9]' || stop "next"

call claim "$hint"
case "$rc:$code" in
1:LEASE-HELD) met hint ;; # someone else's: take other work
*) stop "claim of the hint" ;;
esac

while :; do
	call claim --next --wave "$wave" --wait 1s
	case "$rc" in
	0) work "$(field wave)/$(field cell)" ;;
	1)
		case "$code" in
		WAIT-TIMEOUT)
			# Nothing became claimable: what is left waits on cells that
			# failed. Requeue the ones this agent failed.
			met "claim --next"
			for c in $failed; do
				call requeue "$c"
				[ "$rc" -eq 0 ] || stop "requeue"
			done
			failed=""
			;;
		*) met "claim --next" ;; # CONFLICT, REF-LOCKED, ...: the same request again
		esac
		;;
	2)
		[ "$code" = PLAN-COMPLETE ] || stop "claim --next"
		met "claim --next"
		exit 0
		;;
	*) stop "integrity" ;;
	esac
done
