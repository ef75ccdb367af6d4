package codex

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/prchat/prchat/chat"
)

// Price is what a model costs, in USD per million tokens.
type Price struct {
	// Input is the price of input tokens that were not cached.
	Input float64
	// CachedInput is the price of cached input tokens; zero means Input.
	CachedInput float64
	// Output is the price of output tokens (reasoning included).
	Output float64
}

// DefaultPrices returns a new table of the list prices of models the Codex
// CLI commonly runs, in USD per million tokens (OpenAI's published prices
// as of late 2025). Pass a table of your own in Config.Prices to change or
// extend it.
func DefaultPrices() map[string]Price {
	return map[string]Price{
		"gpt-5":              {Input: 1.25, CachedInput: 0.125, Output: 10},
		"gpt-5-codex":        {Input: 1.25, CachedInput: 0.125, Output: 10},
		"gpt-5.1":            {Input: 1.25, CachedInput: 0.125, Output: 10},
		"gpt-5.1-codex":      {Input: 1.25, CachedInput: 0.125, Output: 10},
		"gpt-5-mini":         {Input: 0.25, CachedInput: 0.025, Output: 2},
		"gpt-5.1-codex-mini": {Input: 0.25, CachedInput: 0.025, Output: 2},
		"gpt-5-nano":         {Input: 0.05, CachedInput: 0.005, Output: 0.4},
		"o3":                 {Input: 2, CachedInput: 0.5, Output: 8},
		"o4-mini":            {Input: 1.1, CachedInput: 0.275, Output: 4.4},
		"gpt-4.1":            {Input: 2, CachedInput: 0.5, Output: 8},
	}
}

// price finds model in the table: by its name, else by its name without a
// -YYYY-MM-DD snapshot suffix.
func (b *Backend) price(model string) (Price, bool) {
	if p, ok := b.prices[model]; ok {
		return p, true
	}
	if i := len(model) - len("-2006-01-02"); i > 0 && model[i] == '-' && isDate(model[i+1:]) {
		p, ok := b.prices[model[:i]]
		return p, ok
	}
	return Price{}, false
}

func isDate(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	return strings.Trim(s[:4]+s[5:7]+s[8:], "0123456789") == ""
}

// usage turns the CLI's token counts into prchat's usage, with the cost
// from the price table or the reason it is unknown.
func (b *Backend) usage(model string, u tokenUsage, requests int) chat.Usage {
	out := chat.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Calls: requests}
	if model == "" {
		out.CostReason = "the codex CLI did not say which model it ran"
		return out
	}
	p, ok := b.price(model)
	if !ok {
		out.CostReason = fmt.Sprintf("no price known for model %s", model)
		return out
	}
	cached := min(max(u.CachedInputTokens, 0), u.InputTokens)
	cachedPrice := cmp.Or(p.CachedInput, p.Input)
	cost := (float64(u.InputTokens-cached)*p.Input + float64(cached)*cachedPrice + float64(u.OutputTokens)*p.Output) / 1e6
	out.CostUSD = &cost
	return out
}
