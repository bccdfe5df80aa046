//go:build linux

package chaos

import "syscall"

// sysProcAttr makes the kernel SIGKILL a holder process when the test dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
