package chat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// SessionChecker checks that data is a session file of one backend that
// holds session id (claude.CheckSessionFile, codex.CheckSessionFile): the
// API process checks an upload with it, without the backend's CLI.
type SessionChecker func(data []byte, id string) (SessionFileInfo, error)

// PutReviewSession stores data as the agent session file of a review
// version (DESIGN §5, Sessions travel): the raw Claude Code session or
// Codex rollout the review was written in. Refused, with nothing stored:
// a review whose backend keeps no session file or that names no session
// (CodeUnsupportedBackend); a file that is not a session of the review's
// backend holding its session id, or a Codex fork, whose parent's file it
// would need too (CodeInvalid); a review with a conversation
// (CodeConflict).
func (s *Admin) PutReviewSession(ctx context.Context, repo string, pr, version int, data []byte) error {
	rev, err := s.Review(ctx, repo, pr, version)
	if err != nil {
		return err
	}
	check := s.sessionCheckers[rev.Backend]
	switch {
	case check == nil:
		return Errorf(CodeUnsupportedBackend, "the review's backend %q keeps no session file (only %s and %s do)", rev.Backend, BackendClaudeCode, BackendCodex)
	case rev.SessionID == "":
		return Errorf(CodeUnsupportedBackend, "the review names no session_id, so it has no session to upload")
	case s.sessionFiles == nil || s.sealer == nil:
		return Errorf(CodeUnavailable, "this server keeps no session files")
	case int64(len(data)) > s.cfg.MaxSessionBytes:
		return Errorf(CodeInvalid, "the session file has %d bytes; the limit is %d", len(data), s.cfg.MaxSessionBytes)
	}
	info, err := check(data, rev.SessionID)
	if err != nil {
		if ErrorCode(err) != CodeInvalid {
			err = &Error{Code: CodeInvalid, Message: "the file is not a session file of the review's backend", Err: err}
		}
		return err
	}
	if info.Parent != "" {
		return Errorf(CodeInvalid, "the session is a fork of session %s, whose file it needs too; upload a session that is not a fork", info.Parent)
	}
	owner := SessionOwner{ReviewID: rev.ID}
	sealed, err := s.sealer.SealSessionFile(owner, SessionFile{
		Backend: rev.Backend, SessionID: rev.SessionID, Cwd: cmp.Or(info.Cwd, rev.RunDir), Data: data,
	})
	if err != nil {
		return err
	}
	if err := s.sessionFiles.PutReviewSessionFile(ctx, sealed); err != nil {
		return err
	}
	s.log.InfoContext(ctx, "review session stored", slog.String("repository", rev.Repository), slog.Int("pr", rev.PR),
		slog.Int("version", rev.Version), slog.String("backend", rev.Backend),
		slog.Int("bytes", len(data)), slog.Int("sealed_bytes", len(sealed.Sealed)))
	return nil
}

// fileBackend returns p's backend as one whose sessions are files, when
// it is one and this Runner keeps session files.
func (r *run) fileBackend(p *plan) (SessionFileBackend, bool) {
	fb, ok := p.backend.(SessionFileBackend)
	return fb, ok && r.s.files != nil && r.s.sealer != nil
}

// errNotStored means a session has no stored file: the worker falls back
// to a warm copy on its disk, if any.
var errNotStored = errors.New("no stored session file")

// storedFiles loads the stored session file of owner and, when its
// session was forked from another (a Codex fork of the review's), the
// review's file it needs too, parent first. It returns errNotStored when
// owner has none, an unavailable error when the store is down (the turn
// is run again), and else an error that says why the file cannot be used
// (the turn is seeded).
func (r *run) storedFiles(ctx context.Context, fb SessionFileBackend, owner SessionOwner, reviewID int64) ([]SessionFile, error) {
	s := r.s
	load := func(o SessionOwner) (SessionFile, error) {
		var sf SealedSessionFile
		err := s.whileUnavailable(ctx, time.Now().Add(s.cfg.Policy.Windows().Turn), "load session file", func() (err error) {
			sf, err = s.files.SessionFile(ctx, o)
			return err
		})
		switch {
		case ErrorCode(err) == CodeNotFound:
			return SessionFile{}, errNotStored
		case err != nil:
			return SessionFile{}, err
		}
		return s.sealer.OpenSessionFile(sf)
	}
	own, err := load(owner)
	if err != nil {
		return nil, err
	}
	info, err := fb.CheckSessionFile(own.Data, own.SessionID)
	if err != nil {
		return nil, fmt.Errorf("the stored session file is damaged: %w", err)
	}
	if info.Parent == "" {
		return []SessionFile{own}, nil
	}
	parent, err := load(SessionOwner{ReviewID: reviewID})
	switch {
	case errors.Is(err, errNotStored):
		// A review whose session stays on its host (never uploaded): the
		// fork resumes where that copy is, which the backend's HasSession
		// checks after the restore.
		return []SessionFile{own}, nil
	case err != nil:
		return nil, err
	case !equalFoldID(parent.SessionID, info.Parent):
		return nil, fmt.Errorf("the session was forked from %s, but the review's stored session is %s", info.Parent, parent.SessionID)
	}
	return []SessionFile{parent, own}, nil
}

// locate finds where the session p names (a review's to fork, a
// conversation's to resume) can run on this worker, and says why it
// cannot ("" when it can). A session with a stored file is restored from
// it (DESIGN §5, Sessions travel) into keepDir when that run directory is
// still here, else into a new run directory; one without falls back to a
// warm copy on this worker's disk (sessionProblem). An error means the
// turn cannot go on here (the store is down, no run directory can be
// made).
func (r *run) locate(ctx context.Context, p *plan, owner SessionOwner, host, whose, keepDir string) (string, error) {
	s := r.s
	fb, ok := r.fileBackend(p)
	if !ok {
		return r.sessionProblem(ctx, p, host, whose), nil
	}
	start := time.Now()
	files, err := r.storedFiles(ctx, fb, owner, p.review.ID)
	loaded := time.Since(start)
	switch {
	case errors.Is(err, errNotStored):
		if owner.ReviewID != 0 && host == "" && p.session.Dir != "" && s.roots.underRoots(p.session.Dir) != nil {
			// A directory recorded as a label only (see checkReview):
			// never a place to run in.
			return whose + " session file was never uploaded", nil
		}
		if why := r.sessionProblem(ctx, p, host, whose); why != "" {
			return why + "; its session file was never stored", nil
		}
		return "", nil
	case Unavailable(err):
		return "", err
	case err != nil:
		return fmt.Sprintf("%s stored session file cannot be used: %v", whose, err), nil
	}
	dir := keepDir
	if dir == "" || !s.workspaces.Exists(dir) {
		if dir, err = r.prepare(ctx, p); err != nil {
			return "", err
		}
		r.dir = dir // removed if the conversation is deleted under the run
	}
	start = time.Now()
	if err := fb.RestoreSession(ctx, dir, files); err != nil {
		return fmt.Sprintf("%s stored session file cannot be restored: %v", whose, err), nil
	}
	r.restoreTook = loaded + time.Since(start) // the run directory's checkout is the seeded turn's cost too
	p.session.Dir = dir
	if err := p.backend.HasSession(ctx, p.session); err != nil {
		return fmt.Sprintf("%s restored session is not found (%v)", whose, err), nil
	}
	size := 0
	for _, f := range files {
		size += len(f.Data)
	}
	s.log.InfoContext(ctx, "session restored", slog.String("turn", r.turn.ID), slog.String("owner", owner.String()),
		slog.Int("files", len(files)), slog.Int("bytes", size), slog.Duration("took", r.restoreTook))
	return "", nil
}

// equalFoldID compares session ids without regard to case.
func equalFoldID(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

// saveSession adds the conversation's session file, as the CLI left it
// after this run, to o, sealed, so that it is stored with the answer in
// the turn's fenced write. A file that cannot be read or is over the
// limit is not stored (the log says why, with sizes only): the next turn
// resumes from a warm copy or is seeded.
func (r *run) saveSession(ctx context.Context, o *Outcome) {
	s, p := r.s, r.plan
	if p == nil || o.Conversation == nil || o.Conversation.SessionID == "" {
		return
	}
	fb, ok := r.fileBackend(p)
	if !ok {
		return
	}
	id := o.Conversation.SessionID
	data, err := fb.ReadSessionFile(ctx, SessionRef{ID: id, Dir: p.dir})
	if err != nil {
		s.log.WarnContext(ctx, "session file not stored: not found after the run", slog.String("turn", r.turn.ID), slog.Any("err", err))
		return
	}
	if int64(len(data)) > s.cfg.MaxSessionBytes {
		s.log.WarnContext(ctx, "session file not stored: over the limit", slog.String("turn", r.turn.ID),
			slog.Int("bytes", len(data)), slog.Int64("limit", s.cfg.MaxSessionBytes))
		return
	}
	cwd := p.dir
	if info, err := fb.CheckSessionFile(data, id); err == nil && info.Cwd != "" {
		cwd = info.Cwd
	}
	sealed, err := s.sealer.SealSessionFile(SessionOwner{ConversationID: r.turn.ConversationID}, SessionFile{
		Backend: p.name, SessionID: id, Cwd: cwd, Data: data,
	})
	if err != nil {
		s.log.WarnContext(ctx, "session file not stored", slog.String("turn", r.turn.ID), slog.Any("err", err))
		return
	}
	o.SessionFile = &sealed
	s.log.InfoContext(ctx, "session file saved", slog.String("turn", r.turn.ID),
		slog.Int("bytes", len(data)), slog.Int("sealed_bytes", len(sealed.Sealed)))
}
