package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/leasehold/leasehold/internal/scripts"
)

const jobsAbout = `Lists the scheduled jobs of the namespace ('leasehold cron', package
schedule), or job NAME, with their latest runs, latest first: the slot, when
it started and ended (the Redis server's clock, UTC), the session that ran
it, its fencing token, and how it ended: ok, the error (CMD's exit code), lost
(its hold was lost, or its process died), or running. A job's record expires
a few intervals after its last run.
`

// JobStatus is one job as 'leasehold jobs --json' prints it.
type JobStatus struct {
	Name     string          `json:"name"`
	Spec     string          `json:"spec"`
	Zone     string          `json:"zone,omitempty"`      // the spec's time zone; "" for @every
	LastSlot *time.Time      `json:"last_slot,omitempty"` // the last slot run
	Runs     []JobRunsStatus `json:"runs"`                // latest first
}

// JobRunsStatus is one run of a job; times are the Redis server's.
type JobRunsStatus struct {
	Slot    time.Time  `json:"slot"`
	Start   time.Time  `json:"start"`
	End     *time.Time `json:"end,omitempty"` // absent while running, or when its process died
	Session string     `json:"session"`
	Token   int64      `json:"token"`
	Err     string     `json:"error,omitempty"`
	Lost    bool       `json:"lost,omitempty"`
	Running bool       `json:"running,omitempty"`
}

func cmdJobs(ctx context.Context, g *globals, args []string, stdout io.Writer) error {
	c := newCommand(g, "jobs", "jobs [--json] [--runs N] [NAME]", jobsAbout)
	asJSON := c.fs.Bool("json", false, "print JSON")
	n := c.fs.Int("runs", 5, "show the latest `N` runs of each job")
	pos, _, hasCmd, err := c.parse(args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 1 || hasCmd {
		return c.usageErr("unexpected arguments")
	}
	if *n < 0 {
		return c.usageErr("--runs %d: negative", *n)
	}
	if len(pos) == 1 {
		if err := checkExisting("job", pos[0]); err != nil {
			return err
		}
	}
	ctx, v, done, err := connectAdmin(ctx, g)
	if err != nil {
		return err
	}
	defer done()
	var list []shardName
	if len(pos) == 1 {
		// A job's keys are in the shard of its mutex.
		list = []shardName{{k: scripts.ShardOf(scripts.JobMutex(pos[0]), len(v.envs)), name: pos[0]}}
	} else if list, err = v.list(ctx, scripts.Keys.Jobs); err != nil {
		return fail(exitError, "jobs: %v", err)
	}
	jobs := []JobStatus{}
	for _, j := range list {
		name := j.name
		st, err := v.envs[j.k].JobRead(ctx, name)
		if err != nil {
			return fail(exitError, "jobs: %q: %v", name, err)
		}
		if len(pos) == 1 && st.Spec == "" && len(st.Runs) == 0 {
			return fail(exitError, "job %q: no record (never run, or idle for longer than its record lives)", name)
		}
		jobs = append(jobs, jobStatus(v.envs[j.k], name, st, *n))
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(jobs)
	}
	printJobs(stdout, jobs)
	return nil
}

// jobStatus is job name's state st, read through e, with its latest n runs.
func jobStatus(e scripts.Env, name string, st scripts.JobState, n int) JobStatus {
	js := JobStatus{Name: name, Spec: st.Spec, Zone: st.Zone, Runs: []JobRunsStatus{}}
	if !st.Last.IsZero() {
		t := st.Last.UTC()
		js.LastSlot = &t
	}
	for _, r := range st.Runs[:min(n, len(st.Runs))] {
		running := r.End.IsZero() && r.HoldID != "" && r.HoldID == st.Holder
		rs := JobRunsStatus{Slot: r.Slot.UTC(), Start: r.Start.UTC(), Session: sessionOf(e, r.HoldID),
			Token: r.Token, Err: r.Err, Lost: r.Lost || (r.End.IsZero() && !running), Running: running}
		if !r.End.IsZero() {
			t := r.End.UTC()
			rs.End = &t
		}
		js.Runs = append(js.Runs, rs)
	}
	return js
}

func printJobs(w io.Writer, jobs []JobStatus) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	if len(jobs) == 0 {
		p("no jobs")
	}
	for i, j := range jobs {
		if i > 0 {
			p("")
		}
		zone := ""
		if j.Zone != "" {
			zone = " (" + j.Zone + ")"
		}
		p("job %s  %s%s", esc(j.Name), cell(j.Spec), zone)
		p("SLOT\tSTART\tTOOK\tSESSION\tTOKEN\tRESULT")
		if len(j.Runs) == 0 {
			p("(none)\t\t\t\t\t")
		}
		for _, r := range j.Runs {
			took, result := "-", "ok"
			if r.End != nil {
				took = round(r.End.Sub(r.Start)).String()
			}
			switch {
			case r.Running:
				result = "running"
			case r.Lost && r.Err != "":
				result = "lost: " + cell(r.Err)
			case r.Lost:
				result = "lost"
			case r.Err != "":
				result = cell(r.Err)
			}
			p("%s\t%s\t%s\t%s\t%d\t%s", r.Slot.Format(time.RFC3339), r.Start.Format("15:04:05.000"), took,
				esc(r.Session), r.Token, result)
		}
	}
}
