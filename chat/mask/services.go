package mask

import (
	"encoding/base64"
	"strings"
)

// publishedGoogleKeys are Google API keys that Google itself publishes in
// SDKs, samples and documentation (gitleaks keeps the same list as its
// allow-list): they identify a public project, they grant nothing, and
// masking them in a review would only hide which sample is meant.
var publishedGoogleKeys = map[string]bool{
	"AIzaSyabcdefghijklmnopqrstuvwxyz1234567": true,
	"AIzaSyAnLA7NfeLquW1tJFpx_eQCxoX-oo6YyIs": true,
	"AIzaSyCkEhVjf3pduRDt6d1yKOMitrUEke8agEM": true,
	"AIzaSyDMAScliyLx7F0NPDEJi1QmyCgHIAODrlU": true,
	"AIzaSyD3asb-2pEZVqMkmL6M9N6nHZRR_znhrh0": true,
	"AIzayDNSXIbFmlXbIE6mCzDLQAqITYefhixbX4A": true,
	"AIzaSyAdOS2zB6NCsk1pCdZ4-P6GBdi_UUPwX7c": true,
	"AIzaSyASWm6HmTMdYWpgMnjRBjxcQ9CKctWmLd4": true,
	"AIzaSyANUvH9H9BsUccjsu2pCmEkOPjjaXeDQgY": true,
	"AIzaSyA5_iVawFQ8ABuTZNUdcwERLJv_a_p4wtM": true,
	"AIzaSyA4UrcGxgwQFTfaI3no3t7Lt1sjmdnP5sQ": true,
	"AIzaSyDSb51JiIcB6OJpwwMicseKRhhrOq1cS7g": true,
	"AIzaSyBF2RrAIm4a0mO64EShQfqfd2AFnzAvvuU": true,
	"AIzaSyBcE-OOIbhjyR83gm4r2MFCu4MJmprNXsw": true,
	"AIzaSyB8qGxt4ec15vitgn44duC5ucxaOi4FmqE": true,
	"AIzaSyA8vmApnrHNFE0bApF4hoZ11srVL_n0nvY": true,
}

// serviceDef is a credential whose format is only distinctive next to the
// name of its service: a key = value pair whose key names the service and
// whose value has the service's shape is masked even when the key does not
// say "token" or "secret" and the value has little entropy (digits only, a
// UUID). The key names are matched in the normalised key (lower case,
// without '_', '-', '.').
type serviceDef struct {
	keys  []string // service names as they appear in key names
	raw   []string // extra spellings to look for in the text (message_bird)
	id    ruleID
	shape func(v string) bool
	// cased: the name must be written lower case, capitalised or upper
	// case (SUMO_ID, sumoKey, but not sumOfExposures)
	cased bool
}

var serviceDefs = []serviceDef{
	{[]string{"discord"}, nil, idDiscordSecret, func(v string) bool { return digitsLen(v, 17, 20) || alnumLen(v, 32, 32) }, false},
	{[]string{"asana"}, nil, idAsana, func(v string) bool { return digitsLen(v, 16, 16) || alnumLen(v, 32, 32) }, false},
	{[]string{"sumo"}, nil, idSumoLogic, func(v string) bool {
		return len(v) == 14 && strings.HasPrefix(v, "su") && allIn(v, setAlnum) || alnumLen(v, 64, 64)
	}, true},
	{[]string{"contribsys"}, nil, idSidekiq, func(v string) bool {
		return len(v) == 17 && v[8] == ':' && allIn(v[:8], setHexLower) && allIn(v[9:], setHexLower)
	}, false},
	{[]string{"sonar"}, nil, idSonar, func(v string) bool {
		return alnumLen(v, 40, 40) || len(v) == 44 && (strings.HasPrefix(v, "squ_") || strings.HasPrefix(v, "sqp_") || strings.HasPrefix(v, "sqa_")) && allIn(v[4:], setAlnum)
	}, false},
	{[]string{"jfrog", "artifactory", "bintray", "xray"}, nil, idJFrog, func(v string) bool { return alnumLen(v, 64, 64) || alnumLen(v, 73, 73) }, false},
	{[]string{"mapbox"}, nil, idMapboxPublic, func(v string) bool {
		return len(v) == 86 && strings.HasPrefix(v, "pk.") && v[63] == '.' && allIn(v[3:63], setAlnum) && allIn(v[64:], setAlnum)
	}, false},
	{[]string{"heroku"}, nil, idHeroku, isUUID, false},
	{[]string{"hubspot", "messagebird", "snyk"}, []string{"message_bird", "message-bird"}, idUUIDKey, isUUID, false},
	{[]string{"cloudflare"}, nil, idCloudflare, func(v string) bool {
		return len(v) == 40 && allIn(v, setB64URL) || len(v) == 37 && allIn(v, setHex)
	}, false},
	{[]string{"airtable"}, nil, idAirtable, func(v string) bool {
		return len(v) == 82 && strings.HasPrefix(v, "pat") && v[17] == '.' && allIn(v[3:17], setAlnum) && allIn(v[18:], setHex) ||
			alnumLen(v, 17, 17)
	}, false},
	{[]string{"mailchimp"}, nil, idMailchimp, func(v string) bool {
		return len(v) == 37 && allIn(v[:32], setHex) && v[32:35] == "-us" && allIn(v[35:], setDigit)
	}, false},
	{[]string{"facebook"}, nil, idFacebook, func(v string) bool {
		if i := strings.IndexAny(v, "|%"); i == 15 || i == 16 {
			return allIn(v[:i], setDigit) && len(v)-i-1 >= 27 && len(v)-i-1 <= 40 && allIn(v[i+1:], setB64URL)
		}
		return len(v) == 32 && allIn(v, setHex)
	}, false},
	{[]string{"telegr"}, nil, idTelegram, telegramToken, false},
}

func digitsLen(v string, lo, hi int) bool { return len(v) >= lo && len(v) <= hi && allIn(v, setDigit) }
func alnumLen(v string, lo, hi int) bool  { return len(v) >= lo && len(v) <= hi && allIn(v, setAlnum) }

// telegramToken: a bot id of 5 to 16 digits, ':', 'A' and 34 more characters.
func telegramToken(v string) bool {
	i := strings.IndexByte(v, ':')
	return i >= 5 && i <= 16 && allIn(v[:i], setDigit) && len(v) == i+36 && v[i+1] == 'A' && allIn(v[i+2:], setB64URL)
}

// serviceKeywords lists what the prefilter looks for to find the keys of
// serviceDefs.
func serviceKeywords() []string {
	var kws []string
	for _, d := range serviceDefs {
		kws = append(kws, d.keys...)
		kws = append(kws, d.raw...)
	}
	return kws
}

// serviceOf returns the serviceDef the key names, or nil; k is key
// normalised.
func serviceOf(key string, k *normKey) *serviceDef {
	names := keyNames()
	if k.names&names.svcMask == 0 {
		return nil
	}
	bits := names.svcBits
	for i := range serviceDefs {
		d := &serviceDefs[i]
		for j, name := range d.keys {
			if !k.has(bits[i][j]) {
				continue
			}
			if d.cased && !strings.Contains(key, name) && !strings.Contains(key, strings.ToUpper(name)) &&
				!strings.Contains(key, strings.ToUpper(name[:1])+name[1:]) {
				continue
			}
			return d
		}
	}
	return nil
}

// matchJWTBase64 masks a base64-encoded JWT ("ZXlK" is base64 of "eyJ"), as
// found in Kubernetes secrets and CI variables.
func matchJWTBase64(v *view, ks, ke int, lit string, sp *spec) result {
	s := v.s
	if sp.rejects(s, ks, ke, lit) {
		return noMatch
	}
	j := v.run(ks, setB64Any, 8193)
	if n := j - ks; n < 60 || n > 8192 || wordAt(v, j) {
		return noMatch
	}
	if !decodesToJWT(s[ks:j]) {
		return noMatch
	}
	return result{start: ks, end: j, id: idJWT}
}

var setB64Any = newSet("A-Za-z0-9+/=_-")

// decodesToJWT reports whether b is base64 (standard or URL alphabet, padded
// or not) of a JWT: three or more base64url segments separated by dots.
func decodesToJWT(b string) bool {
	b = strings.TrimRight(b, "=")
	if len(b)%4 == 1 {
		return false
	}
	enc := base64.RawStdEncoding
	if strings.ContainsAny(b, "-_") {
		enc = base64.RawURLEncoding
	}
	dec, err := enc.DecodeString(b)
	if err != nil {
		return false
	}
	t := string(dec)
	if !strings.HasPrefix(t, "eyJ") || strings.Count(t, ".") < 2 {
		return false
	}
	return allIn(t, setB64URLDot)
}

// matchCurlUser masks the password of curl's -u/--user user:password.
func matchCurlUser(v *view, ks, ke int, lit string, sp *spec) result {
	s := v.s
	if sp.rejects(s, ks, ke, lit) || wordAt(v, ke) {
		return noMatch
	}
	i := ke
	for i-ke < 1024 {
		c := v.at(i)
		if c < 0 || c == '\n' && !(i > 0 && s[i-1] == '\\') || c == '|' || c == ';' {
			return noMatch
		}
		if c == ' ' || c == '\t' || c == '\n' {
			i++
			continue
		}
		// an argument starts at i
		switch {
		case v.hasPrefix(i, "-u") && (v.at(i+2) == ' ' || isUserStart(v.at(i+2))):
			return curlCredential(v, i+2)
		case v.hasPrefix(i, "--user") && (v.at(i+6) == ' ' || v.at(i+6) == '='):
			return curlCredential(v, i+7)
		}
		// skip the argument, quotes included
		var q int
		for i-ke < 1024 {
			c := v.at(i)
			if c < 0 || q == 0 && (c == ' ' || c == '\t' || c == '\n') {
				break
			}
			if q == 0 && (c == '"' || c == '\'') {
				q = c
			} else if c == q {
				q = 0
			}
			i++
		}
	}
	return noMatch
}

func isUserStart(c int) bool { return c >= 0 && (setWord[c] || c == '"' || c == '\'') }

// curlCredential reads user:password at i (after blanks) and masks the
// password.
func curlCredential(v *view, i int) result {
	s := v.s
	i = v.skipBlank(i)
	var q int
	if c := v.at(i); c == '"' || c == '\'' {
		q = c
		i++
	}
	u := i
	for {
		c := v.at(u)
		if c < 0 || c == ':' || isSpace(c) || c == q || c == '"' || c == '\'' || u-i > 256 {
			break
		}
		u++
	}
	if v.at(u) != ':' || u == i {
		return noMatch
	}
	p := u + 1
	pq := q
	if pq == 0 {
		if c := v.at(p); c == '"' || c == '\'' {
			pq = c
			p++
		}
	}
	e := p
	for {
		c := v.at(e)
		if c < 0 || c == '\n' || e-p > 512 || pq != 0 && c == pq || pq == 0 && isSpace(c) {
			break
		}
		e++
	}
	if pq != 0 && v.at(e) != pq {
		return noMatch
	}
	pw := s[p:e]
	if len(pw) < 3 || isPlaceholder(pw) || urlPlaceholder(pw) || pw == s[i:u] || strings.ContainsAny(pw, "<>") {
		return noMatch
	}
	return result{start: p, end: e, id: idBasicAuth}
}

// matchTeamsWebhook masks the path of a Microsoft Teams incoming webhook URL.
func matchTeamsWebhook(v *view, ks, ke int, _ string, _ *spec) result {
	j := v.run(ke, setTeams, 401)
	if n := j - ke; n < 100 || n > 400 || wordAt(v, j) {
		return noMatch
	}
	if !strings.Contains(v.s[ke:j], "/IncomingWebhook/") {
		return noMatch
	}
	return result{start: ke, end: j, id: idTeamsWebhook}
}

var setTeams = newSet("A-Za-z0-9@/-")

// sentryOrgToken: sntrys_ then base64 of a JSON claim set naming its region
// URL, '_' and 43 characters.
func sentryOrgToken(b string) bool {
	if !strings.HasPrefix(b, "eyJpYXQiO") {
		return false
	}
	u := strings.LastIndexByte(b, '_')
	if u < 0 || len(b)-u-1 != 43 || !allIn(b[u+1:], setB64NoPad) {
		return false
	}
	claims := b[:u]
	if !strings.Contains(claims, "LCJyZWdpb25fdXJs") && !strings.Contains(claims, "InJlZ2lvbl91cmwi") && !strings.Contains(claims, "cmVnaW9uX3VybCI6") {
		return false
	}
	return statsOf(b).entropy >= 4.5
}

var setB64NoPad = newSet("A-Za-z0-9+/")
