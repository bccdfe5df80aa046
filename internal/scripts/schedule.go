package scripts

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The scripts of package schedule (jobs run once per slot across the
// fleet); see schedule_claim.lua for the keys and the claim rule.
var (
	scheduleClaim  = script("schedule_claim.lua")
	scheduleFinish = script("schedule_finish.lua")
	scheduleRead   = readOnly("schedule_read.lua")
)

// Job is the hash {ns}:job:<name> of a scheduled job: the last slot run
// (slot, unix ms), its run's token (tok), the job's spec and time zone.
func (k Keys) Job(name string) string { return k.Prefix + keyJob + name }

// JobHistory is the hash {ns}:jobh:<name> of a job's runs by token.
func (k Keys) JobHistory(name string) string { return k.Prefix + keyJobHistory + name }

// JobMutex is the name of the mutex that a job's runs hold
// ("schedule:<name>"; its key is Keys.Mutex of it).
func JobMutex(name string) string { return "schedule:" + name }

// JobClaimCode is schedule_claim.lua's verdict on a slot.
type JobClaimCode int8

// schedule_claim.lua's codes.
const (
	JobClaimed   JobClaimCode = 1  // the slot is the caller's to run
	JobNotHolder JobClaimCode = 0  // the caller's hold of the job's mutex is gone
	JobDone      JobClaimCode = -1 // the slot, or a later one, was run already
	JobEarly     JobClaimCode = -2 // the slot's time has not come on the server's clock
	JobLate      JobClaimCode = -3 // the slot's time passed more than the grace ago
	JobLostData  JobClaimCode = -4 // no record, and the slot predates the last data loss
)

// JobClaim is the outcome of JobClaim: the verdict, the server's time when
// it was given and the last slot run before it (zero when none).
type JobClaim struct {
	Code JobClaimCode
	Now  time.Time
	Last time.Time
}

// JobConfig is what a claim stores and applies besides the slot.
type JobConfig struct {
	Spec, Zone string
	Grace      time.Duration // how late a slot may start; negative: no limit
	FirstGrace time.Duration // Grace for a job without a record
	Keep       time.Duration // how long the record and history live after a write
	History    int           // run records kept
}

// JobClaim asks Redis whether slot is the job's next run for hold hid (the
// holder of JobMutex(name)) with token tok, and records it if so. With
// Acks, the claim is acknowledged by that many replicas, else the error
// matches ErrNotReplicated and the slot, though recorded on the master,
// must not run.
func (e Env) JobClaim(ctx context.Context, name, hid string, tok int64, slot time.Time, c JobConfig) (JobClaim, error) {
	keys := []string{e.K.Job(name), e.K.JobHistory(name), e.K.Mutex(JobMutex(name)), e.K.Epoch()}
	args := []string{hid, strconv.FormatInt(tok, 10), strconv.FormatInt(slot.UnixMilli(), 10),
		graceMs(c.Grace), ms(c.Keep), strconv.Itoa(c.History), c.Spec, c.Zone, graceMs(c.FirstGrace)}
	r, err := e.execWait(ctx, scheduleClaim, keys, args)
	v, rerr := r.AsIntSlice()
	if rerr != nil {
		return JobClaim{}, rerr
	}
	if len(v) != 3 || v[0] < int64(JobLostData) || v[0] > int64(JobClaimed) {
		return JobClaim{}, fmt.Errorf("%w: schedule_claim: %v", errReply, v)
	}
	return JobClaim{Code: JobClaimCode(v[0]), Now: time.UnixMilli(v[1]), Last: unixMs(v[2])}, err
}

// JobFinish records the end of the run with token tok of job name: lost
// when it ended by the loss of its hold, errText its error ("" for none).
// keep is how long the record and history live at least afterwards. It
// reports whether the run's record was still there.
func (e Env) JobFinish(ctx context.Context, name string, tok int64, lost bool, errText string, keep time.Duration) (bool, error) {
	l := "0"
	if lost {
		l = "1"
	}
	n, err := scheduleFinish.Exec(ctx, e.C, []string{e.K.Job(name), e.K.JobHistory(name)},
		[]string{strconv.FormatInt(tok, 10), l, errText, ms(keep)}).AsInt64()
	return n == 1, err
}

// JobRun is one run record of a job.
type JobRun struct {
	Slot, Start, End time.Time // End is zero while running (or never reported)
	Prev             time.Time // the slot run before this one; zero for none
	Token            int64
	Lost             bool // ended by the loss of its hold
	HoldID, Err      string
}

// JobState is a job as Redis records it.
type JobState struct {
	Spec, Zone string
	Last       time.Time // the last slot run; zero when there is no record
	LastToken  int64
	Runs       []JobRun // latest (highest token) first
	Holder     string   // hold id holding the job's mutex with a live lease; "" for none
}

// JobRead reads job name's record, its run records and who holds its mutex,
// in one round trip.
func (e Env) JobRead(ctx context.Context, name string) (JobState, error) {
	v, err := scheduleRead.Exec(ctx, e.C,
		[]string{e.K.Job(name), e.K.JobHistory(name), e.K.Mutex(JobMutex(name))}, nil).ToArray()
	if err != nil {
		return JobState{}, err
	}
	if len(v) != 3 {
		return JobState{}, fmt.Errorf("%w: schedule_read: %d elements", errReply, len(v))
	}
	rec, err := v[0].AsStrSlice()
	if err != nil {
		return JobState{}, fmt.Errorf("%w: schedule_read record: %v", errReply, err)
	}
	hist, err := v[1].AsStrSlice()
	if err != nil {
		return JobState{}, fmt.Errorf("%w: schedule_read history: %v", errReply, err)
	}
	var st JobState
	if st.Holder, err = v[2].ToString(); err != nil {
		return JobState{}, fmt.Errorf("%w: schedule_read holder: %v", errReply, err)
	}
	for i := 0; i+1 < len(rec); i += 2 {
		switch val := rec[i+1]; rec[i] {
		case "slot":
			n, _ := strconv.ParseInt(val, 10, 64)
			st.Last = unixMs(n)
		case "tok":
			st.LastToken, _ = strconv.ParseInt(val, 10, 64)
		case "spec":
			st.Spec = val
		case "tz":
			st.Zone = val
		}
	}
	for i := 0; i+1 < len(hist); i += 2 {
		r, ok := parseJobRun(hist[i], hist[i+1])
		if !ok {
			return JobState{}, fmt.Errorf("%w: schedule_read: run record %q", errReply, hist[i+1])
		}
		st.Runs = append(st.Runs, r)
	}
	slices.SortFunc(st.Runs, func(a, b JobRun) int { return cmp.Compare(b.Token, a.Token) })
	return st, nil
}

// parseJobRun reads the run record "<slot>|<start>|<end>|<prev>|<lost>|<hid>|<err>"
// of token tok (see schedule_claim.lua).
func parseJobRun(tok, v string) (JobRun, bool) {
	f := strings.SplitN(v, "|", 7)
	if len(f) != 7 {
		return JobRun{}, false
	}
	var n [4]int64
	for i := range 4 {
		var err error
		if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return JobRun{}, false
		}
	}
	t, err := strconv.ParseInt(tok, 10, 64)
	if err != nil {
		return JobRun{}, false
	}
	return JobRun{Slot: unixMs(n[0]), Start: unixMs(n[1]), End: unixMs(n[2]), Prev: unixMs(n[3]),
		Token: t, Lost: f[4] == "1", HoldID: f[5], Err: f[6]}, true
}

// graceMs is grace g in ms, "-1" for no limit (g < 0).
func graceMs(g time.Duration) string {
	if g < 0 {
		return "-1"
	}
	return ms(g)
}

// unixMs is the time of unix ms n, the zero time for 0.
func unixMs(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}
