package mask

import "strings"

// keyKind classifies a key name in a key = value assignment.
type keyKind uint8

const (
	kindNone     keyKind = iota
	kindPassword         // password, passwd, pwd, pass, passphrase
	kindSecret           // secret, token, api key, access key, private key, ...
)

const maxValue = 4096

// normKey is a key name lowered with '_', '-', '.', '$' and '@' removed,
// keeping its last len(b) bytes (the end of a key decides what it is).
type normKey struct {
	b [96]byte
	n int
}

func (k *normKey) set(ident string) {
	var tmp [96]byte
	n := 0
	for i := len(ident) - 1; i >= 0 && n < len(tmp); i-- {
		c := ident[i]
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		default:
			continue
		}
		tmp[n] = c
		n++
	}
	for i := 0; i < n; i++ {
		k.b[i] = tmp[n-1-i]
	}
	k.n = n
}

func (k *normKey) str() string { return string(k.b[:k.n]) }

func (k *normKey) hasSuffix(p string) bool {
	return k.n >= len(p) && string(k.b[k.n-len(p):k.n]) == p
}

func (k *normKey) contains(p string) bool {
	return strings.Contains(string(k.b[:k.n]), p)
}

var passwordSuffixes = []string{"password", "passwd", "pwd", "pass", "passphrase"}

var secretSuffixes = []string{
	"secret", "secretkey", "secretkeybase", "token", "apikey", "accesskey", "privatekey",
	"appkey", "authkey", "masterkey", "encryptionkey", "signingkey", "credential",
	"credentials", "sessionkey", "accountkey", "licensekey",
}

func (k *normKey) kind() keyKind {
	for _, s := range passwordSuffixes {
		if k.hasSuffix(s) {
			return kindPassword
		}
	}
	for _, s := range secretSuffixes {
		if k.hasSuffix(s) {
			return kindSecret
		}
	}
	return kindNone
}

// matchAssign is the generic rule: a key whose name says it holds a secret,
// an assignment operator (= : := => and their quoted JSON/YAML forms), and a
// value that looks like a secret rather than code, a reference or a
// placeholder. Only the value is masked.
func matchAssign(v *view, ks, ke int, _ string, _ *spec) result {
	s := v.s
	a := ks
	for a > 0 && setIdent[s[a-1]] && ks-a < 128 {
		a--
	}
	if a >= 3 && s[a-3:a] == "://" {
		return noMatch // user name of a URL: https://x-access-token:...@host
	}
	b := v.run(ke, setIdent, 128)
	// The assignment operator is checked before the key name: most keyword
	// hits are words in prose or code and fail here cheaply.
	i := b
	switch c := v.at(i); {
	case c == '\\' && v.at(i+1) == '"':
		i += 2
	case c == '"' || c == '\'' || c == '`':
		i++
	}
	if v.at(i) == ']' {
		i++ // config['SECRET_KEY'] = ...
	}
	i = v.skipBlank(i)
	switch v.at(i) {
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
		switch v.at(i + 1) {
		case ':':
			return noMatch
		case '=':
			i += 2
		default:
			i++
		}
	default:
		return noMatch
	}
	var nk normKey
	nk.set(s[a:b])
	kind := nk.kind()
	if kind == kindNone {
		return noMatch
	}
	i = v.skipBlank(i)
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
	start, end := i, 0
	if q != 0 {
		j := i
		for {
			c := v.at(j)
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
	}
	val := s[start:end]
	if len(val) == 0 {
		return noMatch
	}
	if q == 0 && v.at(end) == '(' {
		return noMatch // a call: password = getPassword()
	}
	if id, ok := contextualID(&nk, val); ok {
		return result{start: start, end: end, id: id}
	}
	if !secretValue(val, q != 0, kind) {
		return noMatch
	}
	id := idGeneric
	if nk.contains("heroku") {
		id = idHeroku
	}
	return result{start: start, end: end, id: id}
}

// contextualID recognises values whose format is only distinctive next to
// their key name: AWS secret keys and session tokens, Twilio auth tokens,
// Datadog keys, Heroku keys and Discord bot tokens.
func contextualID(k *normKey, val string) (ruleID, bool) {
	switch {
	case (k.hasSuffix("secretaccesskey") || k.contains("aws") && (k.hasSuffix("secretkey") || k.hasSuffix("secret"))) &&
		len(val) == 40 && allIn(val, setB64) && !lowVariety(val) && hasDigitAndLetter(val):
		return idAWSSecretKey, true
	case (k.hasSuffix("sessiontoken") || k.hasSuffix("securitytoken")) && len(val) >= 100 && allIn(val, setAWSSession) && !lowVariety(val):
		return idAWSSessionToken, true
	case k.contains("twilio") && len(val) == 32 && allIn(val, setHexLower) && !lowVariety(val):
		return idTwilioAuth, true
	case (k.contains("datadog") || strings.HasPrefix(k.str(), "dd")) && (k.hasSuffix("apikey") || k.hasSuffix("appkey")) &&
		(len(val) == 32 || len(val) == 40) && allIn(val, setHexLower) && !lowVariety(val):
		return idDatadog, true
	case k.contains("heroku") && isUUID(val):
		return idHeroku, true
	case k.contains("discord") && discordToken(val):
		return idDiscordBot, true
	}
	return 0, false
}

var setAWSSession = newSet("A-Za-z0-9+/=%")

func allIn(v string, set *byteSet) bool {
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
	p := strings.Split(v, ".")
	if len(p) != 3 || len(p[0]) < 23 || len(p[0]) > 28 || len(p[1]) != 6 || len(p[2]) < 27 || len(p[2]) > 40 {
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
func secretValue(val string, quoted bool, kind keyKind) bool {
	n := len(val)
	if strings.Contains(val, "://") || strings.HasPrefix(val, "-----BEGIN") {
		return false // URL and PEM rules handle these
	}
	if isPlaceholder(val) {
		return false
	}
	if !quoted && looksLikeCode(val) {
		return false
	}
	st := statsOf(val)
	if kind == kindPassword {
		if n < 6 || st.distinct < 4 || st.entropy < 2 {
			return false
		}
		if st.lower == n && n < 10 {
			return false // a word: string, required, letmein
		}
		return true
	}
	if n < 8 || st.distinct < 5 {
		return false
	}
	if st.classes() == 1 && (n < 20 || st.entropy < 3.3) {
		return false
	}
	minEnt := 3.0
	switch {
	case n < 12:
		minEnt = 2.5
	case n < 20:
		minEnt = 2.8
	}
	return st.entropy >= minEnt
}

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
	return false
}

var setLetterSep = newSet("A-Za-z_-")

// looksLikeCode reports unquoted values that are expressions, not
// literals: dotted paths (cfg.Secret, process.env.TOKEN) and identifiers
// that read like words (tokenStore, API_KEY, string).
func looksLikeCode(v string) bool {
	if !isLetter(v[0]) && v[0] != '_' && v[0] != '$' {
		return false
	}
	dots := 0
	segStart := true
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '.':
			if segStart {
				return false
			}
			dots++
			segStart = true
		case isLetter(c) || c == '_' || c == '$':
			segStart = false
		case isDigit(c):
			if segStart {
				return false
			}
		default:
			return false
		}
	}
	if segStart {
		return false // trailing dot
	}
	if dots > 0 {
		return true
	}
	return looksLikeIdentifier(v)
}

// looksLikeIdentifier reports a letters-and-underscores name built from
// word-length parts (getPassword, token_store, API_KEY), as opposed to a
// random string.
func looksLikeIdentifier(v string) bool {
	letters, words, upper := 0, 1, 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case 'a' <= c && c <= 'z':
			letters++
		case 'A' <= c && c <= 'Z':
			letters++
			upper++
			if i > 0 && 'a' <= v[i-1] && v[i-1] <= 'z' {
				words++
			}
		case c == '_':
			if i > 0 && i < len(v)-1 {
				words++
			}
		default:
			return false
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
