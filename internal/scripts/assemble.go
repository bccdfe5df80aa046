package scripts

import (
	"embed"
	"regexp"
	"strings"
)

// luaFiles are the Lua files of this package, by name ("mutex_lib.lua").
//
//go:embed *.lua
var luaFiles embed.FS

// luaFile returns the text of the embedded Lua file name; an unknown name
// is a bug in a script, found at init.
func luaFile(name string) string {
	b, err := luaFiles.ReadFile(name)
	if err != nil {
		panic("scripts: no Lua file " + name)
	}
	return string(b)
}

// includeLine matches an include directive: a line "--@include <file>.lua"
// or "--@inline <file>.lua", the latter with an optional "return=<name>",
// indented or not.
var includeLine = regexp.MustCompile(`(?m)^([ \t]*)--@(include|inline)[ \t]+(\S+)(?:[ \t]+return=(\w+))?[ \t]*$`)

// returnLine matches a line of inlined text that returns a value.
var returnLine = regexp.MustCompile(`(?m)^([ \t]*)return (.+)$`)

// expand returns text with each include directive replaced by the named
// file's text, itself expanded, and indented as the directive is. A file
// named by "--@include" (a library: functions) goes into a script at most
// once (seen records those in it already): a later directive naming it is
// dropped, so that libraries may include what they use without defining
// it twice. A file named by "--@inline" is statement text that runs where
// it stands, with the includer's names (a fast path, a message encoder):
// it goes in wherever it is named, and is never a library. Such text gives
// its outcome with "return <value>", a return being the last thing its
// path does; "--@inline <file>.lua return=r" turns each of these lines into
// "r = <value>" instead, for an includer that must go on (a batch script's
// loop). The line "--@helpers" (see join) belongs to a script's own file,
// never to one it includes.
func expand(text string, seen map[string]bool) string {
	return includeLine.ReplaceAllStringFunc(text, func(line string) string {
		m := includeLine.FindStringSubmatch(line)
		indent, name, ret := m[1], m[3], m[4]
		if m[2] == "include" {
			if ret != "" {
				panic("scripts: return= on an --@include of " + name + ", not an --@inline")
			}
			if seen[name] {
				return indent + "-- (" + name + " is above)"
			}
			seen[name] = true
		}
		inc := luaFile(name)
		if strings.Contains(inc, helpersMark) {
			panic("scripts: " + name + " has a --@helpers line but is included")
		}
		inc = strings.TrimSuffix(expand(inc, seen), "\n")
		if ret != "" {
			inc = returnLine.ReplaceAllString(inc, "${1}"+ret+" = ${2}")
		}
		if indent != "" {
			inc = indent + strings.ReplaceAll(inc, "\n", "\n"+indent)
		}
		return inc
	})
}

// bare returns text with its includes expanded and the protocol constants
// it names declared first, and nothing else: no common.lua.
func bare(text string) string {
	text = expand(text, map[string]bool{})
	return protocolLocals(text, map[string]bool{}) + text
}
