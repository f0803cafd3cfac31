package errs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tally-dev/tally/errs"
)

// emittedCodes returns every code the module's non-test code spells as a
// literal where an error code goes: the first argument of errs.New and
// errs.Wrap, and the Code field of a composite literal. It maps each code to
// one place that emits it.
func emittedCodes(t *testing.T) map[string]string {
	t.Helper()
	root := filepath.Join("..")
	codes := map[string]string{}
	fset := token.NewFileSet()
	note := func(lit ast.Expr) {
		if bl, ok := lit.(*ast.BasicLit); ok && bl.Kind == token.STRING {
			if s, err := strconv.Unquote(bl.Value); err == nil {
				if _, seen := codes[s]; !seen {
					codes[s] = fset.Position(bl.Pos()).String()
				}
			}
		}
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && len(n.Args) > 0 {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "errs" && (sel.Sel.Name == "New" || sel.Sel.Name == "Wrap") {
						note(n.Args[0])
					}
				}
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Code" {
					note(n.Value)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
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

// TestEveryCodeHasAClass: every code the code emits is one errs knows (so
// its exit class is chosen, not the default), and the code table of
// docs/FORMAT.md lists it with that class, so another implementation and an
// agent can rely on it. Every documented code is known.
func TestEveryCodeHasAClass(t *testing.T) {
	codes, documented := emittedCodes(t), documentedCodes(t)
	if len(codes) < 20 || len(documented) < 20 {
		t.Fatalf("found only %d codes and %d documented: the scan is broken", len(codes), len(documented))
	}
	var names []string
	for c := range codes {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		if !errs.Known(c) {
			t.Errorf("%s: code %q has no exit class in errs", codes[c], c)
		}
		if class, ok := documented[c]; !ok {
			t.Errorf("%s: code %q is not in the code table of docs/FORMAT.md", codes[c], c)
		} else if class != errs.ClassOfCode(c) {
			t.Errorf("docs/FORMAT.md gives %q class %d, errs %d", c, class, errs.ClassOfCode(c))
		}
	}
	for c := range documented {
		if !errs.Known(c) {
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
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
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
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
