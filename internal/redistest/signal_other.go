//go:build !unix

package redistest

import "syscall"

// Without SIGSTOP and SIGCONT, Stop and Cont send signals that
// os.Process.Signal refuses: they do nothing. The package builds so that
// `go vet ./...` covers the other platforms' code.
const sigStop, sigCont = syscall.Signal(-1), syscall.Signal(-2)
