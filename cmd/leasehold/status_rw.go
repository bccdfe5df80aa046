package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/internal/scripts"
)

// RWMutexStatus is one read-write mutex: a writer, or readers, or neither.
type RWMutexStatus struct {
	Name          string         `json:"name"`
	Writer        *HolderStatus  `json:"writer"`
	Readers       []HolderStatus `json:"readers"`
	LastToken     int64          `json:"last_token"`
	QueuedReaders int            `json:"queued_readers"`
	QueuedWriters int            `json:"queued_writers"`
}

// readStatusRW reads every read-write mutex of namespace e.K, adding each
// live hold to holds (session id -> what it holds); holder builds a holder
// as readStatus does.
func readStatusRW(ctx context.Context, e scripts.Env, holds map[string][]HoldStatus,
	holder func(hid, owner string, token int64) *HolderStatus) ([]RWMutexStatus, error) {
	rws, err := names(ctx, e.C, e.K.Listing(scripts.RWMutex))
	if err != nil {
		return nil, err
	}
	out := []RWMutexStatus{}
	for _, name := range rws {
		in, err := e.RWMutexInspect(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("rwmutex %q: %w", name, err)
		}
		rw := RWMutexStatus{Name: name, LastToken: in.Token, Readers: []HolderStatus{}}
		for _, h := range in.Holders {
			hs := holder(h.HoldID, h.Owner, h.Token)
			hs.RemainingMs = h.TTL.Milliseconds()
			mode := "write"
			if h.Shared {
				mode = "read"
				rw.Readers = append(rw.Readers, *hs)
			} else {
				rw.Writer = hs
			}
			holds[hs.Session] = append(holds[hs.Session], HoldStatus{Kind: "rwmutex", Name: name, Mode: mode,
				Token: hs.Token, Session: hs.Session, Hold: hs.Hold, Owner: hs.Owner, RemainingMs: hs.RemainingMs})
		}
		for _, w := range in.Queue {
			if w.Shared {
				rw.QueuedReaders++
			} else {
				rw.QueuedWriters++
			}
		}
		out = append(out, rw)
	}
	return out, nil
}

// printRW prints the read-write mutexes section of status's text output,
// left out when there are none (read-write mutexes are the newest kind: a
// namespace that uses none gets the output it always got).
func printRW(p func(format string, args ...any), rws []RWMutexStatus) {
	if len(rws) == 0 {
		return
	}
	p("")
	p("RWMUTEXES\tWRITER SESSION\tREADERS (session owner token left)\tLAST TOKEN\tQUEUED R/W")
	for _, rw := range rws {
		writer := "-"
		if w := rw.Writer; w != nil {
			writer = fmt.Sprintf("%s %s %d %s", esc(w.Session), cell(w.Owner), w.Token, msHuman(w.RemainingMs))
		}
		var rs []string
		for _, r := range rw.Readers {
			rs = append(rs, fmt.Sprintf("%s %s %d %s", esc(r.Session), cell(r.Owner), r.Token, msHuman(r.RemainingMs)))
		}
		p("%s\t%s\t%s\t%d\t%d/%d", esc(rw.Name), writer, orDash(strings.Join(rs, "; ")), rw.LastToken, rw.QueuedReaders, rw.QueuedWriters)
	}
}
