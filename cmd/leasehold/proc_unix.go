//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcAttr starts CMD in a process group of its own, so that a loss can
// signal all of it, and (on Linux) kills it if leasehold dies first.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
}

// signalGroup sends sig to p's process group.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}
