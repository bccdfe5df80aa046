//go:build !linux

package main

import (
	"syscall"
	"time"
)

func threadCPU() time.Duration { return 0 }

func procCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
