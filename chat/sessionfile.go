package chat

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// SessionFile is an agent CLI's session file (a Claude Code session, a
// Codex rollout) as a worker or a client holds it: the bytes as the CLI
// wrote them and what prchat knows of them.
type SessionFile struct {
	Backend   string
	SessionID string
	// Cwd is the working directory the session ran in: the file's paths
	// under it are mapped to a worker's run directory when it is restored.
	Cwd  string
	Data []byte
}

// SessionFileInfo is what a session file says of itself.
type SessionFileInfo struct {
	// Cwd is the working directory the file records ("" if it names none).
	Cwd string
	// Parent is the session this one was forked from, whose file must be
	// restored beside it ("" when it needs none).
	Parent string
}

// SessionFileBackend is a Backend whose sessions are files that its CLI
// keeps on the worker's disk (claude-code, codex). prchat keeps those files
// in the database (DESIGN §5, Sessions travel): a worker reads a
// conversation's file after each turn and restores the stored files into
// its own CLI state before it forks or resumes a session.
type SessionFileBackend interface {
	Backend
	// CheckSessionFile checks that data is a whole session file of this
	// backend that holds session id (and no other), and returns what it
	// says of itself. A file that is not one is an *Error with CodeInvalid
	// that says why.
	CheckSessionFile(data []byte, id string) (SessionFileInfo, error)
	// ReadSessionFile returns the file of session ref as the CLI left it on
	// this worker after a run in ref.Dir (the session's own file only, not
	// its parent's).
	ReadSessionFile(ctx context.Context, ref SessionRef) ([]byte, error)
	// RestoreSession writes files into the CLI's state on this worker as if
	// each had run in dir instead of its Cwd (paths under Cwd are mapped to
	// dir), replacing any copy there, so that the CLI can fork or resume
	// their sessions from dir.
	RestoreSession(ctx context.Context, dir string, files []SessionFile) error
}

// SessionOwner is the review or the conversation a stored session file
// belongs to: exactly one of the two is set.
type SessionOwner struct {
	ReviewID       int64
	ConversationID string
}

// String names the owner, for errors and logs.
func (o SessionOwner) String() string {
	if o.ConversationID != "" {
		return "conversation " + o.ConversationID
	}
	return "review " + strconv.FormatInt(o.ReviewID, 10)
}

// SealedSessionFile is a session file as the store keeps it: compressed
// and sealed with the deployment's secret key, bound to its owner and
// session id.
type SealedSessionFile struct {
	Owner     SessionOwner
	Backend   string
	SessionID string
	Cwd       string
	Sealed    []byte
	// Size is the length of the file, Digest its SHA-256 (hex).
	Size      int64
	Digest    string
	UpdatedAt time.Time
}

// SessionFileStore keeps the session files of reviews and conversations;
// each is deleted with its owner. Implemented by package store.
type SessionFileStore interface {
	// PutReviewSessionFile stores f as its review's session file, replacing
	// the one stored before. A review that has a conversation refuses it
	// with an *Error of CodeConflict, storing nothing.
	PutReviewSessionFile(ctx context.Context, f SealedSessionFile) error
	// SessionFile returns the file stored for owner, or an *Error with
	// CodeNotFound.
	SessionFile(ctx context.Context, owner SessionOwner) (SealedSessionFile, error)
}

// DefaultMaxSessionBytes is the largest session file a review may upload
// (PRCHAT_MAX_SESSION_BYTES), and the largest a worker stores after a turn.
const DefaultMaxSessionBytes = 64 << 20

// sealAAD binds a sealed session file to its owner and session id, so that
// a sealed blob copied to another row does not open.
func sealAAD(owner SessionOwner, sessionID string) []byte {
	return []byte("prchat session file\x00" + owner.String() + "\x00" + sessionID)
}

// SealSessionFile compresses f's bytes and seals them for owner.
func (s *Sealer) SealSessionFile(owner SessionOwner, f SessionFile) (SealedSessionFile, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return SealedSessionFile{}, err
	}
	if _, err := zw.Write(f.Data); err != nil {
		return SealedSessionFile{}, fmt.Errorf("compress session file %s: %w", f.SessionID, err)
	}
	if err := zw.Close(); err != nil {
		return SealedSessionFile{}, fmt.Errorf("compress session file %s: %w", f.SessionID, err)
	}
	sum := sha256.Sum256(f.Data)
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return SealedSessionFile{
		Owner:     owner,
		Backend:   f.Backend,
		SessionID: f.SessionID,
		Cwd:       f.Cwd,
		Sealed:    s.aead.Seal(nonce, nonce, buf.Bytes(), sealAAD(owner, f.SessionID)),
		Size:      int64(len(f.Data)),
		Digest:    hex.EncodeToString(sum[:]),
	}, nil
}

// OpenSessionFile opens and decompresses what SealSessionFile made, and
// checks its digest.
func (s *Sealer) OpenSessionFile(sf SealedSessionFile) (SessionFile, error) {
	n := s.aead.NonceSize()
	if len(sf.Sealed) < n {
		return SessionFile{}, fmt.Errorf("open the session file of %s: it is too short", sf.Owner)
	}
	packed, err := s.aead.Open(nil, sf.Sealed[:n], sf.Sealed[n:], sealAAD(sf.Owner, sf.SessionID))
	if err != nil {
		return SessionFile{}, fmt.Errorf("open the session file of %s (was PRCHAT_SECRET_KEY changed?): %w", sf.Owner, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(packed))
	if err != nil {
		return SessionFile{}, fmt.Errorf("decompress the session file of %s: %w", sf.Owner, err)
	}
	data := make([]byte, 0, max(sf.Size, 0))
	buf := bytes.NewBuffer(data)
	if _, err := io.Copy(buf, zr); err != nil {
		return SessionFile{}, fmt.Errorf("decompress the session file of %s: %w", sf.Owner, err)
	}
	data = buf.Bytes()
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != sf.Digest {
		return SessionFile{}, errors.New("the session file of " + sf.Owner.String() + " does not match its digest")
	}
	return SessionFile{Backend: sf.Backend, SessionID: sf.SessionID, Cwd: sf.Cwd, Data: data}, nil
}
