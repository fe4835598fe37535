"""The secret-guard measurement corpus: realistic credentials and look-alikes.

Every credential here is synthetic. Templates hold the shape people actually paste
(an env line, a connection string, a chat sentence) and ``<<kind:n>>`` slots that a
seeded generator fills with random characters, so the corpus is reproducible, looks
like the real thing to a detector, and never contains a live key (nor a string that a
repository's own secret scanning would mistake for one).
"""

from __future__ import annotations

import random
import re
import string
import uuid

_ALPHABETS = {
    "alnum": string.ascii_letters + string.digits,
    "UA": string.ascii_uppercase + string.digits,
    "hex": "0123456789abcdef",
    "digits": string.digits,
    "b64s": string.ascii_letters + string.digits + "+/",
    "b64url": string.ascii_letters + string.digits + "-_",
    "pw": string.ascii_letters + string.digits + "!#%*+-.?@^_~",
}
_SLOT = re.compile(r"<<(\w+)(?::(\d+))?>>")


def render(template: str, rng: random.Random) -> str:
    def fill(match: re.Match[str]) -> str:
        kind, size = match.group(1), int(match.group(2) or 0)
        if kind == "uuid":
            return str(uuid.UUID(int=rng.getrandbits(128), version=4))
        alphabet = _ALPHABETS[kind]
        while True:
            value = "".join(rng.choice(alphabet) for _ in range(size))
            # Generated credentials always mix letters and digits; so do these.
            if kind in ("hex", "digits", "UA") or (any(c.isdigit() for c in value)
                                                   and any(c.isalpha() for c in value)):
                return value

    return _SLOT.sub(fill, template)


# (the detector expected to fire, template)
SECRETS: list[tuple[str, str]] = [
    ("aws_access_key_id", "aws_access_key_id = AKIA<<UA:16>>"),
    ("aws_access_key_id", "Use key ASIA<<UA:16>> for the temporary session"),
    ("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY=<<b64s:40>>"),
    ("aws_secret_access_key", "aws_secret_access_key: <<b64s:40>>"),
    ("github_token", "my token is ghp_<<alnum:36>> keep it safe"),
    ("github_token", "git clone https://ghp_<<alnum:36>>@github.com/acme/repo.git"),
    ("github_token", "GITHUB_TOKEN=github_pat_<<alnum:22>>_<<alnum:59>>"),
    ("github_token", "oauth: gho_<<alnum:36>>"),
    ("github_token", "installation token ghs_<<alnum:36>> expires in an hour"),
    ("gitlab_token", "CI_JOB_TOKEN is not enough, use glpat-<<b64url:20>>"),
    ("openai_api_key", "OPENAI_API_KEY=sk-proj-<<b64url:48>>"),
    ("openai_api_key", "here's my key sk-<<alnum:48>> please remember it"),
    ("openai_api_key", "service account key: sk-svcacct-<<b64url:40>>"),
    ("anthropic_api_key", "ANTHROPIC_API_KEY=sk-ant-api03-<<b64url:93>>AA"),
    ("anthropic_api_key", "admin key sk-ant-admin01-<<b64url:60>>"),
    ("slack_token", "SLACK_BOT_TOKEN=xoxb-<<digits:12>>-<<digits:13>>-<<alnum:24>>"),
    ("slack_token", "user token xoxp-<<digits:12>>-<<digits:12>>-<<digits:13>>-<<hex:32>>"),
    ("slack_webhook", "webhook: https://hooks.slack.com/services/T<<UA:8>>/B<<UA:10>>/<<alnum:24>>"),
    ("stripe_secret_key", "stripe.api_key = \"sk_live_<<alnum:24>>\""),
    ("stripe_secret_key", "STRIPE_KEY=rk_test_<<alnum:24>>"),
    ("stripe_webhook_secret", "endpoint secret whsec_<<alnum:32>>"),
    ("google_api_key", "maps key: AIza<<b64url:35>>"),
    ("google_oauth_token", "access token ya29.<<b64url:60>>"),
    ("sendgrid_api_key", "SENDGRID_API_KEY=SG.<<b64url:22>>.<<b64url:43>>"),
    ("npm_token", "//registry.npmjs.org/:_authToken=npm_<<alnum:36>>"),
    ("pypi_token", "password = pypi-AgEIcHlwaS5vcmc<<b64url:60>>"),
    ("huggingface_token", "HF_TOKEN=hf_<<alnum:34>>"),
    ("azure_storage_key", "DefaultEndpointsProtocol=https;AccountName=acmestore;"
                          "AccountKey=<<b64s:86>>==;EndpointSuffix=core.windows.net"),
    ("jwt", "session cookie eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ<<b64url:60>>."
            "<<b64url:43>>"),
    ("bearer_token", "Authorization: Bearer <<b64url:40>>"),
    ("bearer_token", "curl -H 'Authorization: Bearer <<alnum:32>>' https://api.acme.test/v1"),
    ("basic_auth", "Authorization: Basic <<b64s:24>>="),
    ("private_key", "-----BEGIN RSA PRIVATE KEY-----\n<<b64s:64>>\n<<b64s:64>>\n"
                    "-----END RSA PRIVATE KEY-----"),
    ("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA<<b64s:40>>\n"
                    "-----END OPENSSH PRIVATE KEY-----"),
    ("private_key", "key.pem:\n-----BEGIN EC PRIVATE KEY-----\n<<b64s:64>>\n"
                    "-----END EC PRIVATE KEY-----"),
    ("private_key", "I pasted this by mistake -----BEGIN PRIVATE KEY-----\n<<b64s:64>>"),
    ("private_key", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n<<b64s:64>>\n"
                    "-----END PGP PRIVATE KEY BLOCK-----"),
    ("url_password", "log in at https://admin:<<alnum:12>>@intranet.acme.test/login"),
    ("url_password", "upload to ftp://deploy:<<alnum:10>>@files.acme.test/upload"),
    ("connection_string", "postgresql://app_user:<<alnum:16>>@db.internal:5432/orders"),
    ("connection_string", "DATABASE_URL=postgres://postgres:<<alnum:20>>@localhost/app"),
    ("connection_string", "mysql://root:<<alnum:12>>@127.0.0.1:3306/shop"),
    ("connection_string", "mongodb+srv://svc:<<alnum:16>>@cluster0.ab1cd.mongodb.net/prod"
                          "?retryWrites=true"),
    ("connection_string", "REDIS_URL=redis://:<<alnum:24>>@cache.internal:6379/0"),
    ("connection_string", "amqp://guest:<<alnum:14>>@rabbit.internal:5672/vhost"),
    ("connection_string", "rediss://default:<<alnum:32>>@redis.cloud.test:6380"),
    ("password_assignment", "password=<<pw:12>>"),
    ("password_assignment", "db_password: <<pw:14>>"),
    ("password_assignment", "pwd=<<pw:10>>"),
    ("password_assignment", "passwd: <<pw:12>>"),
    ("password_assignment", "My wifi password is <<pw:10>>"),
    ("password_assignment", "log in with user alice and password <<pw:12>> then"),
    ("password_assignment", "Server=tcp:acme.database.windows.net,1433;Database=orders;"
                            "User ID=app;Password=<<pw:16>>;Encrypt=true"),
    ("password_assignment", "POSTGRES_PASSWORD='<<pw:18>>'"),
    ("secret_assignment", "client_secret: <<alnum:40>>"),
    ("secret_assignment", "api_key=<<hex:32>>"),
    ("secret_assignment", "{\"apiKey\": \"<<alnum:32>>\", \"region\": \"eu-west-1\"}"),
    ("secret_assignment", "https://api.acme.test/v1/export?token=<<alnum:40>>&format=csv"),
    ("secret_assignment", "export SECRET_KEY='<<b64url:50>>'"),
    ("secret_assignment", "X-Api-Key: <<alnum:32>>"),
    ("secret_assignment", "refresh_token=<<b64url:64>>"),
]

NON_SECRETS: list[str] = [
    "Request id 3f2b8c1e-9d4a-4f6b-8e2a-1c5d7e9f0a3b failed with a timeout",
    "UUID v4 for the new tenant: <<uuid>>",
    "Fixed in commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
    "Commit <<hex:40>> reverted <<hex:7>> on main",
    "git log --format=%H shows hashes like 2fd4e1c67a2d28fced849ee1bb76e7391b93eb12",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "docker pull ghcr.io/acme/api@sha256:<<hex:64>>",
    "checksum=<<hex:64>>",
    "The MD5 of the file is 9e107d9d372bb6826bd81d3542a419d6",
    "integrity sha512-<<b64s:86>>==",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhf"
    "DwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "Base64 of 'hello world' is aGVsbG8gd29ybGQ=",
    "Remember to rotate your password every 90 days.",
    "My password must have at least 12 characters",
    "Forgot password? Click reset on the login page.",
    "the password is required for login",
    "Use a password manager like 1Password or Bitwarden",
    "password: ********",
    "Password: ******** (hidden)",
    "Set password=<your-password> in the config file",
    "password=${DB_PASSWORD}",
    "password: {{ vault_db_password }}",
    "The password field is masked as ●●●●●●●●",
    "passport number is not required here",
    "The API key goes in the X-Api-Key header.",
    "OpenAI keys look like sk-... and should never be committed.",
    "export OPENAI_API_KEY=sk-...",
    "api_key=YOUR_API_KEY",
    "Set AWS_SECRET_ACCESS_KEY=<your secret key> in ~/.aws/credentials",
    "AWS access keys start with AKIA and are twenty characters long",
    "GitHub personal access tokens start with ghp_",
    "AIza is the prefix Google uses for browser API keys",
    "eyJ is what base64-encoded JSON starts with",
    "The JWT header eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9 says HS256",
    "See RFC 7519 for JSON Web Tokens (JWT).",
    "Bearer token authentication is described in RFC 6750",
    "Token usage: 1532 prompt tokens, 210 completion tokens",
    "token: the session token expires after 15 minutes",
    "Pull request 4821 changed the token refresh interval to 3600 seconds",
    "The secret to good coffee is fresh beans",
    "secret: keep the recipe between us",
    "Stripe publishable key pk_live_<<alnum:24>> is safe to embed in the page",
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC<<b64s:60>> alice@laptop",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA<<b64s:40>>\n"
    "-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQG\n"
    "-----END CERTIFICATE-----",
    "postgres://user:password@localhost:5432/mydb",
    "DATABASE_URL=postgresql://USER:PASSWORD@HOST:5432/DB",
    "redis://localhost:6379/0",
    "mongodb://db1.internal:27017,db2.internal:27017/?replicaSet=rs0",
    "amqp://rabbit.internal:5672/%2f",
    "https://user@example.com/path",
    "Visit https://docs.acme.test/guide?page=2#auth for details",
    "Connect with psql -h db.internal -U app orders",
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36",
    "Slack channel #xoxo-party-planning-2024 is for the offsite",
    "Version 2.14.0-rc.1+build.5 released on 2024-05-02",
    "Order #A1B2C3D4E5F6G7H8 shipped to the Berlin warehouse",
    "ISBN 978-3-16-148410-0",
    "CSS colors #1e90ff and #a1b2c3 in the theme",
    "The key ID is 5A3B7C9D (public PGP fingerprint)",
    "The risk-assessment-framework-2024-update is due Friday",
    "Run pwd /home/alice/projects to check where you are",
    "sk-learn-is-great-for-ml-2024 was the workshop's hashtag",
    "Alice prefers dark mode in every editor",
]


def secrets(seed: int = 20240601) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(expected, render(template, rng)) for expected, template in SECRETS]


def non_secrets(seed: int = 20240601) -> list[str]:
    rng = random.Random(seed + 1)
    return [render(template, rng) for template in NON_SECRETS]
