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
