package ledger

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Goroutines of one process replace the same record at once (a library
// user's views beside its appends): every write succeeds, and the record is
// always one whole write, never torn or missing.
func TestWriteFileAtomicConcurrentInOneProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tally", "appended")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if err := writeFileAtomic(path, []byte(fmt.Sprintf("writer %d write %03d\n", g, i))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	b, err := os.ReadFile(path)
	var g, i int
	if n, _ := fmt.Sscanf(string(b), "writer %d write %d\n", &g, &i); err != nil || n != 2 || len(b) != len("writer 0 write 000\n") {
		t.Fatalf("record after the writes: %q, %v", b, err)
	}
	if left, _ := filepath.Glob(path + ".tmp*"); len(left) > 0 {
		t.Fatalf("temporaries left: %v", left)
	}
}
