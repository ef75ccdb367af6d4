-- A repository's project on its forge, as in the Postgres migration of the
-- same number.

-- +goose Up
ALTER TABLE repositories ADD COLUMN forge_project TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX repositories_forge_project_key ON repositories (forge_project) WHERE forge_project <> '';
ALTER TABLE webhook_comments ADD COLUMN forge_project TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE webhook_comments DROP COLUMN forge_project;
DROP INDEX repositories_forge_project_key;
ALTER TABLE repositories DROP COLUMN forge_project;
