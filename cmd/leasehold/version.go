package main

import "runtime/debug"

// version is the leasehold module's version as the build recorded it, or
// "(devel)" when it is unknown (a build from a work tree).
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
