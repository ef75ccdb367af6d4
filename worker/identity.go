package worker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Identity names one run of a worker process: the worker's id (its host,
// whose queue is host:<id>) and a random instance id chosen when the process
// starts.
type Identity struct {
	// ID is the worker id, PRCHAT_WORKER_ID (cmd defaults it to the host
	// name). It must not be empty nor contain '/' or whitespace.
	ID string
	// Instance tells this process apart from earlier and later runs of the
	// same worker id.
	Instance string
}

// NewIdentity returns the Identity of a new run of worker id, with a random
// instance id.
func NewIdentity(id string) Identity {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return Identity{ID: id, Instance: hex.EncodeToString(b[:])}
}

// Runner is the runner id "<id>/<instance>" that turns record as their
// holder and that Hosts.RunnerAlive checks.
func (i Identity) Runner() string { return i.ID + "/" + i.Instance }

func (i Identity) validate() error {
	if err := checkWorkerID(i.ID); err != nil {
		return err
	}
	if i.Instance == "" || strings.ContainsAny(i.Instance, "/ \t\r\n") {
		return fmt.Errorf("worker instance %q must be non-empty, without '/' or spaces", i.Instance)
	}
	return nil
}

func checkWorkerID(id string) error {
	if id == "" {
		return errors.New("worker id is empty")
	}
	if strings.ContainsAny(id, "/ \t\r\n") {
		return fmt.Errorf("worker id %q must not contain '/' or spaces", id)
	}
	return nil
}

// ParseRunner splits a runner id "<id>/<instance>" into its Identity.
func ParseRunner(runner string) (Identity, error) {
	id, inst, ok := strings.Cut(runner, "/")
	i := Identity{ID: id, Instance: inst}
	if !ok {
		return i, fmt.Errorf("runner id %q is not <worker id>/<instance>", runner)
	}
	if err := i.validate(); err != nil {
		return i, fmt.Errorf("runner id %q: %w", runner, err)
	}
	return i, nil
}
