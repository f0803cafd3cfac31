package errs_test

import (
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/internal/testrepo"
)

// emittedCodes returns every code the module's non-test code outside errs
// names (errs.X for a Code constant X), mapped to one place that uses it. A
// string literal spelling a code is an error: a typo there would compile and
// fall into the default class, so codes are written as constants only.
func emittedCodes(t *testing.T, declared map[string]string) map[string]string {
	t.Helper()
	values := map[string]string{}
	for name, v := range declared {
		values[v] = name
	}
	codes := map[string]string{}
	errsDir := filepath.Join("..", "errs")
	testrepo.EachGoFile(t, "..", false, func(fset *token.FileSet, path string, f *ast.File) {
		if filepath.Dir(path) == errsDir {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ImportSpec:
				return false
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING && values[s] != "" {
					t.Errorf("%s: code %q spelled as a string: write errs.%s", fset.Position(n.Pos()), s, values[s])
				}
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && id.Name == "errs" {
					if v, ok := declared[n.Sel.Name]; ok {
						if _, seen := codes[v]; !seen {
							codes[v] = fset.Position(n.Pos()).String()
						}
					}
				}
			}
			return true
		})
	})
	return codes
}

// documentedCodes reads the code table of docs/FORMAT.md §12: code -> class.
func documentedCodes(t *testing.T) map[string]errs.Class {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "FORMAT.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "## 12. Error codes and exit classes")
	if !ok {
		t.Fatal("docs/FORMAT.md has no §12 code table")
	}
	out := map[string]errs.Class{}
	for _, line := range strings.Split(table, "\n") {
		f := strings.Split(line, "|")
		if len(f) < 4 || !strings.HasPrefix(strings.TrimSpace(f[1]), "`") {
			continue
		}
		class, err := strconv.Atoi(strings.TrimSpace(f[2]))
		if err != nil {
			t.Fatalf("FORMAT.md §12: bad class in %q", line)
		}
		out[strings.Trim(strings.TrimSpace(f[1]), "`")] = errs.Class(class)
	}
	return out
}

// TestEveryCodeHasAClass: every Code constant has an exit class, is used
// by some code outside errs (no dead codes), and is listed in the code
// table of docs/FORMAT.md with the same class, so another implementation and
// an agent can rely on it; the table lists nothing else. Code outside errs
// never spells a code as a string literal.
func TestEveryCodeHasAClass(t *testing.T) {
	declared := testrepo.Constants(t, "codes.go", "Code")
	codes, documented := emittedCodes(t, declared), documentedCodes(t)
	if len(declared) < 20 || len(codes) < 20 || len(documented) < 20 {
		t.Fatalf("found only %d declared, %d used and %d documented codes: the scan is broken", len(declared), len(codes), len(documented))
	}
	var values []string
	for _, v := range declared {
		values = append(values, v)
	}
	sort.Strings(values)
	for _, c := range values {
		if !errs.Known(errs.Code(c)) {
			t.Errorf("code %q has no exit class in errs", c)
		}
		if _, used := codes[c]; !used && c != string(errs.Internal) && c != string(errs.IOError) {
			t.Errorf("code %q is declared but nothing outside errs emits it", c)
		}
		if class, ok := documented[c]; !ok {
			t.Errorf("code %q is not in the code table of docs/FORMAT.md", c)
		} else if class != errs.ClassOfCode(errs.Code(c)) {
			t.Errorf("docs/FORMAT.md gives %q class %d, errs %d", c, class, errs.ClassOfCode(errs.Code(c)))
		}
	}
	for c := range documented {
		if !errs.Known(errs.Code(c)) {
			t.Errorf("docs/FORMAT.md documents %q, which errs does not know", c)
		}
	}
}

// TestWithCopies: With never changes the error it is called on, so a
// package-level error or one handed to several callers keeps its details.
func TestWithCopies(t *testing.T) {
	base := errs.New("LEASE-HELD", "held").With("holder", "a")
	more := base.With("epoch", 2)
	if _, ok := base.Details["epoch"]; ok || len(base.Details) != 1 {
		t.Fatalf("With changed the original: %v", base.Details)
	}
	if more.Details["holder"] != "a" || more.Details["epoch"] != 2 || more.Code != "LEASE-HELD" || more.Message != "held" {
		t.Fatalf("With lost something: %+v", more)
	}
}

// TestWithResultUsed: With returns a copy, so a statement that calls it and
// drops the result adds nothing. No code of the module may do that.
func TestWithResultUsed(t *testing.T) {
	testrepo.EachGoFile(t, "..", true, func(fset *token.FileSet, _ string, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if s, ok := n.(*ast.ExprStmt); ok {
				if call, ok := s.X.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "With" {
						t.Errorf("%s: the result of With is dropped (it returns a copy)", fset.Position(s.Pos()))
					}
				}
			}
			return true
		})
	})
}
