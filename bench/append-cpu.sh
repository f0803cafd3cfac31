#!/bin/sh
# CPU of one whole-process append, tally binaries against git's plumbing
# append, alternated in one run (docs/PERFORMANCE.md at b45f87f, "Fewer files an
# append").
#
#   bench/append-cpu.sh ROUNDS TALLY_BIN...
#
# Makes a repository with a ledger of 300 notes (appended by the first
# TALLY_BIN) and a git ref on its tip, then runs ROUNDS rounds of `BIN note x`
# for each TALLY_BIN and of git's append (rev-parse + commit-tree +
# update-ref, in sh), one process of each in turn. CPU is user + system time
# of the process and its children (wait4); wall is the time to exit. Prints,
# for each, the median and quartiles, and the ratio of medians to git's.
# Needs git, python3. Run with TMPDIR on the filesystem you care about.
set -e
rounds=$1
shift
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
export HOME=$w/home GIT_CONFIG_NOSYSTEM=1 TALLY_ACTOR=bench
mkdir -p "$HOME"
git config --global user.email bench@example.com
git config --global user.name bench
git init -q "$w/r"
cd "$w/r"
git commit -q --allow-empty -m i
"$1" init >/dev/null
for i in $(seq 300); do "$1" note "n$i" >/dev/null; done
git update-ref refs/bench/git refs/tally/ledger
T=$(git rev-parse 'refs/tally/ledger^{tree}')
printf '#!/bin/sh\nold=$(git rev-parse refs/bench/git) && new=$(git commit-tree -p "$old" -m n %s) && git update-ref refs/bench/git "$new" "$old"\n' "$T" >"$w/gitappend.sh"
python3 - "$rounds" "$w/gitappend.sh" "$@" <<'EOF'
import os, statistics, subprocess, sys, time
rounds, script, bins = int(sys.argv[1]), sys.argv[2], sys.argv[3:] + ["git"]
cpu = {b: [] for b in bins}
wall = {b: [] for b in bins}
null = open(os.devnull, "w")
for _ in range(rounds):
    for b in bins:
        argv = ["sh", script] if b == "git" else [b, "note", "x"]
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=null)
        _, status, ru = os.wait4(p.pid, 0)
        wall[b].append((time.perf_counter() - t0) * 1e3)
        if status != 0:
            sys.exit("%s failed: %d" % (b, status))
        cpu[b].append((ru.ru_utime + ru.ru_stime) * 1e3)
def q(v):
    v = sorted(v)
    return "%.2f (%.2f-%.2f)" % (statistics.median(v), v[len(v) // 4], v[3 * len(v) // 4])
g = statistics.median(cpu["git"])
for b in bins:
    print("%-24s cpu ms %-22s wall ms %-22s cpu/git %.2f" % (b, q(cpu[b]), q(wall[b]), statistics.median(cpu[b]) / g))
EOF
