package main

import "syscall"

// setDeathSignal makes the kernel SIGKILL CMD when the thread that started it
// (locked by supervise for the process's life) exits: leasehold killed with
// SIGKILL, or crashed, does not leave CMD running without the lock.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
