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

// rwmutex reads read-write mutex name for readStatus.
func (r *statusReader) rwmutex(ctx context.Context, name string) (RWMutexStatus, error) {
	in, err := r.e.RWMutexInspect(ctx, name)
	if err != nil {
		return RWMutexStatus{}, err
	}
	rw := RWMutexStatus{Name: name, LastToken: in.Token, Readers: []HolderStatus{}}
	for _, h := range in.Holders {
		hs := r.holder(h.HoldID, h.Owner, h.Token)
		hs.RemainingMs = h.TTL.Milliseconds()
		hd := holdOf(scripts.RWMutex, name, hs)
		if h.Shared {
			hd.Mode = "read"
			rw.Readers = append(rw.Readers, *hs)
		} else {
			hd.Mode = "write"
			rw.Writer = hs
		}
		r.addHold(hd)
	}
	for _, w := range in.Queue {
		if w.Shared {
			rw.QueuedReaders++
		} else {
			rw.QueuedWriters++
		}
	}
	return rw, nil
}

// printRW prints the read-write mutexes section of status's text output,
// left out when there are none (read-write mutexes are the newest kind: a
// namespace that uses none gets the output it always got).
func printRW(p statusPrinter, rws []RWMutexStatus) {
	if len(rws) == 0 {
		return
	}
	p.section("RWMUTEXES\tWRITER SESSION\tREADERS (session owner token left)\tLAST TOKEN\tQUEUED R/W", false)
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
