package fakesecret

import (
	"encoding/base64"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
)

// Record is one text of the beyond corpus: a secret in one of the
// contexts below, or (Secret empty) a harmless look-alike that must come
// out unchanged.
type Record struct {
	Family string // the context: jenkins-xml, key-label, separator, value-before-label, prefixed, service-name, partial, url, or harmless-*
	Rule   string // the rule id expected for the secret, or "" when any rule will do
	Secret string // the part of Text that must be masked whole (empty: harmless)
	Text   string
}

// gen draws a value of a shape written as in the services' documentation:
// "hex32", "alnum40", "b64url43", "b64_64", "upper16" (A-Z0-9), "lower30"
// (a-z0-9), "digits18", "uuid", or a range "alnum32-37" (its low end).
func gen(r *rand.Rand, spec string) string {
	if spec == "uuid" {
		return uuid(r)
	}
	i := len(spec)
	for i > 0 && (spec[i-1] >= '0' && spec[i-1] <= '9' || spec[i-1] == '-') {
		i--
	}
	name := strings.TrimSuffix(spec[:i], "_")
	lo, _, _ := strings.Cut(spec[i:], "-")
	n, _ := strconv.Atoi(lo)
	switch name {
	case "hex":
		return mixed(r, hexLower, n)
	case "alnum":
		return mixed(r, alnum, n)
	case "b64url":
		return mixed(r, alnum, n-2) + rs(r, "-_", 1) + rs(r, alnum, 1)
	case "b64":
		return mixed(r, alnum, n-2) + rs(r, "+/", 1) + rs(r, alnum, 1)
	case "upper":
		return mixed(r, upper+digits, n)
	case "lower":
		return mixed(r, lower+digits, n)
	case "digits":
		for {
			d := rs(r, digits, n)
			if d[0] != '0' && strings.Count(d, d[:1]) < n/2 {
				return d
			}
		}
	}
	panic("fakesecret: unknown shape " + spec)
}

// saas are current prefixed formats, from each service's documentation of
// its tokens: the rule id, the prefix and the body's shape.
var saas = []struct{ rule, prefix, body string }{
	{"prchat-token", "prc_", "alnum43"},
	{"cloudflare-api-token", "cfut_", "alnum40"},
	{"cloudflare-api-token", "cfat_", "alnum48"},
	{"cloudflare-api-token", "cfk_", "alnum40"},
	{"vercel-token", "vcp_", "alnum56"},
	{"vercel-token", "vci_", "alnum24"},
	{"netlify-token", "nfp_", "alnum40"},
	{"render-api-key", "rnd_", "alnum32"},
	{"buildkite-token", "bkua_", "hex40"},
	{"honeycomb-api-key", "hcaik_", "alnum58"},
	{"typeform-token", "tfp_", "b64url44"},
	{"prefect-api-key", "pnu_", "alnum36"},
	{"pinecone-api-key", "pcsk_", "alnum70"},
	{"xai-api-key", "xai-", "alnum80"},
	{"contentful-token", "CFPAT-", "b64url43"},
	{"bitbucket-token", "ATBB", "alnum32"},
	{"clojars-token", "CLOJARS_", "hex60"},
	{"duffel-token", "duffel_test_", "b64url43"},
	{"frameio-token", "fio-u-", "b64url64"},
	{"new-relic-key", "NRJS-", "hex19"},
	{"notion-api-token", "secret_", "alnum43"},
	{"plaid-access-token", "access-sandbox-", "uuid"},
	{"readme-api-key", "rdme_", "hex70"},
	{"scalingo-token", "tk-us-", "b64url48"},
	{"shippo-token", "shippo_live_", "hex40"},
	{"square-token", "sq0atp-", "b64url22"},
	{"square-token", "sq0csp-", "b64url43"},
	{"google-oauth-token", "1//0", "b64url90"},
	{"jfrog-token", "AKCp", "alnum69"},
	{"sonar-api-token", "squ_", "hex40"},
	{"supabase-secret-key", "sb_secret_", "b64url31"},
	{"neon-api-key", "napi_", "alnum64"},
	{"honeybadger-token", "hbp_", "alnum36"},
	{"deno-deploy-token", "ddp_", "alnum36"},
	{"pubnub-secret-key", "sec-c-", "b64_48"},
	{"paddle-api-key", "pdl_live_apikey_", "alnum40"},
	{"jina-api-key", "jina_", "alnum60"},
	{"tavily-api-key", "tvly-dev-", "alnum32"},
	{"firecrawl-api-key", "fc-", "hex32"},
	{"e2b-api-key", "e2b_", "hex40"},
	{"stytch-secret", "secret-live-", "b64url36"},
	{"onesignal-api-key", "os_v2_app_", "lower113"},
	{"coralogix-key", "cxtp_", "alnum30"},
	{"adafruit-io-key", "aio_", "alnum28"},
	{"riot-api-key", "RGAPI-", "uuid"},
	{"twitch-token", "oauth:", "lower30"},
	{"klaviyo-api-key", "pk_", "hex34"},
	{"woocommerce-key", "cs_", "hex40"},
	{"hubspot-token", "pat-na1-", "uuid"},
	{"launchdarkly-key", "sdk-", "uuid"},
	{"octopus-api-key", "API-", "upper26"},
	{"tencent-secret-id", "AKID", "alnum32"},
	{"yandex-api-key", "AQVN", "b64url36"},
	{"dropbox-token", "sl.u.", "b64url140"},
	{"nightfall-api-key", "NF-", "alnum32"},
	{"circleci-token", "CCIPAT_", "alnum60"},
	{"dbt-cloud-token", "dbtc_", "b64url48"},
	{"ngrok-token", "ngrok_", "alnum48"},
	{"linear-api-key", "lin_api_", "alnum40"},
	{"linear-api-key", "lin_oauth_", "hex64"},
	{"shopify-token", "shpss_", "hex32"},
	{"shopify-token", "shpat_", "alnum32"},
	{"shopify-token", "SHPAT_", "hex32"},
}

// saasExtra are formats whose body is more than one shape.
var saasExtra = []struct {
	rule string
	f    func(r *rand.Rand) string
}{
	{"brevo-api-key", func(r *rand.Rand) string { return "xkeysib-" + gen(r, "hex64") + "-" + gen(r, "alnum16") }},
	{"resend-api-key", func(r *rand.Rand) string { return "re_" + gen(r, "alnum8") + "_" + gen(r, "alnum24") }},
	{"akamai-token", func(r *rand.Rand) string { return "akab-" + gen(r, "lower16") + "-" + gen(r, "lower16") }},
	{"flutterwave-secret-key", func(r *rand.Rand) string { return "FLWSECK_TEST-" + gen(r, "hex32") + "-X" }},
	{"clickup-token", func(r *rand.Rand) string { return "pk_" + gen(r, "digits8") + "_" + gen(r, "upper32") }},
	{"braintree-access-token", func(r *rand.Rand) string {
		return "access_token$production$" + gen(r, "lower16") + "$" + gen(r, "hex32")
	}},
	{"tailscale-key", func(r *rand.Rand) string { return "tskey-api-k" + gen(r, "alnum16") + "-" + gen(r, "alnum32") }},
	{"tailscale-key", func(r *rand.Rand) string { return "tskey-auth-k" + gen(r, "alnum11") + "CNTRL-" + gen(r, "alnum33") }},
	{"langsmith-api-key", func(r *rand.Rand) string { return "lsv2_pt_" + gen(r, "hex32") + "_" + gen(r, "hex10") }},
	{"slack-user-token", func(r *rand.Rand) string {
		return "xoxp-" + gen(r, "digits9") + "-" + gen(r, "digits12") + "-" + gen(r, "digits13") + "-" + gen(r, "hex32")
	}},
	{"slack-user-token", func(r *rand.Rand) string {
		return "xoxp-" + gen(r, "digits12") + "-" + gen(r, "digits12") + "-" + gen(r, "digits13") + "-" + gen(r, "hex64")
	}},
	{"slack-token", func(r *rand.Rand) string { return "xoxe-1-" + gen(r, "alnum146") }},
	{"slack-token", func(r *rand.Rand) string { return "xoxe.xoxb-1-" + gen(r, "alnum160") }},
	{"jenkins-secret", jenkinsSecret},
}

// jenkinsSecret is a secret as Jenkins stores it (hudson.util.Secret,
// payload version 1): base64 of 1, the IV's length, the data's length, the
// IV and the encrypted data, in braces.
func jenkinsSecret(r *rand.Rand) string {
	n := 16 * (1 + r.Intn(4))
	b := []byte{1, 0, 0, 0, 16, 0, 0, 0, byte(n)}
	for range 16 + n {
		b = append(b, byte(r.Intn(256)))
	}
	return "{" + base64.StdEncoding.EncodeToString(b) + "}"
}

// services is the dictionary: a service's name as it appears next to its
// credential, the rule id and the credential's documented shape.
var services = []struct{ rule, name, shape string }{
	{"airbrake-api-key", "airbrake", "hex32"},
	{"algolia-api-key", "algolia", "hex32"},
	{"bugsnag-api-key", "bugsnag", "hex32"},
	{"rollbar-token", "rollbar", "hex32"},
	{"raygun-api-key", "raygun", "alnum22"},
	{"mandrill-api-key", "mandrill", "b64url22"},
	{"sparkpost-api-key", "sparkpost", "hex40"},
	{"postmark-token", "postmark", "uuid"},
	{"pagerduty-token", "pagerduty", "b64url20"},
	{"opsgenie-api-key", "opsgenie", "uuid"},
	{"loggly-token", "loggly", "uuid"},
	{"logdna-key", "logdna", "hex32"},
	{"confluent-api-key", "confluent", "upper16"},
	{"plivo-token", "plivo", "alnum40"},
	{"nexmo-api-secret", "nexmo", "alnum16"},
	{"pusher-key", "pusher", "hex20"},
	{"braintree-key", "braintree", "hex32"},
	{"paypal-client-secret", "paypal", "b64url80"},
	{"binance-api-key", "binance", "alnum64"},
	{"bitfinex-api-key", "bitfinex", "alnum43"},
	{"zendesk-token", "zendesk", "alnum40"},
	{"freshdesk-api-key", "freshdesk", "alnum20"},
	{"okta-api-token", "okta", "b64url42"},
	{"auth0-client-secret", "auth0", "b64url64"},
	{"onelogin-secret", "onelogin", "hex64"},
	{"circleci-token", "circleci", "hex40"},
	{"travis-token", "travis", "b64url22"},
	{"codecov-token", "codecov", "uuid"},
	{"coveralls-token", "coveralls", "alnum33"},
	{"netlify-token", "netlify", "b64url43"},
	{"vercel-token", "vercel", "alnum24"},
	{"linode-token", "linode", "hex64"},
	{"vultr-api-key", "vultr", "upper36"},
	{"hetzner-token", "hetzner", "alnum64"},
	{"scaleway-secret-key", "scaleway", "uuid"},
	{"fastly-api-token", "fastly", "b64url32"},
	{"tomtom-api-key", "tomtom", "alnum32"},
	{"openweather-api-key", "openweather", "hex32"},
	{"weatherstack-api-key", "weatherstack", "hex32"},
	{"ipstack-api-key", "ipstack", "hex32"},
	{"ipinfo-token", "ipinfo", "hex14"},
	{"newsapi-key", "newsapi", "hex32"},
	{"spotify-client-secret", "spotify", "hex32"},
	{"twitter-secret", "twitter", "alnum50"},
	{"linkedin-client-secret", "linkedin", "alnum16"},
	{"discord-client-secret", "discord", "b64url32"},
	{"twitch-client-secret", "twitch", "lower30"},
	{"dropbox-app-secret", "dropbox", "lower15"},
	{"trello-token", "trello", "hex64"},
	{"todoist-token", "todoist", "hex40"},
	{"jira-api-token", "jira", "alnum24"},
	{"zoom-client-secret", "zoom_", "alnum32"},
	{"sentry-token", "sentry", "hex64"},
	{"vouchery-api-key", "vouchery", "hex32"},
	{"mailjet-api-key", "mailjet", "hex32"},
	{"sendinblue-api-key", "sendinblue", "hex64"},
	{"messagebird-api-key", "messagebird", "alnum25"},
	{"clicksend-api-key", "clicksend", "upper36"},
	{"telnyx-api-key", "telnyx", "b64url40"},
	{"cloudinary-api-secret", "cloudinary", "b64url27"},
	{"imgur-client-secret", "imgur", "hex40"},
	{"giphy-api-key", "giphy", "alnum32"},
	{"unsplash-access-key", "unsplash", "b64url43"},
	{"mapquest-api-key", "mapquest", "alnum32"},
	{"positionstack-api-key", "positionstack", "hex32"},
	{"abstractapi-key", "abstractapi", "hex32"},
	{"browserstack-access-key", "browserstack", "alnum20"},
	{"saucelabs-access-key", "saucelabs", "uuid"},
	{"wakatime-api-key", "wakatime", "uuid"},
	{"gitter-token", "gitter", "hex40"},
	{"heroku-api-key", "heroku", "uuid"},
	{"datadog-api-key", "datadog", "hex32"},
	{"twilio-auth-token", "twilio", "hex32"},
	{"wandb-api-key", "wandb", "hex40"},
	{"cohere-api-key", "cohere", "alnum40"},
	{"mistral-api-key", "mistral", "alnum32"},
	{"deepgram-api-key", "deepgram", "hex40"},
	{"assemblyai-api-key", "assemblyai", "hex32"},
	{"elevenlabs-api-key", "elevenlabs", "hex32"},
	{"pinata-api-key", "pinata", "hex20"},
	{"etherscan-api-key", "etherscan", "upper34"},
	{"infura-api-key", "infura", "hex32"},
	{"alchemy-api-key", "alchemy", "b64url32"},
	{"moralis-api-key", "moralis", "alnum64"},
	{"coinmarketcap-api-key", "coinmarketcap", "uuid"},
	{"shodan-api-key", "shodan", "alnum32"},
	{"virustotal-api-key", "virustotal", "hex64"},
	{"hunter-api-key", "hunterio", "hex40"},
	{"clearbit-api-key", "clearbit", "b64url35"},
	{"fullcontact-api-key", "fullcontact", "alnum32"},
	{"segment-write-key", "segmentio", "alnum32"},
	{"mixpanel-secret", "mixpanel", "hex32"},
	{"intercom-token", "intercom", "b64_60"},
	{"calendly-token", "calendly", "hex64"},
	{"typeform-token", "typeform", "b64url44"},
	{"surveymonkey-token", "surveymonkey", "b64url50"},
	{"aircall-token", "aircall", "hex32"},
	{"bitly-token", "bitly", "hex40"},
	{"buttercms-token", "buttercms", "hex40"},
	{"storyblok-token", "storyblok", "alnum22"},
	{"contentstack-token", "contentstack", "alnum30"},
	{"prismic-token", "prismic", "b64url64"},
	{"gocardless-token", "gocardless", "b64url40"},
	{"mollie-api-key", "mollie", "alnum30"},
	{"razorpay-secret", "razorpay", "alnum24"},
	{"paystack-secret", "paystack", "hex40"},
	{"lob-api-key", "lob_", "hex35"},
	{"easypost-api-key", "easypost", "alnum22"},
	{"shipengine-api-key", "shipengine", "b64url43"},
	{"aftership-api-key", "aftership", "uuid"},
	{"ably-api-key", "ablyio", "b64url43"},
	{"kraken-api-secret", "kraken_api", "b64_88"},
	{"jotform-api-key", "jotform", "hex32"},
	{"wufoo-api-key", "wufoo", "upper19"},
}

// SaaSFormats are Format generators of the prefixed formats and the
// dictionary's services, for the package's format tests.
func SaaSFormats() []Format {
	var fs []Format
	for _, d := range saas {
		fs = append(fs, token(d.rule, d.prefix, func(r *rand.Rand) string { return d.prefix + gen(r, d.body) }))
	}
	for _, d := range saasExtra {
		fs = append(fs, token(d.rule, d.rule, d.f))
	}
	for _, d := range services {
		fs = append(fs, ctx(d.rule, d.name, func(r *rand.Rand) (string, string) {
			v := gen(r, d.shape)
			return v, fmt.Sprintf(pick(r, serviceContexts...), caseOf(r, d.name), v)
		}))
	}
	return fs
}

// serviceContexts put a credential after its service's name.
var serviceContexts = []string{
	"%s credentials: %s",
	"[DEBUG] Using %s Key=%s for the upload",
	"# %s\nexport KEY=%s\n",
	"| %s | prod | `%s` |",
	"Configured the %s client (secret %s) in staging.",
	"%s:\n  api: \"%s\"\n",
	"new Client(\"%s\", \"%s\")",
	"%s_API = '%s'",
	"%s -> %s",
}

func caseOf(r *rand.Rand, name string) string {
	switch r.Intn(3) {
	case 0:
		return strings.ToUpper(name)
	case 1:
		return strings.ToUpper(name[:1]) + name[1:]
	}
	return name
}

// Beyond is the beyond corpus: secrets in the contexts that scanners
// tuned on key = value pairs miss (Jenkins credentials XML, labels that
// only say key, dash and arrow separators, values written before their
// label, current prefixed formats, a service's name as the only context,
// off-spec tokens that must be masked whole), and harmless look-alikes
// (placeholders, local default credentials, names and ids next to the same
// labels). It is built from the services' published formats and these
// syntaxes; the same seed gives the same corpus.
func Beyond(seed int64) []Record {
	r := rand.New(rand.NewSource(seed))
	var out []Record
	add := func(family, rule, secret, text string) {
		out = append(out, Record{Family: family, Rule: rule, Secret: secret, Text: text})
	}
	harmless := func(family, text string) { out = append(out, Record{Family: family, Text: text}) }

	// Jenkins credentials.xml and job configs.
	jenkinsTags := []string{"password", "secret", "privateKey", "passphrase", "secretBytes", "apiToken", "token", "bindPassword", "clientSecret", "secretPassphrase"}
	for i := range 60 {
		tag := jenkinsTags[i%len(jenkinsTags)]
		sec := jenkinsSecret(r)
		layout := pick(r,
			"<com.cloudbees.plugins.credentials.impl.UsernamePasswordCredentialsImpl>\n  <scope>GLOBAL</scope>\n  <id>deploy-%[3]d</id>\n  <username>deploy</username>\n  <%[1]s>%[2]s</%[1]s>\n</com.cloudbees.plugins.credentials.impl.UsernamePasswordCredentialsImpl>",
			"    <%[1]s>%[2]s</%[1]s>",
			"<hudson.plugins.git.UserRemoteConfig><url>https://git.example.com/app.git</url></hudson.plugins.git.UserRemoteConfig>\n<%[1]s>%[2]s</%[1]s>",
			"<org.jenkinsci.plugins.plaincredentials.impl.StringCredentialsImpl><id>slack-%[3]d</id><%[1]s>%[2]s</%[1]s></org.jenkinsci.plugins.plaincredentials.impl.StringCredentialsImpl>",
			"<com.cloudbees.jenkins.plugins.sshcredentials.impl.BasicSSHUserPrivateKey>\n  <privateKeySource class=\"com.cloudbees.jenkins.plugins.sshcredentials.impl.BasicSSHUserPrivateKey$DirectEntryPrivateKeySource\">\n    <%[1]s>%[2]s</%[1]s>\n  </privateKeySource>\n</com.cloudbees.jenkins.plugins.sshcredentials.impl.BasicSSHUserPrivateKey>",
		)
		add("jenkins-xml", "jenkins-secret", sec, fmt.Sprintf(layout, tag, sec, i))
	}
	for range 10 {
		sec := base64.StdEncoding.EncodeToString([]byte(rs(r, alnum, 24)))
		add("jenkins-xml", "", sec, "<hudson.scm.SubversionSCM_-DescriptorImpl_-Credential>\n  <password>"+sec+"</password>\n</hudson.scm.SubversionSCM_-DescriptorImpl_-Credential>")
	}

	// Labels that only say "key".
	keyLayouts := []string{
		"[DEBUG] Using %[1]s Key=%[2]s",
		"%[1]s_key: \"%[2]s\"",
		"sl_key= %[2]s",
		"Key: %[2]s",
		"{\"name\": \"%[1]s\", \"key\": \"%[2]s\"}",
		"export %[3]s_KEY=%[2]s",
		"key = '%[2]s'",
		"$%[1]sKey = \"%[2]s\";",
		"<add key=\"%[2]s\" />",
		"%[1]s.key=%[2]s",
	}
	keyShapes := []string{"hex32", "alnum20", "upper16", "b64_40", "alnum32", "hex40", "b64url24"}
	for i := range 80 {
		l := keyLayouts[i%len(keyLayouts)]
		if strings.Contains(l, "<add key") {
			continue
		}
		who := pick(r, "acme", "billing", "partner", "upload", "geo", "search", "cdn", "sms")
		v := gen(r, keyShapes[r.Intn(len(keyShapes))])
		add("key-label", "", v, fmt.Sprintf(l, who, v, strings.ToUpper(who)))
	}

	// Dash and arrow separators, YAML lists.
	labels := []string{"twilio token", "api key", "access token", "secret", "password", "auth token", "client secret", "API_TOKEN", "apiKey", "db password"}
	sepLayouts := []string{
		"%s - '%s'",
		"%s -> \"%s\"",
		"%s --> %s",
		"%s - %s",
		"%s => %s",
		"%s:\n  - %s\n",
		"%s: - %s",
		"* %s -> `%s`",
	}
	for i := range 80 {
		lab := labels[r.Intn(len(labels))]
		l := sepLayouts[i%len(sepLayouts)]
		var v string
		if strings.Contains(lab, "password") {
			v = mixed(r, alnum, 10) + pick(r, "!", "#", "%") + mixed(r, alnum, 4)
		} else {
			v = gen(r, pick(r, "hex32", "alnum24", "b64url40", "alnum40"))
		}
		add("separator", "", v, fmt.Sprintf(l, lab, v))
	}

	// The value before its label.
	beforeLayouts := []string{
		"if (\"%[1]s\" == password) {",
		"if ('%[1]s' === apiToken) return true;",
		"{\"%[1]s\": \"api_key\"}",
		"'%[1]s' => 'password',",
		"assert \"%[1]s\" == self.secret",
		"  \"%[1]s\": \"client_secret\",",
		"if \"%[1]s\" == token:",
		"return '%[1]s' == $password;",
	}
	for i := range 48 {
		l := beforeLayouts[i%len(beforeLayouts)]
		v := gen(r, pick(r, "hex32", "alnum24", "b64url40", "alnum16"))
		if strings.Contains(l, "password") && r.Intn(2) == 0 {
			v = "ME-_" + mixed(r, alnum, 12) + "m1R"
		}
		add("value-before-label", "", v, fmt.Sprintf(l, v))
	}

	// Current prefixed formats in the contexts tokens appear in.
	for _, f := range SaaSFormats()[:len(saas)+len(saasExtra)] {
		for range 3 {
			s := f.Sample(r)
			add("prefixed", s.Rule, s.Secret, s.Text)
		}
	}

	// A service's name as the only context.
	for _, d := range services {
		for range 2 {
			v := gen(r, d.shape)
			add("service-name", d.rule, v, fmt.Sprintf(pick(r, serviceContexts...), caseOf(r, d.name), v))
		}
	}

	// Off-spec tokens that a mask must cover whole.
	for range 24 {
		var v string
		switch r.Intn(4) {
		case 0:
			v = "sk_live_" + mixed(r, alnum, 24) + "-" + mixed(r, alnum, 8)
		case 1:
			v = "rk_live_" + mixed(r, alnum, 30) + "-" + mixed(r, alnum, 4) + "_" + mixed(r, alnum, 6)
		case 2:
			v = "ghp_" + mixed(r, alnum, 36) + "-" + mixed(r, alnum, 5)
		default:
			v = "prc_" + mixed(r, alnum, 43) + "-" + mixed(r, alnum, 6)
		}
		add("partial", "", v, fmt.Sprintf(pick(r, "{%s}", "stripe.api_key = {%s};", "`{%s}`", "(%s)"), v))
	}

	// Passwords in URLs (the baseline context).
	for range 20 {
		pw := mixed(r, alnum, 12) + pick(r, "!", "%21", "~", "")
		add("url", "url-password", pw, fmt.Sprintf(pick(r,
			"DATABASE_URL=postgres://app:%s@db.internal:5432/app",
			"amqp://orders:%s@rabbit.prod.example.com:5672/",
			"mongodb+srv://svc:%s@cluster0.example.net/app",
			"redis://:%s@cache.example.com:6379/0"), pw))
	}

	// Harmless look-alikes.
	for _, u := range []string{
		"postgres://user:REPLACE_WITH_PASSWORD@db.example.com/app",
		"mysql://root:YOUR_PASSWORD_HERE@db.example.com:3306/shop",
		"DATABASE_URL=postgres://app:ENTER_PASSWORD@db:5432/app",
		"amqp://guest:guest@localhost:5672/",
		"postgres://postgres:postgres@localhost:5432/app_dev",
		"postgresql://postgres:postgres@127.0.0.1/test",
		"mongodb://admin:admin@127.0.0.1:27017",
		"mysql://root:root@localhost:3306/app",
		"http://minioadmin:minioadmin@localhost:9000",
		"postgres://test:test@localhost/test",
		"DATABASE_URL=postgres://postgres:example@db:5432/postgres",
		"redis://default:redispw@localhost:6379",
		"postgres://app:%s@db/app",
		"postgres://app:${DB_PASSWORD}@db/app",
		"postgres://app:<password>@db/app",
		"jdbc:mysql://root:mysql@localhost:3306/test",
		"postgres://keycloak:keycloak@localhost:5432/keycloak",
		"amqp://rabbitmq:rabbitmq@localhost",
		"postgres://user:PASSWORD@host:5432/db",
		"mssql://sa:yourStrong(!)Password@localhost:1433",
	} {
		harmless("harmless-url", u)
	}
	for _, h := range []string{
		"cache_key: \"user:1234:profile\"",
		"primary_key = \"id\"",
		"key: \"welcome_message\"",
		"sort_key: created_at_desc",
		"partition_key = \"tenant_42_2024_05\"",
		"idempotency_key: 3f1c2b8e-9d47-4a6b-8e21-5c0d7f9a1b34",
		"key: 4096",
		"S3_KEY=uploads/2024/05/report-final-v2.pdf",
		"hotkey: ctrl+shift+k",
		"foreign_key: users.id",
		"key = os.environ[\"KEY\"]",
		"{\"key\": \"Enter\", \"code\": \"Enter\", \"keyCode\": 13}",
		"i18n key: checkout.payment.card_declined",
		"map_key = \"region-eu-west-1\"",
		"monkey: patched",
		"key: ${{ runner.os }}-go-${{ hashFiles('**/go.sum') }}",
		"key = f\"{prefix}:{user_id}\"",
		"<add key=\"ClientValidationEnabled\" value=\"true\" />",
		"gpg_key: 0x4AA4767BBC9C4B1D18AE28B77F2D434B9A3F5C2E",
		"ssh_key: ~/.ssh/id_ed25519.pub",
		"token - which we rotate monthly - is read from Vault",
		"password -> see the README",
		"token:\n  - name: deploy\n",
		"x = token - offset",
		"api key -> \"<your-api-key>\"",
		"secret => null",
		"password - changeme",
		"if (\"\" == password) {",
		"if (\"admin\" == username) {",
		"{\"Content-Type\": \"api_key\"}",
		"'en' => 'password',",
		"if \"placeholder\" == token:",
		"airbrake notice 4711 at 2024-05-01",
		"sentry release 1.2.3 deployed",
		"algolia index products_en_v2",
		"datadog host web-01.prod",
		"vouchery order 20240501-0042 shipped",
		"twilio status callback https://example.com/sms/status",
		"Run the bugsnag uploader with --version 3.4.5",
		"pagerduty escalation policy P1234AB",
		"Discord server: https://discord.gg/golang",
		"heroku run rake db:migrate --app billing-prod",
		"sk_live_xxxxxxxxxxxxxxxxxxxxxxxx",
		"ts.unknown = \"prc_\" + strings.Repeat(\"Z\", 43)",
		"prc_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
		"export PRCHAT_TOKEN=prc_...",
		"ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
		"shpat_<your token>",
		"cfut_… (elided)",
		"lin_api_abcdefghijklmnopqrstuvwxyz0123456789abcd",
		"re.compile(re_pattern_for_tokens)",
		"check_merge_request(ck_id)",
		"api-gateway-0123-4567",
		"pk_test_TYooMQauvdEDq54NiTphI7jx",
		"sdk-version: 1.4.2",
		"<secret>${JENKINS_SECRET}</secret>",
		"<password></password>",
		"<password>{}</password>",
		"<secretBytes/>",
		"<privateKeySource class=\"com.cloudbees.jenkins.plugins.sshcredentials.impl.BasicSSHUserPrivateKey$UsersPrivateKeySource\"/>",
		"<apiToken>${API_TOKEN}</apiToken>",
		"password = getPassword()",
		"token: string",
		"secret := cfg.Secret",
		"Bearer authentication is required.",
		"The token refresh moved to the auth middleware.",
		"commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904 (twilio fix)",
		"image: postgres@sha256:7f5e9b2d4c1a3e6f8b0d2c4e6a8f0b1d3c5e7a9f1b3d5e7f9a1c3e5b7d9f1a3c",
		"integrity sha512-Zq8xV2mN4pL7rT1wK3s9Zq8xV2mN4pL7rT1wK3s9Zq8xV2mN4pL7rT1wK3s9Zq8xV2mN4pL7rT1wK3s9Zq==",
		"request_id=3f1c2b8e-9d47-4a6b-8e21-5c0d7f9a1b34 stripe",
		"uses: actions/checkout@b4ffde65f46336ab88eb53be808477a3936bae11",
		"go.sum: golang.org/x/crypto v0.58.0 h1:Zq8xV2mN4pL7rT1wK3s9Zq8xV2mN4pL7rT1wK3s9Zq8=",
		"const okta_domain = \"dev-123456.okta.com\"",
		"jira ticket PROJ-1234 tracks the migration",
		"confluence page 123456789 has the runbook",
		"wandb: syncing run 2a9f3c1e to project bench",
	} {
		harmless("harmless-label", h)
	}
	// Generated look-alikes: ids and hashes next to keys that are not
	// credentials, and names with shapes of no service.
	for range 30 {
		harmless("harmless-label", fmt.Sprintf(pick(r,
			"cache_key: %s",
			"primary_key = '%s'",
			"\"sort_key\": \"%s\"",
			"commit %s",
			"idempotency_key=%s",
			"checksum: %s",
		), gen(r, pick(r, "hex40", "hex32", "uuid"))))
	}
	return out
}
