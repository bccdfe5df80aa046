//go:build unix

package redistest

import "syscall"

// The signals of Stop and Cont.
const sigStop, sigCont = syscall.SIGSTOP, syscall.SIGCONT
