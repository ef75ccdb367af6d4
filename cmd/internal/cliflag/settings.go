package cliflag

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The parsers of settings: each returns the set function of a setting of a
// configuration C, which parses the setting's text (from its flag or
// environment variable) and stores it in the field p gives.

// Field parses a value with parse and stores it in the field p gives.
func Field[C, T any](parse func(string) (T, error), p func(*C) *T) func(*C, string) error {
	return func(c *C, v string) error {
		x, err := parse(v)
		if err == nil {
			*p(c) = x
		}
		return err
	}
}

// String stores the text as it is.
func String[C any](p func(*C) *string) func(*C, string) error {
	return Field(func(v string) (string, error) { return v, nil }, p)
}

// Int parses a whole number.
func Int[C any](p func(*C) *int) func(*C, string) error {
	return Field(func(v string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("not a whole number: %q", v)
		}
		return n, nil
	}, p)
}

// Bool parses 0 or 1 (or true, false).
func Bool[C any](p func(*C) *bool) func(*C, string) error {
	return Field(func(v string) (bool, error) {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("not 0 or 1: %q", v)
		}
		return b, nil
	}, p)
}

// ParseDuration parses a duration such as 10m.
func ParseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("not a duration such as 10m: %q", v)
	}
	return d, nil
}

// Duration parses a duration.
func Duration[C any](p func(*C) *time.Duration) func(*C, string) error {
	return Field(ParseDuration, p)
}

// PositiveDuration parses a duration above zero.
func PositiveDuration[C any](p func(*C) *time.Duration) func(*C, string) error {
	return Field(func(v string) (time.Duration, error) {
		d, err := ParseDuration(v)
		if err == nil && d <= 0 {
			err = fmt.Errorf("must be above zero, not %s", d)
		}
		return d, err
	}, p)
}

// DurationBetween parses a duration within [least, most] (no upper bound
// when most is 0).
func DurationBetween[C any](least, most time.Duration, p func(*C) *time.Duration) func(*C, string) error {
	return Field(func(v string) (time.Duration, error) {
		d, err := ParseDuration(v)
		switch {
		case err != nil:
		case d < least:
			err = fmt.Errorf("%s is under %s", d, least)
		case most > 0 && d > most:
			err = fmt.Errorf("%s is over %s", d, most)
		}
		return d, err
	}, p)
}

// OneOf stores the text if it is one of values.
func OneOf[C any](values []string, p func(*C) *string) func(*C, string) error {
	return Field(func(v string) (string, error) {
		if !slices.Contains(values, v) {
			return "", fmt.Errorf("%q is none of %s", v, strings.Join(values, ", "))
		}
		return v, nil
	}, p)
}
