"""The secrets rule (profiling/redaction.yaml) on real command lines and environments."""

from profilectl.redaction import redactor

R = "<redacted>"


def test_option_values_in_both_spellings_are_redacted():
    shown = redactor().argv(["python3", "train.py", "--password=hunter2", "--token", "abc", "--api-key", "k1",
                             "--db-pass", "p", "--epochs", "3", "--output", "out.json"])
    assert shown == ("python3", "train.py", f"--password={R}", "--token", R, "--api-key", R, "--db-pass", R,
                     "--epochs", "3", "--output", "out.json")


def test_name_value_arguments_urls_and_the_environment():
    r = redactor()
    assert r.argv(["env", "HF_TOKEN=hf_x", "AWS_SECRET_ACCESS_KEY=s", "MODE=fast", "cmd"]) == \
        ("env", f"HF_TOKEN={R}", f"AWS_SECRET_ACCESS_KEY={R}", "MODE=fast", "cmd")
    assert r.argv(["--db", "postgres://bob:pw@db:5432/x", "https://example.com/a:b@c"]) == \
        ("--db", f"postgres://bob:{R}@db:5432/x", "https://example.com/a:b@c")
    assert r.env({"GITHUB_TOKEN": "t", "PWD": "/home/u", "DB_PASSWORD": "p", "PATH": "/bin", "EMPTY_TOKEN": ""}) == \
        {"GITHUB_TOKEN": R, "PWD": "/home/u", "DB_PASSWORD": R, "PATH": "/bin", "EMPTY_TOKEN": ""}


def test_profiler_options_and_no_redact_are_left_alone():
    r = redactor()
    argv = ["rocprofv3", "--kernel-trace", "--output-format", "csv", "-d", "/x", "--", "app", "--keys", "3"]
    assert r.argv(argv) == tuple(argv)
    assert redactor(False).argv(["app", "--token", "abc"]) == ("app", "--token", "abc")


# Tokens shaped as their vendors issue them (random, never real)
GITHUB = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
HUGGING_FACE = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"
OPENAI = "sk-proj-" + "Ab3De5Gh7Jk9Mn1Pq3St5Vw7Yz9Bc1Ef3"
AWS_KEY_ID = "AKIA" + "Q3EXAMPLE7H2KD9Z"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
RANDOM_KEY = "q8Zr2Lm5Xv9Tb3Nc7Wd1Kf6Hj4Ps0Ga8Ye2Ru5Io"


def test_camel_case_options_and_dotted_names_are_options_too():
    assert redactor().argv(["app", "--apiKey", "v1", "--authToken=v2", "--clientSecret", "v3", "--db.password", "v4",
                            "--batchSize", "32"]) == \
        ("app", "--apiKey", R, f"--authToken={R}", "--clientSecret", R, "--db.password", R, "--batchSize", "32")


def test_dash_p_is_a_password_unless_its_value_is_a_number_or_an_option():
    r = redactor()
    assert r.argv(["mysql", "-u", "root", "-p", "hunter2", "db"]) == ("mysql", "-u", "root", "-p", R, "db")
    assert r.argv(["mysql", "-p=hunter2"]) == ("mysql", f"-p={R}")
    assert r.argv(["server", "-p", "8080", "-p=9090", "-p", "-v"]) == ("server", "-p", "8080", "-p=9090", "-p", "-v")
    assert r.argv(["app", "-port", "8080", "-pretrained", "yes"]) == ("app", "-port", "8080", "-pretrained", "yes")


def test_authorization_headers_and_schemes():
    r = redactor()
    assert r.argv(["curl", "-H", "Authorization: Bearer abc.def-ghi_123", "-H", "X-Api-Key: k123456",
                   "--header", "Accept: application/json", "https://example.com"]) == \
        ("curl", "-H", f"Authorization: {R}", "-H", f"X-Api-Key: {R}", "--header", "Accept: application/json",
         "https://example.com")
    assert r.text("sent with Bearer abcdefgh12345 to the API") == f"sent with Bearer {R} to the API"


def test_tokens_inside_urls():
    r = redactor()
    assert r.argv(["wget", "https://example.com/f?token=abc123&x=1", "https://h/p?access_token=zz9&page=2",
                   "https://bob:pw@db:5432/x", "s3://b/k?X-Amz-Signature=deadbeef&X-Amz-Credential=AK/2026"]) == \
        ("wget", f"https://example.com/f?token={R}&x=1", f"https://h/p?access_token={R}&page=2",
         f"https://bob:{R}@db:5432/x", f"s3://b/k?X-Amz-Signature={R}&X-Amz-Credential={R}")


def test_secrets_inside_json_and_option_lists():
    r = redactor()
    assert r.argv(["app", "--config", '{"api_key": "v1", "lr": 0.1, "nested": {"password": "v2"}, "pin": 1234}']) \
        == ("app", "--config", f'{{"api_key": "{R}", "lr": 0.1, "nested": {{"password": "{R}"}}, "pin": 1234}}')
    assert r.argv(["app", "--config={'token': 'v3', \"n\": 2, \"secret\": 99}"]) == \
        ("app", f"--config={{'token': '{R}', \"n\": 2, \"secret\": {R}}}")
    assert r.argv(["app", "--opts", "lr=0.1,api_key=v4,epochs=3"]) == ("app", "--opts", f"lr=0.1,api_key={R},epochs=3")


def test_secret_shapes_are_redacted_whatever_carries_them():
    r = redactor()
    shown = r.argv(["app", GITHUB, f"--remote={HUGGING_FACE}", f"--model-endpoint-cfg={OPENAI}", AWS_KEY_ID, JWT,
                    f"--seed-url=https://x/?q={RANDOM_KEY}", f"CONFIG={RANDOM_KEY}"])
    assert shown == ("app", R, f"--remote={R}", f"--model-endpoint-cfg={R}", R, R, f"--seed-url=https://x/?q={R}",
                     f"CONFIG={R}")
    assert r.text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA\n-----END OPENSSH PRIVATE KEY-----") == R


def test_values_that_only_look_long_are_kept():
    r = redactor()
    kept = ["--revision=3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f", "--model=meta-llama/Llama-3.1-70B-Instruct",
            "--run-id=6f1c2b8e-4d3a-4e5f-9a8b-7c6d5e4f3a2b", "--out=/data/checkpoints/step_000100000/model.pt",
            "--task-name=fine-tune-with-the-long-descriptive-name-2026", "--skip-first=3", "--keys", "3"]
    assert r.argv(["app", *kept]) == ("app", *kept)


def test_environment_names_that_look_secret():
    r = redactor()
    env = {"SECRETKEY": "a", "AWS_ACCESSKEY": "b", "CLIENT_SECRETS": "c", "MYSQLPWD": "d", "HUB_JWT": "e",
           "NPM_CONFIG__AUTH": "f", "TOKENIZERS_PARALLELISM": "false", "OLDPWD": "/x", "MODE": GITHUB}
    assert r.env(env) == {"SECRETKEY": R, "AWS_ACCESSKEY": R, "CLIENT_SECRETS": R, "MYSQLPWD": R, "HUB_JWT": R,
                          "NPM_CONFIG__AUTH": R, "TOKENIZERS_PARALLELISM": "false", "OLDPWD": "/x", "MODE": R}
