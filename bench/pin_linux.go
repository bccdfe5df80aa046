//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// pinTogether puts every thread of this process and of process pid, a
// running redis-server, on one CPU, the lowest both may use, and returns
// what gives each process its affinity back (threads started meanwhile
// included). It makes the "serial on one CPU" run of the uncontended
// scenario: with the client and Redis on one CPU, a round trip costs their
// CPU work and a context switch, not a wake-up of another CPU, which on a
// virtual machine costs more than the work and varies from run to run.
func pinTogether(pid int) (restore func() error, err error) {
	if pid <= 0 { // sched_getaffinity(0) would be this thread's
		return nil, errors.New("redis-server is not running")
	}
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || !strings.HasPrefix(string(comm), "redis-server") {
		return nil, fmt.Errorf("process %d is not redis-server (%q, %v)", pid, comm, err)
	}
	var mine, its unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mine); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	if err := unix.SchedGetaffinity(pid, &its); err != nil {
		return nil, fmt.Errorf("sched_getaffinity of redis-server: %w", err)
	}
	cpu := -1
	for c := 0; c < 1024 && cpu < 0; c++ {
		if mine.IsSet(c) && its.IsSet(c) {
			cpu = c
		}
	}
	if cpu < 0 {
		return nil, errors.New("no CPU both processes may use")
	}
	restore = func() error {
		return errors.Join(setThreads(os.Getpid(), &mine), setThreads(pid, &its))
	}
	var one unix.CPUSet
	one.Set(cpu)
	for _, p := range []int{os.Getpid(), pid} {
		if err := setThreads(p, &one); err != nil {
			return nil, errors.Join(err, restore())
		}
	}
	return restore, nil
}

// setThreads sets the affinity of every thread of process pid. A thread
// started while it runs inherits its creator's affinity, which may be the
// old one: it goes over the threads again until a pass finds no new one.
func setThreads(pid int, set *unix.CPUSet) error {
	done := map[int]bool{}
	for range 10 {
		es, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return err
		}
		fresh := false
		for _, e := range es {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("sched_setaffinity of thread %d: %w", tid, err)
			}
			done[tid], fresh = true, true
		}
		if !fresh {
			return nil
		}
	}
	return errors.New("threads kept starting while they were pinned")
}
