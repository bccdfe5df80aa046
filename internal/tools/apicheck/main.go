// Command apicheck fails when an exported identifier of a public package
// mentions a type of an internal/ package: in a function or method
// signature, an exported struct field, an exported variable or constant, an
// alias, or a method promoted from an embedded internal type. Such an
// identifier is a door into internals that the library would have to keep
// open once users import it.
//
// Public packages are the module's non-main packages outside internal/
// directories. Types come from the compiler's export data (go list -export),
// so the check costs about one build.
//
// Usage: go run ./internal/tools/apicheck [-skip path,...] [packages]
//
// The packages default to ./...; -skip leaves out packages by import path
// (with their subpackages), for suites that are not library API.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
)

func main() {
	skip := flag.String("skip", "", "comma-separated import paths to leave out, with their subpackages")
	flag.Parse()
	patterns := flag.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	var skips []string
	if *skip != "" {
		skips = strings.Split(*skip, ",")
	}
	bad, err := check(patterns, skips)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apicheck:", err)
		os.Exit(2)
	}
	for _, b := range bad {
		fmt.Println(b)
	}
	if len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "apicheck: %d exported identifiers mention internal types\n", len(bad))
		os.Exit(1)
	}
}

// check returns one line per exported identifier that mentions an internal type.
func check(patterns, skips []string) ([]string, error) {
	return checkPublic(patterns, func(path string) bool { return !isInternal(path) && !skipped(path, skips) })
}

// checkPublic checks the packages of patterns for which public is true.
func checkPublic(patterns []string, public func(path string) bool) ([]string, error) {
	exports, err := goList(append([]string{"-deps", "-export", "-f", "{{.ImportPath}} {{.Export}}"}, patterns...))
	if err != nil {
		return nil, err
	}
	paths, err := goList(append([]string{"-f", "{{if ne .Name \"main\"}}{{.ImportPath}}{{end}}"}, patterns...))
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for _, l := range exports {
		if path, file, ok := strings.Cut(l, " "); ok && file != "" {
			files[path] = file
		}
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := files[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	var bad []string
	for _, path := range paths {
		if path == "" || !public(path) {
			continue
		}
		pkg, err := imp.Import(path)
		if err != nil {
			return nil, err
		}
		bad = append(bad, checkPackage(pkg)...)
	}
	sort.Strings(bad)
	return bad, nil
}

func goList(args []string) ([]string, error) {
	var out, stderr bytes.Buffer
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list: %v\n%s", err, stderr.Bytes())
	}
	var lines []string
	for sc := bufio.NewScanner(&out); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	return lines, nil
}

func skipped(path string, skips []string) bool {
	for _, s := range skips {
		if path == s || strings.HasPrefix(path, s+"/") {
			return true
		}
	}
	return false
}

func isInternal(path string) bool {
	return strings.HasPrefix(path, "internal/") || strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}

// checkPackage reports pkg's exported identifiers that mention internal types.
func checkPackage(pkg *types.Package) []string {
	var bad []string
	report := func(name string, t types.Type) {
		if in := internalIn(t, map[types.Type]bool{}); in != "" {
			bad = append(bad, fmt.Sprintf("%s.%s mentions %s", pkg.Path(), name, in))
		}
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		tn, ok := obj.(*types.TypeName)
		if !ok {
			report(name, obj.Type()) // func, var, const
			continue
		}
		if tn.IsAlias() {
			report(name, types.Unalias(tn.Type()))
			continue
		}
		if st, ok := tn.Type().Underlying().(*types.Struct); ok {
			for f := range st.Fields() {
				if f.Exported() {
					report(name+"."+f.Name(), f.Type())
				}
			}
		} else {
			report(name, tn.Type().Underlying())
		}
		// The pointer's method set includes the value's and promoted methods.
		ms := types.NewMethodSet(types.NewPointer(tn.Type()))
		for sel := range ms.Methods() {
			if m := sel.Obj(); m.Exported() {
				report(name+"."+m.Name(), m.Type())
			}
		}
	}
	return bad
}

// internalIn returns the first internal type that t mentions, or "". Public
// named types are not entered: they are checked as identifiers of their own.
func internalIn(t types.Type, seen map[types.Type]bool) string {
	if seen[t] {
		return ""
	}
	seen[t] = true
	if n, ok := t.(*types.Named); ok {
		if p := n.Obj().Pkg(); p != nil && isInternal(p.Path()) {
			return n.String()
		}
	}
	for _, part := range visibleParts(t) {
		if in := internalIn(part, seen); in != "" {
			return in
		}
	}
	return ""
}

// visibleParts returns the types that a user of t sees through it, in the
// order internalIn reports them: an alias's target, a named type's type
// arguments (not its underlying type), the key and element of a composite,
// a signature's parameters and results, a struct's exported and embedded
// fields, an interface's methods.
func visibleParts(t types.Type) []types.Type {
	var parts []types.Type
	switch t := t.(type) {
	case *types.Alias:
		parts = append(parts, types.Unalias(t))
	case *types.Named:
		parts = slices.AppendSeq(parts, t.TypeArgs().Types())
	case *types.Map:
		parts = append(parts, t.Key(), t.Elem())
	case interface{ Elem() types.Type }: // pointer, slice, array, chan
		parts = append(parts, t.Elem())
	case *types.Signature:
		for _, tup := range []*types.Tuple{t.Params(), t.Results()} {
			for v := range tup.Variables() {
				parts = append(parts, v.Type())
			}
		}
	case *types.Struct:
		for f := range t.Fields() {
			if f.Exported() || f.Embedded() {
				parts = append(parts, f.Type())
			}
		}
	case *types.Interface:
		for m := range t.Methods() {
			parts = append(parts, m.Type())
		}
	}
	return parts
}
