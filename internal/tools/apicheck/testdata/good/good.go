// Package good uses internal types only where users cannot see them.
package good

import "github.com/leasehold/leasehold/internal/scripts"

// T hides its internal field.
type T struct{ r scripts.Resource }

// Name returns a plain string.
func (t T) Name() string { return t.r.Name }

func f(scripts.Env) {}

// Err is an error taken from an internal package: its type is error.
var Err = scripts.ErrBusy
