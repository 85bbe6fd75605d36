"""Secrets in the workload's own command line and environment: run with, never written.

The rule is data (profiling/redaction.yaml, with its source): which option names (`--password=V`,
`--token V`, `--api-key V`), which variable names (`*TOKEN*`, `*_SECRET*`, ... in the environment and
in NAME=VALUE arguments) and URLs with credentials (`https://user:pass@host`) carry a secret. Every
command line and environment profilectl writes (manifest.json, stderr.log's command lines,
summary.json, every report, --dry-run, raw/timing_trace.json) goes through `Redactor`; `--no-redact`
turns it off for one run. What profilectl cannot redact: the files the profilers and the workload
write themselves (a profiler's own trace may hold the process's command line), and the process's
own /proc/PID/cmdline while it runs.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from profilectl import data

RULES_FILE = "redaction.yaml"
_URL_CREDENTIALS = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)(?P<password>[^@\s/]+)(?P<at>@)")


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[-_]+", name.upper()) if w]


@dataclass(frozen=True)
class Redactor:
    replacement: str
    option_words: frozenset[str]
    option_exceptions: frozenset[str]
    env_words: frozenset[str]
    env_suffixes: tuple[str, ...]
    env_exceptions: frozenset[str]
    url_credentials: bool
    enabled: bool = True

    @classmethod
    def from_rules(cls, rules: Mapping[str, Any], enabled: bool = True) -> "Redactor":
        def upper(key: str) -> list[str]:
            return [str(item).upper() for item in rules.get(key) or ()]
        return cls(replacement=str(rules.get("replacement", "<redacted>")),
                   option_words=frozenset(w.replace("-", "_") for w in upper("option_words")),
                   option_exceptions=frozenset(w.replace("-", "_") for w in upper("option_exceptions")),
                   env_words=frozenset(upper("env_words")), env_suffixes=tuple(upper("env_suffixes")),
                   env_exceptions=frozenset(upper("env_exceptions")),
                   url_credentials=bool(rules.get("url_credentials", True)), enabled=enabled)

    # ------------------------------------------------------------ names
    def secret_option(self, option: str) -> bool:
        """`--api-key`, `--password`, `-token`: an option whose value is a secret."""
        name = option.lstrip("-")
        if not name or name == option or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name):
            return False
        joined = "_".join(_words(name))
        if joined in self.option_exceptions:
            return False
        words = _words(name)
        pairs = {"_".join(words[i:i + 2]) for i in range(len(words) - 1)}
        return joined in self.option_words or any(w in self.option_words for w in words) or \
            bool(pairs & self.option_words)

    def secret_name(self, name: str) -> bool:
        """An environment variable's name (API_TOKEN, AWS_SECRET_ACCESS_KEY, HF_TOKEN, DB_PASSWORD)."""
        upper = name.upper()
        if upper in self.env_exceptions:
            return False
        return any(w in self.env_words or w.endswith(self.env_suffixes) for w in _words(upper))

    # ------------------------------------------------------------ values
    def text(self, value: str) -> str:
        """A free string: credentials inside URLs replaced."""
        if not self.enabled or not self.url_credentials or "://" not in value:
            return value
        return _URL_CREDENTIALS.sub(lambda m: f"{m['head']}{self.replacement}{m['at']}", value)

    def argv(self, argv: Iterable[str]) -> tuple[str, ...]:
        """A command line as written down: secret option values, NAME=VALUE secrets, URL passwords."""
        items = tuple(argv)
        if not self.enabled:
            return items
        out: list[str] = []
        hide_next = False
        for item in items:
            if hide_next:
                out.append(self.replacement)
                hide_next = False
                continue
            option, equals, value = item.partition("=")
            if item.startswith("-") and self.secret_option(option):
                if equals:
                    out.append(f"{option}={self.replacement}" if value else item)
                else:
                    hide_next = True  # `--token VALUE`
                    out.append(item)
                continue
            if equals and not item.startswith("-") and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", option) \
                    and self.secret_name(option) and value:
                out.append(f"{option}={self.replacement}")  # `env HF_TOKEN=... python train.py`
                continue
            out.append(self.text(item))
        return tuple(out)

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        if not self.enabled:
            return dict(env)
        return {k: self.replacement if v and self.secret_name(k) else self.text(v) for k, v in env.items()}

    def line(self, argv: Iterable[str]) -> str:
        return " ".join(self.argv(argv))


@functools.lru_cache(maxsize=2)
def redactor(enabled: bool = True) -> Redactor:
    """The rule in profiling/redaction.yaml (the user's folder first, then the shipped one)."""
    return Redactor.from_rules(data.load_mapping(RULES_FILE), enabled=enabled)
