package scripts

import (
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// protocolDoc is the page that specifies the protocol for other clients.
const protocolDoc = "../../docs/protocol.md"

// docTable returns the rows of the table that follows the line
// "<!-- protocol-table: name -->" in doc: each row's cells, trimmed, with
// backticks dropped and "\|" read as "|"; the header and separator rows
// are left out.
func docTable(t *testing.T, doc, name string) [][]string {
	t.Helper()
	mark := "<!-- protocol-table: " + name + " -->"
	_, rest, ok := strings.Cut(doc, mark)
	if !ok {
		t.Fatalf("%s: no table marked %q", protocolDoc, mark)
	}
	var rows [][]string
	for i, line := range strings.Split(strings.TrimLeft(rest, "\n"), "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i < 2 {
			continue // the header and the separator
		}
		line = strings.ReplaceAll(strings.Trim(strings.TrimSpace(line), "|"), `\|`, "\x00")
		var cells []string
		for _, c := range strings.Split(line, "|") {
			c = strings.ReplaceAll(strings.TrimSpace(c), "\x00", "|")
			cells = append(cells, strings.ReplaceAll(c, "`", ""))
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: table %q has no rows", protocolDoc, name)
	}
	return rows
}

func readProtocolDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// compareNamed checks that doc (documented name -> value) and code hold the
// same names with the same values, reporting each difference.
func compareNamed(t *testing.T, what string, doc, code map[string]string) {
	t.Helper()
	for name, v := range code {
		d, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("%s %s = %q is not documented in %s", what, name, v, protocolDoc)
		case d != v:
			t.Errorf("%s %s: %s says %q, the code %q", what, name, protocolDoc, d, v)
		}
	}
	for name, d := range doc {
		if _, ok := code[name]; !ok {
			t.Errorf("%s %s = %q in %s is not in the code", what, name, d, protocolDoc)
		}
	}
}

// docColumn returns column col of rows, keyed by column 0, failing on a
// name documented twice.
func docColumn(t *testing.T, table string, rows [][]string, col int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range rows {
		if len(r) <= col {
			t.Fatalf("%s: table %q: row %q has no column %d", protocolDoc, table, r, col)
		}
		if _, dup := out[r[0]]; dup {
			t.Errorf("%s: table %q lists %s twice", protocolDoc, table, r[0])
		}
		out[r[0]] = r[col]
	}
	return out
}

// TestProtocolDocReplies: the reply codes table of docs/protocol.md lists
// exactly the reply codes of protocolConsts, with their values.
func TestProtocolDocReplies(t *testing.T) {
	doc := docColumn(t, "replies", docTable(t, readProtocolDoc(t), "replies"), 1)
	code := map[string]string{}
	for _, c := range protocolConsts {
		if v, ok := c.v.(int); ok {
			code[c.name] = strconv.Itoa(v)
		}
	}
	compareNamed(t, "reply code", doc, code)
}

// TestProtocolDocInfixes: the infixes table of docs/protocol.md lists
// exactly the key infixes of protocolConsts (keys.go).
func TestProtocolDocInfixes(t *testing.T) {
	doc := docColumn(t, "infixes", docTable(t, readProtocolDoc(t), "infixes"), 1)
	code := map[string]string{}
	for _, c := range protocolConsts {
		if v, ok := c.v.(string); ok && strings.HasPrefix(c.name, "K_") {
			code[c.name] = v
		}
	}
	compareNamed(t, "key infix", doc, code)
}

// TestProtocolDocKeys: the keys table of docs/protocol.md lists exactly the
// keys and channels the code builds, as Keys builds them for namespace
// "ns" with the placeholders the page uses. The pool's sub-keys are
// spelled in Lua (pool_lib.lua), so this list names their suffixes.
func TestProtocolDocKeys(t *testing.T) {
	k := NewKeys("ns")
	pool := k.PoolBase("<name>")
	built := []string{
		k.Lease("<sid>"),
		k.Channel("<sid>"),
		k.Epoch(),
		k.Prefix + probeSuffix,
		k.Mutex("<name>"),
		k.Semaphore("<name>"),
		k.SemaphoreHolders("<name>"),
		pool + "f", pool + "h", pool + "t", pool + "s", pool + "d",
		pool + keyPoolIndex + "<sid>",
		k.Election("<name>"),
		k.ElectionCandidates("<name>"),
		k.ElectionChannel("<name>"),
		k.RWMutex("<name>"),
		k.RWMutexReaders("<name>"),
		k.Flight("<group>:<key>"),
		k.Mutex(FlightMutex("<group>:<key>")),
		k.Job("<name>"),
		k.JobHistory("<name>"),
		k.Mutex(JobMutex("<name>")),
	}
	for _, kind := range []Kind{Mutex, Semaphore, Pool, Election, RWMutex} {
		built = append(built, k.Queue(kind, "<name>"))
	}
	doc := map[string]bool{}
	for _, r := range docTable(t, readProtocolDoc(t), "keys") {
		if doc[r[0]] {
			t.Errorf("%s: key %s listed twice", protocolDoc, r[0])
		}
		doc[r[0]] = true
	}
	for _, key := range built {
		if !doc[key] {
			t.Errorf("key %s, built by the code, is not in the keys table of %s", key, protocolDoc)
		}
	}
	for key := range doc {
		if !slices.Contains(built, key) {
			t.Errorf("key %s in the keys table of %s is not one the code builds", key, protocolDoc)
		}
	}
}

// TestProtocolDocScripts: docs/protocol.md names every Lua file of the
// package.
func TestProtocolDocScripts(t *testing.T) {
	doc := readProtocolDoc(t)
	files, err := fs.Glob(os.DirFS("."), "*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Lua files: %v", err)
	}
	for _, f := range files {
		if !strings.Contains(doc, "`"+f+"`") {
			t.Errorf("%s does not mention %s", protocolDoc, f)
		}
	}
}
