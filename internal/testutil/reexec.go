package testutil

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"testing"
)

// Child is the test binary run again as a helper process (see StartChild).
type Child struct {
	Cmd    *exec.Cmd
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
	Log    string // the file that receives its stderr
}

// StartChild runs the test binary again, running no test (-test.run=^$),
// with cfg as JSON in environment variable env: the package's TestMain
// finds it there and acts as the helper. Its stderr goes to log, a file in
// the test's temporary directory; its stdin and stdout are pipes. The
// caller waits for it (Cmd.Wait) after reading Stdout to its end.
func StartChild(t testing.TB, env string, cfg any, log string) *Child {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &Child{Cmd: exec.Command(os.Args[0], "-test.run=^$"), Log: t.TempDir() + "/" + log}
	c.Cmd.Env = append(os.Environ(), env+"="+string(raw))
	logf, err := os.Create(c.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child has its own descriptor once started
	c.Cmd.Stderr = logf
	if c.Stdin, err = c.Cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if c.Stdout, err = c.Cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", log, err)
	}
	return c
}
