// This file replaces gitleaks' cmd/generate/config/utils/validate.go (through
// go build -overlay) when gitleaksbench builds gitleaks' config generator: it
// records every rule's true- and false-positive examples instead of checking
// them, so that the comparison runs on the examples gitleaks' own rules are
// written and tested against. It is prchat's code, not gitleaks'.

package utils

import (
	"encoding/json"
	"os"
	"strings"

	"github.com/zricethezav/gitleaks/v8/config"
)

// example is one line of the file named by $GITLEAKSBENCH_EXAMPLES.
type example struct {
	Rule  string   `json:"rule"`
	TPs   []string `json:"tps"`
	FPs   []string `json:"fps"`
	Paths bool     `json:"paths,omitempty"`
}

func record(e example) {
	f, err := os.OpenFile(os.Getenv("GITLEAKSBENCH_EXAMPLES"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if err := json.NewEncoder(f).Encode(e); err != nil {
		panic(err)
	}
}

// normalize lowers and de-duplicates the keywords, as the real Validate does
// to the rule it returns.
func normalize(r *config.Rule) {
	seen := map[string]bool{}
	var kws []string
	for _, k := range r.Keywords {
		k = strings.ToLower(k)
		if !seen[k] {
			seen[k] = true
			kws = append(kws, k)
		}
	}
	r.Keywords = kws
}

// Validate records the examples and returns the rule.
func Validate(rule config.Rule, truePositives []string, falsePositives []string) *config.Rule {
	r := &rule
	normalize(r)
	record(example{Rule: r.RuleID, TPs: truePositives, FPs: falsePositives})
	return r
}

// ValidateWithPaths records the examples (their contents) and returns the rule.
func ValidateWithPaths(rule config.Rule, truePositives map[string]string, falsePositives map[string]string) *config.Rule {
	r := &rule
	normalize(r)
	e := example{Rule: r.RuleID, Paths: true}
	for _, v := range truePositives {
		e.TPs = append(e.TPs, v)
	}
	for _, v := range falsePositives {
		e.FPs = append(e.FPs, v)
	}
	record(e)
	return r
}
