package main

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		pkg  string
		want []string // identifiers reported, in order
	}{
		{"bad", "./testdata/bad", []string{"bad.A ", "bad.F ", "bad.T.All ", "bad.T.Env ", "bad.T.Jobs ", "bad.T.Kept ", "bad.T.KeptWaiting ", "bad.T.Keys ", "bad.T.Listing ", "bad.T.M ", "bad.T.Queue ", "bad.T.Sessions ", "bad.V "}},
		{"good", "./testdata/good", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The fixtures sit under internal/: take them as public.
			got, err := checkPublic([]string{tc.pkg}, func(string) bool { return true })
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, g := range got {
				names = append(names, g[strings.LastIndex(g[:strings.Index(g, " mentions")], "/")+1:strings.Index(g, " mentions")+1])
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("reported %q, want %q\n%s", names, tc.want, strings.Join(got, "\n"))
			}
		})
	}
}
