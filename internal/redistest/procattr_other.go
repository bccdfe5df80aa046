//go:build !linux

package redistest

import "syscall"

// sysProcAttr: Pdeathsig is Linux-only; elsewhere only t.Cleanup kills the server.
func sysProcAttr() *syscall.SysProcAttr { return nil }
