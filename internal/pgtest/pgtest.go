// Package pgtest is a test harness that runs real PostgreSQL servers for
// the tests of other packages.
//
// Start runs initdb in a fresh directory under os.TempDir() and starts
// postgres on a free 127.0.0.1 port (its Unix socket in that directory),
// waits until it accepts connections and registers a t.Cleanup that stops
// it (SIGINT, a fast shutdown; SIGKILL if it has not exited within 10 s),
// waits for it and removes the directory. On Linux the server also gets
// SIGKILL when the test binary dies (Pdeathsig).
//
// Debian keeps the binaries in /usr/lib/postgresql/<version>/bin, off PATH:
// Start looks there (newest version first), then on PATH, and skips the test
// when it finds no initdb and postgres, saying so. Run as root, as `make
// test` and CI do, initdb and postgres run as the user "postgres" (they
// refuse to run as root), which owns the directory. The server trusts every
// local connection, fsyncs nothing and is for tests only.
//
// Import this package from _test.go files only.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/leasehold/leasehold/internal/redistest"
)

const (
	readyTimeout = 30 * time.Second      // bound for a start to accept connections
	pollEvery    = 20 * time.Millisecond // readiness poll interval
	stopTimeout  = 10 * time.Second      // fast shutdown bound before SIGKILL
	startTries   = 3                     // new ports to try when a start fails
	superuser    = "postgres"            // the database superuser initdb creates
	binGlob      = "/usr/lib/postgresql/*/bin"
)

// Server is one postgres process started by a test.
type Server struct {
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has been reaped
}

// Bin returns the path of a PostgreSQL program (initdb, postgres): from the
// newest /usr/lib/postgresql/<version>/bin that has it, else from PATH.
func Bin(name string) (string, error) {
	dirs, _ := filepath.Glob(binGlob)
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return exec.LookPath(name)
}

// version is the numeric version of a /usr/lib/postgresql/<version>/bin path.
func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// Start starts a server, or skips the test when PostgreSQL is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	initdb, err1 := Bin("initdb")
	postgres, err2 := Bin("postgres")
	if err := errors.Join(err1, err2); err != nil {
		t.Skipf("pgtest: PostgreSQL could not be found (%v): run `make test`, which installs it, or apt-get install postgresql", err)
	}
	cred, err := credential()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(initdb, "-D", data, "-U", superuser, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	cmd.SysProcAttr = sysProcAttr(cred)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: %s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	s := &Server{dir: dir}
	for range startTries {
		if s.port, err = redistest.FreePort(); err != nil {
			t.Fatalf("pgtest: find a free port: %v", err)
		}
		if err = s.launch(postgres, data, cred); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("pgtest: start postgres: %v", err)
	}
	t.Cleanup(s.stop)
	return s
}

// DSN returns a connection string for the "pgx" driver to database
// "postgres" as the superuser.
func (s *Server) DSN() string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", superuser, s.port)
}

// Open returns a database handle on the server, closed at the end of the test.
func (s *Server) Open(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", s.DSN())
	if err != nil {
		t.Fatalf("pgtest: open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// launch starts postgres on s.port and waits until it accepts connections.
// On failure the process is gone and the error quotes its log.
func (s *Server) launch(postgres, data string, cred *syscall.Credential) error {
	logPath := filepath.Join(s.dir, "postgres.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	if cred != nil {
		_ = logf.Chown(int(cred.Uid), int(cred.Gid))
	}
	s.cmd = exec.Command(postgres, "-D", data, "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=50")
	s.cmd.SysProcAttr = sysProcAttr(cred)
	s.cmd.Env = append(os.Environ(), "LC_ALL=C")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.done) }()

	db, err := sql.Open("pgx", s.DSN())
	if err != nil {
		s.stop()
		return err
	}
	defer db.Close()
	until := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("postgres exited: %v\n%s", err, tail(logPath))
		case <-time.After(pollEvery):
		}
		if time.Now().After(until) {
			s.stop()
			return fmt.Errorf("not ready after %v: %v\n%s", readyTimeout, err, tail(logPath))
		}
	}
}

// stop shuts the server down (SIGINT: fast shutdown) and waits for it.
func (s *Server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// credential returns the user "postgres" to run as when we are root, nil
// otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(superuser)
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses to: %w (install postgresql, which creates the user)", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user %s: %w", superuser, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// tail returns the last lines of the log at path.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
