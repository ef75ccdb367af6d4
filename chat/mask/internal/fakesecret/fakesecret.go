// Package fakesecret generates fake secrets in the formats prchat's masker
// recognises, each inside realistic text (markdown, shell, .env, YAML, JSON,
// code), plus look-alikes that must not be masked. Everything is derived
// from the *rand.Rand the caller passes, so a fixed seed gives fixed output.
// No value it produces is a real credential.
package fakesecret

import (
	"encoding/base64"
	"fmt"
	"math/rand"
	"net/url"
	"strings"
)

// Sample is one generated case.
type Sample struct {
	Rule   string // rule id expected in "[masked:<rule>]", or "none"
	Name   string // format name
	Secret string // the part of Text that must be masked (or kept, for "none")
	Text   string // Secret in context; it occurs in Text exactly once
}

// Format generates samples of one secret format.
type Format struct {
	Rule string
	Name string
	gen  func(r *rand.Rand) (secret, text string)
}

// Sample draws one sample.
func (f Format) Sample(r *rand.Rand) Sample {
	sec, text := f.gen(r)
	return Sample{Rule: f.Rule, Name: f.Name, Secret: sec, Text: text}
}

const (
	upper    = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	lower    = "abcdefghijklmnopqrstuvwxyz"
	digits   = "0123456789"
	alnum    = upper + lower + digits
	hexLower = "0123456789abcdef"
	b64      = alnum + "+/"
	b64url   = alnum + "-_"
)

// rs returns n random bytes from set.
func rs(r *rand.Rand, set string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = set[r.Intn(len(set))]
	}
	return string(b)
}

// mixed returns n random bytes from set that contain a digit, a lower-case
// and an upper-case letter whenever set has them.
func mixed(r *rand.Rand, set string, n int) string {
	for {
		s := rs(r, set, n)
		if (!strings.ContainsAny(set, digits) || strings.ContainsAny(s, digits)) &&
			(!strings.ContainsAny(set, lower) || strings.ContainsAny(s, lower)) &&
			(!strings.ContainsAny(set, upper) || strings.ContainsAny(s, upper)) {
			return s
		}
	}
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.Intn(len(xs))] }

// tokenContexts place a self-identifying token in typical surroundings.
var tokenContexts = []string{
	"Set it in your shell:\n\n```sh\nexport API_TOKEN=%s\n```\n",
	"Use `%s` as the credential.",
	"{\n  \"name\": \"deploy\",\n  \"token\": \"%s\",\n  \"enabled\": true\n}",
	"curl -s -H \"X-Api-Key: %s\" https://api.example.com/v1/items",
	"| env | key |\n|-----|-----|\n| prod | %s |",
	"client = Client(api_key=\"%s\", timeout=30)",
	"The build failed because %s was revoked yesterday.",
	"    env:\n      SERVICE_KEY: %s\n",
	"const key = '%s'; // TODO move to vault",
	"> Found in logs: auth failed for %s (retrying)",
}

func token(rule, name string, f func(r *rand.Rand) string) Format {
	return Format{Rule: rule, Name: name, gen: func(r *rand.Rand) (string, string) {
		s := f(r)
		return s, fmt.Sprintf(pick(r, tokenContexts...), s)
	}}
}

func prefixed(rule, prefix, set string, n int) Format {
	return token(rule, prefix, func(r *rand.Rand) string { return prefix + mixed(r, set, n) })
}

func ctx(rule, name string, f func(r *rand.Rand) (string, string)) Format {
	return Format{Rule: rule, Name: name, gen: f}
}

// sentryOrgToken is a Sentry organization token: base64 of its claims
// (issued at, URL, region URL, org), '_' and 43 random characters.
func sentryOrgToken(r *rand.Rand) string {
	for {
		claims := fmt.Sprintf(`{"iat":%d.%d,"url":"https://sentry.io","region_url":"https://%s.sentry.io","org":"%s"}`,
			1700000000+r.Intn(1e8), r.Intn(1e6), pick(r, "us", "de"), rs(r, lower, 4+r.Intn(8)))
		enc := base64.RawStdEncoding.EncodeToString([]byte(claims))
		if strings.Contains(enc, "LCJyZWdpb25fdXJs") || strings.Contains(enc, "InJlZ2lvbl91cmwi") || strings.Contains(enc, "cmVnaW9uX3VybCI6") {
			return "sntrys_" + enc + "_" + mixed(r, alnum+"+/", 43)
		}
	}
}

func pemBlock(r *rand.Rand, label string, lines int) string {
	var b strings.Builder
	b.WriteString("-----BEGIN " + label + "-----\n")
	for i := 0; i < lines; i++ {
		b.WriteString(rs(r, b64, 64) + "\n")
	}
	b.WriteString(rs(r, b64, 20) + "==\n")
	b.WriteString("-----END " + label + "-----")
	return b.String()
}

func password(r *rand.Rand) string {
	return mixed(r, alnum, 6+r.Intn(6)) + pick(r, "!", "#", "%", "^", "*", "~", "") + mixed(r, alnum, 4+r.Intn(6))
}

func uuid(r *rand.Rand) string {
	h := rs(r, hexLower, 32)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:]
}

// Formats lists a generator for every built-in rule (several for some).
func Formats() []Format {
	return append([]Format{
		prefixed("github-pat", "ghp_", alnum, 36),
		prefixed("github-oauth-token", "gho_", alnum, 36),
		prefixed("github-user-token", "ghu_", alnum, 36),
		prefixed("github-app-token", "ghs_", alnum, 36),
		prefixed("github-refresh-token", "ghr_", alnum, 76),
		token("github-fine-grained-pat", "github_pat_", func(r *rand.Rand) string {
			return "github_pat_11" + mixed(r, upper+digits, 20) + "_" + mixed(r, alnum, 59)
		}),
		prefixed("gitlab-pat", "glpat-", b64url, 20),
		prefixed("gitlab-token", "glrt-", b64url, 20),
		prefixed("gitlab-token", "GR1348941", b64url, 20),
		token("slack-bot-token", "xoxb-", func(r *rand.Rand) string {
			return "xoxb-" + rs(r, digits, 11) + "-" + rs(r, digits, 13) + "-" + mixed(r, alnum, 24)
		}),
		token("slack-user-token", "xoxp-", func(r *rand.Rand) string {
			return "xoxp-" + rs(r, digits, 11) + "-" + rs(r, digits, 11) + "-" + rs(r, digits, 13) + "-" + rs(r, hexLower, 32)
		}),
		token("slack-app-token", "xapp-", func(r *rand.Rand) string {
			return "xapp-1-A" + mixed(r, upper+digits, 10) + "-" + rs(r, digits, 13) + "-" + rs(r, hexLower, 64)
		}),
		token("slack-token", "xoxe.xoxp-", func(r *rand.Rand) string {
			return "xoxe.xoxp-1-" + mixed(r, alnum, 140)
		}),
		ctx("slack-webhook", "hooks.slack.com", func(r *rand.Rand) (string, string) {
			s := "T" + mixed(r, upper+digits, 10) + "/B" + mixed(r, upper+digits, 10) + "/" + mixed(r, alnum, 24)
			return s, fmt.Sprintf(pick(r,
				"SLACK_WEBHOOK_URL=https://hooks.slack.com/services/%s\n",
				"Post alerts to <https://hooks.slack.com/services/%s> from CI.",
				"    webhook: \"https://hooks.slack.com/services/%s\"\n"), s)
		}),
		prefixed("stripe-secret-key", "sk_live_", alnum, 24),
		prefixed("stripe-secret-key", "sk_test_", alnum, 99),
		prefixed("stripe-restricted-key", "rk_live_", alnum, 24),
		prefixed("stripe-webhook-secret", "whsec_", alnum, 32),
		prefixed("openai-api-key", "sk-proj-", b64url, 156),
		prefixed("openai-api-key", "sk-svcacct-", b64url, 156),
		token("openai-api-key", "sk-", func(r *rand.Rand) string {
			return "sk-" + mixed(r, alnum, 20) + "T3BlbkFJ" + mixed(r, alnum, 20)
		}),
		token("anthropic-api-key", "sk-ant-", func(r *rand.Rand) string {
			return "sk-ant-api03-" + mixed(r, b64url, 93) + "AA"
		}),
		prefixed("openrouter-api-key", "sk-or-v1-", hexLower, 64),
		token("google-api-key", "AIza", func(r *rand.Rand) string { return "AIza" + mixed(r, b64url, 35) }),
		ctx("google-api-key", "AIza in URL", func(r *rand.Rand) (string, string) {
			s := "AIza" + mixed(r, alnum, 35)
			return s, "GET https://maps.googleapis.com/maps/api/geocode/json?key=" + s + "&address=Berlin"
		}),
		prefixed("google-oauth-client-secret", "GOCSPX-", b64url, 28),
		prefixed("google-oauth-token", "ya29.", b64url, 150),
		token("aws-access-key-id", "AKIA", func(r *rand.Rand) string { return "AKIA" + mixed(r, upper+"234567", 16) }),
		token("aws-access-key-id", "ASIA", func(r *rand.Rand) string { return "ASIA" + mixed(r, upper+"234567", 16) }),
		ctx("aws-secret-access-key", "aws_secret_access_key", func(r *rand.Rand) (string, string) {
			s := mixed(r, b64, 40)
			return s, fmt.Sprintf(pick(r,
				"[default]\nregion = eu-west-1\naws_secret_access_key = %s\n",
				"export AWS_SECRET_ACCESS_KEY=%s\n",
				"{\n  \"SecretAccessKey\": \"%s\",\n  \"Expiration\": \"2030-01-01T00:00:00Z\"\n}"), s)
		}),
		ctx("aws-session-token", "aws_session_token", func(r *rand.Rand) (string, string) {
			s := pick(r, "FwoGZXIvYXdzE", "IQoJb3JpZ2luX2Vj") + mixed(r, b64, 300)
			return s, fmt.Sprintf(pick(r, "aws_session_token = %s\n", "export AWS_SESSION_TOKEN=\"%s\"\n", "Token: %s"), s)
		}),
		ctx("azure-storage-key", "AccountKey=", func(r *rand.Rand) (string, string) {
			s := mixed(r, b64, 86) + "=="
			return s, "AZURE_STORAGE_CONNECTION_STRING=\"DefaultEndpointsProtocol=https;AccountName=prchatdata;AccountKey=" + s + ";EndpointSuffix=core.windows.net\""
		}),
		ctx("azure-sas-token", "sig=", func(r *rand.Rand) (string, string) {
			s := url.QueryEscape(mixed(r, b64, 43) + "=")
			return s, "Download: https://prchatdata.blob.core.windows.net/exports/report.csv?sv=2022-11-02&ss=b&srt=o&sp=r&se=2030-01-01T00:00:00Z&spr=https&sig=" + s
		}),
		token("azure-ad-client-secret", "Q~", func(r *rand.Rand) string {
			return mixed(r, alnum, 3) + rs(r, digits, 1) + "Q~" + mixed(r, alnum+"_~.-", 34)
		}),
		prefixed("twilio-api-key", "SK", hexLower, 32),
		ctx("twilio-auth-token", "TWILIO_AUTH_TOKEN", func(r *rand.Rand) (string, string) {
			s := rs(r, hexLower, 32)
			return s, fmt.Sprintf(pick(r, "TWILIO_ACCOUNT_SID=AC%s\nTWILIO_AUTH_TOKEN=%s\n", "twilio_account_sid: AC%s\ntwilio_auth_token: \"%s\"\n"), rs(r, hexLower, 32), s)
		}),
		token("sendgrid-api-key", "SG.", func(r *rand.Rand) string { return "SG." + mixed(r, b64url, 22) + "." + mixed(r, b64url, 43) }),
		ctx("npm-token", "npm_", func(r *rand.Rand) (string, string) {
			s := "npm_" + mixed(r, alnum, 36)
			return s, pick(r, "//registry.npmjs.org/:_authToken="+s+"\n", "NPM_TOKEN="+s, "Publish with `npm_token="+s+"`.")
		}),
		prefixed("pypi-token", "pypi-AgEIcHlwaS5vcmc", b64url, 70),
		prefixed("dockerhub-pat", "dckr_pat_", b64url, 27),
		ctx("heroku-api-key", "HEROKU_API_KEY", func(r *rand.Rand) (string, string) {
			s := uuid(r)
			return s, fmt.Sprintf(pick(r, "HEROKU_API_KEY=%s\n", "heroku_api_key: %s\n"), s)
		}),
		prefixed("heroku-api-key", "HRKU-", b64url, 60),
		prefixed("shopify-token", "shpat_", "abcdef0123456789", 32),
		token("mailgun-api-key", "key-", func(r *rand.Rand) string { return "key-" + mixed(r, lower+digits, 32) }),
		ctx("datadog-api-key", "DD_API_KEY", func(r *rand.Rand) (string, string) {
			s := rs(r, hexLower, pick(r, 32, 40))
			return s, fmt.Sprintf(pick(r, "DD_API_KEY=%s\n", "DATADOG_APP_KEY: \"%s\"\n", "export DATADOG_API_KEY=%s"), s)
		}),
		prefixed("digitalocean-token", "dop_v1_", hexLower, 64),
		prefixed("huggingface-token", "hf_", upper+lower, 34),
		ctx("telegram-bot-token", "bot token", func(r *rand.Rand) (string, string) {
			s := rs(r, "123456789", 1) + rs(r, digits, 8+r.Intn(2)) + ":AA" + mixed(r, b64url, 33)
			return s, fmt.Sprintf(pick(r, "curl https://api.telegram.org/bot%s/getMe", "TELEGRAM_BOT_TOKEN=%s", "bot = Bot(\"%s\")"), s)
		}),
		ctx("discord-bot-token", "DISCORD_TOKEN", func(r *rand.Rand) (string, string) {
			s := "M" + mixed(r, alnum, 25) + "." + mixed(r, b64url, 6) + "." + mixed(r, b64url, 38)
			return s, fmt.Sprintf(pick(r, "DISCORD_TOKEN=%s\n", "discord_bot_token: \"%s\"\n"), s)
		}),
		ctx("discord-webhook", "discord webhook", func(r *rand.Rand) (string, string) {
			s := "1" + rs(r, digits, 18) + "/" + mixed(r, b64url, 68)
			return s, "WEBHOOK=https://discord.com/api/webhooks/" + s
		}),
		ctx("jwt", "jwt", func(r *rand.Rand) (string, string) {
			s := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ" + mixed(r, b64url, 80) + "." + mixed(r, b64url, 43)
			return s, fmt.Sprintf(pick(r, "Cookie: session=%s; Path=/", "The id_token was `%s`.", "{\"access_token\": \"%s\", \"expires_in\": 3600}"), s)
		}),
		ctx("private-key", "RSA PRIVATE KEY", func(r *rand.Rand) (string, string) {
			s := pemBlock(r, pick(r, "RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY"), 4+r.Intn(6))
			return s, "Here is the key file:\n\n```\n" + s + "\n```\n\nKeep it safe."
		}),
		ctx("private-key", "PEM in JSON", func(r *rand.Rand) (string, string) {
			s := strings.ReplaceAll(pemBlock(r, "PRIVATE KEY", 4+r.Intn(6)), "\n", `\n`)
			return s, "{\n  \"type\": \"service_account\",\n  \"private_key\": \"" + s + `\n` + "\",\n  \"client_email\": \"bot@proj.iam.gserviceaccount.com\"\n}"
		}),
		ctx("ssh-private-key", "OPENSSH PRIVATE KEY", func(r *rand.Rand) (string, string) {
			s := pemBlock(r, "OPENSSH PRIVATE KEY", 3+r.Intn(5))
			return s, "$ cat ~/.ssh/id_ed25519\n" + s + "\n$ "
		}),
		ctx("pgp-private-key", "PGP PRIVATE KEY BLOCK", func(r *rand.Rand) (string, string) {
			s := strings.Replace(pemBlock(r, "PGP PRIVATE KEY BLOCK", 5), "BLOCK-----\n", "BLOCK-----\n\n", 1)
			return s, s + "\n"
		}),
		ctx("url-password", "connection URL", func(r *rand.Rand) (string, string) {
			s := password(r)
			u := pick(r, "postgres://app:%s@db.internal:5432/prchat?sslmode=disable",
				"mongodb+srv://admin:%s@cluster0.ab1cd.mongodb.net/test",
				"mysql://root:%s@127.0.0.1:3306/app",
				"redis://:%s@cache:6379/0",
				"amqp://guest:%s@rabbit:5672/",
				"https://deploy:%s@git.example.com/org/repo.git",
				"mongodb://user:%s@h1:27017,h2:27017/db?replicaSet=rs0")
			return s, fmt.Sprintf(pick(r, "DATABASE_URL="+u+"\n", "Connect with `"+u+"`.", "    url: \""+u+"\"\n"), s)
		}),
		ctx("basic-auth", "Authorization: Basic", func(r *rand.Rand) (string, string) {
			s := base64.StdEncoding.EncodeToString([]byte("deploy:" + password(r)))
			return s, fmt.Sprintf(pick(r, "curl -H 'Authorization: Basic %s' https://ci.example.com/api", "Authorization: Basic %s\r\nHost: x\r\n"), s)
		}),
		ctx("bearer-token", "Bearer", func(r *rand.Rand) (string, string) {
			s := mixed(r, alnum+"-_", 40)
			return s, fmt.Sprintf(pick(r, "curl -H \"Authorization: Bearer %s\" https://api.example.com", "headers = {\"Authorization\": \"Bearer %s\"}", "Send Bearer %s with every request."), s)
		}),
		ctx("authorization-header", "Authorization: token", func(r *rand.Rand) (string, string) {
			s := rs(r, hexLower, 40)
			return s, fmt.Sprintf(pick(r, "curl -H 'Authorization: token %s' https://api.github.com/user", "Authorization: %s\n"), s)
		}),
		ctx("generic-assignment", "key = value", func(r *rand.Rand) (string, string) {
			s := mixed(r, alnum, 16+r.Intn(16))
			return s, fmt.Sprintf(pick(r,
				"DB_PASSWORD=%s\n",
				"password = \"%s\"\n",
				"    client_secret: %s\n",
				"{\"api_key\": \"%s\", \"region\": \"eu\"}",
				"apiKey := \"%s\"\n",
				"export SECRET_KEY='%s'\n",
				"app.config['SECRET_KEY'] = '%s'",
				"spring.datasource.password=%s\n",
				"/callback#access_token=%s&token_type=bearer"), s)
		}),
		prefixed("linear-api-key", "lin_api_", alnum, 40),
		prefixed("new-relic-key", "NRAK-", upper+digits, 27),
		token("postman-api-key", "PMAK-", func(r *rand.Rand) string {
			return "PMAK-" + rs(r, hexLower, 24) + "-" + rs(r, hexLower, 34)
		}),
		token("sentry-token", "sntrys_", sentryOrgToken),
		prefixed("vault-token", "hvs.", b64url, 90),
		prefixed("age-secret-key", "AGE-SECRET-KEY-1", "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58),
		token("grafana-token", "glsa_", func(r *rand.Rand) string { return "glsa_" + mixed(r, alnum, 32) + "_" + rs(r, hexLower, 8) }),
		prefixed("databricks-token", "dapi", hexLower, 32),
		prefixed("groq-api-key", "gsk_", alnum, 52),
		prefixed("replicate-api-token", "r8_", alnum, 37),
		prefixed("pulumi-token", "pul-", hexLower, 40),
		prefixed("rubygems-api-key", "rubygems_", hexLower, 48),
		prefixed("flyio-token", "fo1_", b64url, 43),
		prefixed("supabase-token", "sbp_", hexLower, 40),
		prefixed("planetscale-token", "pscale_tkn_", b64url, 43),
		prefixed("perplexity-api-key", "pplx-", alnum, 48),
		prefixed("figma-token", "figd_", b64url, 40),
		token("mapbox-secret-token", "sk.eyJ", func(r *rand.Rand) string {
			return "sk.eyJ1IjoiZGV2IiwiYSI6Im" + mixed(r, alnum, 20) + "." + mixed(r, b64url, 22)
		}),
		prefixed("doppler-token", "dp.st.", alnum, 44),
		prefixed("atlassian-api-token", "ATATT3", b64url, 186),
		token("1password-secret-key", "A3-", func(r *rand.Rand) string {
			return "A3-" + mixed(r, upper+digits, 6) + "-" + mixed(r, upper+digits, 11) + "-" + rs(r, upper+digits, 5) + "-" + rs(r, upper+digits, 5) + "-" + rs(r, upper+digits, 5)
		}),
		prefixed("1password-service-account-token", "ops_eyJ", alnum+"+/", 300),
		prefixed("adobe-client-secret", "p8e-", alnum, 32),
		prefixed("alibaba-access-key-id", "LTAI", lower+digits, 20),
		prefixed("aws-bedrock-api-key", "ABSK", alnum+"+/", 132),
		token("cloudflare-api-key", "v1.0-", func(r *rand.Rand) string { return "v1.0-" + rs(r, hexLower, 24) + "-" + rs(r, hexLower, 146) }),
		keyed("cloudflare-api-key", "cloudflare_global_key", func(r *rand.Rand) string { return rs(r, hexLower, 37) }),
		token("dynatrace-api-token", "dt0c01.", func(r *rand.Rand) string {
			return "dt0c01." + mixed(r, upper+digits, 24) + "." + mixed(r, upper+digits, 64)
		}),
		prefixed("easypost-api-token", "EZAK", alnum, 54),
		prefixed("facebook-access-token", "EAAC", alnum, 120),
		keyed("facebook-access-token", "facebook_app_token", func(r *rand.Rand) string { return rs(r, digits, 15) + "|" + mixed(r, alnum, 27) }),
		prefixed("infracost-api-token", "ico-", alnum, 32),
		token("intra42-client-secret", "s-s4t2ud-", func(r *rand.Rand) string { return "s-s4t2ud-" + rs(r, hexLower, 64) }),
		prefixed("openshift-user-token", "sha256~", b64url, 43),
		token("notion-api-token", "ntn_", func(r *rand.Rand) string { return "ntn_" + rs(r, digits, 11) + mixed(r, alnum, 35) }),
		token("sourcegraph-access-token", "sgp_", func(r *rand.Rand) string { return "sgp_" + rs(r, hexLower, 16) + "_" + rs(r, hexLower, 40) }),
		token("harness-api-key", "pat.", func(r *rand.Rand) string {
			return "pat." + mixed(r, alnum, 22) + "." + mixed(r, alnum, 24) + "." + mixed(r, alnum, 20)
		}),
		ctx("microsoft-teams-webhook", "incoming webhook", func(r *rand.Rand) (string, string) {
			s := uuid(r) + "@" + uuid(r) + "/IncomingWebhook/" + rs(r, hexLower, 32) + "/" + uuid(r)
			return s, "TEAMS_WEBHOOK=https://acme.webhook.office.com/webhookb2/" + s + "\n"
		}),
		keyed("sumologic-access-id", "SUMO_ACCESS_ID", func(r *rand.Rand) string { return "su" + mixed(r, alnum, 12) }),
		keyed("sidekiq-secret", "BUNDLE_GEMS__CONTRIBSYS__COM", func(r *rand.Rand) string { return rs(r, hexLower, 8) + ":" + rs(r, hexLower, 8) }),
		keyed("sonar-api-token", "sonar.login", func(r *rand.Rand) string { return mixed(r, lower+digits, 40) }),
		keyed("jfrog-token", "artifactory_identity", func(r *rand.Rand) string { return mixed(r, lower+digits, 64) }),
		keyed("mapbox-api-token", "MAPBOX_ACCESS", func(r *rand.Rand) string {
			return "pk." + mixed(r, lower+digits, 60) + "." + mixed(r, lower+digits, 22)
		}),
		keyed("discord-client-secret", "discord_client_id", func(r *rand.Rand) string { return "1" + rs(r, digits, 17) }),
		keyed("asana-client-secret", "ASANA_CLIENT_ID", func(r *rand.Rand) string { return "1" + rs(r, digits, 15) }),
		keyed("service-api-key", "hubspot_key", func(r *rand.Rand) string { return strings.ToUpper(uuid(r)) }),
		keyed("airtable-token", "airtable_pat", func(r *rand.Rand) string { return "pat" + mixed(r, alnum, 14) + "." + rs(r, hexLower, 64) }),
		keyed("mailchimp-api-key", "MAILCHIMP_KEY", func(r *rand.Rand) string { return rs(r, hexLower, 32) + "-us" + fmt.Sprint(10+r.Intn(12)) }),
	}, SaaSFormats()...)
}

// keyContexts place a value next to the key that names its service.
var keyContexts = []string{
	"%s=%s\n",
	"%s = \"%s\"\n",
	"    %s: %s\n",
	"{\"%s\": \"%s\"}",
	"System.setProperty(\"%s\", \"%s\")",
	"<%s>\n    %s\n</%s>",
}

// keyed is a credential recognisable only next to its key name.
func keyed(rule, key string, f func(r *rand.Rand) string) Format {
	return Format{Rule: rule, Name: key, gen: func(r *rand.Rand) (string, string) {
		s := f(r)
		c := pick(r, keyContexts...)
		if strings.Count(c, "%s") == 3 {
			return s, fmt.Sprintf(c, key, s, key)
		}
		return s, fmt.Sprintf(c, key, s)
	}}
}

// LookAlikes lists generators of text that resembles secrets but must be
// left intact. Their Rule is "none".
func LookAlikes() []Format {
	none := func(name string, f func(r *rand.Rand) (string, string)) Format {
		return Format{Rule: "none", Name: name, gen: f}
	}
	return []Format{
		none("git sha", func(r *rand.Rand) (string, string) {
			s := rs(r, hexLower, 40)
			return s, pick(r, "Fixed in commit "+s+".", "git checkout "+s, "merge_commit_sha: "+s)
		}),
		none("uuid", func(r *rand.Rand) (string, string) {
			s := uuid(r)
			return s, pick(r, "request_id="+s, "{\"id\": \""+s+"\"}", "Trace "+s+" failed.")
		}),
		none("go.sum", func(r *rand.Rand) (string, string) {
			s := "h1:" + rs(r, b64, 43) + "="
			return s, "github.com/acme/widget v1.4.2 " + s
		}),
		none("npm integrity", func(r *rand.Rand) (string, string) {
			s := "sha512-" + rs(r, b64, 86) + "=="
			return s, "\"integrity\": \"" + s + "\","
		}),
		none("cargo checksum", func(r *rand.Rand) (string, string) {
			s := rs(r, hexLower, 64)
			return s, "[[package]]\nname = \"serde\"\nchecksum = \"" + s + "\""
		}),
		none("docker digest", func(r *rand.Rand) (string, string) {
			s := "sha256:" + rs(r, hexLower, 64)
			return s, "image: ghcr.io/prchat/prchat@" + s
		}),
		none("data uri", func(r *rand.Rand) (string, string) {
			s := "iVBORw0KGgo" + rs(r, b64, 400)
			return s, "![logo](data:image/png;base64," + s + ")"
		}),
		none("ssh public key", func(r *rand.Rand) (string, string) {
			s := "AAAAC3NzaC1lZDI1NTE5AAAAI" + rs(r, b64, 43)
			return s, "ssh-ed25519 " + s + " dev@laptop"
		}),
		none("certificate", func(r *rand.Rand) (string, string) {
			s := pemBlock(r, "CERTIFICATE", 6)
			return s, s + "\n"
		}),
		none("public key", func(r *rand.Rand) (string, string) {
			s := pemBlock(r, "PUBLIC KEY", 4)
			return s, s + "\n"
		}),
		none("actions secret ref", func(r *rand.Rand) (string, string) {
			s := "${{ secrets." + pick(r, "GITHUB_TOKEN", "NPM_TOKEN", "DEPLOY_KEY") + " }}"
			return s, pick(r, "      token: "+s+"\n", "        env:\n          API_KEY: "+s+"\n", "Authorization: Bearer "+s)
		}),
		none("env ref", func(r *rand.Rand) (string, string) {
			s := pick(r, "$TOKEN", "${API_KEY}", "os.Getenv(\"API_TOKEN\")", "process.env.SECRET_KEY", "$(cat /run/secrets/db_password)")
			return s, pick(r, "password = "+s, "export GITHUB_TOKEN="+s, "secret: "+s)
		}),
		none("placeholder", func(r *rand.Rand) (string, string) {
			s := pick(r, "<your-token>", "xxxx", "changeme", "***", "XXXXXXXXXXXXXXXX", "your_api_key_here", "<redacted>", "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")
			return s, pick(r, "api_key: "+s, "password = \""+s+"\"", "TOKEN="+s)
		}),
		none("node id", func(r *rand.Rand) (string, string) {
			s := pick(r, "MDQ6VXNlcjE=", "MDEwOlJlcG9zaXRvcnkxMjk2MjY5", "PR_kwDO"+rs(r, b64url, 16), "I_kwDO"+rs(r, b64url, 14))
			return s, pick(r, "\"node_id\": \""+s+"\"", "query { node(id: \""+s+"\") { id } }")
		}),
		none("code expression", func(r *rand.Rand) (string, string) {
			s := pick(r, "getPassword()", "string", "cfg.Secret", "self.token", "None", "req.headers.authorization", "tokenStore", "API_KEY")
			return s, pick(r, "password = "+s, "token: "+s, "secret := "+s, "apiKey = "+s)
		}),
		none("prose", func(r *rand.Rand) (string, string) {
			s := pick(r, "token", "secret", "password")
			return s, "Rotate the " + s + " after the incident; the new " + s + " is stored in the vault, not in the repo."
		}),
		none("hashes", func(r *rand.Rand) (string, string) {
			s := rs(r, hexLower, 64)
			return s, "sha256sum: " + s + "  prchat-linux-amd64.tar.gz"
		}),
		none("url without password", func(r *rand.Rand) (string, string) {
			s := "https://git.example.com:8443/org/repo.git"
			return s, pick(r, "git clone "+s, "ssh://git@github.com/org/repo.git and "+s)
		}),
	}
}

// filler is secret-free text typical of answers: markdown prose, Go,
// Python, YAML, shell and JSON, with the words that trigger the prefilter.
var filler = []string{
	"## Summary\n\nThe pull request moves token refresh into the auth middleware. The old code read the password from the config on every request; now the secret is cached for five minutes and rotated by the worker. Reviewers asked whether the API key should be logged — it must not be.\n\n",
	"```go\nfunc (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {\n\tuser := r.FormValue(\"user\")\n\tpassword := r.FormValue(\"password\")\n\ttoken, err := s.auth.Login(r.Context(), user, password)\n\tif err != nil {\n\t\thttp.Error(w, \"invalid credentials\", http.StatusUnauthorized)\n\t\treturn\n\t}\n\tsecret := cfg.Secret\n\t_ = secret\n\tjson.NewEncoder(w).Encode(map[string]string{\"token\": token})\n}\n```\n\n",
	"```python\ndef connect(settings):\n    password = settings.get(\"password\")\n    api_key = os.environ[\"API_KEY\"]\n    client = Client(api_key=api_key, timeout=30)\n    for key, value in settings.items():\n        print(key, type(value))\n    return client\n```\n\n",
	"```yaml\nservices:\n  api:\n    image: ghcr.io/prchat/api:1.4.2\n    environment:\n      DATABASE_URL: ${DATABASE_URL}\n      API_TOKEN: ${{ secrets.API_TOKEN }}\n      LOG_LEVEL: debug\n    ports:\n      - \"8080:8080\"\n```\n\n",
	"1. Run `make test` locally.\n2. If the build passes, push the branch and open a PR.\n3. The CI job reads `GITHUB_TOKEN` from the environment; never paste the token into the description.\n4. Ask a maintainer to approve.\n\n",
	"| Field | Type | Notes |\n|-------|------|-------|\n| `token` | string | opaque, expires after 1h |\n| `refresh_token` | string | single use |\n| `expires_in` | int | seconds |\n\n",
	"```sh\n$ git log --oneline -3\n9fceb02 fix: close body on error\n1d4c3b2 feat: add retry with backoff\n77ac1e0 chore: bump deps\n$ go test ./... -run TestAuth\nok  \tgithub.com/prchat/prchat/auth\t0.412s\n```\n\n",
	"```json\n{\n  \"id\": 1296269,\n  \"node_id\": \"MDEwOlJlcG9zaXRvcnkxMjk2MjY5\",\n  \"name\": \"Hello-World\",\n  \"private\": false,\n  \"permissions\": {\"admin\": false, \"push\": true},\n  \"token_type\": \"bearer\",\n  \"default_branch\": \"main\"\n}\n```\n\n",
	"The function `validateKey(key string) error` checks that the key has the right prefix before it is stored. Keys are hashed with SHA-256; only the hash (for example `sha256:4f2a...`) is kept. A missing password returns `ErrNoPassword`, and the secret manager is consulted only when `cfg.UseVault` is true.\n\n",
	"```ts\nexport async function fetchUser(token: string): Promise<User> {\n  const res = await fetch(`${API}/user`, {\n    headers: { Authorization: `Bearer ${token}` },\n  });\n  if (!res.ok) throw new Error(`status ${res.status}`);\n  return res.json();\n}\n```\n\n",
	"> **Note**\n> The `secret` field is write-only. Reading it back returns `***`. To rotate it, call `PUT /v1/keys/{id}` with a new value; the old key keeps working for 24 hours.\n\n",
	"```diff\n-\tpassword := os.Getenv(\"DB_PASSWORD\")\n+\tpassword, err := secrets.Load(ctx, \"db-password\")\n+\tif err != nil {\n+\t\treturn fmt.Errorf(\"load password: %w\", err)\n+\t}\n```\n\n",
	"Dependencies were updated in `go.sum`:\n\n```\ngolang.org/x/crypto v0.31.0 h1:ihbySMvVjLAeSH1IbfcRTkD/iNscyz8rGzjF/E5hV6U=\ngolang.org/x/crypto v0.31.0/go.mod h1:kDsLvtWBEx7MV9tJOj9bnXsPbxwJQ6csT/x4KIYH6JzE=\n```\n\n",
	"The request id was 3f2b8c1e-9d4a-4c7b-8e21-5a6f0b9c2d1e and the commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904 introduced the regression in `keyring.go`.\n\n",
	"```sql\nSELECT id, login, created_at FROM users WHERE password_hash IS NULL AND deleted_at IS NULL ORDER BY id LIMIT 50;\n```\n\n",
}

// Document builds about size bytes of mixed markdown and code. After every
// `every` filler blocks (on average) it plants a secret from Formats or a
// look-alike from LookAlikes, alternating. It returns the text and the
// planted samples in order.
func Document(r *rand.Rand, size, every int) (text string, secrets, lookAlikes []Sample) {
	blocks, secrets, lookAlikes := Blocks(r, size, every)
	return strings.Join(blocks, ""), secrets, lookAlikes
}

// Blocks is Document split into its blocks (filler paragraphs and planted
// samples with their separators), for callers that feed the text in parts.
func Blocks(r *rand.Rand, size, every int) (blocks []string, secrets, lookAlikes []Sample) {
	formats := Formats()
	las := LookAlikes()
	n, total := 0, 0
	for total < size {
		f := filler[r.Intn(len(filler))]
		blocks = append(blocks, f)
		total += len(f)
		n++
		if every > 0 && r.Intn(every) == 0 {
			var s Sample
			if n%2 == 0 {
				s = formats[r.Intn(len(formats))].Sample(r)
				secrets = append(secrets, s)
			} else {
				s = las[r.Intn(len(las))].Sample(r)
				lookAlikes = append(lookAlikes, s)
			}
			blocks = append(blocks, s.Text+"\n\n")
			total += len(s.Text) + 2
		}
	}
	return blocks, secrets, lookAlikes
}
