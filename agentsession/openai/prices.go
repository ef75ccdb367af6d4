package openai

import (
	"regexp"
	"strings"
)

// Price is what a model's tokens cost, in US dollars per million tokens.
type Price struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
}

// DefaultPrices returns the list prices of common OpenAI models (USD per
// million input and output tokens, standard tier, uncached input), keyed by
// model name. Cached input is billed less, so costs computed from these are
// upper bounds. A model with a date suffix (gpt-4o-2024-08-06) or a
// provider prefix (openai/gpt-4o) takes the price of its base name.
func DefaultPrices() map[string]Price {
	return map[string]Price{
		"gpt-5":         {Input: 1.25, Output: 10},
		"gpt-5-mini":    {Input: 0.25, Output: 2},
		"gpt-5-nano":    {Input: 0.05, Output: 0.40},
		"gpt-4.1":       {Input: 2, Output: 8},
		"gpt-4.1-mini":  {Input: 0.40, Output: 1.60},
		"gpt-4.1-nano":  {Input: 0.10, Output: 0.40},
		"gpt-4o":        {Input: 2.50, Output: 10},
		"gpt-4o-mini":   {Input: 0.15, Output: 0.60},
		"gpt-4-turbo":   {Input: 10, Output: 30},
		"gpt-3.5-turbo": {Input: 0.50, Output: 1.50},
		"o1":            {Input: 15, Output: 60},
		"o3":            {Input: 2, Output: 8},
		"o3-mini":       {Input: 1.10, Output: 4.40},
		"o4-mini":       {Input: 1.10, Output: 4.40},
	}
}

// dateSuffix is a model version's date: -2024-08-06 or -0125.
var dateSuffix = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{4})$`)

// price returns the price of model and whether one is known.
func (b *Backend) price(model string) (Price, bool) {
	if p, ok := b.prices[model]; ok {
		return p, true
	}
	base := strings.TrimPrefix(model, "openai/")
	if p, ok := b.prices[base]; ok {
		return p, true
	}
	p, ok := b.prices[dateSuffix.ReplaceAllString(base, "")]
	return p, ok
}

// cost returns the cost of a call's tokens, or nil and why not.
func (b *Backend) cost(model string, in, out int64) (*float64, string) {
	p, ok := b.price(model)
	if !ok {
		return nil, "no price known for model " + model
	}
	c := (float64(in)*p.Input + float64(out)*p.Output) / 1e6
	return &c, ""
}
