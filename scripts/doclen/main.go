// Command doclen counts, per package directory, the exported identifiers
// whose doc comment breaks the project's rule of one contract paragraph of
// at most 10 lines (package overviews are exempt: they are the place for
// the rest). With -v it lists them.
//
//	go run ./scripts/doclen -v recipe fence backend/etcdlock
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type hit struct {
	pos   string
	name  string
	lines int
	paras int
}

func measure(cg *ast.CommentGroup) (int, int) {
	if cg == nil {
		return 0, 0
	}
	t := strings.TrimRight(cg.Text(), "\n")
	if t == "" {
		return 0, 0
	}
	lines := len(cg.List)
	// A block comment: count its lines of text.
	if strings.HasPrefix(cg.List[0].Text, "/*") {
		lines = strings.Count(t, "\n") + 1
	}
	paras := 1 + strings.Count(t, "\n\n")
	return lines, paras
}

func main() {
	verbose := flag.Bool("v", false, "list the offenders")
	flag.Parse()
	total := 0
	for _, dir := range flag.Args() {
		fset := token.NewFileSet()
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		var hits []hit
		n := 0
		check := func(name string, pos token.Pos, cg *ast.CommentGroup) {
			if !ast.IsExported(name[strings.LastIndex(name, ".")+1:]) {
				return
			}
			n++
			l, p := measure(cg)
			if l > 10 || p > 1 {
				hits = append(hits, hit{fset.Position(pos).String(), name, l, p})
			}
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			for _, d := range af.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					name := d.Name.Name
					if d.Recv != nil {
						rt := d.Recv.List[0].Type
						if s, ok := rt.(*ast.StarExpr); ok {
							rt = s.X
						}
						if ix, ok := rt.(*ast.IndexExpr); ok {
							rt = ix.X
						}
						id, _ := rt.(*ast.Ident)
						if id == nil || !ast.IsExported(id.Name) {
							continue
						}
						name = id.Name + "." + name
					}
					check(name, d.Pos(), d.Doc)
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							doc := s.Doc
							if doc == nil && len(d.Specs) == 1 {
								doc = d.Doc
							}
							check(s.Name.Name, s.Pos(), doc)
							if !ast.IsExported(s.Name.Name) {
								continue
							}
							switch t := s.Type.(type) {
							case *ast.StructType:
								for _, fl := range t.Fields.List {
									for _, nm := range fl.Names {
										check(s.Name.Name+"."+nm.Name, nm.Pos(), fl.Doc)
									}
								}
							case *ast.InterfaceType:
								for _, fl := range t.Methods.List {
									for _, nm := range fl.Names {
										check(s.Name.Name+"."+nm.Name, nm.Pos(), fl.Doc)
									}
								}
							}
						case *ast.ValueSpec:
							doc := s.Doc
							if doc == nil && len(d.Specs) == 1 {
								doc = d.Doc
							}
							for _, nm := range s.Names {
								check(nm.Name, nm.Pos(), doc)
							}
						}
					}
				}
			}
		}
		sort.Slice(hits, func(i, j int) bool { return hits[i].pos < hits[j].pos })
		fmt.Printf("%-28s %3d offenders of %3d exported\n", dir, len(hits), n)
		total += len(hits)
		if *verbose {
			for _, h := range hits {
				fmt.Printf("    %-45s %2d lines %d paras  %s\n", h.name, h.lines, h.paras, h.pos)
			}
		}
	}
	fmt.Println("total", total)
	if total > 0 {
		os.Exit(1)
	}
}
