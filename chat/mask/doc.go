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
// The built-in rules cover every rule family of gitleaks' default
// configuration and a few more: self-identifying tokens (GitHub, GitLab,
// Slack, Stripe, OpenAI, Anthropic, Google, AWS, Azure, Twilio, SendGrid,
// npm, PyPI, Docker Hub, Heroku, Shopify, Mailgun, DigitalOcean, Hugging
// Face, Telegram, Discord, 1Password, age, Notion, Sourcegraph, Harness,
// Dynatrace, EasyPost, Infracost, OpenShift, Cloudflare, JWTs, base64 JWTs
// and more), PEM and OpenSSH private keys, passwords in URLs of any scheme
// and in curl's -u/--user, Authorization header values and bearer tokens,
// Slack, Discord and Microsoft Teams webhook URLs, and credentials that are
// only recognisable next to a key naming their service (AWS secret keys,
// Twilio, Datadog, Heroku, Discord and Asana ids of digits, Sumo Logic,
// Sidekiq, Sonar, JFrog, Mapbox, HubSpot/Snyk/MessageBird UUIDs, …:
// serviceDefs in services.go). The generic rule masks the value of an
// assignment whose key names a secret (password, passwd, pwd, secret,
// token, api_key, apikey, access_key, client_secret, private_key, creds,
// auth, …) when the value is a literal with enough entropy and character
// variety. It reads the assignment forms of code, YAML, JSON, .env files,
// shell and Makefiles: key = v, key: v, := and =>, ?=, ::=, :::=, +=, PHP's
// .= and ??=, typed declarations (var key string = v, String key = v,
// const key: string = v), calls that pass a key and its value
// (System.setProperty("API_TOKEN", "v"), os.Setenv, getEnvOrDefault) and XML
// elements (<apiToken>v</apiToken>, also with the value on a line of its
// own). Code (getPassword(), cfg.Secret, f(token: x)), type names (string),
// references ($TOKEN, ${API_KEY}, ${{ secrets.X }}), shell commands
// (`etcdctl get /x`) and placeholders (<your-token>, xxxx, changeme, ***,
// runs such as 12345678 or abcdefgh, PUT_YOUR_TOKEN_HERE, values elided
// with "...") are left alone, as are look-alikes such as git SHAs, UUIDs,
// lockfile hashes, image digests, base64 images, SSH public keys,
// certificates, GitHub node ids, Maven coordinates, XML type names, AWS's
// documented example key and the Google API keys Google publishes in its
// samples. There is no in-band opt-out marker. [New] adds the daemon's own
// secrets, masked by exact value, URL-encoded or base64-encoded (also
// inside base64 of "user:secret").
//
// # Beyond key = value: the families and why they stay quiet on harmless text
//
// Jenkins credentials ({AQAAABAAAA…} in credentials.xml, rule
// jenkins-secret): hudson.util.Secret's payload starts with the version
// byte and the IV length, so every stored secret starts with the same 11
// base64 characters inside braces; nothing else does. Old-style plain
// base64 in <password> and <secretBytes> goes through the generic rule.
//
// Labels that only say "key" (Key=…, sl_key: …, confluent_key, kindKey):
// "key" also names map keys, cache entries and paths, so the label must end
// in the word key (not monkey), must not be one of notKeyLabels (primary,
// cache, sort, public, …, also as the word before: "public key: age1…"),
// and the value must be one token of 16 to 512 bytes with digits and
// letters, 10 distinct bytes, 3.2 bits of entropy per byte, no dotted name
// and no path.
//
// Dash and arrow separators (token - 'v', api key -> "v", token --> v) and
// YAML list items (token:\n  - v, token: - v): only after a key that names a
// secret, a " - " needs blanks on both sides (token-offset is an
// expression), and the value passes the same checks as after "=".
//
// Values before their label ("v" == password, 'v' === apiToken,
// {"v": "api_key"}, 'v' => 'password'): the value must be quoted, at most
// 256 bytes without blanks, have digits and letters and not read as a name
// ({"Content-Type": "api_key"} stays); a map's label must end the entry.
// A Stream holds back a quoted value at its end that a label could still
// follow (beforeHold), so streaming still equals String.
//
// Current prefixed formats (saasDefs in formats.go: prc_ tokens of prchat
// itself, Cloudflare cfut_/cfat_/cfk_, Vercel vcp_, Linear lin_api_ and
// lin_oauth_, Shopify tokens in any case, Slack xoxp-/xoxe- variants and
// about 70 more): each prefix is the service's own, the body has the
// published byte set and length, no run of x's or counting run, no word
// byte on either side and no '/' before it (a path segment such as
// notion.site/API-…).
//
// A service's name as the only context (nearDefs, the keyword dictionary:
// about 115 services with their documented shapes, such as a 32-digit hex
// near "vouchery" or "airbrake"): the name must be a word or a part of an
// identifier (AIRBRAKE_KEY, airbrakeKey; not sqlalchemy, not coherent, not
// glued to a base64 run), the value must start within nearWindow (96)
// bytes after it, before a blank line or a mask, be one token of exactly
// one of the service's shapes, with digits and letters (hex) or enough
// entropy and no identifier-like words (the rest). Names that are ordinary
// English or programming words are not in the dictionary.
//
// Placeholders and local defaults in URLs: a letters-only password that
// says what it stands for (REPLACE_WITH_PASSWORD, YOUR_PASSWORD_HERE,
// ENTER_PASSWORD) is left alone, and so is a default credential of a local
// server (the user's name as password, or a documented default such as
// postgres, guest, minioadmin, root) on localhost, a loopback address or a
// one-label compose host (db, postgres).
//
// Whole tokens: a prefixed token whose body stops at a '-' followed by
// more token characters (sk_live_…-W1Yr…) is masked to the end of them, so
// no tail of an off-spec key is left next to its mask.
//
// # Adding a format
//
// A current SaaS token with a prefix is one line in saasDefs (formats.go):
// its rule name (allocated as a rule id when the package starts), prefixes,
// body byte set, length and optional check; a service known only by its
// name is one line in nearDefs with its shapes ("hex32 uuid"). Each needs a
// generator in internal/fakesecret (saas, saasExtra or services in
// beyond.go), which puts it into the beyond corpus too. A token with a
// fixed prefix that needs options is one line in tokenDefs (rules.go): the
// prefixes, a new rule id (ruleID constant and its name in ruleNames: the
// name is what "[masked:<rule>]" shows, so it must not change later), the
// body's byte set and length, and optionally a check of the body's shape
// (onePasswordKey, sourcegraphBody). A credential recognisable only next to
// its service's name is one entry in serviceDefs (services.go): the
// service names as they appear in key names and the value's shape. Formats
// that need to look around their keyword (webhook URLs, curl arguments,
// PEM blocks) get a matcher of their own, a matchKind and a keyword in
// builtinRules; a matcher reads the text only through its view (at, run,
// hasPrefix), so that a stream knows how far it looked.
//
// Each new rule id needs, and the tests insist on it, a generator in
// internal/fakesecret (Formats, which TestFormats, the stream property
// tests and the fuzz test draw from) and a case in testdata/cases.txt
// (TestCorpus); strings of its shape that must stay go into the harmless
// table (syntax_test.go) or LookAlikes. Then run the comparison with
// gitleaks (below), which fails when recall on gitleaks' own examples drops
// under 99%, when a secret is only partly masked, or when more of gitleaks'
// documented harmless strings are changed than gitleaks flags itself.
//
// # How it runs
//
// Masking is one pass over the text: a byte-level Aho–Corasick automaton,
// case-insensitive on ASCII, finds the keywords of all rules (token
// prefixes, key names, "://", "-----BEGIN", …), and at each hit only the
// rules of that keyword run, as hand-written scanners over the bytes next to
// the hit. No regular expression runs over the text. The automaton's loop
// (automaton.next) runs alone up to the next hit, so that its state stays in
// registers, about 13 instructions a byte. (A loop of four bytes a round
// without bounds checks, through package unsafe, ran 8.5 a byte but no
// faster in CPU time, so it was not kept: the steps wait on the transition
// table's memory, not on instructions.) The checks of a
// value run cheapest first (a service shape's length and bytes before its
// placeholder and variety tests).
// Overlapping candidates are resolved by earliest start, then longest span,
// then rule priority; the scan finds them nearly in that order, so an
// insertion sort orders them.
// Text that already has the form "[masked:<rule>]" is kept verbatim, which
// makes masking idempotent. When nothing is masked, [Masker.String] returns
// its argument without allocating.
//
// # Streaming
//
// [Masker.Stream] masks text that arrives in deltas. Each rule reports how
// far past its keyword it had to look to decide; a decision that needed text
// beyond what has arrived is provisional. A keyword found in a delta is not
// decided at once: most rules decided on the few bytes after their keyword
// would only be decided again, so it waits until its line ends or the text
// has grown 64 bytes past it (deferBytes; a service name waits for its
// window, see below), holding the text from the earliest position its span
// could start (its rule's lookback, or a value written before its label,
// which assignStart finds in the text before the keyword). A keyword that
// its rule turns down by its own bytes and the bytes before it alone (a
// token glued to a word, a prefix in the wrong case: spec.rejects) is
// dropped at once. Write releases the text up to the frontier: the start
// of the earliest undecided or provisional candidate (for example a token
// or a key = value pair that runs to the end of the input, or an open PEM
// block), of a keyword that may be partly seen at the end, or of the few
// bytes a future keyword could claim by looking back (a Telegram bot id),
// and never inside a span. Everything before the frontier is final, so the
// concatenation of all Write results and Flush equals String of the whole
// text, whatever the split (the tests check this at every byte), and a
// secret split across deltas never leaks. The stream keeps only the
// unreleased tail plus a little context for rules that look back (it
// forgets older text in pieces of at least 512 bytes); the prefilter runs
// over each byte once (its state and the keyword occurrences still in play
// are kept between deltas). A decision that did not read past the end is
// final: its candidates are kept and its rule does not run again. A
// provisional decision keeps no candidates (the release stops before its
// keyword, so they could not change what is released) and skips the checks
// of a value that runs to the end. It is made again only when the new text
// can change it: when the first read past the end was a run of bytes (a
// token body, a value, a key name; view.run records the run's byte set and
// length limit) or a quoted value still open, not while the text grows by
// bytes of that run alone (bytes that neither close nor escape the value);
// a service name's window, not before a blank line, a mask or nearWindow
// bytes have arrived, and after them not before the value still arriving
// ends (which the stream sees from the end of the text, without running the
// rule); any other, at the line's end or 32 bytes later. Skipping a
// decision can only delay a release, never change what is masked. The
// stream sums up the keywords it holds (the least start their spans could
// have, the first byte count and the kinds of bytes that can wake one), so
// that a Write whose delta wakes none of them does not look at each, and
// returns at once when one of them holds everything not yet released, also
// right after deciding the ones that woke. When no
// keyword is in play (most of ordinary text), Write runs the prefilter over
// the delta alone and, when the delta ends no keyword, releases up to the
// open end of the text (openEnd: a partly seen keyword, the lookback runs,
// a value a label could still follow) without the wake, resolve and
// release passes. A delta is appended to a block without copying the
// retained text, and text released with nothing masked in it is returned as
// a substring of that block; a delta that does not fit moves the retained
// text to a new block (at least 8 kB, and twice what it holds), so a block
// is never grown by copying. Text released with a mask in it is rendered
// into an output block of the same kind and returned as a substring of it.
// The check for a value that a label could still follow (beforeHold) reads
// where the trailing runs it looks back over start from the stream, which
// brings them up to date over the text that arrived since it last looked.
//
// Within one scan the keywords inside one key name (secret_key holds
// "secret" and "key") share one decision of the generic rule (a Stream
// decides them in the same pass, and keeps where each key name starts),
// and the names a key is checked for (public, csrf, the services) are
// found in one pass over the key.
//
// # Comparison with gitleaks
//
// The nested module in internal/gitleaksbench (kept out of prchat's go.mod)
// builds gitleaks' own config generator with its rule validation replaced
// by a recorder, so the corpus is the true and false positive examples each
// of gitleaks' default rules is validated against (secrets.NewSecret
// samples drawn afresh on each run), not text prchat generated. It runs this
// masker and gitleaks' default detector over them and over mixed markdown
// and code (the dependencies' own sources with the examples planted) and
// prints recall, harmless strings changed and MB/s side by side; .ci/run
// runs it:
//
//	cd chat/mask/internal/gitleaksbench
//	go test -count=1 -run TestCompare -v .
//	go test -run XXX -bench Compare -benchtime 3x .
//
// The beyond corpus (internal/fakesecret.Beyond) is prchat's own: secrets
// in the contexts above, generated from the services' published formats,
// and harmless look-alikes. TestBeyond prints recall per family, partial
// masks and look-alikes changed, and fails under the goals it declares
// (beyondMinRecall, beyondMinFamily, beyondMaxHarmless); TestBeyondStream
// checks that 16-byte deltas give String's output on every record. The
// comparison module prints gitleaks' figures on the same corpus, and its
// BenchmarkThroughput both detectors on dense secret text (the corpus
// joined) and on ordinary source code: prchat's String and Stream in 16-
// and 64-byte deltas beside gitleaks, in MB/s and MB per CPU second (the
// masker's work alone: the masked pieces are counted, not collected).
//
// The package's own benchmarks (go test -bench . -cpu 1 ./chat/mask)
// measure a 200-byte answer (BenchmarkString200B), 4 MB of mixed text
// (BenchmarkMixed), the same streamed in 24-byte deltas (BenchmarkStream),
// and String and Stream in 16- and 64-byte deltas on dense secret text and
// on the Go standard library's sources (BenchmarkThroughput, which also
// reports MB per CPU second of the process, the figure that stays put on a
// shared machine).
package mask
