package chain_test

import (
	"go/ast"
	"go/token"
	"strconv"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// TestKindsAreConstants: no non-test code spells an entry kind as a string
// literal where a kind goes (a Kind field, a comparison with .Kind or kind, a
// case of a switch on either): a typo there would compile and silently match nothing.
// Kinds are written chain.KindX.
func TestKindsAreConstants(t *testing.T) {
	kinds := map[string]bool{}
	for _, v := range testrepo.Constants(t, "kinds.go", "Kind") {
		kinds[v] = true
	}
	if len(kinds) < 10 {
		t.Fatalf("found only %d kinds in kinds.go: the scan is broken", len(kinds))
	}
	var fset *token.FileSet
	check := func(e ast.Expr) {
		if bl, ok := e.(*ast.BasicLit); ok && bl.Kind == token.STRING {
			if s, _ := strconv.Unquote(bl.Value); kinds[s] {
				t.Errorf("%s: kind %q spelled as a string: write a chain.Kind constant", fset.Position(bl.Pos()), s)
			}
		}
	}
	isKind := func(e ast.Expr) bool { // x.Kind, or a variable named kind
		if id, ok := e.(*ast.Ident); ok {
			return id.Name == "kind"
		}
		sel, ok := e.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "Kind"
	}
	testrepo.EachGoFile(t, "..", false, func(fs *token.FileSet, _ string, f *ast.File) {
		fset = fs
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Kind" {
					check(n.Value)
				}
			case *ast.BinaryExpr:
				if n.Op == token.EQL || n.Op == token.NEQ {
					if isKind(n.X) {
						check(n.Y)
					}
					if isKind(n.Y) {
						check(n.X)
					}
				}
			case *ast.SwitchStmt:
				if n.Tag != nil && isKind(n.Tag) {
					for _, st := range n.Body.List {
						for _, e := range st.(*ast.CaseClause).List {
							check(e)
						}
					}
				}
			}
			return true
		})
	})
}
