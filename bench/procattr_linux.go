//go:build linux

package main

import "syscall"

// sysProcAttr makes the kernel kill redis-server when the bench process dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
