package scripts

import (
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"
)

var (
	// A reply code spelled as a number: an array reply starting with one,
	// or the bare return of a script whose whole reply is a code.
	luaBareArray  = regexp.MustCompile(`return \{-?[0-9]+[,}]`)
	luaBareReturn = regexp.MustCompile(`^\s*return -?[0-9]+$`)
	// Scripts whose whole reply is a code (helpers in the others return
	// plain numbers).
	luaCodeReply = regexp.MustCompile(`_release\.lua$|^election_resign\.lua$|^session_open\.lua$`)
	// Scripts whose replies are data, not codes: the read-only views, and
	// flight's scripts, which have replies of their own (flight.go).
	luaDataReply = regexp.MustCompile(`inspect|stats|leader|^flight_`)
)

// TestLuaNamesDeclared: every protocol name a script uses is declared by
// protocolConsts (Lua would read an undeclared one as nil), and no script that
// speaks the protocol spells a reply code as a bare number.
func TestLuaNamesDeclared(t *testing.T) {
	declared := map[string]bool{}
	for _, c := range protocolConsts {
		declared[c.name] = true
	}
	files, err := fs.Glob(os.DirFS("."), "*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Lua files: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		data, whole := luaDataReply.MatchString(f), luaCodeReply.MatchString(f)
		for i, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "--")
			for _, name := range luaProtocolName.FindAllString(code, -1) {
				if !declared[name] {
					t.Errorf("%s:%d: %s is not in protocolConsts", f, i+1, name)
				}
			}
			if (!data && luaBareArray.MatchString(code)) || (whole && luaBareReturn.MatchString(code)) {
				t.Errorf("%s:%d: a reply code as a bare number: %s", f, i+1, strings.TrimSpace(code))
			}
		}
	}
}
