//go:build !linux

package main

import "errors"

// pinTogether is Linux's only (pin_linux.go).
func pinTogether(int) (func() error, error) {
	return nil, errors.New("pinning threads to a CPU is done on Linux only")
}
