//go:build linux && !portable

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
)

// elsewhere runs `tally -C r.dir --json args...` as actor in another
// process table made real with unshare(1): the new namespaces named by
// unshareArgs, then setup (a shell snippet, may be empty) before tally is
// exec'd. The test is skipped, saying why, where unshare cannot do that here.
func (r *repo) elsewhere(actor string, unshareArgs []string, setup string, args ...string) testrepo.Result {
	r.t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		r.t.Skip("unshare(1) is not installed: cannot make another PID namespace or mount a boot id")
	}
	script := setup + `exec "$TALLY" -C "$REPO" --json "$@"`
	cmd := exec.Command("unshare", append(append(unshareArgs, "sh", "-c", script, "sh"), args...)...)
	cmd.Env = testrepo.Env(append(r.env(), "TALLY_ACTOR="+actor, "TALLY="+testrepo.Tally(r.t), "REPO="+r.dir)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := testrepo.Result{Stdout: stdout.String(), Stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.Code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatalf("unshare %v: %v", unshareArgs, err)
	}
	if err := json.Unmarshal(stdout.Bytes(), &res.JSON); err != nil {
		if strings.Contains(res.Stderr, "unshare") || strings.Contains(res.Stderr, "mount") {
			r.t.Skipf("unshare %v cannot run here: %s", unshareArgs, strings.TrimSpace(res.Stderr))
		}
		r.t.Fatalf("tally %v in unshare %v: stdout is not JSON: %q %q", args, unshareArgs, res.Stdout, res.Stderr)
	}
	return res
}

// otherPIDNamespace is a fresh PID namespace with its own /proc.
var otherPIDNamespace = []string{"--pid", "--fork", "--mount-proc"}

// fakeBoot returns the unshare arguments and setup that show tally another
// boot id: a private mount namespace where a file holding another UUID is
// bind-mounted over /proc/sys/kernel/random/boot_id. It is what the process
// reads after a reboot; the PID namespace stays the same.
func fakeBoot(t *testing.T) ([]string, string) {
	f := filepath.Join(t.TempDir(), "boot_id")
	if err := os.WriteFile(f, []byte("11111111-2222-4333-8444-555555555555\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"--mount"}, fmt.Sprintf("mount --bind %q /proc/sys/kernel/random/boot_id && ", f)
}

// refuseElsewhere is refuse for elsewhere.
func (r *repo) refuseElsewhere(exit int, code, actor string, unshareArgs []string, setup string, args ...string) map[string]any {
	r.t.Helper()
	before := r.tip()
	return r.checkRefusal(r.elsewhere(actor, unshareArgs, setup, args...), before, exit, code, args)
}

// TestCLIDeadHolderProcessTable: --reclaim-dead takes a live lease only
// from a process in the holder's own process table. A claim records the boot
// id and PID-namespace inode it runs in (read back here from /proc by the
// test itself); a claimant in another PID namespace (a real one, made with
// unshare) cannot see the holder's pid and is refused even while the
// holder's process runs and after it is gone, as is one that reads another
// boot id; the same claimant in the holder's namespace takes the lease once
// the holder is gone.
func TestCLIDeadHolderProcessTable(t *testing.T) {
	r := newRepo(t).at(0)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("p.json", `{"wave":"w","cells":[{"id":"live"},{"id":"boot"}]}`))

	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()
	r.ok("A", "claim", "w/live", "--pid", fmt.Sprint(sleeper.Process.Pid))
	l := obj(t, obj(t, r.ok("A", "show", "w/live"), "cell"), "lease")
	boot, ns := procTable(t)
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", sleeper.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	start, _ := strconv.ParseFloat(strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))[19], 64)
	if l["boot_id"] != boot || l["pid_ns"] != float64(ns) || l["pid_start"] != start {
		t.Fatalf("lease %v, want boot_id %s pid_ns %d pid_start %v", l, boot, ns, start)
	}

	r.at(time.Minute)
	// The holder runs, but not in the claimant's namespace, where its pid is
	// free: the claimant cannot know, so the lease stays.
	e := r.refuseElsewhere(1, "LEASE-HELD", "B", otherPIDNamespace, "", "claim", "w/live", "--reclaim-dead", "--pid", "1")
	if e["holder"] != "A" {
		t.Fatalf("LEASE-HELD details %v", e)
	}
	sleeper.Process.Kill()
	sleeper.Wait()
	r.refuseElsewhere(1, "LEASE-HELD", "B", otherPIDNamespace, "", "claim", "w/live", "--reclaim-dead", "--pid", "1")
	if res := r.ok("B", "claim", "w/live", "--reclaim-dead"); res["takeover"] != "dead-holder" {
		t.Fatalf("same namespace, holder gone: %v", res)
	}

	// Another boot: the holder's pid means nothing there.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	r.ok("A", "claim", "w/boot", "--pid", fmt.Sprint(gone.Process.Pid))
	args, setup := fakeBoot(t)
	r.refuseElsewhere(1, "LEASE-HELD", "B", args, setup, "claim", "w/boot", "--reclaim-dead")
	if res := r.ok("B", "claim", "w/boot", "--reclaim-dead"); res["takeover"] != "dead-holder" {
		t.Fatalf("same boot, holder gone: %v", res)
	}
	r.ok("A", "verify", "--full")
}

// TestCLIDeadHolderPIDReused: a holder whose pid was given to another
// process is gone: the lease records its start time. In a fresh PID
// namespace the test frees the holder's pid and makes the kernel hand it out
// again (ns_last_pid), to a process that started later; --reclaim-dead then
// takes the lease, where a pid probe alone would call the holder alive.
func TestCLIDeadHolderPIDReused(t *testing.T) {
	r := newRepo(t).at(0)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("p.json", `{"wave":"w","cells":[{"id":"reuse"}]}`))
	// Inside the namespace: X holds the lease; X dies; a new process Y gets
	// X's pid with a later start time (retried until the clock tick moved,
	// should both start within one tick); then B reclaims, as B's output.
	setup := `
sleep 600 & X=$!
TALLY_ACTOR=A "$TALLY" -C "$REPO" --json claim w/reuse --pid $X >/dev/null || exit 90
SX=$(cut -d' ' -f22 /proc/$X/stat)
kill $X; wait $X
for i in $(seq 1000); do
	echo $((X-1)) > /proc/sys/kernel/ns_last_pid || exit 91
	sleep 600 & Y=$!
	[ "$Y" = "$X" ] && [ "$(cut -d' ' -f22 /proc/$Y/stat)" != "$SX" ] && break
	kill $Y; wait $Y
done
[ "$Y" = "$X" ] || exit 92
`
	res := r.elsewhere("B", otherPIDNamespace, setup, "claim", "w/reuse", "--reclaim-dead", "--pid", "1")
	if res.Code != 0 || res.JSON["takeover"] != "dead-holder" {
		t.Fatalf("reused pid: exit %d %s %s", res.Code, res.Stdout, res.Stderr)
	}
	r.ok("A", "verify", "--full")
}
