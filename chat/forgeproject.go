package chat

import (
	"context"
	"regexp"
	"strings"
)

// forgeProjectPattern is a project's path on a forge: two or more
// segments of letters, digits, '_', '.' and '-' (GitLab's nested groups:
// group/subgroup/name), none starting with '-'.
var forgeProjectPattern = regexp.MustCompile(`^[A-Za-z0-9_.][A-Za-z0-9_.-]*(/[A-Za-z0-9_.][A-Za-z0-9_.-]*)+$`)

// maxForgeProjectBytes bounds a forge project's path.
const maxForgeProjectBytes = 255

// CheckForgeProject returns an error unless p is a forge project's path,
// such as acme/platform/widgets.
func CheckForgeProject(p string) error {
	if len(p) > maxForgeProjectBytes || !forgeProjectPattern.MatchString(p) || strings.Contains(p, "..") {
		return Errorf(CodeInvalid, "forge_project must be the project's path on its forge, group/subgroup/name (at most %d bytes of letters, digits, '_', '.' and '-' between slashes)", maxForgeProjectBytes)
	}
	return nil
}

// forgeRepository names a comment's repository as prchat registered it:
// the project the forge's event names is the forge project of a registered
// repository (a GitLab project in nested groups), else the repository of
// that name. The forge's own path stays in ForgeProject, where the forge's
// API is called.
func (s *Webhooks) forgeRepository(ctx context.Context, c *Comment) error {
	if c.ForgeProject != "" || CheckForgeProject(c.Repository) != nil {
		return nil
	}
	r, err := s.catalog.store.RepositoryByForgeProject(ctx, c.Repository)
	switch {
	case ErrorCode(err) == CodeRepositoryNotFound:
		return nil
	case err != nil:
		return err
	}
	if r.Name != c.Repository {
		c.ForgeProject, c.Repository = c.Repository, r.Name
	}
	return nil
}

// checkForgeProject keeps the names webhooks match on apart: a forge
// project is no other repository's name, and a name no other repository's
// forge project (webhooks match forge projects first).
func (a *Admin) checkForgeProject(ctx context.Context, r Repository) error {
	if r.ForgeProject != "" {
		other, err := a.catalog.store.Repository(ctx, r.ForgeProject)
		switch {
		case err == nil && other.Name != r.Name:
			return Errorf(CodeConflict, "forge project %s is the name of another registered repository", r.ForgeProject)
		case err != nil && ErrorCode(err) != CodeRepositoryNotFound:
			return err
		}
	}
	other, err := a.catalog.store.RepositoryByForgeProject(ctx, r.Name)
	switch {
	case err == nil && other.Name != r.Name:
		return Errorf(CodeConflict, "%s is the forge project of the registered repository %s", r.Name, other.Name)
	case err != nil && ErrorCode(err) != CodeRepositoryNotFound:
		return err
	}
	return nil
}
