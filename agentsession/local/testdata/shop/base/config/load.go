package config

// Load returns the settings at path.
func Load(path string) (*Config, error) {
	return loadConfig(path)
}

// MustLoad is Load that panics.
func MustLoad(path string) *Config {
	c, err := loadConfig(path)
	if err != nil {
		panic(err)
	}
	return c
}
