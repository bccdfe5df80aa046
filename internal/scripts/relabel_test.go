package scripts

import (
	"errors"
	"fmt"
	"testing"
)

func TestRelabel(t *testing.T) {
	pub := errors.New("pool: not a member")
	other := errors.New("other")
	for _, tc := range []struct {
		name     string
		err      error
		want     string
		isPub    bool
		isInside bool
	}{
		{"nil", nil, "", false, false},
		{"bare", ErrNotMember, "pool: not a member", true, false},
		{"detail", fmt.Errorf("%w: %q", ErrNotMember, "k"), `pool: not a member: "k"`, true, false},
		{"other", other, "other", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Relabel(tc.err, ErrNotMember, pub)
			if tc.err == nil {
				if got != nil {
					t.Fatalf("Relabel(nil) = %v, want nil", got)
				}
				return
			}
			if got.Error() != tc.want {
				t.Errorf("text %q, want %q", got.Error(), tc.want)
			}
			if errors.Is(got, pub) != tc.isPub || errors.Is(got, ErrNotMember) != tc.isInside {
				t.Errorf("errors.Is pub %v, internal %v; want %v, %v",
					errors.Is(got, pub), errors.Is(got, ErrNotMember), tc.isPub, tc.isInside)
			}
		})
	}
}
