-- A repository may name its project on its forge when that is not its
-- owner/name (a GitLab project in nested groups: group/subgroup/name);
-- webhooks are matched on it, and a webhook question keeps it to reply in
-- that project. At most one repository names a project.

-- +goose Up
ALTER TABLE repositories ADD COLUMN forge_project TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX repositories_forge_project_key ON repositories (forge_project) WHERE forge_project <> '';
ALTER TABLE webhook_comments ADD COLUMN forge_project TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE webhook_comments DROP COLUMN forge_project;
DROP INDEX repositories_forge_project_key;
ALTER TABLE repositories DROP COLUMN forge_project;
