package config

// Load returns the settings at path.
func Load(path string) (*Config, error) {
	return parseConfig(path)
}

// MustLoad is Load that panics.
func MustLoad(path string) *Config {
	c, err := parseConfig(path)
	if err != nil {
		panic(err)
	}
	return c
}
