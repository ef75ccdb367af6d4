package mask_test

import (
	"testing"

	"github.com/prchat/prchat/chat/mask"
)

// syntaxTable: key-named secrets in every syntax the generic rule reads,
// each with its exact expected output.
var syntaxTable = []struct{ name, in, want string }{
	{"php concatenation", `$apiToken .= "Zq8xV2mN4pL7rT1wK3s9";`, `$apiToken .= "[masked:generic-assignment]";`},
	{"php null coalescing", `$apiToken ??= "Zq8xV2mN4pL7rT1wK3s9";`, `$apiToken ??= "[masked:generic-assignment]";`},
	{"makefile conditional", `API_TOKEN ?= Zq8xV2mN4pL7rT1wK3s9`, `API_TOKEN ?= [masked:generic-assignment]`},
	{"makefile simple", `API_TOKEN := "Zq8xV2mN4pL7rT1wK3s9"`, `API_TOKEN := "[masked:generic-assignment]"`},
	{"makefile shell", `API_TOKEN ::= "Zq8xV2mN4pL7rT1wK3s9"`, `API_TOKEN ::= "[masked:generic-assignment]"`},
	{"makefile evaluated shell", `API_TOKEN :::= "Zq8xV2mN4pL7rT1wK3s9"`, `API_TOKEN :::= "[masked:generic-assignment]"`},
	{"makefile append", `API_TOKEN += Zq8xV2mN4pL7rT1wK3s9`, `API_TOKEN += [masked:generic-assignment]`},
	{"go typed var", `var apiToken string = "Zq8xV2mN4pL7rT1wK3s9"`, `var apiToken string = "[masked:generic-assignment]"`},
	{"java typed", `String token = "Zq8xV2mN4pL7rT1wK3s9";`, `String token = "[masked:generic-assignment]";`},
	{"c# typed", `private const string ApiToken = "Zq8xV2mN4pL7rT1wK3s9";`, `private const string ApiToken = "[masked:generic-assignment]";`},
	{"typescript typed const", `const token: string = "Zq8xV2mN4pL7rT1wK3s9";`, `const token: string = "[masked:generic-assignment]";`},
	{"kotlin typed var", `var apiToken: String = "Zq8xV2mN4pL7rT1wK3s9"`, `var apiToken: String = "[masked:generic-assignment]"`},
	{"java System.setProperty", `System.setProperty("API_TOKEN", "Zq8xV2mN4pL7rT1wK3s9");`, `System.setProperty("API_TOKEN", "[masked:generic-assignment]");`},
	{"go os.Setenv", `os.Setenv("API_TOKEN", "Zq8xV2mN4pL7rT1wK3s9")`, `os.Setenv("API_TOKEN", "[masked:generic-assignment]")`},
	{"getEnvOrDefault", `token := getEnvOrDefault("api_token", "Zq8xV2mN4pL7rT1wK3s9")`, `token := getEnvOrDefault("api_token", "[masked:generic-assignment]")`},
	{"xml element", `<apiToken>Zq8xV2mN4pL7rT1wK3s9</apiToken>`, `<apiToken>[masked:generic-assignment]</apiToken>`},
	{"xml value on the next line", "<apiToken>\n    Zq8xV2mN4pL7rT1wK3s9\n</apiToken>", "<apiToken>\n    [masked:generic-assignment]\n</apiToken>"},
	{"logstash", `  "apiToken" => "Zq8xV2mN4pL7rT1wK3s9"`, `  "apiToken" => "[masked:generic-assignment]"`},
	{"json escaped newline", `{"config.ini": "API_TOKEN=Zq8xV2mN4pL7rT1wK3s9\nBACKUP=true"}`, `{"config.ini": "API_TOKEN=[masked:generic-assignment]\nBACKUP=true"}`},
	{"curl --user", `curl --user deploy:Zq8xV2mN4pL7 https://ci.example.com`, `curl --user deploy:[masked:basic-auth] https://ci.example.com`},
	{"curl --user=", `curl --user=deploy:Zq8xV2mN4pL7 https://ci.example.com`, `curl --user=deploy:[masked:basic-auth] https://ci.example.com`},
	{"curl -u", `curl -s -u elastic:P@ssw0rd$1 https://localhost:9200`, `curl -s -u elastic:[masked:basic-auth] https://localhost:9200`},
	{"curl -u quoted password", `curl --user kevin:'pRf7vG2h1L8nQkW9' -X PATCH`, `curl --user kevin:'[masked:basic-auth]' -X PATCH`},
	{"curl -u quoted pair", `curl -u "kevin:pRf7vG2h1L8nQkW9" https://x`, `curl -u "kevin:[masked:basic-auth]" https://x`},
	{"curl -u on a continued line", "curl https://api.example.com/token \\\n  -u c28wlsosanujy2z:qgsnai0xokrw4j1", "curl https://api.example.com/token \\\n  -u c28wlsosanujy2z:[masked:basic-auth]"},
	{"curl --header authorization", `curl --header "Authorization: Bearer Zq8xV2mN4pL7rT1wK3s9" https://x`, `curl --header "Authorization: Bearer [masked:bearer-token]" https://x`},
	{"curl -H authorization token", `curl -H 'Authorization: token 0f9e8d7c6b5a49382716' https://x`, `curl -H 'Authorization: token [masked:authorization-header]' https://x`},
	{"digits next to a service name", `discord_client_id = "173012519603910572"`, `discord_client_id = "[masked:discord-client-secret]"`},
	{"uuid next to a service name", `const SNYK_KEY = "3f1c2b8e-9d47-4a6b-8e21-5c0d7f9a1b34"`, `const SNYK_KEY = "[masked:service-api-key]"`},
	{"dotted token value", `token: s.ZC9Ecf4M5g9o34Q6RkzGsj0z`, `token: [masked:generic-assignment]`},
	// prchat's own API tokens: "prc_" and 43 base62 digits of 32 random bytes
	{"prc_ token committed in a .env file", "PRCHAT_TOKEN=prc_4Vq8ZkT1mW7pR2xN9cL5hJ3bF6dS0gY8aE1uK7oI2wQ\n", "PRCHAT_TOKEN=[masked:prchat-token]\n"},
	{"prc_ token in a curl header", `curl -H "Authorization: Bearer prc_4Vq8ZkT1mW7pR2xN9cL5hJ3bF6dS0gY8aE1uK7oI2wQ" http://localhost:8080/api/v1/repos`, `curl -H "Authorization: Bearer [masked:prchat-token]" http://localhost:8080/api/v1/repos`},
	{"prc_ token in prose", "The leaked token prc_4Vq8ZkT1mW7pR2xN9cL5hJ3bF6dS0gY8aE1uK7oI2wQ was revoked.", "The leaked token [masked:prchat-token] was revoked."},
	{"prc_ token of the shortest length", `token := "prc_Zk8T1mW7pR2xN9cL5hJ3bF6dS0gY8aE1"`, `token := "[masked:prchat-token]"`},
}

func TestSyntaxes(t *testing.T) {
	t.Parallel()
	m := mask.New()
	for _, c := range syntaxTable {
		if got := m.String(c.in); got != c.want {
			t.Errorf("%s: String(%q)\n got  %q\n want %q", c.name, c.in, got, c.want)
		}
	}
}

// harmless are strings that look like secrets to a pattern but are not:
// each must come out unchanged.
var harmless = []struct{ name, in string }{
	{"Google's published sample key", `const firebaseKey = "AIzaSyDMAScliyLx7F0NPDEJi1QmyCgHIAODrlU"`},
	{"AIza placeholder", `AIzaSyabcdefghijklmnopqrstuvwxyz1234567`},
	{"openshift placeholder", `--set kraken.kubeconfig.token.token="sha256~XXXXXXXXXX_PUT_YOUR_TOKEN_HERE_XXXXXXXXXXXX" \`},
	{"maven coordinates", `notes            = "Maven - io.jsonwebtoken:jjwt-jackson-0.11.2"`},
	{"shell command as value", "-e SUMO_ACCESS_KEY=`etcdctl get /sumologic_secret`"},
	{"slack token with hashes", `"token4": "xoxp-572370529330-573807301142-572331691188-####################"`},
	{"slack token with short numbers", `"token3": "xoxp-1234-1234-1234-4ddbc191d40ee098cbaae6f3523ada2d"`},
	{"aws example key", `aws_access_key_id = AKIAIOSFODNN7EXAMPLE`},
	{"xml type name", `<xsd:element name="AgencyIdentificationCode" type="clm20547038:AgencyIdentificationCodeContentType"/>`},
	{"telegram key with an xml type", `telegram_api_token = "token:"clm53055:AgencyIdentificationCodeContentType""`},
	{"empty pem block", `-----BEGIN OPENSSH PRIVATE KEY----------END OPENSSH PRIVATE KEY-----`},
	{"pem block without a key", "-----BEGIN PRIVATE KEY-----\nanything\n-----END PRIVATE KEY-----"},
	{"anthropic key of the wrong length", `sk-ant-api03-abc123xyz-456de-klMnopqrstuvwx-3456yza789bcde-1234fghijklmnopAA`},
	{"elided value", `export OP_SERVICE_ACCOUNT_TOKEN=ops_eyJzaWduSW5BZGRyZXNzIjoiaHR0cHM6...`},
	{"public token", `publicToken = "9Cnzj4p4WGeKLs1Pt8QuKUpRKfFLfRYC9AIKjbJTWit"`},
	{"csrf token", `csrf-token=Mj2qykJO5rELyHgezQ69nzUX0i3OH67V7+V4eUrLfpuyOuxmiW9rhROG/Whikle15syazJOkrjJa3U2AbhIvUw==`},
	{"named argument", `MailchimpSDK.initialize(token: 3012a5754bbd716926f99c028f7ea428-us18)`},
	{"password that is a word", `password       = "rootpasswd"`},
	{"counting placeholder", `DATABRICKS_TOKEN=dapi123456789012345678a9bc01234defg5`},
	{"curl with placeholder credentials", `curl -u <user:password> https://test.com/endpoint`},
	{"curl with user as password", `curl -i -u 'test:test'`},
	{"file name with a hash", `http://assets.example.com/media/video_box.ico-7a388b69018576d24b59331fd60aab0c.png`},
	{"service name inside a longer word", `sumOfExposures = 3Kof2VffNQ0QgYIhXUPJosVlCaQKm2hfpWE6F1fT9YGY74blQBIPsrkCcf1TwKE5;`},
	{"zeros next to a service name", `discord=000000000000000000`},
	{"x placeholder next to a service name", `#   SUMO_ACCESS_KEY=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx`},
	{"go type after a key", `var token string`},
	{"comparison", `if apiToken == "Zq8xV2mN4pL7rT1wK3s9" {`},
	{"scope operator", `auto token = std::string(buf);`},
	{"prc_ placeholder of one repeated letter", `ts.unknown = "prc_" + "ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ"`},
	{"prc_ prefix alone", "export PRCHAT_TOKEN=prc_..."},
	{"prc_ body too short", "prc_4Vq8ZkT1mW7pR2xN9c"},
}

func TestHarmless(t *testing.T) {
	t.Parallel()
	m := mask.New()
	for _, c := range harmless {
		if got := m.String(c.in); got != c.in {
			t.Errorf("%s: String(%q) = %q, want it unchanged", c.name, c.in, got)
		}
	}
}

// TestSyntaxesStream: the new syntaxes and harmless strings obey the stream
// property at every split.
func TestSyntaxesStream(t *testing.T) {
	t.Parallel()
	m := mask.New()
	for _, c := range syntaxTable {
		want := m.String(c.in)
		for i := 0; i <= len(c.in); i++ {
			if got := streamPieces(m, splitAt(c.in, i)); got != want {
				t.Fatalf("%s split at %d: got %q want %q", c.name, i, got, want)
			}
		}
	}
	for _, c := range harmless {
		if got := streamPieces(m, bytewise(c.in)); got != c.in {
			t.Fatalf("%s byte-wise: got %q", c.name, got)
		}
	}
}
