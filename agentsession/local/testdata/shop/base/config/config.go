// Package config reads the shop's settings.
package config

// Config holds the settings.
type Config struct {
	Path    string
	Retries int
}

// loadConfig reads the settings at path.
func loadConfig(path string) (*Config, error) {
	c := &Config{Path: path, Retries: 3}
	return c, nil
}
