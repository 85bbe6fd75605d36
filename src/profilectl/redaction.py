"""Secrets in the workload's own command line and environment: run with, never written.

The rule is data (profiling/redaction.yaml, with its sources). A value is a secret by its NAME or by
its SHAPE:
- by name: an option (`--password=V`, `--token V`, `--api-key V`, `--apiKey V`, `-p V` unless V
  is a number), a variable (`*TOKEN*`, `*_SECRET*`, ... in the environment and in NAME=VALUE
  arguments), a `name=value` inside a URL or an option list (`?token=`, `&access_token=`), a
  `"name": "value"` pair inside a JSON (or Python dict) argument, a `Name: value` header
  (`Authorization: Bearer ...`, `X-Api-Key: ...`), the password of a URL (`https://user:pass@host`);
- by shape, whatever carries it: the token formats vendors document (GitHub `ghp_`, Hugging Face
  `hf_`, OpenAI/Anthropic `sk-`, AWS `AKIA`, JWTs `eyJ...`, private key blocks, ...) and long
  random-looking values after '='.
Every command line and environment profilectl writes (manifest.json, stderr.log's command lines,
summary.json, every report, --dry-run, raw/timing_trace.json, an --attach target's command line and
the notes) goes through `Redactor`; `--no-redact` turns it off for one run. What profilectl cannot
redact: the files the profilers and the workload write themselves (a profiler's own trace may hold
the process's command line), and the process's own /proc/PID/cmdline while it runs.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from profilectl import data

RULES_FILE = "redaction.yaml"
_URL_CREDENTIALS = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)(?P<password>[^@\s/]+)(?P<at>@)")
# `Name: value` (a header given to curl -H, wget --header, a client's --header): the whole argument
_HEADER = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_-]*)(?P<colon>\s*:\s*)(?P<value>\S.*)$", re.DOTALL)
# a scheme and its credentials anywhere in a text: `Bearer abc`, `Basic dXNlcjpw`, `token abc`
_SCHEME = re.compile(r"(?P<head>\b(?:Bearer|Basic|Digest|token)\s+)(?P<value>[A-Za-z0-9._~+/=-]{8,})")
# "name": "value" / 'name': 'value' / "name": 12345 (JSON, Python dicts, YAML flow style)
_QUOTED_PAIR = re.compile(r"(?P<q>[\"'])(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P=q)(?P<colon>\s*:\s*)"
                          r"(?P<value>\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|[^\s,}\]{\[\"'][^\s,}\]]*)")
# name=value inside a longer text: a URL's query (?token=, &access_token=), an option list (a=1,key=v)
_EMBEDDED_PAIR = re.compile(r"(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)=(?P<value>[^\s&;,'\"]+)")
_AFTER_EQUALS = re.compile(r"=(?P<value>[A-Za-z0-9_-]+={0,2})(?![A-Za-z0-9_=-])")
_NUMBER = re.compile(r"\d+")


def _words(name: str) -> list[str]:
    """NAME's words in upper case: split at '-', '_', '.' and camelCase humps (apiKey -> API, KEY)."""
    humps = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [w for w in re.split(r"[-_.]+", humps.upper()) if w]


def _entropy(text: str) -> float:
    """Shannon entropy of `text`, in bits per character."""
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


@dataclass(frozen=True)
class Redactor:
    """profiling/redaction.yaml's rule as read: the option and variable words, token patterns and entropy limits that
    make a workload's value a secret, and whether it is on."""
    replacement: str
    option_words: frozenset[str]
    option_exceptions: frozenset[str]
    env_words: frozenset[str]
    env_suffixes: tuple[str, ...]
    env_exceptions: frozenset[str]
    url_credentials: bool
    short_options: frozenset[str] = frozenset()
    token_patterns: tuple[re.Pattern[str], ...] = ()
    entropy_min_length: int = 0  # 0: no value is judged by its entropy
    entropy_min_bits: float = 0.0
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
                   url_credentials=bool(rules.get("url_credentials", True)),
                   short_options=frozenset(str(o) for o in rules.get("short_options") or ()),
                   token_patterns=tuple(re.compile(str(entry["pattern"])) for entry in rules.get("token_patterns") or ()),
                   entropy_min_length=int(rules.get("entropy_min_length") or 0),
                   entropy_min_bits=float(rules.get("entropy_min_bits") or 0.0), enabled=enabled)

    # ------------------------------------------------------------ names
    def secret_option(self, option: str) -> bool:
        """`--api-key`, `--apiKey`, `--password`, `-token`: an option whose value is a secret."""
        name = option.lstrip("-")
        if not name or name == option or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", name):
            return False
        words = _words(name)
        joined = "_".join(words)
        if joined in self.option_exceptions:
            return False
        pairs = {"_".join(words[i:i + 2]) for i in range(len(words) - 1)}
        return joined in self.option_words or any(w in self.option_words for w in words) or \
            bool(pairs & self.option_words)

    def secret_name(self, name: str) -> bool:
        """A variable's or a field's name (API_TOKEN, AWS_SECRET_ACCESS_KEY, HF_TOKEN, DB_PASSWORD,
        access_token, apiKey, X-Api-Key)."""
        if name.upper() in self.env_exceptions:
            return False
        return any(w in self.env_words or w.endswith(self.env_suffixes) for w in _words(name))

    def short_secret(self, item: str) -> bool:
        """`-p` (whose value comes next) or `-p=VALUE`: a one-letter password option. `-pVALUE` is
        not judged by name (`-port`, `-pretrained` are options of their own): only by its shape."""
        return len(item) >= 2 and item[0] == "-" and item[1] in self.short_options and item[2:3] in ("", "=")

    def random_looking(self, value: str) -> bool:
        """A long value with upper and lower case letters and digits, and high entropy (a key)."""
        core = value.rstrip("=")
        return bool(self.entropy_min_length) and len(core) >= self.entropy_min_length and \
            any(c.isupper() for c in core) and any(c.islower() for c in core) and any(c.isdigit() for c in core) \
            and _entropy(core) >= self.entropy_min_bits

    # ------------------------------------------------------------ values
    def text(self, value: str) -> str:
        """A free string (an argument, a value, a note): every secret found by name or shape replaced."""
        if not self.enabled or not value:
            return value
        hidden = self.replacement
        if self.url_credentials and "://" in value:
            value = _URL_CREDENTIALS.sub(lambda m: f"{m['head']}{hidden}{m['at']}", value)
        header = _HEADER.match(value)
        if header and self.secret_name(header["name"]) and " " not in header["name"]:
            return f"{header['name']}{header['colon']}{hidden}"
        value = _SCHEME.sub(lambda m: f"{m['head']}{hidden}", value)
        if ":" in value:
            value = _QUOTED_PAIR.sub(lambda m: m.group() if not self.secret_name(m["name"]) else
                                     f"{m['q']}{m['name']}{m['q']}{m['colon']}" +
                                     (f"{m['value'][0]}{hidden}{m['value'][0]}" if m["value"][:1] in "\"'" else hidden),
                                     value)
        if "=" in value:
            value = _EMBEDDED_PAIR.sub(lambda m: f"{m['name']}={hidden}" if self.secret_name(m["name"]) else m.group(),
                                       value)
            value = _AFTER_EQUALS.sub(lambda m: f"={hidden}" if self.random_looking(m["value"]) else m.group(), value)
        for pattern in self.token_patterns:
            value = pattern.sub(hidden, value)
        return value

    def argv(self, argv: Iterable[str]) -> tuple[str, ...]:
        """A command line as written down: secret option values, NAME=VALUE secrets, and every
        secret `text` finds inside an argument."""
        items = tuple(argv)
        if not self.enabled:
            return items
        out: list[str] = []
        hide_next = short_next = False
        for item in items:
            if hide_next or (short_next and not item.startswith("-") and not _NUMBER.fullmatch(item)):
                out.append(self.replacement)  # `--token VALUE`; `-p VALUE`, unless a number (a port, a pid)
                hide_next = short_next = False
                continue
            hide_next = short_next = False
            option, equals, value = item.partition("=")
            if item.startswith("-") and (self.secret_option(option) or self.short_secret(item)):
                if equals:
                    keep = not value or (self.short_secret(item) and _NUMBER.fullmatch(value))
                    out.append(item if keep else f"{option}={self.replacement}")
                elif self.short_secret(item):
                    short_next = True
                    out.append(item)
                else:
                    hide_next = True
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
