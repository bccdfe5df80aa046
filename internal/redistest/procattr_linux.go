//go:build linux

package redistest

import "syscall"

// sysProcAttr makes the kernel SIGKILL redis-server when the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
