package mask_test

import (
	"encoding/base64"
	"fmt"
	"math/rand"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prchat/prchat/chat/mask"
	"github.com/prchat/prchat/chat/mask/internal/fakesecret"
)

func token(rule string) string { return "[masked:" + rule + "]" }

// samples draws n samples of every format with a fixed seed.
func samples(seed int64, n int, fs []fakesecret.Format) []fakesecret.Sample {
	r := rand.New(rand.NewSource(seed))
	var out []fakesecret.Sample
	for _, f := range fs {
		for range n {
			out = append(out, f.Sample(r))
		}
	}
	return out
}

// TestFormats masks generated fakes of every format in realistic context and
// expects exactly the secret to be replaced, with the format's rule id.
func TestFormats(t *testing.T) {
	t.Parallel()
	m := mask.New()
	for _, s := range samples(1, 25, fakesecret.Formats()) {
		if strings.Count(s.Text, s.Secret) != 1 {
			t.Fatalf("%s: generator placed the secret %d times", s.Name, strings.Count(s.Text, s.Secret))
		}
		want := strings.Replace(s.Text, s.Secret, token(s.Rule), 1)
		if got := m.String(s.Text); got != want {
			t.Errorf("%s / %s:\n text: %q\n got:  %q\n want: %q", s.Rule, s.Name, s.Text, got, want)
		}
	}
}

// TestLookAlikes: hashes, ids, public keys, references and placeholders stay.
func TestLookAlikes(t *testing.T) {
	t.Parallel()
	m := mask.New()
	for _, s := range samples(2, 40, fakesecret.LookAlikes()) {
		if got := m.String(s.Text); got != s.Text {
			t.Errorf("%s: look-alike was masked:\n text: %q\n got:  %q", s.Name, s.Text, got)
		}
	}
}

// TestRulesCovered: every built-in rule has a generator and vice versa, and
// there are at least 40 of them.
func TestRulesCovered(t *testing.T) {
	t.Parallel()
	rules := mask.New().Rules()
	if len(rules) < 40 {
		t.Errorf("only %d rules", len(rules))
	}
	have := map[string]bool{}
	for _, f := range fakesecret.Formats() {
		have[f.Rule] = true
		if !slices.Contains(rules, f.Rule) {
			t.Errorf("generator for unknown rule %q", f.Rule)
		}
	}
	for _, r := range rules {
		if !have[r] {
			t.Errorf("rule %q has no generator", r)
		}
	}
	if !slices.IsSorted(rules) || slices.Contains(rules, "own-secret") {
		t.Errorf("Rules() = %v", rules)
	}
}

// ruleTable holds hand-written cases per rule: each input with its exact
// expected output.
var ruleTable = []struct{ in, want string }{
	// generic assignments in many syntaxes
	{`password = "hunter2abc"`, `password = "[masked:generic-assignment]"`},
	{`DB_PASSWORD=s3cr3t-Pa55`, `DB_PASSWORD=[masked:generic-assignment]`},
	{`  password: hunter22`, `  password: [masked:generic-assignment]`},
	{`{"client_secret":"Zq8xV2mN4pL7rT1w"}`, `{"client_secret":"[masked:generic-assignment]"}`},
	{`apiKey := "f3Kd92LmQp0xZv7B"`, `apiKey := "[masked:generic-assignment]"`},
	{`export SECRET_KEY='kP9vX2qL8mN4tR7w'`, `export SECRET_KEY='[masked:generic-assignment]'`},
	{`$config['db_password'] = 'Tr0ub4dor&3';`, `$config['db_password'] = '[masked:generic-assignment]';`},
	{`--password=Xk29vLq81`, `--password=[masked:generic-assignment]`},
	{`{\"api_key\":\"Qw3Er5Ty7Ui9Op1A\"}`, `{\"api_key\":\"[masked:generic-assignment]\"}`},
	{`:private_key => "k8Jd7Hs6Gf5Ds4Aa3"`, `:private_key => "[masked:generic-assignment]"`},
	// code and prose left alone
	{`password = getPassword()`, `password = getPassword()`},
	{`token: string`, `token: string`},
	{`secret := cfg.Secret`, `secret := cfg.Secret`},
	{`if password == "hunter2abc" {`, `if password == "hunter2abc" {`},
	{`token = self.token_store.get(user)`, `token = self.token_store.get(user)`},
	{`max_tokens: 4096`, `max_tokens: 4096`},
	{`password: ********`, `password: ********`},
	{`api_key = "<your-api-key>"`, `api_key = "<your-api-key>"`},
	{`API_KEY=${API_KEY}`, `API_KEY=${API_KEY}`},
	{`GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}`, `GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}`},
	{`token := os.Getenv("TOKEN")`, `token := os.Getenv("TOKEN")`},
	{`password: changeme`, `password: changeme`},
	{`The secret is stored in the vault.`, `The secret is stored in the vault.`},
	// URLs
	{`postgres://app:p!ss#w0rd@db:5432/x`, `postgres://app:[masked:url-password]@db:5432/x`},
	{`mongodb+srv://u:Zx9%21v@c0.mongodb.net/`, `mongodb+srv://u:[masked:url-password]@c0.mongodb.net/`},
	{`redis://:hunter2@cache:6379`, `redis://:[masked:url-password]@cache:6379`},
	{`https://user:password@example.com`, `https://user:password@example.com`},
	{`https://example.com:8443/a@b`, `https://example.com:8443/a@b`},
	{`ssh://git@github.com/org/repo`, `ssh://git@github.com/org/repo`},
	// authorization
	{`Authorization: Bearer abc123def456`, `Authorization: Bearer [masked:bearer-token]`},
	{`curl -H "Authorization: Basic ZGVwbG95Omh1bnRlcjI="`, `curl -H "Authorization: Basic [masked:basic-auth]"`},
	{`use Basic ZGVwbG95Omh1bnRlcjI= here`, `use Basic [masked:basic-auth] here`},
	{`Basic usage is simple.`, `Basic usage is simple.`},
	{`Bearer authentication is required.`, `Bearer authentication is required.`},
	{`Authorization: Bearer $TOKEN`, `Authorization: Bearer $TOKEN`},
	{`token_type: Bearer`, `token_type: Bearer`},
	// tokens next to punctuation
	{`(ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z0)`, `([masked:github-pat])`},
	{`key=AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW&x=1`, `key=[masked:google-api-key]&x=1`},
	{`Task-aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1`, `Task-aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1`},
	// JSON-escaped text
	{`{"text":"Token:\nghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z0\nDB_PASSWORD=Xk29vLq81\n"}`, `{"text":"Token:\n[masked:github-pat]\nDB_PASSWORD=[masked:generic-assignment]\n"}`},
	// mask tokens are kept as they are
	{`[masked:github-pat] and password = [masked:generic-assignment]`, `[masked:github-pat] and password = [masked:generic-assignment]`},
}

func TestRuleTable(t *testing.T) {
	t.Parallel()
	m := mask.New()
	for _, c := range ruleTable {
		if got := m.String(c.in); got != c.want {
			t.Errorf("String(%q)\n got  %q\n want %q", c.in, got, c.want)
		}
	}
}

func TestPEM(t *testing.T) {
	t.Parallel()
	m := mask.New()
	r := rand.New(rand.NewSource(3))
	body := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(randString(r, 64) + "\n")
		}
		return b.String()
	}
	key := "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F17F5316E2BAC89\n\n" + body(5) + "-----END RSA PRIVATE KEY-----"
	in := "key.pem:\n" + key + "\ntrailing text"
	if got, want := m.String(in), "key.pem:\n[masked:private-key]\ntrailing text"; got != want {
		t.Errorf("got %q", got)
	}
	// indented in YAML
	yaml := "tls:\n  key: |\n    -----BEGIN EC PRIVATE KEY-----\n    " + randString(r, 64) + "\n    " + randString(r, 30) + "\n    -----END EC PRIVATE KEY-----\n  cert: x\n"
	if got, want := m.String(yaml), "tls:\n  key: |\n    [masked:private-key]\n  cert: x\n"; got != want {
		t.Errorf("yaml: got %q", got)
	}
	// missing END line: masked to the end of the body
	trunc := "-----BEGIN OPENSSH PRIVATE KEY-----\n" + body(3) + "```\nThat was the key."
	if got, want := m.String(trunc), "[masked:ssh-private-key]\n```\nThat was the key."; got != want {
		t.Errorf("truncated: got %q", got)
	}
	cert := "-----BEGIN CERTIFICATE-----\n" + body(3) + "-----END CERTIFICATE-----"
	if got := m.String(cert); got != cert {
		t.Errorf("certificate masked: %q", got)
	}
}

func randString(r *rand.Rand, n int) string {
	const set = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	b := make([]byte, n)
	for i := range b {
		b[i] = set[r.Intn(len(set))]
	}
	return string(b)
}

// TestOwnSecrets: the daemon's own secrets are masked raw, URL-encoded and
// base64-encoded; short ones are ignored.
func TestOwnSecrets(t *testing.T) {
	t.Parallel()
	own := "pr-chat/webhook+secret=42!"
	m := mask.New(own, "", "short")
	variants := map[string]string{
		"raw":        own,
		"query":      url.QueryEscape(own),
		"path":       url.PathEscape(own),
		"std":        base64.StdEncoding.EncodeToString([]byte(own)),
		"url":        base64.URLEncoding.EncodeToString([]byte(own)),
		"raw-std":    base64.RawStdEncoding.EncodeToString([]byte(own)),
		"raw-url":    base64.RawURLEncoding.EncodeToString([]byte(own)),
		"in-basic":   base64.StdEncoding.EncodeToString([]byte("bot:" + own)),
		"in-basic-2": base64.StdEncoding.EncodeToString([]byte("u:" + own)),
	}
	for name, v := range variants {
		in := "value: " + v + " end"
		got := m.String(in)
		if strings.Contains(got, v) || !strings.Contains(got, "[masked:") {
			t.Errorf("%s: %q -> %q", name, in, got)
		}
		if name != "in-basic" && name != "in-basic-2" {
			if want := "value: [masked:own-secret] end"; got != want {
				t.Errorf("%s: got %q want %q", name, got, want)
			}
		}
	}
	if got := m.String("a short word"); got != "a short word" {
		t.Errorf("short own secret was masked: %q", got)
	}
	if got := mask.New("").String("x"); got != "x" {
		t.Errorf("empty own secret: %q", got)
	}
	// Own secrets are matched case-sensitively.
	if got := mask.New("CaseSensitive1").String("casesensitive1"); got != "casesensitive1" {
		t.Errorf("case-folded own secret masked: %q", got)
	}
}

// TestIdempotent: masking masked text changes nothing.
func TestIdempotent(t *testing.T) {
	t.Parallel()
	m := mask.New("own-secret-value-1")
	texts := corpusTexts(t)
	for _, s := range samples(4, 5, append(fakesecret.Formats(), fakesecret.LookAlikes()...)) {
		texts = append(texts, s.Text)
	}
	doc, _, _ := fakesecret.Document(rand.New(rand.NewSource(5)), 200_000, 3)
	texts = append(texts, doc)
	for _, s := range texts {
		once := m.String(s)
		if twice := m.String(once); twice != once {
			t.Errorf("not idempotent:\n in    %q\n once  %q\n twice %q", s, once, twice)
		}
	}
}

// TestNoAllocWhenClean: text without secrets is returned as is, without
// allocating, even when it is full of keywords.
func TestNoAllocWhenClean(t *testing.T) {
	m := mask.New("own-secret-value-1")
	clean := "The token refresh moved to the auth middleware; the password is read from the secret store, and the API key is never logged. See `keyring.go` (commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904)."
	if got := m.String(clean); got != clean {
		t.Fatalf("clean text changed: %q", got)
	}
	if n := testing.AllocsPerRun(200, func() { _ = m.String(clean) }); n != 0 {
		t.Errorf("String allocated %.1f times on clean text", n)
	}
}

func TestNilMasker(t *testing.T) {
	t.Parallel()
	var m *mask.Masker
	if got := m.String("ghp_x"); got != "ghp_x" {
		t.Errorf("nil masker: %q", got)
	}
	st := m.Stream()
	if got := st.Write("abc") + st.Flush(); got != "abc" {
		t.Errorf("nil stream: %q", got)
	}
	var zero mask.Masker
	if got := zero.String("abc"); got != "abc" {
		t.Errorf("zero masker: %q", got)
	}
}

// TestConcurrent uses one Masker from many goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	t.Parallel()
	m := mask.New("own-secret-value-1")
	ss := samples(6, 2, fakesecret.Formats())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, s := range ss {
				if (i+g)%3 == 0 {
					st := m.Stream()
					_ = st.Write(s.Text) + st.Flush()
				} else if strings.Contains(m.String(s.Text), s.Secret) {
					t.Errorf("leak in goroutine %d: %s", g, s.Name)
				}
			}
		}()
	}
	wg.Wait()
}

func ExampleMasker_String() {
	m := mask.New()
	fmt.Println(m.String(`DATABASE_URL=postgres://app:Xk2!pq9@db:5432/prchat`))
	fmt.Println(m.String(`password = getPassword()`))
	// Output:
	// DATABASE_URL=postgres://app:[masked:url-password]@db:5432/prchat
	// password = getPassword()
}

func TestWithAddsSecretsByValue(t *testing.T) {
	base := mask.New("configured-secret-1")
	more := base.With("stored-key-Zq8rT2")
	for _, s := range []string{"configured-secret-1", "stored-key-Zq8rT2"} {
		if got := more.String("x " + s + " y"); strings.Contains(got, s) {
			t.Errorf("With: %q is not masked: %q", s, got)
		}
	}
	if got := base.String("stored-key-Zq8rT2"); got != "stored-key-Zq8rT2" {
		t.Errorf("With changed the Masker it was called on: %q", got)
	}
}
