//go:build linux

package pgtest

import "syscall"

// sysProcAttr runs the program as cred (nil: as we are) and makes the
// kernel SIGKILL it when the test binary dies.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
}
