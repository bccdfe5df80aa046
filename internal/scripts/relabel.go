package scripts

import (
	"errors"
	"fmt"
	"strings"
)

// Relabel returns err with the sentinel from, an error of this package,
// replaced by to, the public package's own sentinel: errors.Is then matches
// to and not from, and the text is to's followed by the detail err added to
// from ("semaphore: limit ...: stored limit is 5"). Call it on the error
// as a function of this package returned it. Other errors come back unchanged.
func Relabel(err, from, to error) error {
	if err == nil || !errors.Is(err, from) {
		return err
	}
	detail, ok := strings.CutPrefix(err.Error(), from.Error())
	if !ok {
		detail = ": " + err.Error()
	}
	return fmt.Errorf("%w%s", to, detail)
}
