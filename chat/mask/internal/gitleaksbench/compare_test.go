package gitleaksbench

import (
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/prchat/prchat/chat/mask"
	"github.com/prchat/prchat/chat/mask/internal/fakesecret"
	"github.com/rs/zerolog"
	"github.com/zricethezav/gitleaks/v8/detect"
	"github.com/zricethezav/gitleaks/v8/report"
)

// corpus is the shared input: about 10 MB of generated markdown and code
// with planted fake secrets of every format and look-alikes.
type corpus struct {
	text    string
	chunks  []string // text in parts of about chunkSize bytes, cut between blocks
	secrets []fakesecret.Sample
	looks   []fakesecret.Sample
}

// chunkSize is how much text each detector call gets: the buffer size
// gitleaks itself reads files with. Both detectors get the same chunks.
const chunkSize = 100_000

var input = sync.OnceValue(func() corpus {
	zerolog.SetGlobalLevel(zerolog.Disabled)
	blocks, secrets, looks := fakesecret.Blocks(rand.New(rand.NewSource(7)), 10<<20, 3)
	var chunks []string
	var cur strings.Builder
	for _, b := range blocks {
		cur.WriteString(b)
		if cur.Len() >= chunkSize {
			chunks = append(chunks, cur.String())
			cur.Reset()
		}
	}
	if cur.Len() > 0 {
		chunks = append(chunks, cur.String())
	}
	return corpus{strings.Join(blocks, ""), chunks, secrets, looks}
})

// uniqueLooks are the look-alikes whose value occurs once in the input, so
// whether that one occurrence was masked can be told from the output.
func (c corpus) uniqueLooks() []fakesecret.Sample {
	var out []fakesecret.Sample
	for _, s := range c.looks {
		if strings.Count(c.text, s.Secret) == 1 {
			out = append(out, s)
		}
	}
	return out
}

// prchatCaught reports, per planted sample, whether its value is gone from
// the masked output.
func prchatCaught(out string, ss []fakesecret.Sample) []bool {
	res := make([]bool, len(ss))
	for i, s := range ss {
		res[i] = !strings.Contains(out, s.Secret)
	}
	return res
}

// gitleaksCaught reports, per planted sample, whether a finding covers it:
// the finding's secret contains the planted value, or is a substantial part
// of it.
func gitleaksCaught(fs []report.Finding, ss []fakesecret.Sample) []bool {
	res := make([]bool, len(ss))
	for i, s := range ss {
		for _, f := range fs {
			sec := strings.TrimSpace(f.Secret)
			if sec == "" {
				sec = f.Match
			}
			if strings.Contains(sec, s.Secret) || len(sec) >= 8 && 2*len(sec) >= len(s.Secret) && strings.Contains(s.Secret, sec) {
				res[i] = true
				break
			}
		}
	}
	return res
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// runPrchat masks every chunk and returns the joined output.
func runPrchat(chunks []string) (string, time.Duration) {
	m := mask.New()
	var b strings.Builder
	start := time.Now()
	for _, c := range chunks {
		b.WriteString(m.String(c))
	}
	return b.String(), time.Since(start)
}

// runGitleaks runs the default gitleaks detector over every chunk.
func runGitleaks(tb testing.TB, chunks []string) ([]report.Finding, time.Duration) {
	d, err := detect.NewDetectorDefaultConfig()
	if err != nil {
		tb.Fatal(err)
	}
	var fs []report.Finding
	start := time.Now()
	for _, c := range chunks {
		fs = append(fs, d.DetectString(c)...)
	}
	return fs, time.Since(start)
}

// BenchmarkCompare runs both detectors over the same input and reports
// throughput (MB/s), recall on planted secrets and look-alikes flagged.
func BenchmarkCompare(b *testing.B) {
	c := input()
	looks := c.uniqueLooks()
	b.Run("prchat", func(b *testing.B) {
		b.SetBytes(int64(len(c.text)))
		var out string
		for b.Loop() {
			out, _ = runPrchat(c.chunks)
		}
		b.ReportMetric(100*float64(count(prchatCaught(out, c.secrets)))/float64(len(c.secrets)), "recall%")
		b.ReportMetric(float64(count(prchatCaught(out, looks))), "lookalikes-flagged")
	})
	b.Run("gitleaks", func(b *testing.B) {
		b.SetBytes(int64(len(c.text)))
		var fs []report.Finding
		for b.Loop() {
			fs, _ = runGitleaks(b, c.chunks)
		}
		b.ReportMetric(100*float64(count(gitleaksCaught(fs, c.secrets)))/float64(len(c.secrets)), "recall%")
		b.ReportMetric(float64(count(gitleaksCaught(fs, looks))), "lookalikes-flagged")
	})
}

// TestCompare prints a side-by-side table, overall and per rule. It takes a
// while (gitleaks on 10 MB), so it is skipped with -short.
func TestCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("comparison skipped in -short mode")
	}
	c := input()
	looks := c.uniqueLooks()
	out, pd := runPrchat(c.chunks)
	whole, wd := runPrchat([]string{c.text})
	if whole != out {
		t.Errorf("prchat output differs between chunked and whole input")
	}
	fs, gd := runGitleaks(t, c.chunks)
	pc, gc := prchatCaught(out, c.secrets), gitleaksCaught(fs, c.secrets)
	pl, gl := prchatCaught(out, looks), gitleaksCaught(fs, looks)
	mb := float64(len(c.text)) / 1e6

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "input\t%.1f MB in %d chunks\t%d planted secrets\t%d unique look-alikes\t\n", mb, len(c.chunks), len(c.secrets), len(looks))
	fmt.Fprintf(w, "detector\tMB/s\trecall\tlook-alikes flagged\t\n")
	fmt.Fprintf(w, "prchat\t%.1f\t%.1f%%\t%d\t\n", mb/pd.Seconds(), 100*float64(count(pc))/float64(len(pc)), count(pl))
	fmt.Fprintf(w, "prchat (one 10 MB string)\t%.1f\t\t\t\n", mb/wd.Seconds())
	fmt.Fprintf(w, "gitleaks\t%.1f\t%.1f%%\t%d\t\n", mb/gd.Seconds(), 100*float64(count(gc))/float64(len(gc)), count(gl))
	w.Flush()

	type row struct{ planted, p, g int }
	rows := map[string]*row{}
	for i, s := range c.secrets {
		r := rows[s.Rule]
		if r == nil {
			r = &row{}
			rows[s.Rule] = r
		}
		r.planted++
		if pc[i] {
			r.p++
		}
		if gc[i] {
			r.g++
		}
	}
	var rules []string
	for k := range rows {
		rules = append(rules, k)
	}
	slices.Sort(rules)
	fmt.Fprintf(w, "\nrule\tplanted\tprchat\tgitleaks\t\n")
	for _, k := range rules {
		r := rows[k]
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t\n", k, r.planted, r.p, r.g)
	}
	w.Flush()
	for i, s := range looks {
		if pl[i] {
			t.Logf("prchat flagged look-alike %s: %q", s.Name, s.Secret)
		}
	}
	if count(pc) < len(pc)*95/100 {
		t.Errorf("prchat recall %d/%d is below 95%%", count(pc), len(pc))
	}
}
