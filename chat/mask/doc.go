// Package mask is prchat's secret masker. Every answer, note, transcript
// entry and streamed event passes through it before it is stored or sent,
// so that an agent quoting a .env file does not put a live key on a
// dashboard.
//
// A [Masker] replaces each secret with "[masked:<rule>]", where <rule> is a
// short stable id such as github-pat, aws-access-key-id, url-password,
// generic-assignment or own-secret ([Masker.Rules] lists the built-in ones).
// Only the secret is replaced: for password = "…" the value, for
// postgres://u:PASS@h/db the password, for Authorization: Bearer X the
// credential, and for a PEM private key the whole block from its BEGIN line
// to its END line.
//
// # Rules
//
// The built-in rules cover self-identifying tokens (GitHub, GitLab, Slack,
// Stripe, OpenAI, Anthropic, Google, AWS, Azure, Twilio, SendGrid, npm, PyPI,
// Docker Hub, Heroku, Shopify, Mailgun, DigitalOcean, Hugging Face,
// Telegram, Discord, JWTs and more), PEM and OpenSSH private keys, passwords
// in URLs of any scheme, Authorization header values and bearer tokens, and
// formats that are only recognisable next to their key name (AWS secret keys
// and session tokens, Twilio auth tokens, Datadog keys, Heroku keys, Discord
// bot tokens). The generic rule masks the value of assignments whose key
// names a secret (password, passwd, pwd, secret, token, api_key, apikey,
// access_key, client_secret, private_key, …) in code, YAML, JSON, .env files
// and shell, when the value is a literal with enough entropy and character
// variety; code (getPassword(), cfg.Secret), type names (string), references
// ($TOKEN, ${API_KEY}, ${{ secrets.X }}) and placeholders (<your-token>,
// xxxx, changeme, ***) are left alone, as are look-alikes such as git SHAs,
// UUIDs, lockfile hashes, image digests, base64 images, SSH public keys,
// certificates and GitHub node ids. There is no in-band opt-out marker.
// [New] adds the daemon's own secrets, masked by exact value, URL-encoded or
// base64-encoded (also inside base64 of "user:secret").
//
// # How it runs
//
// Masking is one pass over the text: a byte-level Aho–Corasick automaton,
// case-insensitive on ASCII, finds the keywords of all rules (token
// prefixes, key names, "://", "-----BEGIN", …), and at each hit only the
// rules of that keyword run, as hand-written scanners over the bytes next to
// the hit. No regular expression runs over the text. Overlapping candidates
// are resolved by earliest start, then longest span, then rule priority.
// Text that already has the form "[masked:<rule>]" is kept verbatim, which
// makes masking idempotent. When nothing is masked, [Masker.String] returns
// its argument without allocating.
//
// # Streaming
//
// [Masker.Stream] masks text that arrives in deltas. Each rule reports how
// far past its keyword it had to look to decide; a decision that needed text
// beyond what has arrived is provisional. Write releases the text up to the
// frontier: the start of the earliest provisional candidate (for example a
// token or a key = value pair that runs to the end of the input, or an open
// PEM block), of a keyword that may be partly seen at the end, or of the few
// bytes a future keyword could claim by looking back (a Telegram bot id),
// and never inside a span. Everything before the frontier is final, so the
// concatenation of all Write results and Flush equals String of the whole
// text, whatever the split (the tests check this at every byte), and a
// secret split across deltas never leaks. The stream keeps only the
// unreleased tail plus a little context for rules that look back.
//
// # Comparison with gitleaks
//
// The nested module in internal/gitleaksbench (kept out of prchat's go.mod)
// runs this masker and gitleaks' default detector over the same generated
// 10 MB of markdown and code with planted fake secrets and prints recall,
// look-alikes flagged and MB/s side by side:
//
//	cd chat/mask/internal/gitleaksbench
//	go test -run TestCompare -v .
//	go test -run XXX -bench Compare -benchtime 1x .
//
// The package's own benchmarks (go test -bench . ./chat/mask) measure a
// 200-byte answer (BenchmarkString200B) and mixed text (BenchmarkMixed).
package mask
