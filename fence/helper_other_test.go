//go:build !unix

package fence_test

// helperMain: holder processes need SIGSTOP, so there are none here.
func helperMain() bool { return false }
