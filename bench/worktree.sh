#!/bin/sh
# claim --worktree against its baseline, whole process (docs/PERFORMANCE.md,
# issue 31): `tally claim --next --worktree` beside `git worktree add` of
# the same base plus a plain `tally claim --next`, alternated by farm-bench.
#
#   bench/worktree.sh DIR [RUNS]
#
# Makes DIR/repo, a repository holding this tree's files (about 350) with a
# ledger and a plan of 400 ready cells, so every run claims a fresh cell.
# The two are alternated, one of each in turn, and compared pair by pair
# (the repository grows a worktree each run, so running all of one first
# would favour it). CPU is user + system of the process and its children
# (wait4). Needs git, python3. Prints the medians and the median of the
# pairs' ratios.
set -e
dir=$1
runs=${2:-40}
src=$(pwd)
rm -rf "$dir" && mkdir -p "$dir/bin"
CGO_ENABLED=0 go build -o "$dir/bin/tally" ./cmd/tally
export PATH="$dir/bin:$PATH" TALLY_ACTOR=bench GIT_CONFIG_NOSYSTEM=1
git init -q -b main "$dir/repo"
cd "$dir/repo"
git config user.email bench@example.com && git config user.name bench
git -C "$src" archive HEAD | tar x && git add -A && git commit -qm src
tally init >/dev/null
python3 -c "import json; print(json.dumps({'wave':'w','cells':[{'id':'c%03d'%i} for i in range(400)]}))" >"$dir/plan.json"
tally plan "$dir/plan.json" >/dev/null
python3 - "$runs" <<'PY'
import os, statistics, subprocess, sys, time
runs = int(sys.argv[1])
cmds = {"claim --worktree": ["tally", "claim", "--next", "--worktree"],
        "worktree add + claim": ["sh", "-c", 'git worktree add -q -b b$$ ../wb$$ HEAD && exec tally claim --next']}
cpu = {k: [] for k in cmds}
wall = {k: [] for k in cmds}
null = open(os.devnull, "w")
for i in range(runs + 2):
    for k, argv in cmds.items():
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=null)
        _, status, ru = os.wait4(p.pid, 0)
        if status != 0:
            sys.exit("%s failed: %d" % (k, status))
        if i >= 2:  # two warm-up rounds
            wall[k].append((time.perf_counter() - t0) * 1e3)
            cpu[k].append((ru.ru_utime + ru.ru_stime) * 1e3)
a, b = cmds
for k in cmds:
    print("%-22s cpu ms %.1f  wall ms %.1f" % (k, statistics.median(cpu[k]), statistics.median(wall[k])))
print("ratio, median of pairs: cpu %.3f  wall %.3f" % (
    statistics.median(x / y for x, y in zip(cpu[a], cpu[b])),
    statistics.median(x / y for x, y in zip(wall[a], wall[b]))))
PY
