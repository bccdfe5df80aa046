//go:build unix && !linux

package pgtest

import "syscall"

// sysProcAttr runs the program as cred (nil: as we are).
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
