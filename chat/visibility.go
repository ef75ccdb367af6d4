package chat

import "context"

// sees reports whether the request's token (if any) may see repo.
func sees(ctx context.Context, repo string) bool {
	t, ok := limitedToken(ctx)
	return !ok || t.Sees(repo)
}

func repositoryNotFound(name string) error {
	return Errorf(CodeRepositoryNotFound, "repository %s is not registered", name)
}

func conversationNotFound(id string) error {
	return Errorf(CodeNotFound, "conversation %s not found", id)
}

// conversationHeads reads a conversation without its turns.
type conversationHeads interface {
	ConversationHead(ctx context.Context, id string) (Conversation, error)
}

// visibleHead returns a conversation without its turns if the request's
// token may see it, else the error of a missing one.
func visibleHead(ctx context.Context, st conversationHeads, id string) (Conversation, error) {
	c, err := st.ConversationHead(ctx, id)
	if err == nil && !sees(ctx, c.Repository) {
		return Conversation{}, conversationNotFound(id)
	}
	return c, err
}

// seeConversation checks, for a token limited to some repositories, that
// the conversation is one of theirs. An unlimited token costs no query.
func seeConversation(ctx context.Context, st conversationHeads, id string) error {
	if _, ok := limitedToken(ctx); !ok {
		return nil
	}
	_, err := visibleHead(ctx, st, id)
	return err
}
