package store

// ClaimQuery returns the statement a worker's claim of the queued turn id
// runs on Postgres (ClaimTurnWithConversation) and its arguments, for a
// test that explains it.
func ClaimQuery(s *Store, id string) (string, []any) {
	return `WITH t AS (` + claimReturning(` AND state = 'queued'`, true) + `)` + claimWithConversation, []any{"runner", now(), id}
}
