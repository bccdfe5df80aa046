//go:build !unix

package main

import (
	"context"
	"io"
)

func cmdLock(context.Context, *globals, []string, io.Writer) error  { return errNoUnix }
func cmdRLock(context.Context, *globals, []string, io.Writer) error { return errNoUnix }
func cmdSem(context.Context, *globals, []string, io.Writer) error   { return errNoUnix }
func cmdElect(context.Context, *globals, []string, io.Writer) error { return errNoUnix }

func cmdPoolAcquire(context.Context, *globals, []string, io.Writer) error { return errNoUnix }

var errNoUnix = fail(exitFailed, "lock, rlock, sem, elect and pool acquire need a Unix system (process groups and signals)")
