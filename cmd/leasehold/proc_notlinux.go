//go:build unix && !linux

package main

import "syscall"

// setDeathSignal: only Linux can tie CMD's life to leasehold's.
func setDeathSignal(*syscall.SysProcAttr) {}
