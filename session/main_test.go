package session_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/redistest"
)

func TestMain(m *testing.M) {
	if raw := os.Getenv(crashChildEnv); raw != "" {
		os.Exit(crashChild(raw))
	}
	goleak.VerifyTestMain(m, redistest.LeakOptions...)
}
