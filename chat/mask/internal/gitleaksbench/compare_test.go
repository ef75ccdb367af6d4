package gitleaksbench

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/prchat/prchat/chat/mask"
	"github.com/prchat/prchat/chat/mask/internal/fakesecret"
	"github.com/rs/zerolog"
	"github.com/zricethezav/gitleaks/v8/config"
	"github.com/zricethezav/gitleaks/v8/detect"
	"github.com/zricethezav/gitleaks/v8/report"
)

// tp is one true-positive example of a gitleaks rule together with the
// secret gitleaks' rule itself reports in it.
type tp struct {
	rule, text, secret string
}

// fixture is everything the comparison runs on.
type fixture struct {
	rules []ruleExamples
	tps   []tp
	fps   []string // every documented false positive (harmless string)
	noTP  []string // true positives the rule's own detector did not report (not counted)
	doc   docCorpus
}

var (
	fixtureOnce sync.Once
	theFixture  fixture
)

func loadFixture(tb testing.TB) fixture {
	fixtureOnce.Do(func() {
		zerolog.SetGlobalLevel(zerolog.Disabled)
		theFixture = buildFixture(tb)
	})
	if theFixture.rules == nil {
		tb.Fatal("fixture failed to build")
	}
	return theFixture
}

func buildFixture(tb testing.TB) fixture {
	exs := loadExamples(tb)
	full := defaultDetector(tb)
	var fx fixture
	fx.rules = exs
	for _, e := range exs {
		r, ok := full.Config.Rules[e.Rule]
		if !ok {
			tb.Fatalf("examples of unknown rule %s", e.Rule)
		}
		fx.fps = append(fx.fps, e.FPs...)
		if e.Paths || r.Regex == nil {
			continue // path-only rules and examples that need a file name
		}
		one := singleRuleDetector(full.Config, r)
		for _, t := range e.TPs {
			sec := ""
			for _, f := range one.DetectString(t) {
				if s := strings.TrimSpace(f.Secret); len(s) > len(sec) {
					sec = s
				}
			}
			if sec == "" {
				fx.noTP = append(fx.noTP, e.Rule+": "+t)
				continue
			}
			fx.tps = append(fx.tps, tp{rule: e.Rule, text: t, secret: sec})
		}
	}
	fx.doc = buildDoc(tb, fx.tps, 4<<20)
	return fx
}

func defaultDetector(tb testing.TB) *detect.Detector {
	d, err := detect.NewDetectorDefaultConfig()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// singleRuleDetector is gitleaks' default configuration (global allow-lists
// included) reduced to one rule, as gitleaks validates its rules.
func singleRuleDetector(base config.Config, r config.Rule) *detect.Detector {
	cfg := base
	cfg.Rules = map[string]config.Rule{r.RuleID: r}
	cfg.OrderedRules = []string{r.RuleID}
	cfg.Keywords = map[string]struct{}{}
	for _, k := range r.Keywords {
		cfg.Keywords[strings.ToLower(k)] = struct{}{}
	}
	return detect.NewDetector(cfg)
}

// outcome classifies what a masker did to one true positive.
type outcome int

const (
	missed  outcome = iota // the secret is still in the output
	partial                // masked, but a piece of the secret is left glued to a mask token
	masked                 // the secret is gone and no piece of it is left next to a mask
)

// judge compares a true positive with prchat's output for it. The changed
// region of the input is what lies between the longest common prefix and
// suffix of input and output; a secret whose occurrence is not inside it is
// partly masked when the cut runs through it.
func judge(in, out, secret string) outcome {
	if strings.Contains(out, secret) {
		return missed
	}
	i := strings.Index(in, secret)
	if i < 0 {
		return masked
	}
	j := i + len(secret)
	p := 0
	for p < len(in) && p < len(out) && in[p] == out[p] {
		p++
	}
	q := 0
	for q < len(in)-p && q < len(out)-p && in[len(in)-1-q] == out[len(out)-1-q] {
		q++
	}
	lo, hi := p, len(in)-q
	// A secret's head left before a mask is a partial mask unless it ends
	// at a separator (the host of a webhook URL, "user:" before a password).
	if lo > i && lo < j && tokenByte(in[lo-1]) && in[lo-1] != '/' && in[lo-1] != '=' && tokenByte(in[lo]) {
		return partial
	}
	// Any piece of its tail left after a mask is.
	if hi > i && hi < j && tokenByte(in[hi]) {
		return partial
	}
	return masked
}

func tokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_-+/=.~", c) >= 0
}

// gitleaksFinds reports whether a finding of d on text covers the secret.
func gitleaksFinds(fs []report.Finding, secret string) bool {
	for _, f := range fs {
		s := strings.TrimSpace(f.Secret)
		if s != "" && (strings.Contains(s, secret) || 2*len(s) >= len(secret) && strings.Contains(secret, s)) {
			return true
		}
	}
	return false
}

// docCorpus is mixed markdown and code: the Go sources, markdown, YAML,
// TOML and JSON files of this module's dependencies (real code nobody here
// wrote, in a fixed order), as markdown sections with fenced code, with the
// true positives planted between lines.
type docCorpus struct {
	text    string
	chunks  []string // text in parts of about chunkSize bytes, cut at line ends
	planted []tp
}

// chunkSize is how much text each detector call gets: the buffer size
// gitleaks itself reads files with. Both detectors get the same chunks.
const chunkSize = 100_000

func buildDoc(tb testing.TB, tps []tp, size int) docCorpus {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "all").Output()
	if err != nil {
		tb.Fatal(err)
	}
	var files []string
	for _, dir := range strings.Fields(string(out)) {
		if strings.Contains(dir, "gitleaks") || strings.HasSuffix(dir, "gitleaksbench") {
			continue // gitleaks' own sources are full of its example secrets
		}
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() {
				if n := d.Name(); n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".") {
					return filepath.SkipDir
				}
				return nil
			}
			switch filepath.Ext(p) {
			case ".go", ".md", ".yaml", ".yml", ".toml", ".json":
				if !strings.HasSuffix(p, "_test.go") {
					files = append(files, p)
				}
			}
			return nil
		})
	}
	slices.Sort(files)
	r := rand.New(rand.NewSource(1))
	r.Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
	var b strings.Builder
	var doc docCorpus
	next := 0
	for _, p := range files {
		if b.Len() >= size {
			break
		}
		src, err := os.ReadFile(p)
		if err != nil || len(src) > 200_000 {
			continue
		}
		lang := strings.TrimPrefix(filepath.Ext(p), ".")
		fmt.Fprintf(&b, "## %s\n\nThe file below is quoted for review.\n\n```%s\n", filepath.Base(p), lang)
		lines := strings.SplitAfter(string(src), "\n")
		for i, l := range lines {
			b.WriteString(l)
			if !strings.HasSuffix(l, "\n") {
				b.WriteByte('\n')
			}
			// one planted example about every 40 lines
			if i%40 == 39 && len(tps) > 0 {
				t := tps[next%len(tps)]
				next++
				if strings.Count(b.String(), t.secret) == 0 {
					doc.planted = append(doc.planted, t)
					b.WriteString(t.text + "\n")
				}
			}
		}
		b.WriteString("```\n\n")
	}
	doc.text = b.String()
	rest := doc.text
	for len(rest) > 0 {
		n := min(len(rest), chunkSize)
		if k := strings.IndexByte(rest[n:], '\n'); k >= 0 && n < len(rest) {
			n += k + 1
		} else {
			n = len(rest)
		}
		doc.chunks = append(doc.chunks, rest[:n])
		rest = rest[n:]
	}
	return doc
}

// runPrchat masks every chunk with String and returns the joined output.
func runPrchat(m *mask.Masker, chunks []string) (string, time.Duration) {
	var b strings.Builder
	start := time.Now()
	for _, c := range chunks {
		b.WriteString(m.String(c))
	}
	return b.String(), time.Since(start)
}

// runStream masks the text as a stream of n-byte deltas.
func runStream(m *mask.Masker, text string, n int) (string, time.Duration) {
	var b strings.Builder
	b.Grow(len(text))
	start := time.Now()
	st := m.Stream()
	for i := 0; i < len(text); i += n {
		b.WriteString(st.Write(text[i:min(len(text), i+n)]))
	}
	b.WriteString(st.Flush())
	return b.String(), time.Since(start)
}

// countPrchat and countStream are runPrchat and runStream for the
// benchmarks: they return how many bytes came out and leave the masked
// pieces to nobody, so that a figure is the masker's and not a collector's
// copy (16-byte pieces cost a copy each). TestCompare checks what runStream
// and runPrchat return.
func countPrchat(m *mask.Masker, chunks []string) int {
	out := 0
	for _, c := range chunks {
		out += len(m.String(c))
	}
	return out
}

func countStream(m *mask.Masker, text string, n int) int {
	st := m.Stream()
	out := 0
	for i := 0; i < len(text); i += n {
		out += len(st.Write(text[i:min(len(text), i+n)]))
	}
	return out + len(st.Flush())
}

// runGitleaks runs the default gitleaks detector over every chunk.
func runGitleaks(d *detect.Detector, chunks []string) ([]report.Finding, time.Duration) {
	var fs []report.Finding
	start := time.Now()
	for _, c := range chunks {
		fs = append(fs, d.DetectString(c)...)
	}
	return fs, time.Since(start)
}

// results are the figures of one comparison run.
type results struct {
	tps, prMasked, prPartial, glFound int
	missedBy                          map[string][]string
	partialBy                         map[string][]string
	fps, prChanged, glFlagged         int
	prChangedFPs, glFlaggedFPs        []string
}

func compareExamples(fx fixture) results {
	m := mask.New()
	full, _ := detect.NewDetectorDefaultConfig()
	res := results{tps: len(fx.tps), fps: len(fx.fps), missedBy: map[string][]string{}, partialBy: map[string][]string{}}
	for _, t := range fx.tps {
		out := m.String(t.text)
		switch judge(t.text, out, t.secret) {
		case masked:
			res.prMasked++
		case partial:
			res.prPartial++
			res.partialBy[t.rule] = append(res.partialBy[t.rule], t.text+"  ->  "+out)
		default:
			res.missedBy[t.rule] = append(res.missedBy[t.rule], t.text+"  ->  "+out)
		}
		if gitleaksFinds(full.DetectString(t.text), t.secret) {
			res.glFound++
		}
	}
	for _, fp := range fx.fps {
		if m.String(fp) != fp {
			res.prChanged++
			res.prChangedFPs = append(res.prChangedFPs, fp)
		}
		if len(full.DetectString(fp)) > 0 {
			res.glFlagged++
			res.glFlaggedFPs = append(res.glFlaggedFPs, fp)
		}
	}
	return res
}

func pct(a, b int) float64 { return 100 * float64(a) / float64(max(b, 1)) }

// TestCompare runs prchat's masker and gitleaks' default detector on the
// examples gitleaks' 222 default rules are validated against, and on mixed
// markdown and code with those examples planted, and prints recall,
// harmless strings changed and MB/s side by side. It fails when prchat's
// recall on the examples is below 99%, when it changes more of the
// documented harmless strings than gitleaks' detector flags, or when any
// secret is only partly masked. Throughput is printed, not asserted.
func TestCompare(t *testing.T) {
	fx := loadFixture(t)
	res := compareExamples(fx)

	m := mask.New()
	gl := defaultDetector(t)
	doc := fx.doc
	out, pd := runPrchat(m, doc.chunks)
	streamed, sd := runStream(m, doc.text, 16)
	if streamed != m.String(doc.text) {
		t.Errorf("streamed output differs from String")
	}
	fs, gd := runGitleaks(gl, doc.chunks)
	inDoc, glInDoc := 0, 0
	for _, p := range doc.planted {
		if !strings.Contains(out, p.secret) {
			inDoc++
		}
		if gitleaksFinds(fs, p.secret) {
			glInDoc++
		}
	}
	mb := float64(len(doc.text)) / 1e6

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "gitleaks v8.30.1 default rules with examples:\t%d (%d true positives, %d documented harmless strings; %d true positives not reported by their own rule, not counted)\n",
		len(fx.rules), res.tps, res.fps, len(fx.noTP))
	fmt.Fprintf(w, "\t\tprchat\tgitleaks\n")
	fmt.Fprintf(w, "recall on the rules' true positives\t\t%.2f%% (%d/%d)\t%.2f%% (%d/%d)\n", pct(res.prMasked, res.tps), res.prMasked, res.tps, pct(res.glFound, res.tps), res.glFound, res.tps)
	fmt.Fprintf(w, "partly masked\t\t%d\t-\n", res.prPartial)
	fmt.Fprintf(w, "harmless strings changed / flagged\t\t%d/%d\t%d/%d\n", res.prChanged, res.fps, res.glFlagged, res.fps)
	fmt.Fprintf(w, "mixed markdown and code\t\t%.1f MB, %d planted\t\n", mb, len(doc.planted))
	fmt.Fprintf(w, "recall in the document\t\t%.2f%%\t%.2f%%\n", pct(inDoc, len(doc.planted)), pct(glInDoc, len(doc.planted)))
	fmt.Fprintf(w, "findings in total (planted: %d)\t\t%d masks\t%d findings\n", len(doc.planted), strings.Count(out, "[masked:"), len(fs))
	fmt.Fprintf(w, "MB/s, String (chunks of 100 kB)\t\t%.1f\t%.1f\n", mb/pd.Seconds(), mb/gd.Seconds())
	fmt.Fprintf(w, "MB/s, Stream (16-byte deltas)\t\t%.1f\t-\n", mb/sd.Seconds())
	by := compareBeyond(m, gl)
	fmt.Fprintf(w, "beyond corpus (prchat's own, fakesecret.Beyond)\t\t%d secrets, %d look-alikes\t\n", by.secrets, by.lookAlikes)
	fmt.Fprintf(w, "recall on the beyond corpus\t\t%.2f%% (%d, %d partly)\t%.2f%% (%d)\n", pct(by.prMasked, by.secrets), by.prMasked, by.prPartial, pct(by.glFound, by.secrets), by.glFound)
	fmt.Fprintf(w, "look-alikes changed / flagged\t\t%d\t%d\n", by.prChanged, by.glFlagged)
	w.Flush()

	var rules []string
	for r := range res.missedBy {
		rules = append(rules, r)
	}
	for r := range res.partialBy {
		rules = append(rules, r)
	}
	slices.Sort(rules)
	rules = slices.Compact(rules)
	for _, r := range rules {
		for _, s := range res.missedBy[r] {
			t.Logf("missed %s: %q", r, s)
		}
		for _, s := range res.partialBy[r] {
			t.Logf("partial %s: %q", r, s)
		}
	}
	for _, fp := range res.prChangedFPs {
		t.Logf("changed harmless string: %q -> %q", fp, m.String(fp))
	}
	for _, fp := range res.glFlaggedFPs {
		t.Logf("gitleaks flags harmless string: %q", fp)
	}
	if res.prMasked*100 < res.tps*99 {
		t.Errorf("recall %.2f%% is below 99%%", pct(res.prMasked, res.tps))
	}
	if res.prPartial > 0 {
		t.Errorf("%d secrets partly masked", res.prPartial)
	}
	if res.prChanged > res.glFlagged {
		t.Errorf("%d documented harmless strings changed, gitleaks flags %d", res.prChanged, res.glFlagged)
	}
}

// beyondResults are both detectors' figures on the beyond corpus.
type beyondResults struct {
	secrets, lookAlikes          int
	prMasked, prPartial, glFound int
	prChanged, glFlagged         int
}

// compareBeyond runs both detectors on prchat's own corpus of secrets in
// the contexts of issue 27 (fakesecret.Beyond): Jenkins XML, key labels,
// separators, values before their label, current prefixed formats, a
// service's name as the only context, off-spec tokens, and look-alikes.
func compareBeyond(m *mask.Masker, gl *detect.Detector) beyondResults {
	var res beyondResults
	for _, rec := range fakesecret.Beyond(1) {
		out := m.String(rec.Text)
		fs := gl.DetectString(rec.Text)
		if rec.Secret == "" {
			res.lookAlikes++
			if out != rec.Text {
				res.prChanged++
			}
			if len(fs) > 0 {
				res.glFlagged++
			}
			continue
		}
		res.secrets++
		switch judge(rec.Text, out, rec.Secret) {
		case masked:
			res.prMasked++
		case partial:
			res.prPartial++
		}
		if gitleaksFinds(fs, rec.Secret) {
			res.glFound++
		}
	}
	return res
}

// denseText is the beyond corpus's secrets joined into one text, a secret
// on every line, repeated to about 1 MB.
func denseText() string {
	var lines []string
	for _, rec := range fakesecret.Beyond(1) {
		if rec.Secret != "" {
			lines = append(lines, strings.ReplaceAll(rec.Text, "\n", " "))
		}
	}
	one := strings.Join(lines, "\n") + "\n"
	return strings.Repeat(one, max(1, (1<<20)/len(one)))
}

// chunksOf cuts text at line ends into parts of about chunkSize bytes.
func chunksOf(text string) []string {
	var out []string
	for len(text) > 0 {
		n := min(len(text), chunkSize)
		if k := strings.IndexByte(text[n:], '\n'); k >= 0 && n < len(text) {
			n += k + 1
		} else {
			n = len(text)
		}
		out = append(out, text[:n])
		text = text[n:]
	}
	return out
}

// BenchmarkThroughput measures prchat's String and Stream (16- and 64-byte
// deltas) beside gitleaks' detector on the same texts: dense secret text
// (the beyond corpus joined, a secret on every line; goal at least 50 MB/s)
// and ordinary source code (the dependencies' sources, nothing planted;
// goal at least 200 MB/s). Besides MB/s it reports MB per CPU second of the
// process (cpu-MB/s), the figure that stays put on a shared machine.
func BenchmarkThroughput(b *testing.B) {
	m := mask.New()
	gl := defaultDetector(b)
	zerolog.SetGlobalLevel(zerolog.Disabled)
	texts := []struct{ name, text string }{{"dense", denseText()}, {"source", buildDoc(b, nil, 4<<20).text}}
	for _, t := range texts {
		chunks := chunksOf(t.text)
		run := func(name string, f func()) {
			b.Run(t.name+"/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(t.text)))
				cpu := cpuTime()
				for b.Loop() {
					f()
				}
				reportCPU(b, len(t.text), cpuTime()-cpu)
			})
		}
		run("prchat-String", func() { countPrchat(m, chunks) })
		run("prchat-Stream16", func() { countStream(m, t.text, 16) })
		run("prchat-Stream64", func() { countStream(m, t.text, 64) })
		run("gitleaks", func() { runGitleaks(gl, chunks) })
	}
}

// reportCPU adds MB per CPU second of the process ("cpu-MB/s").
func reportCPU(b *testing.B, size int, cpu time.Duration) {
	if cpu > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/1e6/cpu.Seconds(), "cpu-MB/s")
	}
}

// BenchmarkCompare measures both detectors' throughput on the mixed
// markdown and code document.
func BenchmarkCompare(b *testing.B) {
	fx := loadFixture(b)
	doc := fx.doc
	m := mask.New()
	b.Run("prchat-String", func(b *testing.B) {
		b.SetBytes(int64(len(doc.text)))
		for b.Loop() {
			countPrchat(m, doc.chunks)
		}
	})
	b.Run("prchat-Stream", func(b *testing.B) {
		b.SetBytes(int64(len(doc.text)))
		for b.Loop() {
			countStream(m, doc.text, 16)
		}
	})
	b.Run("gitleaks", func(b *testing.B) {
		gl := defaultDetector(b)
		b.SetBytes(int64(len(doc.text)))
		for b.Loop() {
			runGitleaks(gl, doc.chunks)
		}
	})
}
