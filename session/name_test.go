package session_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/session"
)

// TestCheckName: names are 1 to MaxNameLen bytes of valid UTF-8 without
// control characters; anything else fails with an error matching
// ErrInvalidName that quotes the name and says what is wrong.
func TestCheckName(t *testing.T) {
	long := strings.Repeat("x", session.MaxNameLen+1)
	for _, c := range []struct {
		name string
		in   string
		want string // the error's text; "" for a valid name
	}{
		{name: "ascii", in: "reindex"},
		{name: "non-ASCII", in: "café"},
		{name: "CJK and emoji", in: "仕事/👷"},
		{name: "encoded U+FFFD", in: "a\uFFFDb"},
		{name: "space and punctuation", in: "a b:c{d}"},
		{name: "MaxNameLen bytes", in: strings.Repeat("x", session.MaxNameLen)},
		{name: "MaxNameLen bytes, multi-byte", in: strings.Repeat("é", session.MaxNameLen/2)},

		{name: "empty", in: "",
			want: `session: invalid name "": empty`},
		{name: "MaxNameLen+1 bytes", in: long,
			want: `session: invalid name "` + long[:64] + `"...: 1025 bytes, longer than 1024`},
		{name: "invalid bytes", in: "\xff\xfe",
			want: `session: invalid name "\xff\xfe": invalid UTF-8 at byte 0`},
		{name: "invalid byte after a multi-byte rune", in: "é\xff",
			want: `session: invalid name "é\xff": invalid UTF-8 at byte 2`},
		{name: "truncated rune", in: "caf\xc3",
			want: `session: invalid name "caf\xc3": invalid UTF-8 at byte 3`},
		{name: "overlong encoding", in: "\xc0\xaf",
			want: `session: invalid name "\xc0\xaf": invalid UTF-8 at byte 0`},
		{name: "surrogate", in: "x\xed\xa0\x80",
			want: `session: invalid name "x\xed\xa0\x80": invalid UTF-8 at byte 1`},
		{name: "newline", in: "a\nb",
			want: `session: invalid name "a\nb": control character at byte 1`},
		{name: "DEL", in: "\x7f",
			want: `session: invalid name "\x7f": control character at byte 0`},
		{name: "tab", in: "tab\t",
			want: `session: invalid name "tab\t": control character at byte 3`},
		{name: "NUL", in: "a\x00",
			want: `session: invalid name "a\x00": control character at byte 1`},
		{name: "escape", in: "\x1b[31mred",
			want: `session: invalid name "\x1b[31mred": control character at byte 0`},
		{name: "C1 control U+0085", in: "é\u0085",
			want: `session: invalid name "é\u0085": control character at byte 2`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := session.CheckName(c.in)
			if c.want == "" {
				if err != nil {
					t.Fatalf("CheckName(%.16q) = %v, want nil", c.in, err)
				}
				return
			}
			if !errors.Is(err, session.ErrInvalidName) {
				t.Fatalf("CheckName(%.16q) = %v, want an error matching ErrInvalidName", c.in, err)
			}
			if got := err.Error(); got != c.want {
				t.Errorf("CheckName(%.16q):\n got %s\nwant %s", c.in, got, c.want)
			}
		})
	}
}
