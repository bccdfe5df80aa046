package testutil

import (
	"strings"

	"github.com/leasehold/leasehold/session"
)

// InvalidNames returns resource names that session.CheckName rejects, one or
// more per rule: empty, longer than MaxNameLen bytes, invalid UTF-8, a
// control character (C0, DEL, C1). The primitives' tests check that each
// fails with ErrInvalidName and changes nothing in Redis.
func InvalidNames() []string {
	return []string{
		"",
		strings.Repeat("x", session.MaxNameLen+1),
		"\xff\xfe",
		"caf\xc3",
		"a\nb",
		"\x7f",
		"tab\t",
		"nul\x00",
		"c1\u0085",
	}
}
