package main

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// esc makes a name, key, owner, value or session id read from Redis safe to
// print in text output: it returns s unchanged when s is plain, else s
// quoted as strconv.Quote does. Quoted are: invalid UTF-8 (0xFF is
// tabwriter's escape character), control and other non-printing characters
// (a newline would split a row, a tab add a column), spaces (the text
// tables separate fields with spaces), the empty string and "-" (which
// would read as "nothing"), and anything starting with '"' (which would
// read as quoted). JSON output needs none of this.
func esc(s string) string {
	if needsQuote(s) {
		return strconv.Quote(s)
	}
	return s
}

func needsQuote(s string) bool {
	if s == "" || s == "-" || s[0] == '"' || !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if r == ' ' || !strconv.IsPrint(r) {
			return true
		}
	}
	return false
}

// cell is esc for a table cell that may be empty: "-" then.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return esc(s)
}

// escAll is esc of every element, for a comma-separated list.
func escAll(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = esc(s)
	}
	return strings.Join(out, ", ")
}

// round rounds a duration for people: "333ms", "3.3s", "12s", "2m5s".
// Durations under a millisecond are left as they are.
func round(d time.Duration) time.Duration {
	switch a := d.Abs(); {
	case a < time.Millisecond:
		return d
	case a < time.Second:
		return d.Round(time.Millisecond)
	case a < 10*time.Second:
		return d.Round(100 * time.Millisecond)
	default:
		return d.Round(time.Second)
	}
}
