package testrepo

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// With FsckVar set to 1, a repository New makes refuses a push of an
// object git fsck reports (here a commit with a negative time, which git
// calls badDateOverflow), as a server with receive.fsckObjects does;
// without it, the repository takes it. CI's run of the ledger, receipt and
// remote tests under FsckVar relies on the first.
func TestCheckObjects(t *testing.T) {
	for _, strict := range []bool{false, true} {
		if strict {
			t.Setenv(FsckVar, "1")
		} else {
			t.Setenv(FsckVar, "")
		}
		server, client := New(t), New(t)
		raw := fmt.Sprintf("tree %s\nauthor a <a> -1 +0000\ncommitter a <a> -1 +0000\n\nbefore 1970\n",
			Git(t, client, "rev-parse", "HEAD^{tree}"))
		write := exec.Command("git", "hash-object", "-t", "commit", "-w", "--literally", "--stdin")
		write.Dir, write.Env, write.Stdin = client, Env(), strings.NewReader(raw)
		id, err := write.Output()
		if err != nil {
			t.Fatal(err)
		}
		push := exec.Command("git", "push", server, strings.TrimSpace(string(id))+":refs/heads/negative")
		push.Dir, push.Env = client, Env()
		out, err := push.CombinedOutput()
		if (err != nil) != strict {
			t.Fatalf("%s=%v: push of a commit git fsck refuses: %v\n%s", FsckVar, strict, err, out)
		}
	}
}
