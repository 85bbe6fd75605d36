"""Secrets as users really pass them: camelCase options, `-p`, Authorization headers, tokens in URLs,
secrets inside JSON arguments, `--env` names that only look secret, and tokens known by their shape
whatever option carries them. None may be written anywhere profilectl writes (the run's files, every
report format, the dry-run plan, `--json`), nor printed by profilectl's start-up hook in the workload."""

from __future__ import annotations

import json

from reliability_support import manifest_of, only_run

# (argument as given, the secret inside it); tokens shaped like their vendors', random, never real
ARGUMENTS = [
    ("--apiKey", None), ("camel-key-1", "camel-key-1"),
    ("--authToken=camel-tok-2", "camel-tok-2"),
    ("-p", None), ("dash-p-pw-3", "dash-p-pw-3"),
    ("Authorization: Bearer hdr-bearer-4abc", "hdr-bearer-4abc"),
    ("https://example.com/data?token=url-tok-5&page=2", "url-tok-5"),
    ("https://example.com/cb?access_token=url-at-6", "url-at-6"),
    ('{"api_key": "json-key-7", "lr": 0.1}', "json-key-7"),
    ("--hub=hf_" + "Kq8Zr2Lm5Xv9Tb3Nc7Wd1Kf6Hj4Ps0Ga8", "hf_" + "Kq8Zr2Lm5Xv9Tb3Nc7Wd1Kf6Hj4Ps0Ga8"),
    ("ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5", "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"),
    ("--cfg-endpoint=sk-proj-" + "Ab3De5Gh7Jk9Mn1Pq3St5Vw7Yz9", "sk-proj-" + "Ab3De5Gh7Jk9Mn1Pq3St5Vw7Yz9"),
    ("AKIA" + "Q3EXAMPLE7H2KD9Z", "AKIA" + "Q3EXAMPLE7H2KD9Z"),
    ("--seed=q8Zr2Lm5Xv9Tb3Nc7Wd1Kf6Hj4Ps0Ga8Ye2Ru5Io", "q8Zr2Lm5Xv9Tb3Nc7Wd1Kf6Hj4Ps0Ga8Ye2Ru5Io"),
]
ENV = {"SECRETKEY": "env-secretkey-8", "CLIENT_SECRETS": "env-secrets-9", "MYSQLPWD": "env-mysqlpwd-10"}


def test_secrets_in_every_form_are_in_no_file_profilectl_writes(harness, tmp_path):
    traces = harness.traces()
    argv = ["sh", "-c", "true", *[argument for argument, _ in ARGUMENTS]]
    secrets = [secret for _, secret in ARGUMENTS if secret] + list(ENV.values())
    env_items = [item for name, value in ENV.items() for item in ("--env", f"{name}={value}")]
    done = harness.run("profile", "--json", "--no-sample", "--repeat", "1", "--warmup", "0", "--traces-dir",
                       str(traces), *env_items, "--", *argv)
    assert done.returncode == 0, done.stderr
    run = only_run(traces)
    texts = {str(p.relative_to(run)): p.read_text(errors="replace") for p in run.rglob("*") if p.is_file()}
    out = tmp_path / "reports"
    out.mkdir()
    for fmt in ("md", "html", "json"):
        shown = harness.run("report", str(run), "--format", fmt, "-o", str(out / f"r.{fmt}"))
        assert shown.returncode == 0, shown.stderr
        texts[f"report {fmt}"] = (out / f"r.{fmt}").read_text()
    texts["report table"] = harness.run("report", str(run)).stdout
    texts["profile --json"] = done.stdout
    texts["profile stderr"] = done.stderr
    texts["dry run"] = harness.run("profile", "--dry-run", "--json", "--traces-dir", str(traces), *env_items, "--",
                                   *argv).stdout
    leaked = {name: [s for s in secrets if s in text] for name, text in texts.items()}
    assert not any(leaked.values()), {name: found for name, found in leaked.items() if found}
    manifest = manifest_of(run)
    assert manifest["workload"][3:5] == ["--apiKey", "<redacted>"]  # shown as redacted, not dropped
    assert json.loads(done.stdout)["manifest"]["phases"][0]["environment"]["SECRETKEY"] == "<redacted>"


def test_the_start_up_hooks_debug_line_names_the_program_not_its_arguments(harness, tmp_path):
    traces = harness.traces()
    script = tmp_path / "train.py"
    script.write_text("print('trained')\n")
    done = harness.run("profile", "--no-sample", "--repeat", "1", "--warmup", "0", "--traces-dir", str(traces),
                       "--env", "PROFILECTL_HOOK_DEBUG=1", "--", "python3", str(script), "--token=hook-tok-11",
                       "--x", "plain-12")
    assert done.returncode == 0, done.stderr
    log = (only_run(traces) / "stderr.log").read_text()
    hook = [line for line in log.splitlines() + done.stderr.splitlines() if line.startswith("profilectl hook")]
    assert hook and all("train.py" in line for line in hook), log  # the hook ran and spoke
    assert not [line for line in hook if "hook-tok-11" in line or "plain-12" in line], hook
    assert "hook-tok-11" not in log + done.stderr  # profilectl's own command line is redacted as ever
