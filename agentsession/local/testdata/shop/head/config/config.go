// Package config reads the shop's settings.
package config

// Config holds the settings.
type Config struct {
	Path    string
	Retries int
}

// parseConfig reads the settings at path.
func parseConfig(path string) (*Config, error) {
	if path == "" {
		return nil, errEmpty
	}
	c := &Config{Path: path, Retries: 3}
	return c, nil
}
