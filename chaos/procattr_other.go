//go:build !linux

package chaos

import "syscall"

// sysProcAttr: Pdeathsig is Linux-only; elsewhere only t.Cleanup kills holders.
func sysProcAttr() *syscall.SysProcAttr { return nil }
