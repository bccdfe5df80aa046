// Package bad exports internal types in every way apicheck looks for.
package bad

import "github.com/leasehold/leasehold/internal/scripts"

// F takes an internal type.
func F(scripts.Resource) {}

// T has an exported field and a method of internal types, and promotes
// methods of an embedded internal type.
type T struct {
	Env scripts.Env
	scripts.Keys
	hidden scripts.Resource // unexported: fine
}

// M returns an internal type.
func (T) M() map[string][]*scripts.Grant { return nil }

// A is an alias of an internal type.
type A = scripts.Value

// V is a variable of an internal type.
var V scripts.Status
