package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/scripts"
)

// Status is what `leasehold status --json` prints. Durations are in
// milliseconds; remaining_ms is the holder lease's TTL left on the server.
type Status struct {
	Namespace    string         `json:"namespace"`
	Shards       int            `json:"shards,omitempty"`        // a sharded namespace's shard count (session.Options.Shards)
	Cluster      *ClusterStatus `json:"cluster,omitempty"`       // Redis Cluster only
	RestartGrace *GraceStatus   `json:"restart_grace,omitempty"` // only while one is pending
	EpochMissing bool           `json:"epoch_missing,omitempty"` // the next session starts a restart grace
	// EpochMissingShards, of a sharded namespace, are the shards whose
	// epoch marker is missing (nothing used them yet, or Redis lost their
	// data): the next session to use each starts the restart grace there.
	EpochMissingShards []int             `json:"epoch_missing_shards,omitempty"`
	Sessions           []SessionStatus   `json:"sessions"`
	Mutexes            []MutexStatus     `json:"mutexes"`
	Semaphores         []SemaphoreStatus `json:"semaphores"`
	Pools              []PoolStatus      `json:"pools"`
	Elections          []ElectionStatus  `json:"elections"`
	RWMutexes          []RWMutexStatus   `json:"rwmutexes"`
}

// ClusterStatus says where the namespace lives on a Redis Cluster. For a
// sharded namespace, Slot and Master are those of its guard {ns}:epoch, and
// ShardSlots says where each shard lives.
type ClusterStatus struct {
	Slot       int64       `json:"slot"`                  // the namespace's hash slot
	Master     string      `json:"master"`                // the master serving it ("" if none does)
	Masters    []string    `json:"masters"`               // every master, all scanned for the namespace's keys
	ShardSlots []ShardSlot `json:"shard_slots,omitempty"` // a sharded namespace's shards, by shard
}

// ShardSlot is where one shard of a sharded namespace lives on a Redis
// Cluster.
type ShardSlot struct {
	Shard  int    `json:"shard"`
	Slot   int64  `json:"slot"`
	Master string `json:"master"` // "" if no master serves the slot
}

// GraceStatus is a pending restart grace: after Redis lost its data,
// nothing is granted for left_ms more. In a sharded namespace each shard
// has its own: this is the longest, and Shards are those that have one.
type GraceStatus struct {
	LeftMs  int64 `json:"left_ms"`
	GraceMs int64 `json:"grace_ms"`         // the namespace's restart grace; 0 when none is recorded
	Shards  []int `json:"shards,omitempty"` // sharded: the shards in a restart grace
}

// SessionStatus is one live session (lease). In a sharded namespace a
// session has a lease copy in each shard it used (Shards); RemainingMs is
// then the least any copy has left.
type SessionStatus struct {
	ID          string       `json:"id"`
	Owner       string       `json:"owner"`
	TTLMs       int64        `json:"ttl_ms"`           // the session's configured TTL
	RemainingMs int64        `json:"remaining_ms"`     // lease TTL left on the server
	Shards      []int        `json:"shards,omitempty"` // sharded: the shards it has a lease copy in
	Holds       []HoldStatus `json:"holds"`
}

// HoldStatus is one hold of a session.
type HoldStatus struct {
	Kind        string `json:"kind"` // "mutex", "semaphore", "pool", "election", "rwmutex"
	Name        string `json:"name"`
	Member      string `json:"member,omitempty"`  // pool: the member held
	Permits     int64  `json:"permits,omitempty"` // semaphore: the permits held
	Value       string `json:"value,omitempty"`   // election: the leader's value
	Mode        string `json:"mode,omitempty"`    // rwmutex: "read" or "write"
	Token       int64  `json:"token"`             // fencing token (election: term)
	Session     string `json:"session"`           // the holder session's id
	Hold        string `json:"hold"`              // the hold id (sharded: its lease copy's id, then "." and a number)
	Owner       string `json:"owner"`
	RemainingMs int64  `json:"remaining_ms"` // the holder lease's TTL left on the server
}

// String is the hold as status's text output shows it, names quoted:
// `mutex "deploy"`, `semaphore "api" (2)`, `pool "shards" member "s1"`.
func (h HoldStatus) String() string {
	switch h.Kind {
	case "semaphore":
		return fmt.Sprintf("%s %q (%d)", h.Kind, h.Name, h.Permits)
	case "pool":
		return fmt.Sprintf("%s %q member %q", h.Kind, h.Name, h.Member)
	case "rwmutex":
		return fmt.Sprintf("%s %q (%s)", h.Kind, h.Name, h.Mode)
	}
	return fmt.Sprintf("%s %q", h.Kind, h.Name)
}

// HolderStatus is the holder of a mutex, pool member or election.
type HolderStatus struct {
	Session     string `json:"session"`
	Hold        string `json:"hold"`
	Owner       string `json:"owner"`
	Token       int64  `json:"token"`
	RemainingMs int64  `json:"remaining_ms"`
}

// MutexStatus is one mutex; Holder is null when it is free.
type MutexStatus struct {
	Name      string        `json:"name"`
	Holder    *HolderStatus `json:"holder"`
	LastToken int64         `json:"last_token"`
	Waiters   int           `json:"waiters"`
}

// SemaphoreHolderStatus is one holder of semaphore permits.
type SemaphoreHolderStatus struct {
	HolderStatus
	Permits int64 `json:"permits"`
}

// SemaphoreStatus is one semaphore.
type SemaphoreStatus struct {
	Name     string                  `json:"name"`
	Limit    int64                   `json:"limit"`
	LimitSet bool                    `json:"limit_set"` // an operator set the limit (sem-limit)
	InUse    int64                   `json:"in_use"`
	Holders  []SemaphoreHolderStatus `json:"holders"`
	Waiters  int                     `json:"waiters"`
}

// PoolMemberStatus is one held member of a pool.
type PoolMemberStatus struct {
	Key string `json:"key"`
	HolderStatus
}

// PoolStatus is one pool.
type PoolStatus struct {
	Name    string             `json:"name"`
	Members []string           `json:"members"`
	Free    []string           `json:"free"`
	Held    []PoolMemberStatus `json:"held"`
	Waiters int                `json:"waiters"`
}

// ElectionStatus is one election; Leader is null when nobody leads.
type ElectionStatus struct {
	Name       string        `json:"name"`
	Leader     *HolderStatus `json:"leader"`
	Value      string        `json:"value"`
	Candidates int           `json:"candidates"` // live sessions queued to lead next
}

const statusAbout = `Shows the live sessions of the namespace, and every mutex, semaphore, pool,
election and read-write mutex with its holders (session, owner, fencing token, lease time left) and
waiters. It reads Redis with SCAN and read-only scripts and opens no session.
A resource whose holder's lease is gone is shown free. While a restart grace
is pending (a session found the namespace's data missing, because Redis lost
it or the namespace is new: nothing is granted for the namespace's restart
grace from then), a line says so and for how long. --json prints the same as one JSON
object (durations in milliseconds; every hold of a session as an object with
kind, name, member, permits, value, token, session, hold, owner and
remaining_ms). A semaphore limit an operator set with sem-limit shows as
"2/6(set)" (in use / limit), and as "limit_set" in JSON.

Names, owners, values and session ids that hold spaces, control characters
or invalid UTF-8 are printed quoted, with Go escapes ("a\nb", "\xff"), so
that each row stays one line; JSON carries them as they are.

On Redis Cluster it also shows the namespace's hash slot and the master that
serves it, and it scans every master for the namespace's keys (replicas are
not scanned).

A sharded namespace (session.Options.Shards, found in Redis or given with
--shards) is shown as one: its shard count in the header, each session once
with every hold it has in any shard, each resource once. On Redis Cluster it
also says which master serves each shard. Each shard has its own restart
grace; a shard nothing used yet has no epoch marker, and the next session to
use it starts its restart grace there.
`

func cmdStatus(ctx context.Context, g *globals, args []string, stdout io.Writer) error {
	c := newCommand(g, "status", "status [--json]", statusAbout)
	asJSON := c.fs.Bool("json", false, "print JSON")
	pos, _, hasCmd, err := c.parse(args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 || hasCmd {
		return c.usageErr("unexpected arguments")
	}
	ctx, v, done, err := connectAdmin(ctx, g)
	if err != nil {
		return err
	}
	defer done()
	st, err := readStatus(ctx, v)
	if err != nil {
		return fail(exitError, "status: %v", err)
	}
	if *asJSON {
		return writeJSON(stdout, st)
	}
	printStatus(stdout, st)
	return nil
}

// readStatus reads everything in namespace v: in every shard of a sharded
// one, merged as one namespace.
func readStatus(ctx context.Context, v *nsView) (*Status, error) {
	st := &Status{Namespace: v.name, Shards: v.shards}
	if v.c.Mode() == rueidis.ClientModeCluster {
		cs, err := readCluster(ctx, v)
		if err != nil {
			return nil, err
		}
		st.Cluster = cs
	}
	if err := readStatusGrace(ctx, v, st); err != nil {
		return nil, fmt.Errorf("restart grace: %w", err)
	}
	// The sessions first: each hold found then is matched with its
	// session's lease.
	sessions, err := readSessions(ctx, v)
	if err != nil {
		return nil, err
	}
	holds := map[string][]HoldStatus{}
	rs := make([]*statusReader, len(v.envs))
	for k, e := range v.envs {
		rs[k] = &statusReader{e: e, sessions: sessions[k], holds: holds}
	}
	if st.Mutexes, err = readEach(ctx, v, rs, scripts.Mutex, (*statusReader).mutex); err != nil {
		return nil, err
	}
	if st.Semaphores, err = readEach(ctx, v, rs, scripts.Semaphore, (*statusReader).semaphore); err != nil {
		return nil, err
	}
	if st.Pools, err = readEach(ctx, v, rs, scripts.Pool, (*statusReader).pool); err != nil {
		return nil, err
	}
	if st.Elections, err = readEach(ctx, v, rs, scripts.Election, (*statusReader).election); err != nil {
		return nil, err
	}
	if st.RWMutexes, err = readEach(ctx, v, rs, scripts.RWMutex, (*statusReader).rwmutex); err != nil {
		return nil, err
	}
	st.Sessions = sessionsWithHolds(v, sessions, holds)
	return st, nil
}

// readStatusGrace records in st the restart grace of namespace v: of each
// of its shards when sharded (see Status.EpochMissingShards and
// GraceStatus.Shards).
func readStatusGrace(ctx context.Context, v *nsView, st *Status) error {
	grs, err := readGraces(ctx, v.c, v.envs)
	if err != nil {
		return err
	}
	var longest grace
	var pending, missing []int
	for k, gr := range grs {
		if gr.pending() {
			pending = append(pending, k)
			if gr.left > longest.left {
				longest = gr
			}
		}
		if gr.missing {
			missing = append(missing, k)
		}
	}
	st.EpochMissing = len(missing) > 0
	if len(pending) > 0 {
		st.RestartGrace = &GraceStatus{LeftMs: longest.left.Milliseconds(), GraceMs: longest.grace.Milliseconds()}
	}
	if v.shards > 0 {
		st.EpochMissingShards = missing
		if st.RestartGrace != nil {
			st.RestartGrace.Shards = pending
		}
	}
	return nil
}

// readEach reads every resource of kind in namespace v with read, of the
// reader of the shard it is in, in name order; the list is empty, not nil,
// when there are none.
func readEach[T any](ctx context.Context, v *nsView, rs []*statusReader, kind scripts.Kind,
	read func(r *statusReader, ctx context.Context, name string) (T, error)) ([]T, error) {
	all, err := v.list(ctx, func(k scripts.Keys) scripts.Listing { return k.Listing(kind) })
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(all))
	for _, n := range all {
		x, err := read(rs[n.k], ctx, n.name)
		if err != nil {
			return nil, fmt.Errorf("%v %q: %w", kind, n.name, err)
		}
		out = append(out, x)
	}
	return out, nil
}

// statusReader reads the resources of one namespace, or one shard of a
// sharded namespace, for readStatus, and gathers the holds it finds by
// session.
type statusReader struct {
	e        scripts.Env
	sessions map[string]*SessionStatus // the live leases of e.K (a shard's lease copies), by id
	holds    map[string][]HoldStatus   // session id -> what it holds; shared by the shards' readers
}

// holder describes the holder of hold hid: its lease's time left and, when
// owner is "", its session's owner.
func (r *statusReader) holder(hid, owner string, token int64) *HolderStatus {
	h := &HolderStatus{Session: sessionOf(r.e, hid), Hold: hid, Owner: owner, Token: token}
	if s, ok := r.sessions[sidOf(hid)]; ok {
		h.RemainingMs = s.RemainingMs
		if h.Owner == "" {
			h.Owner = s.Owner
		}
	}
	return h
}

// addHold records hd among its session's holds.
func (r *statusReader) addHold(hd HoldStatus) {
	r.holds[hd.Session] = append(r.holds[hd.Session], hd)
}

// holdOf is the hold of resource kind name by h, without the kind's own
// fields (permits, member, value, mode).
func holdOf(kind scripts.Kind, name string, h *HolderStatus) HoldStatus {
	return HoldStatus{Kind: kind.String(), Name: name, Token: h.Token, Session: h.Session, Hold: h.Hold,
		Owner: h.Owner, RemainingMs: h.RemainingMs}
}

// sessionsWithHolds lists the live sessions, each with its holds, by id:
// in a sharded namespace, each session once, its lease copies in the
// shards merged (see sessionOf).
func sessionsWithHolds(v *nsView, sessions []map[string]*SessionStatus, holds map[string][]HoldStatus) []SessionStatus {
	merged := map[string]*SessionStatus{}
	for k, byID := range sessions {
		for _, id := range slices.Sorted(maps.Keys(byID)) {
			s, sid := byID[id], copySession(v.envs[k], id)
			m := merged[sid]
			if m == nil {
				m = s
				m.ID = sid
				merged[sid] = m
			} else {
				m.RemainingMs = min(m.RemainingMs, s.RemainingMs)
			}
			if v.shards > 0 && !slices.Contains(m.Shards, k) {
				m.Shards = append(m.Shards, k)
			}
		}
	}
	out := make([]SessionStatus, 0, len(merged))
	for _, id := range slices.Sorted(maps.Keys(merged)) {
		s := merged[id]
		s.Holds = holds[id]
		if s.Holds == nil {
			s.Holds = []HoldStatus{}
		}
		out = append(out, *s)
	}
	return out
}

// mutex, semaphore, pool, election and rwmutex (in status_rw.go) each read
// one resource for readEach and record its holds.

func (r *statusReader) mutex(ctx context.Context, name string) (MutexStatus, error) {
	in, err := r.e.MutexInspect(ctx, name)
	if err != nil {
		return MutexStatus{}, err
	}
	m := MutexStatus{Name: name, LastToken: in.Token, Waiters: in.Waiters}
	if in.HoldID != "" {
		m.Holder = r.holder(in.HoldID, in.Owner, in.Token)
		m.Holder.RemainingMs = in.TTL.Milliseconds()
		r.addHold(holdOf(scripts.Mutex, name, m.Holder))
	}
	return m, nil
}

func (r *statusReader) semaphore(ctx context.Context, name string) (SemaphoreStatus, error) {
	ss, err := r.e.SemaphoreStats(ctx, name)
	if err != nil {
		return SemaphoreStatus{}, err
	}
	s := SemaphoreStatus{Name: name, Limit: ss.Limit, LimitSet: ss.Set, Waiters: ss.Waiters, Holders: []SemaphoreHolderStatus{}}
	for _, h := range ss.Holders {
		hs := r.holder(h.HoldID, h.Owner, h.Token)
		hs.RemainingMs = h.TTL.Milliseconds()
		s.Holders = append(s.Holders, SemaphoreHolderStatus{HolderStatus: *hs, Permits: h.N})
		s.InUse += h.N
		hd := holdOf(scripts.Semaphore, name, hs)
		hd.Permits = h.N
		r.addHold(hd)
	}
	return s, nil
}

func (r *statusReader) pool(ctx context.Context, name string) (PoolStatus, error) {
	p, err := readStatusPool(ctx, r.e, name)
	if err != nil {
		return PoolStatus{}, err
	}
	for _, h := range p.Held {
		hd := holdOf(scripts.Pool, name, &h.HolderStatus)
		hd.Member = h.Key
		r.addHold(hd)
	}
	return p, nil
}

func (r *statusReader) election(ctx context.Context, name string) (ElectionStatus, error) {
	l, err := r.e.ElectionLeader(ctx, name)
	if err != nil {
		return ElectionStatus{}, err
	}
	el := ElectionStatus{Name: name}
	if l.HoldID != "" {
		el.Leader = r.holder(l.HoldID, "", l.Term)
		el.Leader.RemainingMs = l.TTL.Milliseconds()
		el.Value = l.Value
		hd := holdOf(scripts.Election, name, el.Leader)
		hd.Value = l.Value
		r.addHold(hd)
	}
	el.Candidates, err = liveQueued(ctx, r.e, r.e.K.Queue(scripts.Election, name), r.sessions)
	return el, err
}

// readCluster says where namespace v lives on the Redis Cluster v.c: its
// slot (a sharded namespace's guard's), and each shard's.
func readCluster(ctx context.Context, v *nsView) (*ClusterStatus, error) {
	shards, err := clusterTopology(ctx, v.c)
	if err != nil {
		return nil, err
	}
	masterOf := func(slot int64) string {
		for _, sh := range shards {
			if sh.serves(slot) {
				return sh.master
			}
		}
		return ""
	}
	cs := &ClusterStatus{Slot: namespaceSlot(v.c, scripts.NewKeys(v.name)), Masters: []string{}}
	cs.Master = masterOf(cs.Slot)
	for _, sh := range shards {
		cs.Masters = append(cs.Masters, sh.master)
	}
	if v.shards > 0 {
		for k, e := range v.envs {
			slot := namespaceSlot(v.c, e.K)
			cs.ShardSlots = append(cs.ShardSlots, ShardSlot{Shard: k, Slot: slot, Master: masterOf(slot)})
		}
	}
	return cs, nil
}

// readSessions reads every lease of namespace v (every lease copy of a
// sharded one), by shard and id: owner, TTL and time left.
func readSessions(ctx context.Context, v *nsView) ([]map[string]*SessionStatus, error) {
	ids, err := v.list(ctx, scripts.Keys.Sessions)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]*SessionStatus, len(v.envs))
	for k := range out {
		out[k] = map[string]*SessionStatus{}
	}
	const batch = 256
	c := v.c
	for i := 0; i < len(ids); i += batch {
		part := ids[i:min(i+batch, len(ids))]
		cmds := make(rueidis.Commands, 0, 2*len(part))
		for _, id := range part {
			k := v.envs[id.k].K.Lease(id.name)
			cmds = append(cmds, c.B().Hmget().Key(k).Field("owner", "ttl").Build(), c.B().Pttl().Key(k).Build())
		}
		res := c.DoMulti(ctx, cmds...)
		for j, id := range part {
			f, err := res[2*j].ToArray()
			if err != nil {
				return nil, fmt.Errorf("session %s: %w", esc(id.name), err)
			}
			pttl, err := res[2*j+1].AsInt64()
			if err != nil {
				return nil, fmt.Errorf("session %s: %w", esc(id.name), err)
			}
			if pttl <= 0 || len(f) != 2 {
				continue // expired meanwhile
			}
			owner, _ := f[0].ToString()
			ttl, _ := f[1].ToString()
			ttlMs, _ := strconv.ParseInt(ttl, 10, 64)
			out[id.k][id.name] = &SessionStatus{ID: id.name, Owner: owner, TTLMs: ttlMs, RemainingMs: pttl}
		}
	}
	return out, nil
}

// liveQueued counts the entries of queue q whose session lease exists.
func liveQueued(ctx context.Context, e scripts.Env, q string, sessions map[string]*SessionStatus) (int, error) {
	hids, err := e.C.Do(ctx, e.C.B().Lrange().Key(q).Start(0).Stop(-1).Build()).AsStrSlice()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, hid := range hids {
		sid := sidOf(hid)
		if _, ok := sessions[sid]; ok {
			n++
			continue
		}
		// A session opened after the scan: ask.
		ok, err := e.C.Do(ctx, e.C.B().Exists().Key(e.K.Lease(sid)).Build()).AsInt64()
		if err != nil {
			return 0, err
		}
		n += int(ok)
	}
	return n, nil
}

// statusPrinter prints one line of a tabwriter table: format and args as
// for fmt.Printf, without the newline.
type statusPrinter func(format string, args ...any)

// printStatus prints status's text output: a header, then one table per
// kind.
func printStatus(w io.Writer, st *Status) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	p := statusPrinter(func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) })

	printHeader(p, st)
	printSessions(p, st.Sessions)
	printMutexes(p, st.Mutexes)
	printSemaphores(p, st.Semaphores)
	printPools(p, st.Pools)
	printElections(p, st.Elections)
	printRW(p, st.RWMutexes)
}

// section starts a table after a blank line with its header's row and,
// when the table is empty, a row "(none)".
func (p statusPrinter) section(header string, empty bool) {
	p("")
	p("%s", header)
	if empty {
		p("(none)%s", strings.Repeat("\t", strings.Count(header, "\t")))
	}
}

// printHeader prints the namespace, where it lives on a Redis Cluster, and
// the state of its restart grace.
func printHeader(p statusPrinter, st *Status) {
	if st.Shards > 0 {
		p("namespace %q (%d shards)", st.Namespace, st.Shards)
	} else {
		p("namespace %q", st.Namespace)
	}
	if cs := st.Cluster; cs != nil {
		printCluster(p, cs)
	}
	if g := st.RestartGrace; g != nil {
		gr := grace{left: time.Duration(g.LeftMs) * time.Millisecond, grace: time.Duration(g.GraceMs) * time.Millisecond}
		if len(g.Shards) > 0 {
			p("in %s of %d: %v", shardsText(g.Shards), st.Shards, gr)
		} else {
			p("%v", gr)
		}
	}
	switch ks := st.EpochMissingShards; {
	case len(ks) == 1:
		p("no epoch marker in %s of %d (nothing used it yet, or Redis lost its data): "+
			"the next session to use it starts the restart grace there", shardsText(ks), st.Shards)
	case len(ks) > 1:
		p("no epoch marker in %s of %d (nothing used them yet, or Redis lost their data): "+
			"the next session to use each starts the restart grace there", shardsText(ks), st.Shards)
	case st.EpochMissing:
		p("%v", grace{missing: true})
	}
}

// printCluster prints where the namespace lives on a Redis Cluster: its
// slot, or a sharded namespace's guard's, then for a sharded namespace
// the shards each master serves.
func printCluster(p statusPrinter, cs *ClusterStatus) {
	where := "no master serves it (cluster down?)"
	if cs.Master != "" {
		where = "served by master " + cs.Master
	}
	what := "slot"
	if len(cs.ShardSlots) > 0 {
		what = "guard in slot"
	}
	p("Redis Cluster: %s %d, %s; %s scanned: %s", what, cs.Slot, where,
		plural(len(cs.Masters), "master", "masters"), strings.Join(cs.Masters, ", "))
	byMaster := map[string][]int{}
	for _, sh := range cs.ShardSlots {
		byMaster[sh.Master] = append(byMaster[sh.Master], sh.Shard)
	}
	for _, m := range slices.Sorted(maps.Keys(byMaster)) {
		if m == "" {
			p("%s served by no master (cluster down?)", shardsText(byMaster[m]))
			continue
		}
		p("%s on master %s", shardsText(byMaster[m]), m)
	}
}

func printSessions(p statusPrinter, sessions []SessionStatus) {
	p.section("SESSIONS\tOWNER\tTTL\tLEFT\tHOLDS", len(sessions) == 0)
	for _, s := range sessions {
		hs := make([]string, len(s.Holds))
		for i, h := range s.Holds {
			hs[i] = h.String()
		}
		p("%s\t%s\t%s\t%s\t%s", esc(s.ID), cell(s.Owner), msHuman(s.TTLMs), msHuman(s.RemainingMs), orDash(strings.Join(hs, ", ")))
	}
}

func printMutexes(p statusPrinter, mutexes []MutexStatus) {
	p.section("MUTEXES\tHOLDER SESSION\tOWNER\tTOKEN\tLEFT\tWAITERS", len(mutexes) == 0)
	for _, m := range mutexes {
		if m.Holder == nil {
			p("%s\t(free)\t-\t%d\t-\t%d", esc(m.Name), m.LastToken, m.Waiters)
			continue
		}
		p("%s\t%s\t%s\t%d\t%s\t%d", esc(m.Name), esc(m.Holder.Session), cell(m.Holder.Owner), m.Holder.Token, msHuman(m.Holder.RemainingMs), m.Waiters)
	}
}

func printSemaphores(p statusPrinter, sems []SemaphoreStatus) {
	p.section("SEMAPHORES\tIN USE\tWAITERS\tHOLDERS (session owner permits token left)", len(sems) == 0)
	for _, s := range sems {
		var hs []string
		for _, h := range s.Holders {
			hs = append(hs, fmt.Sprintf("%s %s %d %d %s", esc(h.Session), cell(h.Owner), h.Permits, h.Token, msHuman(h.RemainingMs)))
		}
		set := ""
		if s.LimitSet {
			set = "(set)" // one field: the table separates fields with spaces
		}
		p("%s\t%d/%d%s\t%d\t%s", esc(s.Name), s.InUse, s.Limit, set, s.Waiters, orDash(strings.Join(hs, "; ")))
	}
}

func printPools(p statusPrinter, pools []PoolStatus) {
	p.section("POOLS\tMEMBERS\tFREE\tWAITERS\tHELD (key session owner token left)", len(pools) == 0)
	for _, pl := range pools {
		var hs []string
		for _, h := range pl.Held {
			hs = append(hs, fmt.Sprintf("%s %s %s %d %s", esc(h.Key), esc(h.Session), cell(h.Owner), h.Token, msHuman(h.RemainingMs)))
		}
		p("%s\t%d\t%d\t%d\t%s", esc(pl.Name), len(pl.Members), len(pl.Free), pl.Waiters, orDash(strings.Join(hs, "; ")))
	}
}

func printElections(p statusPrinter, els []ElectionStatus) {
	p.section("ELECTIONS\tLEADER SESSION\tOWNER\tVALUE\tTERM\tLEFT\tCANDIDATES", len(els) == 0)
	for _, e := range els {
		if e.Leader == nil {
			p("%s\t(nobody)\t-\t-\t-\t-\t%d", esc(e.Name), e.Candidates)
			continue
		}
		p("%s\t%s\t%s\t%s\t%d\t%s\t%d", esc(e.Name), esc(e.Leader.Session), cell(e.Leader.Owner), cell(e.Value), e.Leader.Token, msHuman(e.Leader.RemainingMs), e.Candidates)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
