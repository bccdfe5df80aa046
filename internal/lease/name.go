package lease

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// CheckName returns an error matching ErrInvalidName unless name is a valid
// resource name: 1 to MaxNameLen bytes of valid UTF-8 without control
// characters (unicode.IsControl: C0, DEL and C1). The error quotes the name
// (its first quotedRunes runes) and says what is wrong, e.g.
//
//	session: invalid name "a\nb": control character at byte 1
//
// so that callers need not repeat the name.
func CheckName(name string) error {
	if name == "" {
		return fmt.Errorf("%w %s: empty", ErrInvalidName, quoteName(name))
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w %s: %d bytes, longer than %d", ErrInvalidName, quoteName(name), len(name), MaxNameLen)
	}
	for i, r := range name {
		switch {
		case r == utf8.RuneError && !validAt(name, i):
			return fmt.Errorf("%w %s: invalid UTF-8 at byte %d", ErrInvalidName, quoteName(name), i)
		case unicode.IsControl(r):
			return fmt.Errorf("%w %s: control character at byte %d", ErrInvalidName, quoteName(name), i)
		}
	}
	return nil
}

// validAt reports whether the RuneError at byte i of s is an encoded U+FFFD
// rather than an invalid byte.
func validAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size > 1
}

// quotedRunes bounds how much of a name its error quotes.
const quotedRunes = 64

// quoteName quotes name for an error message, escaping what is not
// printable, and cuts it after quotedRunes runes (invalid bytes count as one).
func quoteName(name string) string {
	if utf8.RuneCountInString(name) <= quotedRunes {
		return fmt.Sprintf("%q", name)
	}
	return fmt.Sprintf("%.*q...", quotedRunes, name)
}
