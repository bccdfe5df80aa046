package scripts

import (
	"errors"
	"strings"

	"github.com/redis/rueidis"
)

// Refused reports whether err is Redis refusing a command for a reason that
// sending it again cannot fix, unlike the transient errors (see transient)
// and a lost connection:
//
//   - NOPERM: the user may not run the command, or touch its keys or
//     channels (a call inside a script refused by the ACL is reported as
//     "ERR The user executing the script can't ..." by Redis 7.0 and as
//     "ERR ACL failure in script: ..." by later versions);
//   - NOAUTH, WRONGPASS: the client is not authenticated;
//   - "unknown command" (or, inside a script, "Unknown Redis command called
//     from script"): the server lacks a command leasehold needs;
//   - READONLY: the node is a read-only replica (a client pointed at a
//     replica, standalone or Sentinel).
//
// A refusal inside a script comes after the script's earlier calls, whose
// writes stay: an acquire refused that way may have queued its hold id.
func Refused(err error) bool {
	var e *rueidis.RedisError
	if !errors.As(err, &e) || e.IsNil() {
		return false
	}
	msg := e.Error()
	for _, p := range refusedPrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	for _, s := range refusedInScript {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

var (
	// refusedPrefixes start the errors Redis answers for the refusals of
	// Refused (rueidis drops the code "ERR ").
	refusedPrefixes = []string{"NOPERM", "NOAUTH", "WRONGPASS", "READONLY", "unknown command"}
	// refusedInScript are in the errors a script's refused call raises, in
	// the versions that report them as "ERR" (after a prefix in Redis 6).
	refusedInScript = []string{
		"The user executing the script can't",      // Redis 6.2, 7.0: ACL
		"ACL failure in script",                    // Redis 7.2 and later: ACL
		"Unknown Redis command called from script", // an unknown command
		"You can't write against a read only replica",
	}
)
