package scripts

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/assembled from the scripts")

// TestGolden: testdata/assembled/<name> holds, for every script of the
// registry, the exact text Redis runs (includes resolved, helpers and
// protocol locals in place), so that a change to a shared file shows in
// every script it reaches. go test ./internal/scripts -run Golden -update
// rewrites them.
func TestGolden(t *testing.T) {
	dir := filepath.Join("testdata", "assembled")
	if *update {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, s := range registry {
		path := filepath.Join(dir, name)
		if *update {
			if err := os.WriteFile(path, []byte(s.text), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v (go test ./internal/scripts -run Golden -update writes it)", name, err)
			continue
		}
		if string(want) != s.text {
			t.Errorf("%s: the assembled script differs from %s (go test ./internal/scripts -run Golden -update rewrites it, then review the diff)", name, path)
		}
	}
	// No file left of a script that is gone.
	files, err := filepath.Glob(filepath.Join(dir, "*.lua"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if registry[filepath.Base(f)] == nil {
			t.Errorf("%s: no script of that name in the registry", f)
		}
	}
}

// TestRegistryHasEveryScript: every Lua file that is a script of its own
// (not a file that others include) is in the registry.
func TestRegistryHasEveryScript(t *testing.T) {
	files, err := fs.Glob(luaFiles, "*.lua")
	if err != nil {
		t.Fatal(err)
	}
	included := map[string]bool{"common.lua": true, "fastpath.lua": true}
	for _, f := range files {
		for _, m := range includeLine.FindAllStringSubmatch(luaFile(f), -1) {
			included[m[3]] = true
		}
	}
	for _, f := range files {
		if !included[f] && registry[f] == nil {
			t.Errorf("%s is neither included nor in the registry", f)
		}
		if included[f] && registry[f] != nil {
			t.Errorf("%s is both included and a script", f)
		}
	}
}

// TestInclude: an include directive is replaced by the file, indented as
// the directive, at most once per script (an inline directive each time);
// an unknown file panics.
func TestInclude(t *testing.T) {
	seen := map[string]bool{}
	got := expand("a\n  --@include session_close.lua\n--@include session_close.lua\nb\n", seen)
	body := strings.TrimSuffix(luaFile("session_close.lua"), "\n")
	want := "a\n  " + strings.ReplaceAll(body, "\n", "\n  ") + "\n-- (session_close.lua is above)\nb\n"
	if got != want {
		t.Errorf("expand:\n%s\nwant:\n%s", got, want)
	}
	if !slices.Equal(keys(seen), []string{"session_close.lua"}) {
		t.Errorf("seen = %v", seen)
	}
	// An inlined file goes in wherever it is named, and is not recorded.
	inl := strings.TrimSuffix(luaFile("grant_message.lua"), "\n")
	got = expand("--@inline grant_message.lua\n  --@inline grant_message.lua\n", seen)
	want = inl + "\n  " + strings.ReplaceAll(inl, "\n", "\n  ") + "\n"
	if got != want {
		t.Errorf("expand of two inlines:\n%s\nwant:\n%s", got, want)
	}
	if seen["grant_message.lua"] {
		t.Error("an inlined file was recorded as included")
	}
	// return=r turns the inlined text's returns into assignments to r.
	got = expand("--@inline mutex_release_fast.lua return=r\n", seen)
	if !strings.Contains(got, "\n    r = REL_FREED\n") || returnLine.MatchString(got) {
		t.Errorf("expand with return=r left a return or made no assignment:\n%s", got)
	}
	for _, text := range []string{"--@include nope.lua\n", "x\n  --@include nope.lua\n", "--@inline nope.lua\n",
		"--@include nope.lua return=r\n"} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "nope.lua") {
					t.Errorf("expand(%q) panicked with %v, want a panic naming nope.lua", text, r)
				}
			}()
			expand(text, map[string]bool{})
		}()
	}
	// A script built from a file naming an unknown include panics at init.
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("join of a file including an unknown one did not panic")
			}
		}()
		join("return 1\n--@include missing.lua\n")
	}()
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// callArgs returns the top-level arguments of each redis.call (or pcall)
// that starts in line, as written (nested calls and strings kept whole).
func callArgs(line string) [][]string {
	var calls [][]string
	for _, m := range callStart.FindAllStringIndex(line, -1) {
		var args []string
		depth, start, quote := 0, m[1], byte(0)
	scan:
		for i := m[1]; i < len(line); i++ {
			switch c := line[i]; {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '\'' || c == '"':
				quote = c
			case c == '(' || c == '{':
				depth++
			case (c == ')' || c == '}') && depth > 0:
				depth--
			case c == ')':
				args = append(args, strings.TrimSpace(line[start:i]))
				break scan
			case c == ',' && depth == 0:
				args = append(args, strings.TrimSpace(line[start:i]))
				start = i + 1
			}
		}
		calls = append(calls, args)
	}
	return calls
}

var (
	callStart = regexp.MustCompile(`redis\.p?call\(`)
	numberLit = regexp.MustCompile(`^-?[0-9][0-9.]*$`)
)

// TestNoNumberLiterals: no script passes a number literal to redis.call,
// which Redis would format with snprintf on every call (about 2k
// instructions each); a string ('0') costs nothing.
func TestNoNumberLiterals(t *testing.T) {
	if got := callArgs(`x(redis.call('A', string.sub(s, 1, 1) == '1' and k, 0), redis.pcall("B", '(', -1))`); !slices.Equal(got[0], []string{"'A'", "string.sub(s, 1, 1) == '1' and k", "0"}) ||
		!slices.Equal(got[1], []string{`"B"`, "'('", "-1"}) {
		t.Fatalf("callArgs = %q", got)
	}
	files, err := luaFiles.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		for i, line := range strings.Split(luaFile(f.Name()), "\n") {
			code, _, _ := strings.Cut(line, "--")
			for _, args := range callArgs(code) {
				for _, a := range args {
					if numberLit.MatchString(a) {
						t.Errorf("%s:%d passes the number %s to redis.call: %s", f.Name(), i+1, a, strings.TrimSpace(line))
					}
				}
			}
		}
	}
}
