package mask

import (
	"strconv"
	"strings"
)

// saasDef is a prefixed token format of a service, declared by name: its
// rule id is allocated when the package starts (ruleOf), so that adding a
// format is one line. The prefix must be distinctive (an underscore or a
// dash in it, or upper case a word does not start with), and the body's
// byte set and length come from the service's published format.
type saasDef struct {
	rule     string
	prefixes []string
	body     *byteSet
	min, max int
	check    func(body string) bool
}

var (
	setAlnumDash = newSet("A-Za-z0-9-")
	setB64Std    = newSet("A-Za-z0-9+/=")
	setUUIDBody  = newSet("0-9a-fA-F-")
)

// saasDefs are the services' current token formats, from their own
// documentation of the prefix and the body. The token's left and right
// must not continue a word, the body must have the variety of a random
// string (no xxxx, 0000 or counting runs), and the check, when there is
// one, the published inner structure.
var saasDefs = []saasDef{
	{"prchat-token", []string{"prc_"}, setAlnum, 32, 255, nil},
	{"cloudflare-api-token", []string{"cfut_", "cfat_", "cfk_"}, setAlnum, 40, 80, nil},
	{"vercel-token", []string{"vcp_", "vci_", "vca_", "vcr_", "vck_"}, setAlnum, 24, 80, nil},
	{"netlify-token", []string{"nfp_", "nfc_", "nfo_", "nfu_"}, setAlnum, 36, 64, nil},
	{"render-api-key", []string{"rnd_"}, setAlnum, 32, 40, nil},
	{"buildkite-token", []string{"bkua_"}, setHexLower, 40, 40, nil},
	{"honeycomb-api-key", []string{"hcaik_", "hcxik_", "hcxmk_", "hcxlk_"}, setAlnum, 32, 70, nil},
	{"tailscale-key", []string{"tskey-api-", "tskey-auth-", "tskey-client-", "tskey-scim-", "tskey-webhook-"}, setAlnumDash, 20, 80, hasDashInside},
	{"typeform-token", []string{"tfp_"}, setB64URLDot, 40, 64, nil},
	{"prefect-api-key", []string{"pnu_", "pnb_"}, setAlnum, 36, 36, nil},
	{"pinecone-api-key", []string{"pcsk_"}, setWord, 40, 120, nil},
	{"langsmith-api-key", []string{"lsv2_pt_", "lsv2_sk_"}, setWord, 40, 48, nil},
	{"xai-api-key", []string{"xai-"}, setAlnum, 64, 96, nil},
	{"contentful-token", []string{"CFPAT-"}, setB64URL, 43, 43, nil},
	{"bitbucket-token", []string{"ATBB", "ATCTT3"}, newSet("A-Za-z0-9_=-"), 28, 300, nil},
	{"clojars-token", []string{"CLOJARS_"}, setHexLower, 60, 60, nil},
	{"duffel-token", []string{"duffel_test_", "duffel_live_"}, setB64URL, 43, 43, nil},
	{"frameio-token", []string{"fio-u-"}, setB64URL, 64, 64, nil},
	{"new-relic-key", []string{"NRJS-", "NRII-", "NRRA-", "NRAA-"}, setHex, 19, 40, nil},
	{"notion-api-token", []string{"secret_"}, setAlnum, 43, 43, nil},
	{"plaid-access-token", []string{"access-sandbox-", "access-production-", "access-development-"}, setUUIDBody, 36, 36, nil},
	{"readme-api-key", []string{"rdme_"}, setHexLower, 70, 70, nil},
	{"scalingo-token", []string{"tk-us-"}, setB64URL, 48, 48, nil},
	{"brevo-api-key", []string{"xkeysib-", "xsmtpsib-"}, setAlnumDash, 81, 81, func(b string) bool { return b[64] == '-' }},
	{"shippo-token", []string{"shippo_live_", "shippo_test_"}, setHexLower, 40, 40, nil},
	{"square-token", []string{"sq0atp-", "sq0csp-", "EAAA"}, setB64URL, 22, 100, nil},
	{"google-oauth-token", []string{"1//0"}, setB64URL, 40, 512, nil},
	{"jfrog-token", []string{"AKCp", "cmVmdGtu"}, setAlnum, 60, 80, nil},
	{"sonar-api-token", []string{"squ_", "sqp_", "sqa_"}, setHexLower, 40, 40, nil},
	{"supabase-secret-key", []string{"sb_secret_"}, setB64URL, 24, 80, nil},
	{"neon-api-key", []string{"napi_"}, setAlnum, 60, 72, nil},
	{"resend-api-key", []string{"re_"}, setWord, 33, 33, func(b string) bool { return b[8] == '_' && strings.Count(b, "_") == 1 }},
	{"honeybadger-token", []string{"hbp_"}, setAlnum, 36, 36, nil},
	{"deno-deploy-token", []string{"ddp_", "ddo_"}, setAlnum, 36, 40, nil},
	{"akamai-token", []string{"akab-"}, setAlnumDash, 33, 40, hasDashInside},
	{"pubnub-secret-key", []string{"sec-c-"}, setB64, 40, 64, nil},
	{"paddle-api-key", []string{"pdl_live_apikey_", "pdl_sdbx_apikey_"}, setWord, 30, 80, nil},
	{"jina-api-key", []string{"jina_"}, setWord, 56, 70, nil},
	{"tavily-api-key", []string{"tvly-dev-", "tvly-prod-", "tvly-"}, setAlnum, 32, 48, nil},
	{"firecrawl-api-key", []string{"fc-"}, setHexLower, 32, 32, nil},
	{"e2b-api-key", []string{"e2b_"}, setHexLower, 40, 40, nil},
	{"stytch-secret", []string{"secret-live-", "secret-test-"}, setB64URL, 36, 40, nil},
	{"onesignal-api-key", []string{"os_v2_app_", "os_v2_org_"}, setLowerNum, 100, 130, nil},
	{"coralogix-key", []string{"cxtp_"}, setAlnum, 30, 30, nil},
	{"adafruit-io-key", []string{"aio_"}, setAlnum, 28, 28, nil},
	{"flutterwave-secret-key", []string{"FLWSECK_TEST-", "FLWSECK-"}, setAlnumDash, 34, 34, func(b string) bool { return allIn(b[:32], setHex) && b[32:] == "-X" }},
	{"riot-api-key", []string{"RGAPI-"}, setUUIDBody, 36, 36, func(b string) bool { return isUUID(b) }},
	{"twitch-token", []string{"oauth:"}, setLowerNum, 30, 30, nil},
	{"clickup-token", []string{"pk_"}, newSet("A-Z0-9_"), 40, 48, clickupBody},
	{"klaviyo-api-key", []string{"pk_"}, setHexLower, 34, 34, nil},
	{"woocommerce-key", []string{"ck_", "cs_"}, setHexLower, 40, 40, nil},
	{"hubspot-token", []string{"pat-na1-", "pat-eu1-", "pat-na2-", "pat-ap1-"}, setUUIDBody, 36, 36, func(b string) bool { return isUUID(b) }},
	{"launchdarkly-key", []string{"sdk-", "api-"}, setUUIDBody, 36, 36, func(b string) bool { return isUUID(b) }},
	{"octopus-api-key", []string{"API-"}, setUpperNum, 26, 32, nil},
	{"tencent-secret-id", []string{"AKID"}, setAlnum, 32, 36, nil},
	{"yandex-api-key", []string{"AQVN", "AQVE"}, setB64URL, 35, 38, nil},
	{"dropbox-token", []string{"sl.u.", "sl.B", "sl.A"}, setB64URL, 120, 1400, nil},
	{"nightfall-api-key", []string{"NF-"}, setAlnum, 32, 32, nil},
	{"circleci-token", []string{"CCIPAT_", "CCIRT_"}, setWord, 40, 80, nil},
	{"dbt-cloud-token", []string{"dbtc_", "dbtu_"}, setB64URL, 40, 80, nil},
	{"braintree-access-token", []string{"access_token$production$", "access_token$sandbox$"}, newSet("a-z0-9$"), 49, 49, func(b string) bool { return b[16] == '$' }},
	{"ngrok-token", []string{"ngrok_"}, setAlnum, 40, 64, nil},
	{"jenkins-secret", []string{"{AQAAABAAAA"}, setB64Std, 20, 4096, nil},
}

// saasIDs and nearIDs are the rule ids of saasDefs and nearDefs, by index.
var saasIDs, nearIDs []ruleID

func init() {
	for _, d := range saasDefs {
		saasIDs = append(saasIDs, ruleOf(d.rule))
	}
	for _, d := range nearDefs {
		nearIDs = append(nearIDs, ruleOf(d.rule))
	}
}

func hasDashInside(b string) bool {
	i := strings.IndexByte(b, '-')
	return i > 0 && i < len(b)-16
}

// clickupBody: digits, '_', 32 upper-case letters and digits.
func clickupBody(b string) bool {
	i := strings.IndexByte(b, '_')
	return i >= 6 && allIn(b[:i], setDigit) && len(b)-i-1 == 32 && allIn(b[i+1:], setUpperNum)
}

// nearDef is a service of the keyword dictionary: when one of its names
// appears (as a word or a part of an identifier), a value of one of its
// shapes within the next nearWindow bytes is its credential, whatever
// separates them (key = value, "airbrake Key=…", a log line, a table).
type nearDef struct {
	rule   string
	names  []string
	shapes []shape
}

// parseNearDefs reads the dictionary's table: one service a line, its rule
// name, its names (separated by commas) and its shapes (parseShapes).
func parseNearDefs(table string) []nearDef {
	var out []nearDef
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 {
			panic("mask: bad dictionary line " + line)
		}
		out = append(out, nearDef{rule: f[0], names: strings.Split(f[1], ","), shapes: parseShapes(strings.Join(f[2:], " "))})
	}
	return out
}

// nearWindow is how far after a service's name its credential may start.
const nearWindow = 96

// maxNearValue is longer than any shape of nearDefs.
const maxNearValue = 100

// shape is a value's form: a byte set and a length range, or a UUID.
type shape struct {
	set      *byteSet
	min, max int
	uuid     bool
	hex      bool // hexadecimal: needs a digit and a letter
}

// shapeSets are the byte sets of parseShapes' names.
var shapeSets = map[string]*byteSet{
	"hex": setHex, "alnum": setAlnum, "b64url": setB64URL, "b64": setB64Std,
	"upper": setUpperNum, "lower": setLowerNum, "digits": setDigit,
}

// parseShapes reads shapes written as "hex32", "alnum40", "b64url43",
// "upper16" (A-Z0-9), "lower30" (a-z0-9), "digits16", "b64_88", "uuid" or
// with a range "alnum32-40".
func parseShapes(spec string) []shape {
	var out []shape
	for _, f := range strings.Fields(spec) {
		if f == "uuid" {
			out = append(out, shape{uuid: true, min: 36, max: 36})
			continue
		}
		i := len(f)
		for i > 0 && (isDigit(f[i-1]) || f[i-1] == '-') {
			i--
		}
		name, lens := f[:i], f[i:]
		name = strings.TrimSuffix(name, "_")
		lo, hi, ok := strings.Cut(lens, "-")
		if !ok {
			hi = lo
		}
		var sh shape
		sh.min, _ = strconv.Atoi(lo)
		sh.max, _ = strconv.Atoi(hi)
		set, ok := shapeSets[name]
		if !ok {
			panic("mask: unknown shape " + f)
		}
		sh.set, sh.hex = set, name == "hex"
		out = append(out, sh)
	}
	return out
}

// fits reports whether v has the length and bytes of one of d's shapes,
// the cheap part of shape.matches.
func (d *nearDef) fits(v string) bool {
	for _, sh := range d.shapes {
		if len(v) >= sh.min && len(v) <= sh.max && (sh.uuid || allIn(v, sh.set)) {
			return true
		}
	}
	return false
}

func (sh shape) matches(v string) bool {
	if len(v) < sh.min || len(v) > sh.max {
		return false
	}
	if sh.uuid {
		return isUUID(v)
	}
	if !allIn(v, sh.set) {
		return false
	}
	if sh.set == setDigit {
		return distinctAtLeast(v, 6)
	}
	if !hasDigitAndLetter(v) {
		return false
	}
	st := statsOf(v)
	if sh.hex {
		// short hex strings have little entropy even when random
		return st.distinct >= 6 && (st.entropy >= 3 || len(v) < 24 && st.entropy >= 2.4)
	}
	minEnt := 3.4
	if len(v) < 24 {
		minEnt = 2.9
	}
	return st.entropy >= minEnt && !looksLikeIdentifier(v) && !st.camelWords(v)
}

// nearDefs is the keyword dictionary: services whose credentials have no
// prefix of their own, with the shapes their documentation gives, one
// service a line (rule name, names separated by commas, shapes). Names are
// chosen so that they are not ordinary English or programming words.
var nearDefs = parseNearDefs(`
airbrake-api-key         airbrake                 hex32 hex40
algolia-api-key          algolia                  hex32
bugsnag-api-key          bugsnag                  hex32
rollbar-token            rollbar                  hex32
raygun-api-key           raygun                   alnum22-24
mandrill-api-key         mandrill                 b64url22
sparkpost-api-key        sparkpost                hex40
postmark-token           postmark                 uuid
pagerduty-token          pagerduty                b64url20 b64url32
opsgenie-api-key         opsgenie                 uuid
loggly-token             loggly                   uuid
logdna-key               logdna,mezmo             hex32
confluent-api-key        confluent                upper16 b64_64
plivo-token              plivo                    upper20 alnum40
nexmo-api-secret         nexmo,vonage             alnum16
pusher-key               pusher                   hex20
braintree-key            braintree                hex32
paypal-client-secret     paypal                   b64url80
binance-api-key          binance                  alnum64
bitfinex-api-key         bitfinex                 alnum43
zendesk-token            zendesk                  alnum40
freshdesk-api-key        freshdesk                alnum20
okta-api-token           okta                     b64url42
auth0-client-secret      auth0                    b64url64
onelogin-secret          onelogin                 hex64
circleci-token           circleci                 hex40
travis-token             travis                   b64url22
codecov-token            codecov                  uuid
coveralls-token          coveralls                alnum32-37
netlify-token            netlify                  b64url43
vercel-token             vercel                   alnum24
linode-token             linode                   hex64
vultr-api-key            vultr                    upper36
hetzner-token            hetzner                  alnum64
scaleway-secret-key      scaleway                 uuid
fastly-api-token         fastly                   b64url32
tomtom-api-key           tomtom                   alnum32
openweather-api-key      openweather              hex32
weatherstack-api-key     weatherstack             hex32
ipstack-api-key          ipstack                  hex32
ipinfo-token             ipinfo                   hex14
newsapi-key              newsapi                  hex32
spotify-client-secret    spotify                  hex32
twitter-secret           twitter                  alnum50 alnum25
linkedin-client-secret   linkedin                 alnum16
discord-client-secret    discord                  b64url32
twitch-client-secret     twitch                   lower30
dropbox-app-secret       dropbox                  lower15
trello-token             trello                   hex32 hex64
todoist-token            todoist                  hex40
jira-api-token           jira,confluence          alnum24
zoom-client-secret       zoom_,zoomus             alnum32
sentry-token             sentry                   hex64
vouchery-api-key         vouchery                 hex32
mailjet-api-key          mailjet                  hex32
sendinblue-api-key       sendinblue               hex64
messagebird-api-key      messagebird              alnum25
clicksend-api-key        clicksend                upper36
telnyx-api-key           telnyx                   b64url32-60
cloudinary-api-secret    cloudinary               b64url27
imgur-client-secret      imgur                    hex40
giphy-api-key            giphy                    alnum32
unsplash-access-key      unsplash                 b64url43
mapquest-api-key         mapquest                 alnum32
positionstack-api-key    positionstack            hex32
abstractapi-key          abstractapi              hex32
browserstack-access-key  browserstack             alnum20
saucelabs-access-key     saucelabs,sauce_         uuid
wakatime-api-key         wakatime                 uuid
gitter-token             gitter                   hex40
heroku-api-key           heroku                   uuid
datadog-api-key          datadog                  hex32 hex40
twilio-auth-token        twilio                   hex32
wandb-api-key            wandb                    hex40
cohere-api-key           cohere                   alnum40
mistral-api-key          mistral                  alnum32
deepgram-api-key         deepgram                 hex40
assemblyai-api-key       assemblyai               hex32
elevenlabs-api-key       elevenlabs               hex32
pinata-api-key           pinata                   hex20 hex64
etherscan-api-key        etherscan                upper34
infura-api-key           infura                   hex32
alchemy-api-key          alchemy                  b64url32
moralis-api-key          moralis                  alnum64
coinmarketcap-api-key    coinmarketcap            uuid
shodan-api-key           shodan                   alnum32
virustotal-api-key       virustotal               hex64
hunter-api-key           hunterio,hunter_io       hex40
clearbit-api-key         clearbit                 b64url35
fullcontact-api-key      fullcontact              alnum32
segment-write-key        segment_write,segmentio  alnum32
mixpanel-secret          mixpanel                 hex32
intercom-token           intercom                 b64_60
calendly-token           calendly                 hex64
typeform-token           typeform                 b64url44
surveymonkey-token       surveymonkey             b64url40-70
aircall-token            aircall                  hex32
bitly-token              bitly                    hex40
buttercms-token          buttercms                hex40
storyblok-token          storyblok                alnum22-24
contentstack-token       contentstack             alnum24-35
prismic-token            prismic                  b64url60-80
gocardless-token         gocardless               b64url40
mollie-api-key           mollie                   alnum30
razorpay-secret          razorpay                 alnum24
paystack-secret          paystack                 hex40
lob-api-key              lob_                     hex35
easypost-api-key         easypost                 alnum22
shipengine-api-key       shipengine               b64url43
aftership-api-key        aftership                uuid
ably-api-key             ably_,ablyio             b64url43
kraken-api-secret        krakenio,kraken_api      b64_88
jotform-api-key          jotform                  hex32
wufoo-api-key            wufoo                    upper19
`)

// nearWalk walks the window of a service's name that ends at ke: the runs
// of setNearValue bytes, with up to two '=' after them, that start within
// nearWindow bytes, up to a blank line, a mask or a run too long for any
// shape. It calls f with each run s[i:j] and its end e after the '='s, and
// stops when f returns false. A masked value ends the window because
// masking shortens the text, and what lay beyond the window must not move
// into it; a longer run (base64, a path) holds no credential of these
// shapes.
func nearWalk(v *view, ke int, f func(i, j, e int) bool) {
	for i := ke; i < ke+nearWindow; {
		c := v.at(i)
		if c < 0 || c == '\n' && v.at(i+1) == '\n' || c == '[' && v.hasPrefix(i, maskPrefix) {
			return
		}
		if !setNearValue[c] {
			i++
			continue
		}
		j := v.run(i, setNearValue, maxNearValue+1)
		if j-i > maxNearValue {
			return
		}
		e := j
		for e-j < 2 && v.at(e) == '=' {
			e++
		}
		if !f(i, j, e) {
			return
		}
		i = e
	}
}

// setNearWait marks a service name's decision that waits for the end of
// its window (see matchNear): a blank line or a mask wakes it (nearWakes),
// other bytes do not.
var setNearWait = notSet("\n[")

// nearWakes reports whether s[pair:] holds a blank line ("\n\n") or
// s[from:] the start of a mask, which may end a service name's window
// early.
func nearWakes(s string, pair, from int) bool {
	if i := strings.IndexByte(s[pair:], '\n'); i >= 0 && strings.Contains(s[pair+i:], "\n\n") {
		return true
	}
	for i := from; i < len(s); i++ {
		k := strings.IndexByte(s[i:], '[')
		if k < 0 {
			return false
		}
		i += k
		if t := s[i:min(len(s), i+len(maskPrefix))]; t == maskPrefix[:len(t)] {
			return true // a mask, or its start at the end
		}
	}
	return false
}

// setNearValue are the bytes of a value the dictionary rule reads after a
// service's name; anything else separates values.
var setNearValue = newSet("A-Za-z0-9_+/.-")

// nearValueArriving reports whether the window of the service name that
// ends at ke ends in s with a value still arriving: a run of setNearValue
// bytes at the end of s that starts in the window (not before ke) and is
// not too long for a shape yet. It returns where the run starts. Once the
// window has arrived, matchNear's decision on s either reads to the end
// of that run and waits for it to end, or it is final without reading as
// far; a Stream may wait for the run's end in both cases.
func nearValueArriving(s string, ke int) (int, bool) {
	p := len(s)
	for lo := max(ke, len(s)-maxNearValue-1); p > lo && setNearValue[s[p-1]]; {
		p--
	}
	return p, p < len(s) && p < ke+nearWindow && len(s)-p <= maxNearValue
}

// matchNear is the dictionary rule: after a service's name (a word or a
// part of an identifier: airbrake, AIRBRAKE_KEY, airbrakeKey, not
// sqlalchemy or coherent, nor glued to a base64 run or a mask), the values within nearWindow bytes, up to a
// blank line, that have one of the service's shapes.
func matchNear(v *view, ks, ke int, sp *spec, out *[4]result) int {
	s := v.s
	if sp.rejects(s, ks, ke, "") {
		return 0
	}
	if c := v.at(ke); c >= 0 && isLower(byte(c)) && s[ke-1] != '_' {
		return 0
	}
	// The window's values long enough for a shape, judged once the
	// window is complete: each starts after at least 14 bytes of the
	// previous one and a separator, so at most 7 start in the window.
	var toks [8]struct{ i, t int }
	nt := 0
	nearWalk(v, ke, func(i, j, e int) bool {
		t := e
		for t > i && s[t-1] == '.' {
			t--
		}
		if t-i >= 14 && i > ke {
			toks[nt].i, toks[nt].t = i, t
			nt++
		}
		return nt < len(toks)
	})
	if v.pending() {
		// The window is still arriving. It ends at a blank line or a mask,
		// once its last value is complete after nearWindow bytes, and
		// surely once the last value that can start in it is complete.
		// Before nearWindow bytes only a blank line or a '[' can end it
		// early, except a value too long for a shape, whose end only means
		// waiting longer; after them, the value still arriving must end
		// first (its run is the wait).
		if v.wait != setNearValue || len(s) < ke+nearWindow {
			v.wait, v.waitEnd = setNearWait, min(ke+nearWindow+maxNearValue+3, max(ke+nearWindow+1, len(s)+16))
		}
		return 0
	}
	d := &nearDefs[sp.near]
	n := 0
	for _, k := range toks[:nt] {
		tok := s[k.i:k.t]
		if !d.fits(tok) {
			continue
		}
		for _, sh := range d.shapes {
			if sh.matches(tok) {
				// the shape first: it is cheaper than the placeholder checks
				if !isPlaceholder(tok) && !lowVariety(tok) {
					out[n] = result{start: k.i, end: k.t, id: sp.id}
					n++
				}
				break
			}
		}
		if n == len(out) {
			break
		}
	}
	return n
}
