package lease_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRulesDoNoIO: the lease rules are a pure state machine (the writer,
// verify and the hooks do the I/O around them), so neither lease nor any
// package of this module it depends on imports a package that reaches the
// file system, processes or the network.
func TestRulesDoNoIO(t *testing.T) {
	const module = "github.com/tally-dev/tally/"
	forbidden := map[string]bool{"os": true, "os/exec": true, "net": true, "net/http": true, "io/ioutil": true, "io/fs": true}
	seen := map[string]bool{}
	var visit func(pkg, from string)
	visit = func(pkg, from string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		dir := filepath.Join("..", strings.TrimPrefix(pkg, module))
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("package %s: no Go files in %s (%v)", pkg, dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			ast, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range ast.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				switch {
				case forbidden[path]:
					t.Errorf("%s imports %s (reached from lease through %s): the rules must do no I/O", f, path, from)
				case strings.HasPrefix(path, module):
					visit(path, from+" -> "+path)
				}
			}
		}
	}
	visit(module+"lease", "lease")
}
