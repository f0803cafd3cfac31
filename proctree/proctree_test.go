package proctree

import (
	"context"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"
)

// roleVar makes the test binary a member of the tree the test ends.
const roleVar = "PROCTREE_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleVar) {
	case "parent": // starts a child that shares its stdout, then waits
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), roleVar+"=child")
		child.Stdout = os.Stdout
		if err := child.Start(); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("started\n")
		child.Wait()
		os.Exit(0)
	case "child":
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Cancelling the context of a command started with KillGroupOnCancel ends
// the command and the child it started: the pipe both hold as stdout
// reaches its end only when neither is left.
func TestKillGroupOnCancelEndsTheTree(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), roleVar+"=parent")
	cmd.Stdout = w
	KillGroupOnCancel(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	started := make([]byte, len("started\n"))
	if _, err := io.ReadFull(r, started); err != nil {
		t.Fatalf("the tree did not start: %v", err)
	}
	cancel()
	cmd.Wait()
	ended := make(chan error, 1)
	go func() { _, err := io.ReadAll(r); ended <- err }()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a minute after the cancel, a process of the tree still holds its stdout")
	}
}
