package mask

import "strings"

// keyKind classifies a key name in a key = value assignment.
type keyKind uint8

const (
	kindNone     keyKind = iota
	kindPassword         // password, passwd, pwd, pass, passphrase
	kindSecret           // secret, token, api key, access key, private key, ...
	kindKey              // a label that only says key (Key=, sl_key:, confluent_key)
)

const maxValue = 4096

// normKey is a key name lowered with '_', '-', '.', '$' and '@' removed,
// keeping its last len(b) bytes (the end of a key decides what it is).
// names records which of keyNames it contains, found in one pass when
// the key is set.
type normKey struct {
	b     [96]byte
	n     int
	names uint64 // bit i: keyNames()[i] occurs in the key
}

func (k *normKey) set(ident string) {
	// the key is read from its end and written to the end of k.b, then
	// moved to its start
	p := len(k.b)
	for i := len(ident) - 1; i >= 0 && p > 0; i-- {
		if c := keyByte[ident[i]]; c != 0 {
			p--
			k.b[p] = c
		}
	}
	k.n = copy(k.b[:], k.b[p:])
	k.names = keyNames().find(k.b[:k.n])
}

// keyByte[b] is b in lower case for letters and digits, 0 for the bytes
// normKey drops.
var keyByte = func() (t [256]byte) {
	for b := range t {
		if c := byte(b); isLetter(c) || isDigit(c) {
			t[b] = fold(c)
		}
	}
	return t
}()

func (k *normKey) hasSuffix(p string) bool {
	return k.n >= len(p) && string(k.b[k.n-len(p):k.n]) == p
}

// has reports whether the key contains the name with index i in
// keyNames.
func (k *normKey) has(i int) bool { return k.names&(1<<uint(i)) != 0 }

var passwordSuffixes = []string{"password", "passwd", "pwd", "pass", "passphrase"}

var secretSuffixes = []string{
	"secret", "secretkey", "secretkeybase", "token", "apikey", "accesskey", "privatekey",
	"appkey", "authkey", "masterkey", "encryptionkey", "signingkey", "credential",
	"credentials", "creds", "sessionkey", "accountkey", "licensekey", "auth", "secretstring",
	"secretbytes",
}

// notKeyLabels are names ending in "key" whose values are names, paths or
// ids, not credentials (a cache key, a primary key, a map key).
var notKeyLabels = []string{
	"public", "primary", "foreign", "sort", "partition", "cache", "idempotency", "hash", "row",
	"map", "dict", "lookup", "index", "object", "bucket", "file", "i18n", "translation", "message",
	"msg", "redis", "config", "setting", "registry", "group", "hot", "short", "shortcut", "keyboard",
	"enum", "unique", "composite", "natural", "surrogate", "list", "item", "data", "field", "column",
	"table", "parent", "child", "next", "prev", "last", "first", "cursor", "page", "entry", "node",
	"element", "attr", "attribute", "property", "prop", "query", "param", "state", "event", "route",
	"path", "url", "name", "type", "kind", "label", "tag", "metric", "dedupe", "dedup", "lock",
	"sequence", "ssh", "gpg", "pgp", "s3", "sub", "react", "vue", "sharding", "shard", "routing",
	"dimension", "cluster", "form", "i18", "locale", "lang", "meta", "sender", "schema", "version",
}

// notKeyWordBefore reports a label written in words whose word before
// "key" makes it one of notKeyLabels ("public key: age1…", "cache key -").
func notKeyWordBefore(s string, a int) bool {
	if a < 2 || s[a-1] != ' ' {
		return false
	}
	w := a - 1
	for w > 0 && a-1-w < 24 && isLetter(s[w-1]) {
		w--
	}
	var low [24]byte
	n := 0
	for i := w; i < a-1 && n < len(low); i++ {
		low[n] = fold(s[i])
		n++
	}
	return n > 0 && notKeyLabelSet[string(low[:n])]
}

// notKeyLabelSet holds notKeyLabels; notKeyByLast lists them by their
// last byte, for the suffix test of keyLabel.
var notKeyLabelSet, notKeyByLast = func() (map[string]bool, *[256][]string) {
	set := map[string]bool{}
	var by [256][]string
	for _, w := range notKeyLabels {
		set[w] = true
		by[w[len(w)-1]] = append(by[w[len(w)-1]], w)
	}
	return set, &by
}()

// hasNotKeySuffix reports whether rest ends in one of notKeyLabels.
func hasNotKeySuffix(rest []byte) bool {
	if len(rest) == 0 {
		return false
	}
	for _, w := range notKeyByLast[rest[len(rest)-1]] {
		if len(rest) >= len(w) && string(rest[len(rest)-len(w):]) == w {
			return true
		}
	}
	return false
}

// keyLabel reports a key name that ends in the word "key" (Key, sl_key,
// confluentKey, AIRBRAKE-KEY, not monkey) and is not one of notKeyLabels.
func keyLabel(key string, k *normKey) bool {
	if !k.hasSuffix("key") || len(key) < 3 {
		return false
	}
	i := len(key) - 3
	for i > 0 && !equalFold(key[i:i+3], "key") {
		i--
	}
	if i < 0 || !equalFold(key[i:i+3], "key") {
		return false
	}
	if i > 0 {
		c := key[i-1]
		if isLetter(c) && !(isLower(c) && key[i] == 'K') {
			return false // monkey, MONKEY
		}
	}
	return !hasNotKeySuffix(k.b[:k.n-3])
}

func (k *normKey) kind() keyKind {
	// public keys and tokens, and CSRF tokens (bound to a session, shown in
	// every form) are not secrets
	if k.has(namePublic) || k.has(nameCSRF) || k.has(nameXSRF) {
		return kindNone
	}
	if k.n == 0 {
		return kindNone
	}
	for _, x := range suffixKinds[k.b[k.n-1]] {
		if k.hasSuffix(x.suffix) {
			return x.kind
		}
	}
	return kindNone
}

// suffixKinds lists, by their last byte, passwordSuffixes (kindPassword)
// and then secretSuffixes (kindSecret), so that kind compares a key only
// with the suffixes that end as it does, in the same order.
var suffixKinds = func() (t [256][]suffixKind) {
	for _, s := range passwordSuffixes {
		t[s[len(s)-1]] = append(t[s[len(s)-1]], suffixKind{s, kindPassword})
	}
	for _, s := range secretSuffixes {
		t[s[len(s)-1]] = append(t[s[len(s)-1]], suffixKind{s, kindSecret})
	}
	return t
}()

// suffixKind is a key name suffix and the kind of key it makes.
type suffixKind struct {
	suffix string
	kind   keyKind
}

// matchAssign is the generic rule: a key whose name says it holds a secret,
// an assignment operator, and a value that looks like a secret rather than
// code, a reference or a placeholder. Only the value is masked. The forms
// it reads:
//
//	key = v, key: v, key := v, key => v         (code, YAML, .env, Ruby, logstash)
//	key ?= v, key ::= v, key :::= v, key += v   (Makefile)
//	$key .= v, $key ??= v, key ||= v            (PHP, JavaScript)
//	var key string = v, const key: string = v   (typed declarations)
//	String key = v                              (Java, C#: the type comes first)
//	f("KEY", "v")                               (System.setProperty, os.Setenv, getEnvOrDefault)
//	<key>v</key>, <key>\n  v\n</key>             (XML, the value may be on its own line)
//
// with the key and the value quoted or not (also JSON-escaped quotes).
func matchAssign(v *view, ks, ke int, memo *assignMemo) result {
	s := v.s
	a := memo.key
	if !memo.keyKnown || memo.keyKs != ks {
		a = keyStart(s, ks)
	}
	b := v.run(ke, setIdent, 128)
	if memo.ok && memo.a == a && memo.b == b {
		if v.reach <= len(s) && memo.reach > len(s) {
			v.wait, v.waitEnd = memo.wait, memo.waitEnd
		}
		v.reach = max(v.reach, memo.reach)
		if memo.back >= 0 {
			v.back = ks - memo.back
		}
		return memo.r
	}
	r := assignAt(v, ks, a, b)
	*memo = assignMemo{ok: true, a: a, b: b, r: r, reach: v.reach, back: -1, wait: v.wait, waitEnd: v.waitEnd}
	if v.back > 0 {
		memo.back = ks - v.back
	}
	return r
}

// assignMemo is the generic rule's last decision in one scan: the
// keywords inside one key name (secret_key holds "secret" and "key") lead
// to the same key and value, which are then decided once.
type assignMemo struct {
	ok    bool
	a, b  int // the key name s[a:b]
	r     result
	reach int // the view's reach after the decision
	back  int // where a value before the label starts (view.back), or -1
	// the view's wait after the decision
	wait    *byteSet
	waitEnd int
	// keyStart(s, keyKs) when keyKnown (a Stream keeps it with the
	// keyword)
	keyKnown   bool
	keyKs, key int
}

// assignAt is matchAssign for the key name s[a:b] that holds the keyword
// starting at ks.
func assignAt(v *view, ks, a, b int) result {
	s := v.s
	if a >= 3 && s[a-3:a] == "://" {
		return noMatch // user name of a URL: https://x-access-token:...@host
	}
	if a > 0 {
		if r := matchBefore(v, a, b, ks); r.start >= 0 {
			return r
		}
	}
	// The assignment operator is checked before the key name: most keyword
	// hits are words in prose or code and fail here cheaply.
	i := b
	var kq byte // the key's closing quote
	switch c := v.at(i); {
	case c == '\\' && v.at(i+1) == '"':
		kq = '"'
		i += 2
	case c == '"' || c == '\'' || c == '`':
		kq = byte(c)
		i++
	}
	if v.at(i) == ']' {
		i++ // config['SECRET_KEY'] = ...
	}
	blankBefore := v.at(i) == ' ' || v.at(i) == '\t'
	i = v.skipBlank(i)
	form := formAssign
	colonGlued := false
	listItem := false // a YAML list may follow (key:\n  - value)
	switch c := v.at(i); c {
	case '=':
		switch v.at(i + 1) {
		case '=', '~':
			return noMatch
		case '>':
			i += 2
		default:
			i++
		}
	case ':':
		colonGlued = !isSpace(v.at(i + 1))
		n := 1
		for n < 3 && v.at(i+n) == ':' {
			n++
		}
		switch {
		case v.at(i+n) == '=':
			i += n + 1
		case n == 1:
			i++
			i = skipType(v, i)
			listItem = true
		default:
			return noMatch // a::b, std::string
		}
	case '-':
		// key - value, key -> value, key --> value (logs, prose, tables)
		n := 1
		if v.at(i+1) == '-' {
			n = 2
		}
		switch {
		case v.at(i+n) == '>':
			i += n + 1
		case n == 1 && blankBefore && (v.at(i+1) == ' ' || v.at(i+1) == '\t'):
			i++
		default:
			return noMatch
		}
	case '?', '+', '.', '|':
		switch {
		case v.at(i+1) == '=':
			i += 2
		case c == '?' && v.at(i+1) == '?' && v.at(i+2) == '=', c == '|' && v.at(i+1) == '|' && v.at(i+2) == '=':
			i += 3
		default:
			return noMatch
		}
	case ',':
		// f("KEY", "value"): a quoted key, then a quoted value
		if kq == 0 || a == 0 || s[a-1] != kq {
			return noMatch
		}
		i++
		form = formCall
	case '>':
		// <key>value</key>
		if kq != 0 || a == 0 || s[a-1] != '<' {
			return noMatch
		}
		i++
		form = formXML
	default:
		// var key string = v
		if kq != 0 || !isLetterInt(c) {
			return noMatch
		}
		j := skipType(v, i)
		if j == i {
			return noMatch
		}
		i = j
	}
	var nk normKey
	nk.set(s[a:b])
	kind := nk.kind()
	if kind == kindNone && keyLabel(s[a:b], &nk) && !notKeyWordBefore(s, a) {
		kind = kindKey
	}
	if kind == kindNone && serviceOf(s[a:b], &nk) == nil {
		return noMatch
	}
	if form == formXML {
		return xmlValue(v, i, s[a:b], &nk, kind)
	}
	i = v.skipBlank(i)
	if listItem {
		// token:\n  - value, token: - value
		k := i
		if v.at(k) == '\r' {
			k++
		}
		if v.at(k) == '\n' {
			k = v.skipBlank(k + 1)
		}
		if v.at(k) == '-' && v.at(k+1) == ' ' {
			i = v.skipBlank(k + 2)
		}
	}
	var q byte
	esc := false
	switch c := v.at(i); {
	case c == '"' || c == '\'' || c == '`':
		q = byte(c)
		i++
	case c == '\\' && v.at(i+1) == '"':
		q, esc = '"', true
		i += 2
	}
	if form == formCall && q == 0 {
		return noMatch
	}
	start, end := i, 0
	if q != 0 {
		j := i
		first := v.reach <= len(s) // no read past the end yet
		for {
			c := v.at(j)
			if c < 0 && first {
				// The value is still open at the end: the decision stays
				// the same while the text grows by bytes that neither
				// close nor escape it.
				v.wait, v.waitEnd = openValue(q), start+maxValue+1
			}
			if c < 0 || c == '\n' || j-start > maxValue {
				return noMatch
			}
			if c == '\\' {
				if esc && v.at(j+1) == '"' {
					break
				}
				j += 2
				continue
			}
			if !esc && c == int(q) {
				break
			}
			j++
		}
		end = j
	} else {
		end = v.run(i, setUnquoted, maxValue+1)
		if end-start > maxValue {
			return noMatch
		}
		switch v.at(end) {
		case '(':
			return noMatch // a call: password = getPassword()
		case ')':
			return noMatch // a named argument: f(token: value)
		}
	}
	val := s[start:end]
	if len(val) == 0 {
		return noMatch
	}
	if q == '`' && strings.IndexByte(val, ' ') >= 0 {
		return noMatch // a shell command: `etcdctl get /x`
	}
	if q == 0 && kq == 0 && colonGlued {
		return noMatch // group:artifact, host:port, a:b in prose
	}
	if v.pending() {
		return noMatch // the value may go on
	}
	return assignResult(s[a:b], &nk, kind, val, q != 0, start, end)
}

// openValue is the set of bytes that keep a value quoted with q open:
// anything but q, a backslash and a newline.
func openValue(q byte) *byteSet {
	switch q {
	case '"':
		return setOpenDouble
	case '\'':
		return setOpenSingle
	}
	return setOpenBack
}

var (
	setOpenDouble = notSet("\n\\\"")
	setOpenSingle = notSet("\n\\'")
	setOpenBack   = notSet("\n\\`")
)

// assignForm is the syntax an assignment was recognised in.
type assignForm uint8

const (
	formAssign assignForm = iota
	formCall
	formXML
)

// assignResult decides on the value of a secret-named key.
func assignResult(key string, nk *normKey, kind keyKind, val string, quoted bool, start, end int) result {
	if id, ok := contextualID(nk, val); ok {
		return result{start: start, end: end, id: id}
	}
	if d := serviceOf(key, nk); d != nil {
		if d.shape(val) && !lowVariety(val) && !containsFold(val, "xxxxx") {
			return result{start: start, end: end, id: d.id}
		}
		if d.id == idTelegram && strings.IndexByte(val, ':') > 0 && allIn(val[:strings.IndexByte(val, ':')], setDigit) {
			return noMatch // a bot id and something that is not a bot token
		}
	}
	if publishedGoogleKeys[val] {
		return noMatch
	}
	if kind == kindNone {
		return noMatch
	}
	if ok, st := secretValue(val, quoted, kind); !ok || kind == kindKey && !keyValue(val, st) {
		return noMatch
	}
	id := idGeneric
	if nk.has(nameHeroku) {
		id = idHeroku
	}
	return result{start: start, end: end, id: id}
}

// skipType skips a type name in a typed declaration: after "var key" or
// "key:" a type (string, String, str, []byte) followed by "="; it returns i
// unchanged when there is none.
func skipType(v *view, i int) int {
	j := v.skipBlank(i)
	t := j
	for v.at(t) == '[' && v.at(t+1) == ']' {
		t += 2
	}
	e := v.run(t, setWord, 40)
	if e == t || !isLetterInt(v.at(t)) {
		return i
	}
	if v.at(e) == '?' {
		e++ // String?
	}
	k := v.skipBlank(e)
	if v.at(k) != '=' || v.at(k+1) == '=' || v.at(k+1) == '>' {
		return i
	}
	return k + 1
}

func isLetterInt(c int) bool { return c >= 0 && isLetter(byte(c)) }

// xmlValue reads the text of an XML element <key>value</key>, where value
// may sit on a line of its own; it must be followed by a closing tag.
func xmlValue(v *view, i int, key string, nk *normKey, kind keyKind) result {
	st := i
	for k := 0; k < 80; k++ {
		c := v.at(st)
		if !isSpace(c) {
			break
		}
		st++
	}
	end := v.run(st, setXMLText, maxValue+1)
	if end == st || end-st > maxValue {
		return noMatch
	}
	k := end
	for n := 0; n < 80 && isSpace(v.at(k)); n++ {
		k++
	}
	if !v.hasPrefix(k, "</") || !v.hasPrefix(k+2, key) {
		return noMatch
	}
	if v.pending() {
		return noMatch
	}
	return assignResult(key, nk, kind, v.s[st:end], true, st, end)
}

var setXMLText = notSet(" \t\r\n\v\f<>\"'`")

// contextualID recognises values whose format is only distinctive next to
// their key name: AWS secret keys and session tokens, Twilio auth tokens,
// Datadog keys, Heroku keys and Discord bot tokens.
func contextualID(k *normKey, val string) (ruleID, bool) {
	switch {
	case (k.hasSuffix("secretaccesskey") || k.has(nameAWS) && (k.hasSuffix("secretkey") || k.hasSuffix("secret"))) &&
		len(val) == 40 && allIn(val, setB64) && !lowVariety(val) && hasDigitAndLetter(val):
		return idAWSSecretKey, true
	case (k.hasSuffix("sessiontoken") || k.hasSuffix("securitytoken")) && len(val) >= 100 && allIn(val, setAWSSession) && !lowVariety(val):
		return idAWSSessionToken, true
	case k.has(nameTwilio) && len(val) == 32 && allIn(val, setHexLower) && !lowVariety(val):
		return idTwilioAuth, true
	case (k.has(nameDatadog) || k.n >= 2 && k.b[0] == 'd' && k.b[1] == 'd') && (k.hasSuffix("apikey") || k.hasSuffix("appkey")) &&
		(len(val) == 32 || len(val) == 40) && allIn(val, setHexLower) && !lowVariety(val):
		return idDatadog, true
	case k.has(nameHeroku) && isUUID(val):
		return idHeroku, true
	case k.has(nameDiscord) && discordToken(val):
		return idDiscordBot, true
	}
	return 0, false
}

var setAWSSession = newSet("A-Za-z0-9+/=%")

func allIn(v string, set *byteSet) bool {
	_ = set[0] // set is not nil: the loop need not check it on every byte
	for i := 0; i < len(v); i++ {
		if !set[v[i]] {
			return false
		}
	}
	return true
}

// isUUID reports the 8-4-4-4-12 hex form.
func isUUID(v string) bool {
	if len(v) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if v[i] != '-' {
				return false
			}
		} else if !setHex[v[i]] {
			return false
		}
	}
	return true
}

// discordToken: base64 user id . 6 chars . 27+ chars.
func discordToken(v string) bool {
	if strings.Count(v, ".") != 2 {
		return false
	}
	var p [3]string
	p[0], v, _ = strings.Cut(v, ".")
	p[1], p[2], _ = strings.Cut(v, ".")
	if len(p[0]) < 23 || len(p[0]) > 28 || len(p[1]) != 6 || len(p[2]) < 27 || len(p[2]) > 40 {
		return false
	}
	if p[0][0] != 'M' && p[0][0] != 'N' && p[0][0] != 'O' {
		return false
	}
	for _, x := range p {
		if !allIn(x, setB64URL) {
			return false
		}
	}
	return true
}

// secretValue decides whether the value of a secret-named key is a literal
// secret. It rejects references ($TOKEN, ${{ secrets.X }}), placeholders
// (<your-token>, xxxx, changeme), code (cfg.Secret, getPassword()), type
// names (string) and, for keys other than passwords, values with too little
// entropy or character variety.
// When it is, it also returns the value's statsOf, for the checks that
// follow.
func secretValue(val string, quoted bool, kind keyKind) (bool, textStats) {
	n := len(val)
	if strings.Contains(val, "://") || strings.HasPrefix(val, "-----BEGIN") {
		return false, textStats{} // URL and PEM rules handle these
	}
	if isPlaceholder(val) || strings.HasSuffix(val, "...") || strings.HasSuffix(val, "…") {
		return false, textStats{}
	}
	if !quoted && looksLikeCode(val) {
		return false, textStats{}
	}
	st := statsOf(val)
	if st.camelWords(val) {
		return false, textStats{} // a type or field name: AgencyIdentificationCodeContentType
	}
	if kind == kindPassword {
		if n < 6 || st.distinct < 4 || st.entropy < 2 {
			return false, textStats{}
		}
		if st.lower == n && n < 13 {
			return false, textStats{} // a word: string, required, letmein, rootpasswd
		}
		return true, st
	}
	if strings.IndexByte(val, ' ') >= 0 || strings.IndexByte(val, '\t') >= 0 {
		return false, textStats{} // prose or a command, not a token
	}
	if st.digit == n {
		// a long random number (client ids and secrets of some services)
		return n >= 16 && st.distinct >= 7 && st.entropy >= 2.8, st
	}
	if n < 10 || st.distinct < 5 {
		return false, textStats{}
	}
	if st.classes() == 1 && (n < 20 || st.entropy < 3.3) {
		return false, textStats{}
	}
	minEnt := 3.0
	switch {
	case n < 12:
		minEnt = 2.5
	case n < 20:
		if longestAlnumRun(val) < 12 {
			return false, textStats{} // a prefixed short id: sm_pat_9f8g8n3twm
		}
		minEnt = 2.8
	}
	return st.entropy >= minEnt, st
}

// longestAlnumRun is the length of the longest run of letters and digits.
func longestAlnumRun(v string) int {
	best, run := 0, 0
	for i := 0; i < len(v); i++ {
		if setAlnum[v[i]] {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// camelWords reports a value that contains a run of three or more
// capitalised words of at least three letters with a vowel, 16 letters or
// more in all (AgencyIdentificationCodeContentType): identifiers, not
// random strings.
func camelWords(v string) bool {
	run, letters := 0, 0
	for i := 0; i < len(v); {
		c := v[i]
		if 'A' <= c && c <= 'Z' {
			j := i + 1
			vowel := false
			for j < len(v) && 'a' <= v[j] && v[j] <= 'z' {
				vowel = vowel || setVowel[v[j]]
				j++
			}
			if j-i >= 3 && vowel {
				run++
				letters += j - i
				if run >= 3 && letters >= 16 {
					return true
				}
				i = j
				continue
			}
		}
		run, letters = 0, 0
		i++
	}
	return false
}

// camelWords is camelWords(v) for v whose statsOf is t. The words of
// such a run are letters side by side, 16 or more, three of them capitals
// and six small: a value without that many, or without a run of 16
// letters, is not walked.
func (t textStats) camelWords(v string) bool {
	if t.letterRun < 16 || t.upper < 3 || t.lower < 6 {
		return false
	}
	return camelWords(v)
}

var setVowel = newSet("aeiouy")

var placeholderWords = map[string]bool{
	"changeme": true, "change_me": true, "change-me": true, "changeit": true,
	"password": true, "passwd": true, "secret": true, "token": true, "apikey": true, "api_key": true,
	"example": true, "placeholder": true, "redacted": true, "removed": true, "hidden": true,
	"none": true, "null": true, "nil": true, "undefined": true, "true": true, "false": true,
	"string": true, "str": true, "required": true, "optional": true, "empty": true,
	"todo": true, "tbd": true, "dummy": true, "sample": true, "foobar": true, "notset": true,
	"not_set": true, "unset": true, "default": true, "secret_value": true, "mysecret": true,
	"mypassword": true, "my_password": true, "yourpassword": true, "bearer": true,
}

// isPlaceholder reports values that stand for a secret instead of being one.
func isPlaceholder(v string) bool {
	n := len(v)
	if n == 0 {
		return true
	}
	switch v[0] {
	case '$': // $TOKEN, ${API_KEY}, ${{ secrets.X }}, $(cat key)
		if n > 1 && (isLetter(v[1]) || v[1] == '_' || v[1] == '{' || v[1] == '(') {
			return true
		}
	case '<':
		if v[n-1] == '>' {
			return true
		}
	case '{':
		if v[n-1] == '}' {
			return true
		}
	case '[':
		if v[n-1] == ']' {
			return true
		}
	case '%':
		if n <= 3 || v[1] == '(' || v[1] == '{' {
			return true
		}
	}
	if strings.Contains(v, "${") || strings.Contains(v, "{{") {
		return true
	}
	// xxxx, ****, XXXX-XXXX, 0000, ....
	masky := true
	var alnum byte
	for i := 0; i < n; i++ {
		c := v[i]
		switch {
		case c == '*' || c == '.' || c == '-' || c == '_' || c == '#' || c == ' ':
		case setAlnum[c]:
			if alnum == 0 {
				alnum = fold(c)
			} else if fold(c) != alnum {
				masky = false
			}
		default:
			masky = false
		}
		if !masky {
			break
		}
	}
	if masky {
		return true
	}
	if n <= 16 {
		var low [16]byte
		for i := 0; i < n; i++ {
			low[i] = fold(v[i])
		}
		if placeholderWords[string(low[:n])] {
			return true
		}
	}
	// your-token, YOUR_API_KEY_HERE, yourSecretKey
	if hasPrefixFold(v, "your") && allIn(v, setLetterSep) {
		return true
	}
	return fillerInside(v)
}

// fillerInside reports placeholder text inside a value: a run of x's
// (sha256~XXXX_PUT_YOUR_TOKEN_HERE), PUT_YOUR/_HERE, or a counting run such
// as 123456789 or abcdefghij.
func fillerInside(v string) bool {
	// "your_", "_here", "yourtoken", "example" are looked for (in values of
	// 8 bytes or more) only at the underscores, y's and x's (fillerAt).
	words := len(v) >= 8
	seq := 1
	var prev byte // the previous byte, folded
	for i := 0; i < len(v); i++ {
		x := fillerBytes[v[i]]
		c := byte(x)
		if x&fillerMark != 0 && fillerAt(v, i, c, words) {
			return true
		}
		if c == prev+1 && x&fillerAlnum != 0 && i > 0 {
			seq++
			if seq >= 8 {
				return true
			}
		} else {
			seq = 1
		}
		prev = c
	}
	return false
}

// fillerBytes[b] is fold(b), with fillerMark set for the bytes at which
// fillerAt looks (x, _ and y in either case) and fillerAlnum for letters
// and digits: fillerInside reads one table a byte.
var fillerBytes = func() (t [256]uint16) {
	for b := range t {
		t[b] = uint16(fold(byte(b)))
		switch fold(byte(b)) {
		case 'x', '_', 'y':
			t[b] |= fillerMark
		}
		if setAlnum[b] {
			t[b] |= fillerAlnum
		}
	}
	return t
}()

const (
	fillerMark  = 1 << 8
	fillerAlnum = 1 << 9
)

// fillerAt reports placeholder text at v[i], whose folded byte c is an x
// (the first of a run of five, or "example"), an underscore ("your_",
// "_here") or a y ("yourtoken").
func fillerAt(v string, i int, c byte, words bool) bool {
	switch c {
	case 'x':
		if i == 0 || lowerByte[v[i-1]] != 'x' {
			n := 1
			for n < 5 && i+n < len(v) && lowerByte[v[i+n]] == 'x' {
				n++
			}
			if n >= 5 {
				return true
			}
		}
		return words && i >= 1 && hasPrefixFold(v[i-1:], "example")
	case '_':
		return words && (i >= 4 && equalFold(v[i-4:i], "your") || hasPrefixFold(v[i+1:], "here"))
	case 'y':
		return words && hasPrefixFold(v[i:], "yourtoken")
	}
	return false
}

// containsFold reports whether s contains sub (lower case) ignoring ASCII
// case.
func containsFold(s, sub string) bool {
	c0 := sub[0]
	for i := 0; i+len(sub) <= len(s); i++ {
		if fold(s[i]) == c0 && equalFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

var setLetterSep = newSet("A-Za-z_-")

// looksLikeCode reports unquoted values that are expressions, not
// literals: dotted paths (cfg.Secret, process.env.TOKEN) and identifiers
// that read like words (tokenStore, API_KEY, string).
func looksLikeCode(v string) bool {
	// A name's bytes are letters, '_' and '$'; a digit or a dot may not
	// start a part (seg is codeAtStart there, v's start included), and any
	// other byte is not code. The loop tests each byte's class in bits,
	// not in branches, which on a random value would be coin tosses.
	seg, bad, dots := uint8(codeAtStart), uint8(0), 0
	for i := 0; i < len(v); i++ {
		k := codeClass[v[i]]
		bad |= k & (codeOther | seg)
		if bad != 0 {
			return false
		}
		seg = k >> 1 & codeAtStart // after a dot
		dots += int(k >> 2)
	}
	if seg != 0 {
		return false // trailing dot
	}
	if dots > 0 {
		return namedParts(v)
	}
	return looksLikeIdentifier(v)
}

// namedParts reports whether every part of a dotted path reads like a
// name (cfg.Secret, process.env.TOKEN): a part of more than three bytes
// with a digit must look like an identifier.
func namedParts(v string) bool {
	for _, seg := range strings.Split(v, ".") {
		if len(seg) > 3 && !looksLikeIdentifier(seg) && strings.ContainsAny(seg, "0123456789") {
			return false
		}
	}
	return true
}

// looksLikeIdentifier reports a letters-and-underscores name built from
// word-length parts (getPassword, token_store, API_KEY), as opposed to a
// random string.
func looksLikeIdentifier(v string) bool {
	// The counts are summed from each byte's class, without a branch on
	// its case: a word starts at a capital after a small letter, and at
	// an underscore inside v.
	letters, words, upper, under := 0, 1, 0, 0
	prevLower := 0
	for i := 0; i < len(v); i++ {
		k := int(identClass[v[i]])
		if k == 0 {
			return false
		}
		lower, capital := k&identLower, k>>1&1
		letters += lower | capital
		upper += capital
		words += capital & prevLower
		under += k >> 2
		prevLower = lower
	}
	if under > 0 {
		words += under
		if v[0] == '_' {
			words--
		}
		if len(v) > 1 && v[len(v)-1] == '_' {
			words--
		}
	}
	if letters == 0 {
		return false
	}
	if upper == letters {
		return true // CONSTANT_NAME
	}
	return letters >= 3*words
}

// The classes of looksLikeCode's bytes: a letter, '_' and '$' are 0.
const (
	codeOther   = 1 // not in a name
	codeAtStart = 2 // may not start a part: a digit or a dot
	codeDot     = 4 | codeAtStart
)

var codeClass = func() (t [256]uint8) {
	for c := range t {
		switch b := byte(c); {
		case isLetter(b) || b == '_' || b == '$':
		case isDigit(b):
			t[c] = codeAtStart
		case b == '.':
			t[c] = codeDot
		default:
			t[c] = codeOther
		}
	}
	return t
}()

// The classes of looksLikeIdentifier's bytes; any other byte is 0.
const (
	identLower      = 1
	identCapital    = 2
	identUnderscore = 4
)

var identClass = func() (t [256]uint8) {
	for c := range t {
		switch b := byte(c); {
		case isLower(b):
			t[c] = identLower
		case isUpper(b):
			t[c] = identCapital
		case b == '_':
			t[c] = identUnderscore
		}
	}
	return t
}()

// setKeyValue are the bytes of a value after a label that only says key.
var setKeyValue = newSet("A-Za-z0-9_+/=.-")

// keyValue decides on the value of a label that only says "key", which
// also names cache entries, map keys and paths: it must be one random-
// looking token of 16 bytes or more with digits and letters, not a dotted
// name or a path.
// st is statsOf(val).
func keyValue(val string, st textStats) bool {
	n := len(val)
	if n < 16 || n > 512 || !allIn(val, setKeyValue) || !hasDigitAndLetter(val) {
		return false
	}
	if strings.Count(val, ".") >= 2 || strings.Contains(val, "/") && !strings.ContainsAny(val, "+=") && n < 40 {
		return false
	}
	if looksLikeCode(val) || looksLikeIdentifier(val) {
		return false
	}
	return st.entropy >= 3.2 && st.distinct >= 10
}

// maxBefore is the longest value matchBefore reads before its label.
const maxBefore = 256

// setBeforeValue are the bytes of a quoted value written before its label.
var setBeforeValue = notSet(" \t\r\n\v\f\"'`\\")

// beforeValue finds a quoted value that ends (with its closing quote) at
// e, as in "VALUE" == password or {"VALUE": "api_key"}: it returns the
// value's bounds, or vs < 0.
func beforeValue(s string, e int) (vs, ve int) {
	if e <= 0 {
		return -1, 0
	}
	q := s[e-1]
	if q != '"' && q != '\'' {
		return -1, 0
	}
	ve = e - 1
	vs = ve
	for lo := max(0, ve-maxBefore); vs > lo && setBeforeValue[s[vs-1]]; {
		vs--
	}
	if vs == 0 || s[vs-1] != q || vs == ve {
		return -1, 0
	}
	return vs, ve
}

// skipBlankBack skips at most 16 spaces and tabs before i.
func skipBlankBack(s string, i int) int {
	for lo := max(0, i-16); i > lo && (s[i-1] == ' ' || s[i-1] == '\t'); {
		i--
	}
	return i
}

// matchBefore is the generic rule for a value written before its label: a
// comparison ("VALUE" == password, 'VALUE' === apiToken) or a map from the
// value to its label ({"VALUE": "api_key"}, 'VALUE' => 'password'). The
// key s[a:b] must name a secret and the value pass the checks of an
// assignment's value.
func matchBefore(v *view, a, b, ks int) result {
	s := v.s
	vs, ve, lq, op := labelBefore(s, a)
	if vs < 0 {
		return noMatch
	}
	v.back = ks - vs
	if lq != 0 {
		if v.at(b) != int(lq) {
			return noMatch
		}
		if op == ':' {
			// the label is the map's value: a ',', '}' or the line's end follows
			k := v.skipBlank(b + 1)
			if c := v.at(k); c >= 0 && c != ',' && c != '}' && c != '\n' && c != '\r' && c != ')' {
				return noMatch
			}
		}
	} else if setIdent[byteAt(v, b)] {
		return noMatch
	}
	var nk normKey
	nk.set(s[a:b])
	kind := nk.kind()
	if kind == kindNone && keyLabel(s[a:b], &nk) && !notKeyWordBefore(s, a) {
		kind = kindKey
	}
	if kind == kindNone {
		return noMatch
	}
	val := s[vs:ve]
	ok, st := secretValue(val, true, kind)
	if !ok || kind == kindKey && !keyValue(val, st) {
		return noMatch
	}
	if !hasDigitAndLetter(val) || looksLikeIdentifier(val) || st.camelWords(val) {
		return noMatch // {"Content-Type": "api_key"}: a name, not a secret
	}
	return result{start: vs, end: ve, id: idGeneric}
}

// labelBefore finds the quoted value written before the label that starts
// at a ("VALUE" == password, {"VALUE": "api_key"}): its bounds (vs < 0 when
// there is none), the label's opening quote (0 when it has none) and the
// operator between them ('=' for == and ===, ':' for : and =>). It reads
// only text before a.
func labelBefore(s string, a int) (vs, ve int, lq, op byte) {
	p := a
	if c := s[p-1]; c == '"' || c == '\'' {
		lq = c
		p--
	} else if c == '$' {
		p-- // PHP: 'VALUE' == $password
	}
	p = skipBlankBack(s, p)
	if p == 0 {
		return -1, 0, 0, 0
	}
	// the operator, read back from its last byte: ===, ==, => or :
	switch s[p-1] {
	case '=':
		switch {
		case p >= 3 && s[p-2] == '=' && s[p-3] == '=':
			op, p = '=', p-3
		case p >= 2 && s[p-2] == '=':
			op, p = '=', p-2
		default:
			return -1, 0, 0, 0
		}
	case '>':
		if p < 2 || s[p-2] != '=' {
			return -1, 0, 0, 0
		}
		op, p = ':', p-2
	case ':':
		op, p = ':', p-1
	default:
		return -1, 0, 0, 0
	}
	if op == ':' && lq == 0 {
		return -1, 0, 0, 0
	}
	vs, ve = beforeValue(s, skipBlankBack(s, p))
	return vs, ve, lq, op
}

// assignStart is the earliest position at which the generic rule's span
// for the keyword at ks, whose key name starts at a (keyStart), can start:
// a value written before its label, or the keyword itself. It reads only
// text before ks, so a Stream can hold that much back before the rule has
// run.
func assignStart(s string, ks, a int) int {
	if a == 0 || a >= 3 && s[a-3:a] == "://" {
		return ks
	}
	if vs, _, _, _ := labelBefore(s, a); vs >= 0 {
		return min(vs, ks)
	}
	return ks
}

// keyStart is where the key name that holds the keyword at ks starts.
func keyStart(s string, ks int) int {
	lo := max(0, ks-128)
	t := s[lo:ks] // the walk reads t without bounds checks
	a := len(t)
	for a > 0 && trailIdent[t[a-1]] {
		a--
	}
	return lo + a
}

// beforeHold is where a Stream must hold text back so that a value written
// before its label can still be masked when the label arrives: the start of
// a quoted token-like value at the end of s, possibly followed by blanks,
// an operator, a quote and the first bytes of a label. It returns len(s)
// when there is none. The stream keeps where the runs of setBeforeValue
// and setIdent bytes that end s start (trail), so that it need not walk
// them back on each delta: beforeHold brings them up to date over the
// text that arrived since it last looked.
func beforeHold(s string, t *trail) int {
	t.grow(s)
	hold := len(s)
	// inside an open quoted value
	i := max(t.value, len(s)-maxBefore)
	if i > 0 && i < len(s) && (s[i-1] == '"' || s[i-1] == '\'') {
		hold = i - 1
	}
	// a closed value, then blanks, an operator and part of a label
	p := max(t.ident, len(s)-128)
	if p == 0 || !setBeforeLabel[s[p-1]] {
		return hold // no quote, blank or operator before the label
	}
	if s[p-1] == '"' || s[p-1] == '\'' || s[p-1] == '$' {
		if p == len(s) {
			// the quote that ends s may close the value itself, with
			// the operator and the label still to come
			if vs, _ := beforeValue(s, p); vs >= 0 && vs-1 < hold {
				hold = vs - 1
			}
		}
		p--
	}
	p = skipBlankBack(s, p)
	if p == 0 || !setOpQuote[s[p-1]] {
		return hold // no operator or closing quote
	}
	for k := 0; k < 3 && p > 0 && (s[p-1] == '=' || s[p-1] == ':' || s[p-1] == '>'); k++ {
		p--
	}
	if vs, _ := beforeValue(s, skipBlankBack(s, p)); vs >= 0 && vs-1 < hold {
		hold = vs - 1
	}
	return hold
}

// setOpQuote are the operators and quotes between a value and its label.
var setOpQuote = newSet("=:>\"'")

// setBeforeLabel are the bytes beforeHold may find right before a label.
var setBeforeLabel = newSet(" \t=:>\"'$")

// trail is where the runs of bytes that beforeHold looks back over start
// in the stream's retained text up to end.
type trail struct {
	value int // the run of setBeforeValue bytes
	ident int // the run of setIdent bytes
	end   int
}

// grow updates t for s, which is t's text with bytes appended from
// position t.end on.
func (t *trail) grow(s string) {
	// setIdent is a subset of setBeforeValue: one walk back over the new
	// bytes d finds both
	from := t.end
	t.end = len(s)
	d := s[from:]
	i := len(d)
	for i > 0 && trailIdent[d[i-1]] {
		i--
	}
	if i == 0 {
		return // both runs go on
	}
	t.ident = from + i
	for i > 0 && trailValue[d[i-1]] {
		i--
	}
	if i > 0 {
		t.value = from + i
	}
}

// trailIdent and trailValue are setIdent and setBeforeValue as arrays of
// their own, which trail.grow's and keyStart's loops read without loading
// a pointer.
var trailIdent, trailValue = *setIdent, *setBeforeValue

// shift moves t's positions n bytes to the left (the text lost n bytes at
// its start).
func (t *trail) shift(n int) {
	t.value, t.ident, t.end = max(0, t.value-n), max(0, t.ident-n), max(0, t.end-n)
}
