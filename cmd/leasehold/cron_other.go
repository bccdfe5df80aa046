//go:build !unix

package main

import (
	"context"
	"io"
)

func cmdCron(context.Context, *globals, []string, io.Writer) error { return errNoUnix }
