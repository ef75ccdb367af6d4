package mask

import "strings"

// ruleID identifies the rule reported in "[masked:<rule>]".
type ruleID uint16

const (
	idProtect ruleID = iota // an existing mask token (internal)
	idOwnSecret
	idGeneric
	idURLPassword
	idBasicAuth
	idBearer
	idAuthHeader
	idPrivateKey
	idSSHPrivateKey
	idPGPPrivateKey
	idJWT
	idAWSAccessKeyID
	idAWSSecretKey
	idAWSSessionToken
	idGitHubPAT
	idGitHubOAuth
	idGitHubUser
	idGitHubApp
	idGitHubRefresh
	idGitHubFineGrained
	idGitLabPAT
	idGitLabToken
	idSlackBot
	idSlackUser
	idSlackApp
	idSlackToken
	idSlackWebhook
	idStripeSecret
	idStripeRestricted
	idStripeWebhook
	idOpenAI
	idAnthropic
	idOpenRouter
	idGoogleAPIKey
	idGoogleOAuthSecret
	idGoogleOAuthToken
	idAzureStorageKey
	idAzureSAS
	idAzureADSecret
	idTwilioAPIKey
	idTwilioAuth
	idSendGrid
	idNPM
	idPyPI
	idDockerHub
	idHeroku
	idShopify
	idMailgun
	idDatadog
	idDigitalOcean
	idHuggingFace
	idTelegram
	idDiscordBot
	idDiscordWebhook
	idLinear
	idNewRelic
	idPostman
	idSentry
	idVault
	idAge
	idGrafana
	idDatabricks
	idGroq
	idReplicate
	idPulumi
	idRubyGems
	idFlyio
	idSupabase
	idPlanetScale
	idPerplexity
	idFigma
	idMapbox
	idDoppler
	idAtlassian
	id1Password
	id1PasswordSA
	idAdobe
	idAlibaba
	idBedrock
	idCloudflare
	idDynatrace
	idEasyPost
	idFacebook
	idInfracost
	idIntra42
	idOpenShift
	idNotion
	idSourcegraph
	idHarness
	idTeamsWebhook
	idSumoLogic
	idSidekiq
	idSonar
	idJFrog
	idMapboxPublic
	idDiscordSecret
	idAsana
	idUUIDKey
	idAirtable
	idMailchimp
	numRuleIDs
)

// ruleName is the stable id printed in the mask token of id.
func ruleName(id ruleID) string {
	if id < numRuleIDs {
		return ruleNames[id]
	}
	return tableNames[id-numRuleIDs]
}

// tableNames are the names of the rule ids allocated for saasDefs and
// nearDefs (ids from numRuleIDs on); tableIDs maps every rule name to its id.
var (
	tableNames []string
	tableIDs   = staticIDs()
)

func staticIDs() map[string]ruleID {
	m := map[string]ruleID{}
	for id := ruleID(0); id < numRuleIDs; id++ {
		m[ruleNames[id]] = id
	}
	return m
}

// ruleOf returns the id of a rule name, allocating one for a new name.
func ruleOf(name string) ruleID {
	if id, ok := tableIDs[name]; ok {
		return id
	}
	id := numRuleIDs + ruleID(len(tableNames))
	tableNames = append(tableNames, name)
	tableIDs[name] = id
	return id
}

// ruleNames are the stable ids printed in mask tokens.
var ruleNames = [numRuleIDs]string{
	idProtect:           "masked",
	idOwnSecret:         "own-secret",
	idGeneric:           "generic-assignment",
	idURLPassword:       "url-password",
	idBasicAuth:         "basic-auth",
	idBearer:            "bearer-token",
	idAuthHeader:        "authorization-header",
	idPrivateKey:        "private-key",
	idSSHPrivateKey:     "ssh-private-key",
	idPGPPrivateKey:     "pgp-private-key",
	idJWT:               "jwt",
	idAWSAccessKeyID:    "aws-access-key-id",
	idAWSSecretKey:      "aws-secret-access-key",
	idAWSSessionToken:   "aws-session-token",
	idGitHubPAT:         "github-pat",
	idGitHubOAuth:       "github-oauth-token",
	idGitHubUser:        "github-user-token",
	idGitHubApp:         "github-app-token",
	idGitHubRefresh:     "github-refresh-token",
	idGitHubFineGrained: "github-fine-grained-pat",
	idGitLabPAT:         "gitlab-pat",
	idGitLabToken:       "gitlab-token",
	idSlackBot:          "slack-bot-token",
	idSlackUser:         "slack-user-token",
	idSlackApp:          "slack-app-token",
	idSlackToken:        "slack-token",
	idSlackWebhook:      "slack-webhook",
	idStripeSecret:      "stripe-secret-key",
	idStripeRestricted:  "stripe-restricted-key",
	idStripeWebhook:     "stripe-webhook-secret",
	idOpenAI:            "openai-api-key",
	idAnthropic:         "anthropic-api-key",
	idOpenRouter:        "openrouter-api-key",
	idGoogleAPIKey:      "google-api-key",
	idGoogleOAuthSecret: "google-oauth-client-secret",
	idGoogleOAuthToken:  "google-oauth-token",
	idAzureStorageKey:   "azure-storage-key",
	idAzureSAS:          "azure-sas-token",
	idAzureADSecret:     "azure-ad-client-secret",
	idTwilioAPIKey:      "twilio-api-key",
	idTwilioAuth:        "twilio-auth-token",
	idSendGrid:          "sendgrid-api-key",
	idNPM:               "npm-token",
	idPyPI:              "pypi-token",
	idDockerHub:         "dockerhub-pat",
	idHeroku:            "heroku-api-key",
	idShopify:           "shopify-token",
	idMailgun:           "mailgun-api-key",
	idDatadog:           "datadog-api-key",
	idDigitalOcean:      "digitalocean-token",
	idHuggingFace:       "huggingface-token",
	idTelegram:          "telegram-bot-token",
	idDiscordBot:        "discord-bot-token",
	idDiscordWebhook:    "discord-webhook",
	idLinear:            "linear-api-key",
	idNewRelic:          "new-relic-key",
	idPostman:           "postman-api-key",
	idSentry:            "sentry-token",
	idVault:             "vault-token",
	idAge:               "age-secret-key",
	idGrafana:           "grafana-token",
	idDatabricks:        "databricks-token",
	idGroq:              "groq-api-key",
	idReplicate:         "replicate-api-token",
	idPulumi:            "pulumi-token",
	idRubyGems:          "rubygems-api-key",
	idFlyio:             "flyio-token",
	idSupabase:          "supabase-token",
	idPlanetScale:       "planetscale-token",
	idPerplexity:        "perplexity-api-key",
	idFigma:             "figma-token",
	idMapbox:            "mapbox-secret-token",
	idDoppler:           "doppler-token",
	idAtlassian:         "atlassian-api-token",
	id1Password:         "1password-secret-key",
	id1PasswordSA:       "1password-service-account-token",
	idAdobe:             "adobe-client-secret",
	idAlibaba:           "alibaba-access-key-id",
	idBedrock:           "aws-bedrock-api-key",
	idCloudflare:        "cloudflare-api-key",
	idDynatrace:         "dynatrace-api-token",
	idEasyPost:          "easypost-api-token",
	idFacebook:          "facebook-access-token",
	idInfracost:         "infracost-api-token",
	idIntra42:           "intra42-client-secret",
	idOpenShift:         "openshift-user-token",
	idNotion:            "notion-api-token",
	idSourcegraph:       "sourcegraph-access-token",
	idHarness:           "harness-api-key",
	idTeamsWebhook:      "microsoft-teams-webhook",
	idSumoLogic:         "sumologic-access-id",
	idSidekiq:           "sidekiq-secret",
	idSonar:             "sonar-api-token",
	idJFrog:             "jfrog-token",
	idMapboxPublic:      "mapbox-api-token",
	idDiscordSecret:     "discord-client-secret",
	idAsana:             "asana-client-secret",
	idUUIDKey:           "service-api-key",
	idAirtable:          "airtable-token",
	idMailchimp:         "mailchimp-api-key",
}

// Priorities break ties between candidates with the same span.
const (
	prioGeneric = 1
	prioAuth    = 2
	prioContext = 3
	prioToken   = 4
	prioOwn     = 5
)

// matchKind selects a matcher. Matchers are called through a switch, not
// through function values, so the view they get stays on the stack.
type matchKind uint8

const (
	kAccountKey matchKind = iota
	kAssign
	kAuthorization
	kAzureAD
	kBasic
	kBearer
	kDiscordWebhook
	kJWT
	kOwn
	kPEM
	kProtect
	kSAS
	kSK
	kSlack
	kSlackWebhook
	kTelegram
	kToken
	kURL
	kJWTBase64
	kCurl
	kTeams
	kNear
)

// match runs the matcher of sp at the keyword occurrence s[ks:ke].
func match(v *view, ks, ke int, lit string, sp *spec) result {
	switch sp.kind {
	case kAccountKey:
		return matchAccountKey(v, ks, ke, lit, sp)
	case kAuthorization:
		return matchAuthorization(v, ks, ke, lit, sp)
	case kAzureAD:
		return matchAzureAD(v, ks, ke, lit, sp)
	case kBasic:
		return matchBasic(v, ks, ke, lit, sp)
	case kBearer:
		return matchBearer(v, ks, ke, lit, sp)
	case kDiscordWebhook:
		return matchDiscordWebhook(v, ks, ke, lit, sp)
	case kJWT:
		return matchJWT(v, ks, ke, lit, sp)
	case kOwn:
		return matchOwn(v, ks, ke, lit, sp)
	case kPEM:
		return matchPEM(v, ks, ke, lit, sp)
	case kProtect:
		return matchProtect(v, ks, ke, lit, sp)
	case kSAS:
		return matchSAS(v, ks, ke, lit, sp)
	case kSK:
		return matchSK(v, ks, ke, lit, sp)
	case kSlack:
		return matchSlack(v, ks, ke, lit, sp)
	case kSlackWebhook:
		return matchSlackWebhook(v, ks, ke, lit, sp)
	case kTelegram:
		return matchTelegram(v, ks, ke, lit, sp)
	case kToken:
		return matchToken(v, ks, ke, lit, sp)
	case kURL:
		return matchURL(v, ks, ke, lit, sp)
	case kJWTBase64:
		return matchJWTBase64(v, ks, ke, lit, sp)
	case kCurl:
		return matchCurlUser(v, ks, ke, lit, sp)
	case kTeams:
		return matchTeamsWebhook(v, ks, ke, lit, sp)
	}
	// kNear yields several results; scan calls matchNear itself.
	return noMatch
}

// result is a matcher's answer; start < 0 means no match.
type result struct {
	start, end int
	id         ruleID
	protect    bool
}

var noMatch = result{start: -1}

// spec is one compiled rule: the matcher run at each hit of one of its
// keywords, plus the parameters of table-driven token rules.
type spec struct {
	kind     matchKind
	id       ruleID
	prio     int8
	lookback int // how far before the keyword a span may start
	// token rules
	body     *byteSet
	min, max int
	opts     uint16
	check    func(body string) bool
	near     int // index into nearDefs (kNear)
}

const (
	optLeft        uint16 = 1 << iota // no word byte right before the token
	optRight                          // no word byte right after the token
	optDigitLetter                    // body has a digit and a letter
	optTrimDot                        // a trailing '.' ends a sentence, not the token
	optAnyVariety                     // the prefix alone identifies the token: no variety check
	optEndDelim                       // the token ends at a blank, quote, ';', ',' or bracket, not '.' (video_box.ico-<hash>.png)
	optBrace                          // the token is {prefix body}: the closing brace is part of it
	optFoldPrefix                     // the prefix may be written in any case (SHPAT_)
	optNoFiller                       // no run of x's or counting run (abcdefgh, 12345678) in the body
)

// tokenDef declares a prefixed token format.
type tokenDef struct {
	prefixes []string
	id       ruleID
	body     *byteSet
	min, max int
	opts     uint16
	check    func(string) bool
}

const lr = optLeft | optRight

var tokenDefs = []tokenDef{
	{[]string{"ghp_"}, idGitHubPAT, setAlnum, 30, 255, lr, nil},
	{[]string{"gho_"}, idGitHubOAuth, setAlnum, 30, 255, lr, nil},
	{[]string{"ghu_"}, idGitHubUser, setAlnum, 30, 255, lr, nil},
	{[]string{"ghs_"}, idGitHubApp, setAlnum, 30, 255, lr, nil},
	{[]string{"ghr_"}, idGitHubRefresh, setAlnum, 30, 255, lr, nil},
	{[]string{"github_pat_"}, idGitHubFineGrained, setWord, 40, 255, lr, nil},
	{[]string{"glpat-"}, idGitLabPAT, setB64URLDot, 20, 255, lr | optTrimDot, nil},
	{[]string{"glrt-", "gldt-", "glptt-", "glcbt-", "glsoat-", "glft-", "glimt-", "glagent-", "gloas-", "GR1348941"}, idGitLabToken, setB64URLDot, 20, 255, lr | optTrimDot, nil},
	{[]string{"xapp-"}, idSlackApp, newSet("A-Za-z0-9-"), 20, 255, lr | optDigitLetter, nil},
	{[]string{"sk_live_", "sk_test_"}, idStripeSecret, setAlnum, 16, 255, lr, nil},
	{[]string{"rk_live_", "rk_test_"}, idStripeRestricted, setAlnum, 16, 255, lr, nil},
	{[]string{"whsec_"}, idStripeWebhook, setAlnum, 24, 255, lr, nil},
	{[]string{"AIza"}, idGoogleAPIKey, setB64URL, 35, 35, lr, nil},
	{[]string{"GOCSPX-"}, idGoogleOAuthSecret, setB64URL, 24, 40, lr, nil},
	{[]string{"ya29."}, idGoogleOAuthToken, setB64URLDot, 20, 2048, lr | optTrimDot, nil},
	{[]string{"AKIA", "ASIA", "ABIA", "ACCA"}, idAWSAccessKeyID, setUpperNum, 16, 16, lr, nil},
	{[]string{"FwoGZXIvYXdzE", "IQoJb3JpZ2luX2Vj"}, idAWSSessionToken, setB64, 100, 8192, lr, nil},
	{[]string{"SK"}, idTwilioAPIKey, setHexLower, 32, 32, lr, nil},
	{[]string{"SG."}, idSendGrid, setB64URLDot, 66, 66, lr, func(b string) bool { return b[22] == '.' }},
	{[]string{"npm_"}, idNPM, setAlnum, 36, 36, lr, nil},
	{[]string{"pypi-AgEIcHlwaS5vcmc"}, idPyPI, setB64URL, 50, 1024, lr, nil},
	{[]string{"dckr_pat_", "dckr_oat_"}, idDockerHub, setB64URL, 20, 255, lr, nil},
	{[]string{"HRKU-"}, idHeroku, setB64URL, 40, 120, lr, nil},
	{[]string{"shpat_", "shpca_", "shppa_", "shpss_"}, idShopify, setAlnum, 32, 40, lr | optDigitLetter | optFoldPrefix, nil},
	{[]string{"key-"}, idMailgun, setLowerNum, 32, 32, lr | optDigitLetter, nil},
	{[]string{"dop_v1_", "doo_v1_", "dor_v1_"}, idDigitalOcean, setHexLower, 64, 64, lr, nil},
	{[]string{"hf_", "api_org_"}, idHuggingFace, setAlnum, 30, 40, lr, hasUpperAndLower},
	{[]string{"lin_api_"}, idLinear, setAlnum, 32, 64, lr | optNoFiller, nil},
	{[]string{"lin_oauth_"}, idLinear, setHexLower, 64, 64, lr, nil},
	{[]string{"NRAK-"}, idNewRelic, setUpperNum, 27, 27, lr, nil},
	{[]string{"PMAK-"}, idPostman, newSet("a-f0-9-"), 59, 59, lr, func(b string) bool { return b[24] == '-' }},
	{[]string{"sntrys_"}, idSentry, newSet("A-Za-z0-9+/=_"), 50, 2048, lr, sentryOrgToken},
	{[]string{"sntryu_"}, idSentry, setHexLower, 64, 64, lr, nil},
	{[]string{"hvs.", "hvb.", "hvr."}, idVault, setB64URL, 24, 255, lr, nil},
	{[]string{"AGE-SECRET-KEY-1"}, idAge, setAge, 58, 58, lr | optAnyVariety, nil},
	{[]string{"glsa_"}, idGrafana, setWord, 41, 41, lr, nil},
	{[]string{"glc_"}, idGrafana, setB64, 32, 1024, lr, nil},
	{[]string{"dapi"}, idDatabricks, setHexLower, 32, 32, lr | optDigitLetter, nil},
	{[]string{"gsk_"}, idGroq, setAlnum, 52, 52, lr, nil},
	{[]string{"r8_"}, idReplicate, setAlnum, 37, 37, lr, nil},
	{[]string{"pul-"}, idPulumi, setHexLower, 40, 40, lr, nil},
	{[]string{"rubygems_"}, idRubyGems, setHexLower, 48, 48, lr, nil},
	{[]string{"fo1_"}, idFlyio, setB64URL, 43, 43, lr, nil},
	{[]string{"sbp_"}, idSupabase, setHexLower, 40, 40, lr, nil},
	{[]string{"pscale_tkn_", "pscale_pw_", "pscale_oauth_"}, idPlanetScale, newSet("A-Za-z0-9_.=-"), 32, 255, lr | optTrimDot, nil},
	{[]string{"pplx-"}, idPerplexity, setAlnum, 48, 48, lr, nil},
	{[]string{"figd_"}, idFigma, setB64URL, 40, 40, lr, nil},
	{[]string{"sk.eyJ"}, idMapbox, setB64URLDot, 40, 2048, lr | optTrimDot, nil},
	{[]string{"dp.st.", "dp.ct.", "dp.sa.", "dp.pt.", "dp.scim.", "dp.audit."}, idDoppler, setB64URL, 40, 64, lr, nil},
	{[]string{"ATATT3"}, idAtlassian, newSet("A-Za-z0-9_=-"), 100, 400, lr, nil},
	{[]string{"A3-"}, id1Password, newSet("A-Z0-9-"), 36, 37, lr, onePasswordKey},
	{[]string{"ops_eyJ"}, id1PasswordSA, setB64, 250, 8192, lr, nil},
	{[]string{"p8e-"}, idAdobe, setAlnum, 32, 32, lr, nil},
	{[]string{"LTAI"}, idAlibaba, setAlnum, 20, 20, lr | optDigitLetter, nil},
	{[]string{"ABSK"}, idBedrock, setB64, 109, 271, lr, minEntropy(3)},
	{[]string{"v1.0-"}, idCloudflare, newSet("a-f0-9-"), 171, 171, lr, func(b string) bool { return b[24] == '-' && strings.Count(b, "-") == 1 }},
	{[]string{"dt0c01."}, idDynatrace, newSet("A-Za-z0-9."), 89, 89, lr, func(b string) bool { return b[24] == '.' && strings.Count(b, ".") == 1 }},
	{[]string{"EZAK", "EZTK"}, idEasyPost, setAlnum, 54, 54, lr, nil},
	{[]string{"EAAM", "EAAC"}, idFacebook, setAlnum, 100, 2048, lr, minEntropy(3.5)},
	{[]string{"fm1a_", "fm1r_", "fm2_"}, idFlyio, setB64, 100, 8192, lr, nil},
	{[]string{"ico-"}, idInfracost, setAlnum, 32, 32, lr | optEndDelim, nil},
	{[]string{"s-s4t2ud-", "s-s4t2af-"}, idIntra42, setHex, 64, 64, lr, nil},
	{[]string{"sha256~"}, idOpenShift, setB64URL, 43, 43, lr, minEntropy(3.5)},
	{[]string{"ntn_"}, idNotion, setAlnum, 46, 46, lr, func(b string) bool { return allIn(b[:11], setDigit) }},
	{[]string{"sgp_"}, idSourcegraph, setWord, 40, 80, lr, sourcegraphBody},
	{[]string{"pat.", "sat."}, idHarness, newSet("A-Za-z0-9_.-"), 68, 68, lr, func(b string) bool { return b[22] == '.' && b[47] == '.' && strings.Count(b, ".") == 2 }},
	{[]string{"sk_prod_", "rk_prod_"}, idStripeSecret, setAlnum, 10, 255, lr, nil},
	{[]string{"xoxo-", "xoxs-"}, idSlackToken, newSet("a-fA-F0-9-"), 12, 255, lr, slackLegacy},
}

// minEntropy is a token check: the body has at least e bits of entropy per
// byte (random, not a placeholder).
func minEntropy(e float64) func(string) bool {
	return func(b string) bool { return statsOf(b).entropy >= e }
}

// onePasswordKey: A3-XXXXXX-XXXXXXXXXXX-XXXXX-XXXXX-XXXXX or
// A3-XXXXXX-XXXXXX-XXXXX-XXXXX-XXXXX-XXXXX.
func onePasswordKey(b string) bool {
	p := strings.Split(b, "-")
	ok := len(p) == 5 && len(p[0]) == 6 && len(p[1]) == 11 || len(p) == 6 && len(p[0]) == 6 && len(p[1]) == 6 && len(p[2]) == 5
	if !ok {
		return false
	}
	for _, x := range p[len(p)-3:] {
		if len(x) != 5 {
			return false
		}
	}
	return statsOf(b).entropy >= 3.5
}

// sourcegraphBody: 40 hex digits, local_ and 40, or 16, an underscore and 40.
func sourcegraphBody(b string) bool {
	if statsOf(b).entropy < 3 {
		return false
	}
	switch {
	case len(b) == 40:
		return allIn(b, setHex)
	case len(b) == 46 && strings.HasPrefix(b, "local_"):
		return allIn(b[6:], setHex)
	case len(b) == 57 && b[16] == '_':
		return allIn(b[:16], setHex) && allIn(b[17:], setHex)
	}
	return false
}

// slackLegacy: xoxo-/xoxs- then three dash-separated numbers and hex.
func slackLegacy(b string) bool {
	p := strings.Split(b, "-")
	if len(p) != 4 || len(p[3]) < 8 {
		return false
	}
	for _, x := range p[:3] {
		if x == "" || !allIn(x, setDigit) {
			return false
		}
	}
	return true
}

// genericKeywords trigger the key = value rule.
var genericKeywords = []string{"pass", "pwd", "secret", "token", "key", "credential"}

// builtinRules compiles the built-in specs and their keywords.
func builtinRules() ([]*spec, []keyword) {
	var specs []*spec
	var kws []keyword
	add := func(sp *spec, lits ...string) {
		specs = append(specs, sp)
		idx := uint16(len(specs) - 1)
		for _, l := range lits {
			kws = append(kws, keyword{lit: l, rule: idx})
		}
	}
	for i := range tokenDefs {
		d := &tokenDefs[i]
		add(&spec{kind: kToken, id: d.id, prio: prioToken, body: d.body, min: d.min, max: d.max, opts: d.opts, check: d.check}, d.prefixes...)
	}
	for i, d := range saasDefs {
		opts := lr | optNoFiller
		if strings.HasPrefix(d.prefixes[0], "{") {
			opts |= optBrace
		}
		add(&spec{kind: kToken, id: saasIDs[i], prio: prioToken, body: d.body, min: d.min, max: d.max, opts: opts, check: d.check}, d.prefixes...)
	}
	for i, d := range nearDefs {
		add(&spec{kind: kNear, id: nearIDs[i], prio: prioContext, near: i}, d.names...)
	}
	add(&spec{kind: kProtect, id: idProtect, prio: 0}, maskPrefix)
	add(&spec{kind: kSK, id: idOpenAI, prio: prioToken}, "sk-")
	add(&spec{kind: kSlack, id: idSlackToken, prio: prioToken}, "xox")
	add(&spec{kind: kSlackWebhook, id: idSlackWebhook, prio: prioToken}, "hooks.slack.com/")
	add(&spec{kind: kDiscordWebhook, id: idDiscordWebhook, prio: prioToken}, "/api/webhooks/")
	add(&spec{kind: kJWT, id: idJWT, prio: prioToken}, "eyJ")
	add(&spec{kind: kPEM, id: idPrivateKey, prio: prioToken}, "-----BEGIN")
	add(&spec{kind: kTelegram, id: idTelegram, prio: prioToken, lookback: 10}, ":A")
	add(&spec{kind: kAzureAD, id: idAzureADSecret, prio: prioToken, lookback: 4}, "Q~")
	add(&spec{kind: kSAS, id: idAzureSAS, prio: prioToken}, "sig=")
	add(&spec{kind: kAccountKey, id: idAzureStorageKey, prio: prioToken}, "accountkey=")
	add(&spec{kind: kURL, id: idURLPassword, prio: prioContext}, "://")
	add(&spec{kind: kAuthorization, id: idAuthHeader, prio: prioAuth}, "authorization")
	add(&spec{kind: kBearer, id: idBearer, prio: prioAuth}, "bearer")
	add(&spec{kind: kBasic, id: idBasicAuth, prio: prioAuth}, "basic")
	add(&spec{kind: kJWTBase64, id: idJWT, prio: prioToken}, "ZXlK")
	add(&spec{kind: kCurl, id: idBasicAuth, prio: prioAuth}, "curl")
	add(&spec{kind: kTeams, id: idTeamsWebhook, prio: prioToken}, ".webhook.office.com/webhookb2/")
	add(&spec{kind: kAssign, id: idGeneric, prio: prioGeneric}, append(genericKeywords, serviceKeywords()...)...)
	return specs, kws
}

// rejects reports a keyword occurrence s[ks:ke] of lit that sp's rule
// turns down for the keyword's own bytes and the bytes before it alone: a
// prefix in the wrong case, a token glued to the word before it, a
// service's name inside a word, a number or a base64 run. Such a decision
// reads nothing after the keyword, so a Stream drops the occurrence at
// once instead of waiting to decide it.
func (sp *spec) rejects(s string, ks, ke int, lit string) bool {
	switch sp.kind {
	case kToken:
		return s[ks:ke] != lit && (sp.opts&optFoldPrefix == 0 || !equalFold(s[ks:ke], lit)) || sp.opts&optLeft != 0 && wordBefore(s, ks)
	case kSK, kSlack, kJWTBase64, kCurl:
		return s[ks:ke] != lit || wordBefore(s, ks)
	case kJWT:
		return s[ks:ke] != lit || wordBefore(s, ks) || ks > 0 && (s[ks-1] == '-' || s[ks-1] == '.')
	case kAccountKey, kBearer, kBasic:
		return wordBefore(s, ks)
	case kNear:
		if ks == 0 {
			return false
		}
		// not inside a word, a number or a base64 run
		c := s[ks-1]
		return isLetter(c) && !(isLower(c) && isUpper(s[ks])) || isDigit(c) || c == '+' || c == '/' || c == '=' || c == ']'
	}
	return false
}

// spanLookbacks are the rules whose span may start before their keyword:
// the byte class they look back over and how far.
var spanLookbacks = []struct {
	set *byteSet
	n   int
}{
	{setDigit, 10}, // telegram bot id
	{setAzure, 4},  // azure client secret
}

// maxSpanLookback is the longest of spanLookbacks, setSpanLookback the
// bytes of any of them.
var maxSpanLookback, setSpanLookback = func() (int, *byteSet) {
	n, set := 0, new(byteSet)
	for _, lb := range spanLookbacks {
		n = max(n, lb.n)
		for c, in := range lb.set {
			set[c] = set[c] || in
		}
	}
	return n, set
}()

// lowVariety reports a body made of very few distinct bytes (xxxx, 0000,
// abababab): a placeholder, not a key.
func lowVariety(b string) bool {
	if len(b) < 12 {
		return !distinctAtLeast(b, 4)
	}
	return !distinctAtLeast(b, 6)
}

func matchToken(v *view, ks, ke int, lit string, sp *spec) result {
	s := v.s
	if sp.rejects(s, ks, ke, lit) {
		return noMatch
	}
	j := v.run(ke, sp.body, sp.max+1)
	if sp.opts&optTrimDot != 0 {
		for j > ke && s[j-1] == '.' {
			j--
		}
	}
	n := j - ke
	if n < sp.min || n > sp.max {
		return noMatch
	}
	end := j
	switch {
	case sp.opts&optBrace != 0:
		if v.at(j) != '}' {
			return noMatch
		}
		end = j + 1
	case sp.opts&optEndDelim == 0:
		end = continuation(v, j)
	}
	if sp.opts&optRight != 0 && wordAt(v, end) {
		return noMatch
	}
	if sp.opts&optEndDelim != 0 {
		if c := v.at(j); c >= 0 && !isSpace(c) && strings.IndexByte("\"'`;,)]}>\\", byte(c)) < 0 {
			return noMatch
		}
	}
	body := s[ke:j]
	if sp.opts&optAnyVariety == 0 && lowVariety(body) || sp.opts&optDigitLetter != 0 && !hasDigitAndLetter(body) {
		return noMatch
	}
	if sp.id == idAWSAccessKeyID && strings.HasSuffix(body, "EXAMPLE") {
		return noMatch // AWS's documented example key
	}
	if sp.id == idGoogleAPIKey && publishedGoogleKeys[lit+body] {
		return noMatch
	}
	if sp.opts&optNoFiller != 0 && (fillerInside(body) || ks > 0 && s[ks-1] == '/') {
		return noMatch // a placeholder, or a path segment (notion.site/API-BD80…)
	}
	if sp.check != nil && !sp.check(body) {
		return noMatch
	}
	return result{start: ks, end: end, id: sp.id}
}

// continuation extends a token that ends at j over a '-' and the letters,
// digits, '-' and '_' after it: an off-spec key (sk_live_…-W1Yr…) is masked
// whole, never up to its first dash.
func continuation(v *view, j int) int {
	for v.at(j) == '-' {
		k := v.run(j+1, setB64URL, 512)
		if k == j+1 {
			break
		}
		j = k
	}
	return j
}

// matchProtect recognises an existing "[masked:<id>]" token.
func matchProtect(v *view, ks, ke int, _ string, _ *spec) result {
	j := v.run(ke, setMaskID, 64)
	if j == ke || v.at(j) != ']' {
		return noMatch
	}
	return result{start: ks, end: j + 1, id: idProtect, protect: true}
}

// matchOwn masks one of the daemon's own secrets by exact bytes.
func matchOwn(v *view, ks, ke int, lit string, sp *spec) result {
	if v.s[ks:ke] != lit {
		return noMatch
	}
	return result{start: ks, end: ke, id: idOwnSecret}
}

// matchSK: OpenAI (sk-, sk-proj-, sk-svcacct-, sk-admin-), Anthropic
// (sk-ant-) and OpenRouter (sk-or-) keys.
func matchSK(v *view, ks, ke int, lit string, sp *spec) result {
	s := v.s
	if sp.rejects(s, ks, ke, lit) {
		return noMatch
	}
	j := v.run(ke, setB64URL, 301)
	n := j - ke
	if n < 20 || n > 300 || wordAt(v, j) {
		return noMatch
	}
	body := s[ke:j]
	id := idOpenAI
	switch {
	case strings.HasPrefix(body, "ant-"):
		id = idAnthropic
		if n < 32 {
			return noMatch
		}
		if fillerInside(body) {
			return noMatch // sk-ant-api03-abc123xyz-...-klmnopqrstuvwx-...AA
		}
	case strings.HasPrefix(body, "or-"):
		id = idOpenRouter
	}
	if !hasDigitAndLetter(body) || lowVariety(body) || statsOf(body).entropy < 3 {
		return noMatch
	}
	return result{start: ks, end: j, id: id}
}

// matchSlack: xoxb-, xoxp-, xoxa-, xoxr-, xoxs-, xoxe- and xoxe.xoxp- tokens.
func matchSlack(v *view, ks, ke int, lit string, sp *spec) result {
	s := v.s
	if sp.rejects(s, ks, ke, lit) {
		return noMatch
	}
	t := v.at(ke)
	if t < 0 || !strings.ContainsRune("abprse", rune(t)) {
		return noMatch
	}
	if sep := v.at(ke + 1); sep != '-' && sep != '.' {
		return noMatch
	}
	j := v.run(ke+2, newSetSlack, 400)
	n := j - (ke + 2)
	if n < 8 || n >= 400 || wordAt(v, j) {
		return noMatch
	}
	body := s[ke+2 : j]
	if !strings.ContainsAny(body, "0123456789") || lowVariety(body) {
		return noMatch
	}
	sep := s[ke+1]
	switch {
	case t == 'e' && sep == '.':
		if n < 100 { // xoxe.xoxp-1-<160 or so>
			return noMatch
		}
	case t == 'p' || t == 'e':
		if !slackUserShape(body) && !(t == 'e' && n >= 100) {
			return noMatch
		}
	case t == 'a' || t == 'r':
	default:
		if n < 20 {
			return noMatch
		}
	}
	id := idSlackToken
	switch t {
	case 'b':
		id = idSlackBot
	case 'p':
		id = idSlackUser
	}
	return result{start: ks, end: j, id: id}
}

var newSetSlack = newSet("A-Za-z0-9.-")

// slackUserShape: three numbers of 8 to 13 digits, then 24 to 64 letters,
// digits and dashes (xoxp-<team>-<user>-<id>-<secret>).
func slackUserShape(b string) bool {
	p := strings.SplitN(b, "-", 4)
	if len(p) != 4 || len(p[3]) < 24 || len(p[3]) > 64 {
		return false
	}
	for _, x := range p[:3] {
		if len(x) < 8 || len(x) > 13 || !allIn(x, setDigit) {
			return false
		}
	}
	return true
}

// matchSlackWebhook masks the secret path of a Slack webhook URL.
func matchSlackWebhook(v *view, ks, ke int, _ string, _ *spec) result {
	for _, p := range [...]string{"services/", "workflows/", "triggers/"} {
		if v.hasPrefix(ke, p) {
			st := ke + len(p)
			j := v.run(st, setWebhook, 301)
			if j-st < 20 || j-st > 300 || wordAt(v, j) {
				return noMatch
			}
			return result{start: st, end: j, id: idSlackWebhook}
		}
	}
	return noMatch
}

// matchDiscordWebhook masks the id/token path of a Discord webhook URL.
func matchDiscordWebhook(v *view, ks, ke int, _ string, _ *spec) result {
	host := v.s[:ks]
	if !hasSuffixFold(host, "discord.com") && !hasSuffixFold(host, "discordapp.com") {
		return noMatch
	}
	d := v.run(ke, setDigit, 30)
	if d-ke < 5 || v.at(d) != '/' {
		return noMatch
	}
	j := v.run(d+1, setB64URL, 201)
	if j-(d+1) < 40 || j-(d+1) > 200 || wordAt(v, j) {
		return noMatch
	}
	return result{start: ke, end: j, id: idDiscordWebhook}
}

// matchJWT: three (or five, JWE) base64url segments starting with "eyJ".
func matchJWT(v *view, ks, ke int, lit string, sp *spec) result {
	s := v.s
	if sp.rejects(s, ks, ke, lit) {
		return noMatch
	}
	i, segs, end := ks, 0, -1
	for {
		j := v.run(i, setB64URL, 8192)
		if n := j - i; n < 10 || n >= 8192 {
			break
		}
		segs++
		if segs == 3 || segs == 5 {
			end = j
		}
		if segs == 5 || v.at(j) != '.' {
			break
		}
		if segs == 2 && !setB64URL[byteAt(v, j+1)] {
			end = j + 1 // an unsigned JWT (alg "none"): header.claims.
			break
		}
		i = j + 1
	}
	if end < 0 {
		return noMatch
	}
	for k := 0; k < 2 && v.at(end) == '='; k++ {
		end++ // some encoders pad the signature
	}
	if wordAt(v, end) {
		return noMatch
	}
	return result{start: ks, end: end, id: idJWT}
}

// byteAt is v.at(i) as a byte index for a byteSet (0 past the end).
func byteAt(v *view, i int) byte {
	if c := v.at(i); c >= 0 {
		return byte(c)
	}
	return 0
}

const maxPEM = 1 << 20

// minPEMBody is the least key body a private key block must have: shorter
// ones are documentation ("-----BEGIN PRIVATE KEY-----\nanything\n...").
const minPEMBody = 40

// matchPEM masks a private key block from its BEGIN line to its END line
// (or, when the END line is missing, to the end of the key body). Lines may
// be separated by real or escaped ("\n") newlines, as in JSON.
func matchPEM(v *view, ks, ke int, _ string, _ *spec) result {
	s := v.s
	if s[ks:ke] != "-----BEGIN" || v.at(ke) != ' ' {
		return noMatch
	}
	le := v.run(ke+1, setPEMLabel, 80)
	if !v.hasPrefix(le, "-----") {
		return noMatch
	}
	label := s[ke+1 : le]
	if !strings.Contains(label, "PRIVATE KEY") {
		return noMatch
	}
	id := idPrivateKey
	switch {
	case strings.Contains(label, "OPENSSH"):
		id = idSSHPrivateKey
	case strings.Contains(label, "PGP"):
		id = idPGPPrivateKey
	}
	i := le + 5
	last := i
	body := 0 // bytes of key body seen
	for i-ks < maxPEM {
		k := i
		sep := false
		for {
			c := v.at(k)
			if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
				k++
				sep = true
				continue
			}
			if c == '\\' {
				if d := v.at(k + 1); d == 'n' || d == 'r' {
					k += 2
					sep = true
					continue
				}
			}
			break
		}
		c := v.at(k)
		if c < 0 || !sep {
			break
		}
		if c == '-' {
			if v.hasPrefix(k, "-----END ") {
				e := v.run(k+9, setPEMLabel, 80)
				if v.hasPrefix(e, "-----") {
					if body < minPEMBody {
						return noMatch
					}
					return result{start: ks, end: e + 5, id: id}
				}
			}
			break
		}
		m := v.run(k, setPEMBody, 8192)
		if m == k {
			break
		}
		if c := v.at(m); !(c < 0 || c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\\') {
			break
		}
		last = m
		body += m - k
		i = m
	}
	if body < minPEMBody {
		return noMatch
	}
	return result{start: ks, end: last, id: id}
}

// matchTelegram: <8-10 digit bot id>:A<34 chars>.
func matchTelegram(v *view, ks, ke int, _ string, _ *spec) result {
	s := v.s
	if s[ks:ke] != ":A" {
		return noMatch
	}
	d := ks
	for d > 0 && ks-d <= 10 && isDigit(s[d-1]) {
		d--
	}
	if n := ks - d; n < 8 || n > 10 || d > 0 && (isDigit(s[d-1]) || isLetter(s[d-1]) && !(d >= 3 && s[d-3:d] == "bot")) {
		return noMatch // clm20547038:AgencyIdentificationCodeContentType is an XML type
	}
	j := v.run(ks+1, setB64URL, 36)
	if j-(ks+1) != 35 || wordAt(v, j) || lowVariety(s[ks+1:j]) || camelWords(s[ks+1:j]) {
		return noMatch
	}
	return result{start: d, end: j, id: idTelegram}
}

// matchAzureAD: Entra ID client secrets, xxx9Q~ followed by 31-34 chars.
func matchAzureAD(v *view, ks, ke int, _ string, _ *spec) result {
	s := v.s
	if s[ks:ke] != "Q~" || ks < 4 || !isDigit(s[ks-1]) {
		return noMatch
	}
	for k := ks - 4; k < ks-1; k++ {
		if !setAzure[s[k]] {
			return noMatch
		}
	}
	if st := ks - 4; st > 0 && (setAzureBody[s[st-1]]) {
		return noMatch
	}
	j := v.run(ke, setAzureBody, 35)
	if n := j - ke; n < 31 || n > 34 || wordAt(v, j) {
		return noMatch
	}
	if !hasDigitAndLetter(s[ke:j]) {
		return noMatch
	}
	return result{start: ks - 4, end: j, id: idAzureADSecret}
}

// matchSAS masks the sig= parameter of an Azure SAS URL or token.
func matchSAS(v *view, ks, ke int, _ string, _ *spec) result {
	s := v.s
	if ks == 0 || !strings.ContainsRune("?&;", rune(s[ks-1])) || s[ks:ke] != "sig=" {
		return noMatch
	}
	j := v.run(ke, setSAS, 257)
	if n := j - ke; n < 20 || n > 256 || wordAt(v, j) {
		return noMatch
	}
	if statsOf(s[ke:j]).entropy < 3 {
		return noMatch
	}
	return result{start: ke, end: j, id: idAzureSAS}
}

// matchAccountKey masks AccountKey=... in Azure storage connection strings.
func matchAccountKey(v *view, ks, ke int, lit string, sp *spec) result {
	s := v.s
	if sp.rejects(s, ks, ke, lit) {
		return noMatch
	}
	j := v.run(ke, setB64, 201)
	if n := j - ke; n < 40 || n > 200 || wordAt(v, j) {
		return noMatch
	}
	if lowVariety(s[ke:j]) {
		return noMatch
	}
	return result{start: ke, end: j, id: idAzureStorageKey}
}

// matchURL masks the password of user:password@host in a URL of any scheme.
func matchURL(v *view, ks, ke int, _ string, _ *spec) result {
	s := v.s
	a := ks
	for a > 0 && setScheme[s[a-1]] && ks-a < 32 {
		a--
	}
	if a == ks || !isLetter(s[a]) {
		return noMatch
	}
	u := v.run(ke, setURLUser, 256)
	if v.at(u) != ':' {
		return noMatch
	}
	p := u + 1
	at := -1
	for k := p; k-p < 512; k++ {
		c := v.at(k)
		if c < 0 || isSpace(c) || c == '/' || c == '"' || c == '\'' || c == '`' || c == '<' || c == '>' || c == '\\' {
			break
		}
		if at >= 0 && (c == '?' || c == '#') {
			break
		}
		if c == '@' {
			at = k
		}
	}
	if at <= p {
		return noMatch
	}
	if h := v.at(at + 1); h < 0 || !(setWord[h] || h == '[') {
		return noMatch
	}
	pw := s[p:at]
	if isPlaceholder(pw) || urlPlaceholder(pw) {
		return noMatch
	}
	if localDefault(s[ke:u], pw, urlHost(v, at+1)) {
		return noMatch
	}
	return result{start: p, end: at, id: idURLPassword}
}

// urlHost returns the host of a URL whose authority starts at i.
func urlHost(v *view, i int) string {
	j := v.run(i, setHostName, 256)
	return v.s[i:j]
}

var setHostName = newSet("A-Za-z0-9.-")

// localDefaults are the documented default passwords of servers run
// locally or in a compose file (PostgreSQL's and MySQL's images, RabbitMQ,
// MinIO, SQL Server's sample): on such a host they protect nothing.
var localDefaults = map[string]bool{
	"postgres": true, "root": true, "admin": true, "password": true, "guest": true, "mysql": true,
	"redispw": true, "example": true, "secret": true, "test": true, "minioadmin": true, "changeme": true,
	"yourstrong(!)password": true, "toor": true, "sa": true, "dev": true, "local": true,
}

// localDefault reports a well-known default credential of a local server:
// the user's name as password, or a documented default, on localhost, a
// loopback address or a one-label compose service name (db, postgres).
func localDefault(user, pw, host string) bool {
	local := host == "localhost" || strings.HasPrefix(host, "127.") || host == "0.0.0.0" ||
		host == "host.docker.internal" || host != "" && !strings.Contains(host, ".") && !allIn(host, setDigit)
	if !local {
		return false
	}
	return pw == user || localDefaults[strings.ToLower(pw)]
}

func urlPlaceholder(pw string) bool {
	low := strings.ToLower(pw)
	switch low {
	case "pass", "pw", "pwd", "user", "username", "pass123":
		return true
	}
	// REPLACE_WITH_PASSWORD, ENTER_PASSWORD, YOUR_PASSWORD_HERE, DB_PASS:
	// words standing for the password
	if allIn(pw, setLetterSep) {
		for _, w := range placeholderParts {
			if strings.Contains(low, w) {
				return true
			}
		}
	}
	return false
}

// placeholderParts are words that make a letters-only password a
// placeholder.
var placeholderParts = []string{"password", "passwd", "replace", "your", "enter", "insert", "here", "changeme", "example", "placeholder", "dummy", "redacted", "secret"}

// matchAuthorization masks the credential of an Authorization header or
// field: "Authorization: Bearer X", "authorization=Basic X", "Authorization: X".
func matchAuthorization(v *view, ks, ke int, _ string, _ *spec) result {
	s := v.s
	i := ke
	switch c := v.at(i); {
	case c == '"' || c == '\'':
		i++
	case c == '\\' && v.at(i+1) == '"':
		i += 2
	}
	i = v.skipBlank(i)
	if c := v.at(i); c != ':' && c != '=' {
		return noMatch
	}
	i++
	if v.at(i) == '>' {
		i++
	}
	i = v.skipBlank(i)
	switch c := v.at(i); {
	case c == 'f' && (v.at(i+1) == '"' || v.at(i+1) == '\''):
		i += 2
	case c == '"' || c == '\'' || c == '`':
		i++
	case c == '\\' && v.at(i+1) == '"':
		i += 2
	}
	j := v.run(i, setAuthSch, 40)
	k := j
	for v.at(k) == ' ' {
		k++
	}
	id := idAuthHeader
	vs := i
	if j > i && k > j {
		// '[' counts as a credential here so that a masked credential
		// still marks the word before it as the scheme.
		if c := v.at(k); c >= 0 && (setAuthValue[c] || c == '[') {
			vs = k
			switch {
			case equalFold(s[i:j], "basic"):
				id = idBasicAuth
			case equalFold(s[i:j], "bearer"):
				id = idBearer
			}
		}
	}
	ve := v.run(vs, setAuthValue, 8193)
	if ve-vs > 8192 || v.at(ve) == '(' {
		return noMatch
	}
	val := s[vs:ve]
	if len(val) < 6 || isPlaceholder(val) || onlyLetters(val) && len(val) < 16 {
		return noMatch
	}
	return result{start: vs, end: ve, id: id}
}

func onlyLetters(v string) bool {
	for i := 0; i < len(v); i++ {
		if !isLetter(v[i]) {
			return false
		}
	}
	return true
}

// matchBearer masks opaque bearer tokens anywhere ("Bearer X"); values that
// look like words or placeholders are left alone.
func matchBearer(v *view, ks, ke int, lit string, sp *spec) result {
	s := v.s
	if sp.rejects(s, ks, ke, lit) || wordAt(v, ke) {
		return noMatch
	}
	i := ke
	for c := v.at(i); c == ' ' || c == '\t'; c = v.at(i) {
		i++
	}
	if i == ke {
		return noMatch
	}
	j := v.run(i, setAuthValue, 8193)
	e := j
	for e > i && s[e-1] == '.' {
		e--
	}
	val := s[i:e]
	if j-i > 8192 || len(val) < 12 || isPlaceholder(val) || v.at(j) == '(' {
		return noMatch
	}
	if !hasDigitAndLetter(val) && !hasUpperAndLower(val) || lowVariety(val) {
		return noMatch
	}
	st := statsOf(val)
	if st.entropy < 3 || looksLikeIdentifier(val) {
		return noMatch
	}
	return result{start: i, end: e, id: idBearer}
}

// matchBasic masks "Basic <base64 of user:password>".
func matchBasic(v *view, ks, ke int, lit string, sp *spec) result {
	s := v.s
	if sp.rejects(s, ks, ke, lit) || wordAt(v, ke) {
		return noMatch
	}
	i := ke
	for c := v.at(i); c == ' ' || c == '\t'; c = v.at(i) {
		i++
	}
	if i == ke {
		return noMatch
	}
	j := v.run(i, setB64, 1025)
	if n := j - i; n < 8 || n > 1024 || wordAt(v, j) {
		return noMatch
	}
	if !base64UserPass(s[i:j]) {
		return noMatch
	}
	return result{start: i, end: j, id: idBasicAuth}
}

// base64UserPass reports whether b is standard base64 of printable ASCII
// text containing a colon, as in HTTP basic credentials.
func base64UserPass(b string) bool {
	for len(b) > 0 && b[len(b)-1] == '=' {
		b = b[:len(b)-1]
	}
	if len(b)%4 == 1 {
		return false
	}
	var acc uint32
	bits := 0
	colon := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		var d uint32
		switch {
		case 'A' <= c && c <= 'Z':
			d = uint32(c - 'A')
		case 'a' <= c && c <= 'z':
			d = uint32(c-'a') + 26
		case '0' <= c && c <= '9':
			d = uint32(c-'0') + 52
		case c == '+':
			d = 62
		case c == '/':
			d = 63
		default:
			return false
		}
		acc = acc<<6 | d
		bits += 6
		if bits >= 8 {
			bits -= 8
			x := byte(acc >> uint(bits))
			acc &= 1<<uint(bits) - 1
			if x < 0x20 || x > 0x7e {
				return false
			}
			if x == ':' {
				colon = true
			}
		}
	}
	return colon
}
