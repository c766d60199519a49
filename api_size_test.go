package dagrun_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"
)

// maxAPILines bounds the root package's `go doc -short` listing: the API of
// load, plan and run (plus check) and the types that cross it, the error
// types and sentinels among them. Helpers that only the command line needs
// belong under internal/. Of the 37, three lines are errors a caller tells
// apart with errors.As and errors.Is (BudgetError, RunRaceError, and the
// var group of ErrNotSupported and ErrNoDevice): go doc lists each type
// alias on a line of its own, and the errors must be reachable without an
// import of planner, executor or cudart.
const maxAPILines = 37

// TestAPISize counts the lines `go doc -short .` prints for the root
// package (each const and var group, func, type, and each func, const and
// var group listed under its type) and holds them to maxAPILines.
func TestAPISize(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, f := range pkgs["dagrun"].Files {
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/dagrun/dagrun")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, v := range append(p.Consts, p.Vars...) {
		lines = append(lines, "const/var "+strings.Join(v.Names, ","))
	}
	for _, f := range p.Funcs {
		lines = append(lines, "func "+f.Name)
	}
	for _, ty := range p.Types {
		lines = append(lines, "type "+ty.Name)
		for _, v := range append(ty.Consts, ty.Vars...) {
			lines = append(lines, "  const/var "+strings.Join(v.Names, ","))
		}
		for _, f := range ty.Funcs {
			lines = append(lines, "  func "+f.Name)
		}
	}
	t.Logf("%d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	if len(lines) > maxAPILines {
		t.Errorf("the root package's go doc -short has %d lines, more than %d: group constants, or move what only the command line needs under internal/", len(lines), maxAPILines)
	}
}
