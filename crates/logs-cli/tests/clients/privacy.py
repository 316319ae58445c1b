"""An independent oracle of the field-policy transforms (issue 46): pseudonymise, truncate,
coarsen and scrub written again from their published rules with Python's standard library
(hmac, hashlib, ipaddress, re), sharing no code with the Rust engine.

    python privacy.py selftest
    python privacy.py corpus PATH
    python privacy.py scrub < requests.jsonl
    python privacy.py compare --dataset DIR --query QUERY --policy POLICY_JSON
                              --key-file FILE --format FMT --export FILE

`selftest`: checks the transforms against literal values worked out by hand.

`corpus`: reads JSON lines `{"text": ..., "expected": ...}` (optionally `"patterns": [...]`,
the operator's patterns) and checks `scrub(text, patterns) == expected` for each. Prints
`{"cases": n, "failures": [...]}`; exits 1 on any failure.

`scrub`: reads JSON lines `{"text": str|null, "patterns": [...]}` on stdin and writes one
line `{"scrubbed": str|null}` for each, in order.

`compare`: computes the rows an export must hold from the dataset's Parquet files with DuckDB
(`<DIR>/application_id=<id>/date=<yyyy-mm-dd>/*.parquet`, hive partitioning) and the
transforms of POLICY_JSON (`{"fields": {field: treatment}, "ipv4_prefix": 24,
"ipv6_prefix": 48, "coarsen": "day"|"hour", "scrub_patterns": [...]}`), reads the export
file in FMT (csv, json, ndjson, parquet, arrow) and compares the two as multisets of rows.
QUERY is the request's query string: `application_id`, `date_since`, `date_until`
(inclusive, UTC; `date_dimension=receive` ranges over `error_receive_timestamp`), `fields`,
equality filters `field=value` (matched against the value as the caller sees it, i.e. after
the field's treatment) and `limit` (then the export's rows must be a sub-multiset of the
expected ones, and number min(limit, total)). Prints `{"rows": n, "ok": true}`, or exits 1
with the difference.

The transforms and the scrubber need only the standard library (`selftest`, `corpus` and
`scrub` run with any Python 3.9+); `compare` needs DuckDB and pyarrow (the `formats`
environment of tests/common/python.rs).
"""

import argparse
import collections
import datetime
import hashlib
import hmac
import ipaddress
import json
import os
import re
import sys
import urllib.parse

# ---------------------------------------------------------------------------------------------
# pseudonymise


def pseudonymise(value, key: bytes):
    """HMAC-SHA256 of the value's text under `key`, the first 16 bytes as lowercase hex. An
    integer's text is its decimal form, a string's its UTF-8 bytes."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("pseudonymise: a boolean")
    if isinstance(value, int):
        text = str(value).encode("ascii")
    elif isinstance(value, str):
        text = value.encode("utf-8")
    else:
        raise TypeError(f"pseudonymise: a {type(value).__name__}")
    return hmac.new(key, text, hashlib.sha256).hexdigest()[:32]


# ---------------------------------------------------------------------------------------------
# truncate

_IPV4_TEXT = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}", re.ASCII)
_IPV6_CHARS = re.compile(r"[0-9A-Fa-f:.]+", re.ASCII)


def _parse_ipv4(text: str):
    """The address of a strict dotted quad (four numbers 0-255, no leading zero), else None."""
    if not _IPV4_TEXT.fullmatch(text):
        return None
    parts = text.split(".")
    if any(len(p) > 1 and p[0] == "0" for p in parts) or any(int(p) > 255 for p in parts):
        return None
    return int.from_bytes(bytes(int(p) for p in parts), "big")


def _parse_ipv6(text: str):
    """The 128-bit value of an IPv6 address text (no zone id, no brackets), else None."""
    if not _IPV6_CHARS.fullmatch(text):
        return None
    try:
        return int(ipaddress.IPv6Address(text))
    except ValueError:
        return None


def _dotted(value: int) -> str:
    return ".".join(str(b) for b in value.to_bytes(4, "big"))


def _compressed(value: int) -> str:
    """RFC 5952: lowercase hex groups without leading zeros; the longest run of two or more
    zero groups (the first of equal runs) written `::`."""
    groups = [(value >> (112 - 16 * i)) & 0xFFFF for i in range(8)]
    best_start, best_len, i = -1, 0, 0
    while i < 8:
        if groups[i] == 0:
            j = i
            while j < 8 and groups[j] == 0:
                j += 1
            if j - i > best_len:
                best_start, best_len = i, j - i
            i = j
        else:
            i += 1
    text = [format(g, "x") for g in groups]
    if best_len < 2:
        return ":".join(text)
    head = ":".join(text[:best_start])
    tail = ":".join(text[best_start + best_len :])
    return f"{head}::{tail}"


def _mask(value: int, keep: int, width: int) -> int:
    keep = max(0, min(keep, width))
    return value & (((1 << keep) - 1) << (width - keep))


def truncate(value, v4: int = 24, v6: int = 48):
    """An IP address cut to its network prefix: IPv4 to `v4` bits (dotted quad), IPv4-mapped
    IPv6 to `v4` bits of the embedded address (`::ffff:a.b.c.d`), any other IPv6 to `v6` bits
    (RFC 5952). Anything that is not an address is null."""
    if value is None or not isinstance(value, str):
        return None
    four = _parse_ipv4(value)
    if four is not None:
        return _dotted(_mask(four, v4, 32))
    six = _parse_ipv6(value)
    if six is None:
        return None
    if six >> 32 == 0xFFFF:
        return "::ffff:" + _dotted(_mask(six & 0xFFFFFFFF, v4, 32))
    return _compressed(_mask(six, v6, 128))


# ---------------------------------------------------------------------------------------------
# coarsen

UNITS = {"hour": 3600, "day": 86400}
_DATETIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}", re.ASCII)


def coarsen(value, unit: str):
    """A timestamp rounded down to the hour or day: Unix seconds (floor), or a
    `yyyy-mm-dd hh:mm:ss` text (any other text is null)."""
    if unit not in UNITS:
        raise ValueError(f"coarsen: unit {unit!r}")
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("coarsen: a boolean")
    if isinstance(value, int):
        return value - value % UNITS[unit]
    if isinstance(value, str):
        if len(value) != 19 or not _DATETIME.fullmatch(value):
            return None
        return value[:13] + ":00:00" if unit == "hour" else value[:10] + " 00:00:00"
    raise TypeError(f"coarsen: a {type(value).__name__}")


# ---------------------------------------------------------------------------------------------
# scrub

_A = re.ASCII
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*", _A)
_BEARER = re.compile(r"(?i)(?:bearer|oauth)\s+[A-Za-z0-9._~+/=-]{8,}", _A)
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+(?:@|%40)[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b", _A)
_PHONE_INTERNATIONAL = re.compile(r"\+\d[\d .()-]{6,22}\d", _A)
_CARD = re.compile(r"(?:[2-6]\d{12,18}|[2-6]\d{3}(?:[ -]\d{4}){3}(?:[ -]\d{3})?|3\d{3}[ -]\d{6}[ -]\d{5})\b", _A)
_PHONE_LOCAL = re.compile(r"(?:\(\d{3}\) ?|\d{3}[.-])\d{3}[.-]\d{4}\b", _A)
_IPV6 = re.compile(r"[0-9A-Fa-f.:]*:[0-9A-Fa-f.:]*:[0-9A-Fa-f.:]*", _A)
_IPV4 = re.compile(r"(?:\d{1,3}\.){3}\d{1,3}\b", _A)

_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_DIGITS = frozenset("0123456789")
_ESCAPE_LETTERS = frozenset("nrtbf")


def _starts_word(text: str, at: int) -> bool:
    """After a non-word character, or after the letter of a backslash escape (`\n`, …)."""
    if at == 0 or text[at - 1] not in _WORD:
        return True
    return text[at - 1] in _ESCAPE_LETTERS and at >= 2 and text[at - 2] == "\\"


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _jwt(m):
    return "[token]" if _starts_word(m.string, m.start()) else m.group(0)


def _bearer(m):
    credential = m.group(0).split()[1]
    strong = len(credential) >= 20 or any(ch in _DIGITS for ch in credential)
    return "[token]" if strong and _starts_word(m.string, m.start()) else m.group(0)


def _email(m):
    found = m.group(0)
    at = found.find("@")
    domain = found[at + 1 :] if at >= 0 else found[found.find("%40") + 3 :]
    if len(domain) > 2 and domain[0] in _DIGITS and domain[1] == "x" and domain[2] == ".":
        return found  # an image scale, `icon@2x.png`
    text, start = m.string, m.start()
    if start > 0 and text[start - 1] == "\\" and found[0] in _ESCAPE_LETTERS:
        return found[0] + "[email]"
    return "[email]"


def _phone_international(m):
    count = sum(1 for ch in m.group(0) if ch in _DIGITS)
    return "[phone]" if 8 <= count <= 15 else m.group(0)


def _card(m):
    digits = "".join(ch for ch in m.group(0) if ch in _DIGITS)
    return "[card]" if _starts_word(m.string, m.start()) and _luhn(digits) else m.group(0)


def _phone_local(m):
    found = m.group(0)
    return "[phone]" if found[0] == "(" or _starts_word(m.string, m.start()) else found


def _ipv6(m):
    text, start, end = m.string, m.start(), m.end()
    found = m.group(0)
    s, e = start, end
    if text[s] == ":" and (s + 1 >= len(text) or text[s + 1] != ":"):
        s += 1
    while e > s and text[e - 1] == ".":
        e -= 1
    if e > s + 1 and text[e - 1] == ":" and text[e - 2] != ":":
        e -= 1
    address = text[s:e]
    alone = _starts_word(text, s) and not (end < len(text) and text[end] in _WORD)
    if not alone or not any(ch in _DIGITS for ch in address) or _parse_ipv6(address) is None:
        return found
    return text[start:s] + "[ip]" + text[e:end]


def _ipv4(m):
    text, start, end = m.string, m.start(), m.end()
    found = m.group(0)
    if any(len(p) > 1 and p[0] == "0" or int(p) > 255 for p in found.split(".")):
        return found
    if not _starts_word(text, start) or (start > 0 and text[start - 1] == "."):
        return found
    if end + 1 < len(text) and text[end] == "." and text[end + 1] in _DIGITS:
        return found
    return "[ip]"


def scrub(text, patterns=()):
    """`text` with the secrets of the published passes replaced by placeholders. The
    operator's patterns are Unicode-aware, as Rust's `regex` compiles them."""
    if text is None:
        return None
    for pattern in patterns:
        text = re.sub(pattern, "[redacted]", text)
    text = _JWT.sub(_jwt, text)
    text = _BEARER.sub(_bearer, text)
    if "@" in text or "%40" in text:
        text = _EMAIL.sub(_email, text)
    text = _PHONE_INTERNATIONAL.sub(_phone_international, text)
    text = _CARD.sub(_card, text)
    text = _PHONE_LOCAL.sub(_phone_local, text)
    text = _IPV6.sub(_ipv6, text)
    text = _IPV4.sub(_ipv4, text)
    return text


# ---------------------------------------------------------------------------------------------
# selftest: literal expectations worked out by hand.


def selftest() -> None:
    checks = 0

    def eq(got, want, what):
        nonlocal checks
        checks += 1
        if got != want:
            raise AssertionError(f"{what}: got {got!r}, want {want!r}")

    # truncate
    eq(truncate("192.168.7.9"), "192.168.7.0", "v4 /24")
    eq(truncate("192.168.7.9", v4=16), "192.168.0.0", "v4 /16")
    eq(truncate("192.168.7.9", v4=20), "192.168.0.0", "v4 /20 (7 = 0000 0111)")
    eq(truncate("192.168.23.9", v4=20), "192.168.16.0", "v4 /20 (23 = 0001 0111)")
    eq(truncate("255.255.255.255", v4=32), "255.255.255.255", "v4 /32")
    eq(truncate("255.255.255.255", v4=0), "0.0.0.0", "v4 /0")
    eq(truncate("2001:db8:1234:5678::1"), "2001:db8:1234::", "v6 /48")
    eq(truncate("2001:DB8:1234:5678:9abc:def0:1:2"), "2001:db8:1234::", "v6 upper case")
    eq(truncate("2001:0db8:1234:5678:0000:0000:0000:0001"), "2001:db8:1234::", "v6 leading zeros")
    eq(truncate("2001:db8:1234:5678::1", v6=64), "2001:db8:1234:5678::", "v6 /64")
    eq(truncate("2001:db8:12ff:5678::1", v6=40), "2001:db8:1200::", "v6 /40")
    eq(truncate("fe80::1"), "fe80::", "link local")
    eq(truncate("::1"), "::", "loopback")
    eq(truncate("::"), "::", "unspecified")
    eq(truncate("::ffff:10.1.2.3"), "::ffff:10.1.2.0", "mapped")
    eq(truncate("::FFFF:10.1.2.3"), "::ffff:10.1.2.0", "mapped, upper case")
    eq(truncate("::ffff:a01:203"), "::ffff:10.1.2.0", "mapped in hex")
    eq(truncate("0:0:0:0:0:ffff:10.1.2.3", v4=16), "::ffff:10.1.0.0", "mapped /16")
    for bad in ["", " 10.1.2.3", "10.1.2.3 ", "10.1.2", "10.1.2.256", "010.1.2.3", "1.2.3.4.5",
                "[::1]", "fe80::1%eth0", "2001:db8::1::2", "12:34:56", "host", "१.२.३.४",
                "2001:db8:0:0:0:0:0:0:1", "::ffff:01.2.3.4"]:
        eq(truncate(bad), None, f"truncate({bad!r})")
    eq(truncate(None), None, "null")
    eq(_compressed(0x20010DB8000000010000000000000001), "2001:db8:0:1::1", "RFC 5952 longest run")
    eq(_compressed(0x20010DB8000000000001000000000001), "2001:db8::1:0:0:1", "RFC 5952 first of equal runs")
    eq(_compressed(0x20010DB8000000010001000100010001), "2001:db8:0:1:1:1:1:1", "RFC 5952 single zero")
    eq(_compressed(0), "::", "RFC 5952 all zero")
    # The compression against ipaddress on masked values (none of them look IPv4-mapped).
    import random

    rng = random.Random(46)
    for _ in range(2000):
        value = rng.getrandbits(128) & rng.choice([0, 0xFFFF, 0xFFFF0000FFFF, (1 << 128) - 1]) << rng.choice([0, 16, 48, 80])
        value = _mask(value & ((1 << 128) - 1), rng.choice([0, 16, 32, 48, 64, 80]), 128)
        eq(_compressed(value), ipaddress.IPv6Address(value).compressed, f"RFC 5952 of {value:032x}")

    # coarsen
    eq(coarsen(3601, "hour"), 3600, "int hour")
    eq(coarsen(3600, "hour"), 3600, "int hour exact")
    eq(coarsen(86399, "day"), 0, "int day")
    eq(coarsen(1790000000, "day"), 1789948800, "int day 2026")  # 1790000000 = 20717 d + 51200 s
    eq(coarsen(1790000000, "hour"), 1789999200, "int hour 2026")  # 51200 = 14 h + 800 s
    eq(coarsen(-1, "hour"), -3600, "int floor of negative")
    eq(coarsen(-3600, "day"), -86400, "int floor of negative day")
    eq(coarsen("2026-10-01 12:34:56", "day"), "2026-10-01 00:00:00", "text day")
    eq(coarsen("2026-10-01 12:34:56", "hour"), "2026-10-01 12:00:00", "text hour")
    for bad in ["2026-10-01", "2026-10-01T12:34:56", "2026-10-01 12:34:56Z", "2026-10-01 1:34:56",
                "2026/10/01 12:34:56", "2026-10-01 12:34:5x", "２026-10-01 12:34:56", ""]:
        eq(coarsen(bad, "hour"), None, f"coarsen({bad!r})")
    eq(coarsen(None, "day"), None, "null")

    # pseudonymise: the HMAC construction checked against hashlib by hand (RFC 2104), and an
    # integer hashed as its decimal text.
    key = bytes(range(32))
    inner = hashlib.sha256(bytes(b ^ 0x36 for b in key.ljust(64, b"\0")) + b"42").digest()
    outer = hashlib.sha256(bytes(b ^ 0x5C for b in key.ljust(64, b"\0")) + inner).hexdigest()
    eq(pseudonymise(42, key), outer[:32], "int as decimal text")
    eq(pseudonymise("42", key), outer[:32], "the same text")
    eq(len(pseudonymise("é", key)), 32, "32 hex digits")
    eq(re.fullmatch("[0-9a-f]{32}", pseudonymise(18446744073709551615, key)) is not None, True, "lowercase hex")
    eq(pseudonymise(None, key), None, "null")
    # RFC 4231 test case 2 (key "Jefe"): HMAC-SHA256 of "what do ya want for nothing?".
    eq(pseudonymise("what do ya want for nothing?", b"Jefe"), "5bdcc146bf60754e6a042426089575c7", "RFC 4231 #2")

    # scrub
    cases = [
        ("user@example.com", "[email]"),
        ("user@localhost", "user@localhost"),
        ("\\\"user@example.com\\\"", "\\\"[email]\\\""),
        ("4111 1111 1111 1111", "[card]"),
        ("4111-1111-1111-1111", "[card]"),
        ("4111111111111112", "4111111111111112"),
        ("+1 (555) 123-4567", "[phone]"),
        ("555-123-4567", "[phone]"),
        ("(555) 123-4567", "[phone]"),
        ("10.0.0.1", "[ip]"),
        ("1.2.3.4.5", "1.2.3.4.5"),
        ("10.0.1", "10.0.1"),
        ("256.1.1.1", "256.1.1.1"),
        ("01.2.3.4", "01.2.3.4"),
        ("2001:db8::1", "[ip]"),
        ("::ffff:10.1.2.3", "[ip]"),
        ("at fe80::1.", "at [ip]."),
        ("std::vector", "std::vector"),
        ("a::b", "a::b"),
        ("12:34:56", "12:34:56"),
        ("Bearer abcdefg1", "[token]"),
        ("Bearer abcdefgh", "Bearer abcdefgh"),
        ("Bearer abcdefghijklmnopqrst", "[token]"),
        ("bearer abcdefg", "bearer abcdefg"),
        ("xoauth 12345678", "xoauth 12345678"),
        ("AppIcon60x60@2x.png", "AppIcon60x60@2x.png"),
        ("to jane.doe%40example.com", "to [email]"),
        ("Hi\\nbob@example.com", "Hi\\n[email]"),
        ("x\\n10.20.30.40", "x\\n[ip]"),
        ("+4915112345678", "[phone]"),
        ("1790000000005", "1790000000005"),
        ("range 2026-10-01 2026-10-07", "range 2026-10-01 2026-10-07"),
        ("card 4111 1111 1111 1111 12/27", "card [card] 12/27"),
        ("ip:2001:db8::1", "ip:[ip]"),
        ("to 2001:db8:85a3::8a2e:370:7334: refused", "to [ip]: refused"),
        ("eyJa.b.", "[token]"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "[token]"),
        ("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "Bearer [token]"),
        (None, None),
    ]
    for text, want in cases:
        eq(scrub(text), want, f"scrub({text!r})")
    eq(scrub("id 12345 of 678", [r"\d{5}"]), "id [redacted] of 678", "operator pattern")
    eq(scrub("a 12345 b", [r"\d+", "redacted"]), "a [[redacted]] b", "patterns in order")
    print(json.dumps({"selftest": "ok", "checks": checks}))


# ---------------------------------------------------------------------------------------------
# corpus, scrub


def corpus(path: str) -> int:
    failures, cases = [], 0
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            if not line.strip():
                continue
            case = json.loads(line)
            cases += 1
            got = scrub(case["text"], case.get("patterns", []))
            if got != case["expected"]:
                failures.append({"line": number, "text": case["text"], "expected": case["expected"], "got": got})
    print(json.dumps({"cases": cases, "failures": failures}))
    return 1 if failures else 0


def scrub_lines() -> int:
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        sys.stdout.write(json.dumps({"scrubbed": scrub(request["text"], request.get("patterns", []))}) + "\n")
    sys.stdout.flush()
    return 0


# ---------------------------------------------------------------------------------------------
# compare

INT_FIELDS = {"error_timestamp", "error_receive_timestamp", "mcc", "mnc", "service_device_id", "application_id"}
DATE_FOLDER = re.compile(r"date=[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
APP_FOLDER = re.compile(r"application_id=-?[0-9]+", re.ASCII)
IGNORED_PARAMETERS = {"use_utf8_bom"}
UNSUPPORTED_PARAMETERS = {"cursor", "parts_count", "part_number", "skip_unavailable_shards"}


def unix_seconds(text: str, end: bool) -> int:
    if " " not in text:
        text += " 23:59:59" if end else " 00:00:00"
    when = datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return int(when.timestamp())


def dataset_files(root: str, application_id: int) -> list:
    """The Parquet files of one application, as the dataset contract counts them."""
    files = []
    for app in sorted(os.listdir(root)):
        if not APP_FOLDER.fullmatch(app) or int(app.partition("=")[2]) != application_id:
            continue
        for date in sorted(os.listdir(os.path.join(root, app))):
            folder = os.path.join(root, app, date)
            if not DATE_FOLDER.fullmatch(date) or not os.path.isdir(folder):
                continue
            for name in sorted(os.listdir(folder)):
                path = os.path.join(folder, name)
                if name.endswith(".parquet") and name[0] not in "._" and os.path.isfile(path):
                    files.append(path)
    return files


class Policy:
    def __init__(self, spec: dict, key: bytes):
        self.fields = spec.get("fields", {})
        self.v4 = int(spec.get("ipv4_prefix", 24))
        self.v6 = int(spec.get("ipv6_prefix", 48))
        self.unit = spec.get("coarsen", "day")
        self.patterns = list(spec.get("scrub_patterns", []))
        self.key = key
        for field, treatment in self.fields.items():
            if treatment not in ("allow", "deny", "pseudonymise", "truncate", "coarsen", "scrub"):
                sys.exit(f"policy: field {field!r} has treatment {treatment!r}")

    def treatment(self, field: str) -> str:
        return self.fields.get(field, "allow")

    def apply(self, field: str, value):
        treatment = self.treatment(field)
        if treatment == "allow":
            return value
        if treatment == "pseudonymise":
            return pseudonymise(value, self.key)
        if treatment == "truncate":
            return truncate(value, self.v4, self.v6)
        if treatment == "coarsen":
            return coarsen(value, self.unit)
        if treatment == "scrub":
            return scrub(value, self.patterns)
        raise SystemExit(f"field {field!r} is denied by the policy: an export cannot hold it")

    def filter_value(self, field: str, text: str):
        """The filter's value as the caller sees the field: an integer where the treated
        field is still an integer, else the text."""
        if self.treatment(field) == "deny":
            sys.exit(f"the filter on {field!r}: the field is denied by the policy")
        integer = field in INT_FIELDS and self.treatment(field) in ("allow", "coarsen")
        if integer:
            try:
                return int(text)
            except ValueError:
                sys.exit(f"the filter {field}={text!r} needs an integer")
        return text


def expected_rows(dataset: str, query: dict, policy: Policy) -> tuple:
    import duckdb

    query = dict(query)
    for name in UNSUPPORTED_PARAMETERS & set(query):
        sys.exit(f"the oracle does not model `{name}`")
    for name in IGNORED_PARAMETERS:
        query.pop(name, None)
    application_id = int(query.pop("application_id"))
    since = unix_seconds(query.pop("date_since"), end=False)
    until = unix_seconds(query.pop("date_until"), end=True)
    dimension = query.pop("date_dimension", "default")
    if dimension not in ("default", "receive"):
        sys.exit(f"date_dimension={dimension!r}")
    range_field = "error_receive_timestamp" if dimension == "receive" else "error_timestamp"
    fields = [f.strip() for f in query.pop("fields").split(",")]
    limit = query.pop("limit", None)
    limit = int(limit) if limit is not None else None
    filters = {field: policy.filter_value(field, text) for field, text in query.items()}
    for field in fields:
        if policy.treatment(field) == "deny":
            sys.exit(f"field {field!r} is denied by the policy: an export cannot hold it")

    files = dataset_files(dataset, application_id)
    if not files:
        return fields, [], limit
    connection = duckdb.connect()
    relation = "read_parquet(?, hive_partitioning = true, union_by_name = true)"
    present = {row[0] for row in connection.execute(f"DESCRIBE SELECT * FROM {relation}", [files]).fetchall()}
    needed = list(dict.fromkeys([*fields, *filters, range_field]))
    columns = []
    for name in needed:
        if name == "application_id":
            columns.append(f"CAST({application_id} AS BIGINT) AS application_id")
        elif name in present:
            columns.append(f'"{name}"')
        else:
            kind = "BIGINT" if name in INT_FIELDS else "VARCHAR"
            columns.append(f'CAST(NULL AS {kind}) AS "{name}"')
    sql = f'SELECT {", ".join(columns)} FROM {relation} WHERE "{range_field}" BETWEEN ? AND ?'
    raw = connection.execute(sql, [files, since, until]).fetchall()
    rows = []
    for record in raw:
        values = dict(zip(needed, record))
        seen = {}

        def shown(name):
            if name not in seen:
                seen[name] = policy.apply(name, values[name])
            return seen[name]

        if all(shown(name) is not None and shown(name) == want for name, want in filters.items()):
            rows.append([shown(name) for name in fields])
    return fields, rows, limit


def read_export(path: str, format: str) -> tuple:
    """(columns, rows) of an export file, each value as Python reads it."""
    if format == "csv":
        import csv

        with open(path, newline="", encoding="utf-8-sig") as file:
            records = list(csv.reader(file))
        return (records[0] if records else []), records[1:]
    if format == "json":
        with open(path, encoding="utf-8-sig") as file:
            data = json.load(file)["data"]
        return (list(data[0]) if data else None), [list(r.values()) for r in data]
    if format == "ndjson":
        data = []
        with open(path, encoding="utf-8") as file:
            for line in file:
                if line.strip():
                    data.append(json.loads(line))
        return (list(data[0]) if data else None), [list(r.values()) for r in data]
    if format in ("parquet", "arrow"):
        import pyarrow
        import pyarrow.ipc
        import pyarrow.parquet

        if format == "parquet":
            table = pyarrow.parquet.read_table(path)
        else:
            with pyarrow.OSFile(path) as file:
                table = pyarrow.ipc.open_stream(file).read_all()
        return table.column_names, [list(r.values()) for r in table.to_pylist()]
    sys.exit(f"unknown format {format!r}")


def typed(value):
    """A value as the typed formats hold it: an integer, a string or null; anything else is
    an error."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    raise TypeError(f"a {type(value).__name__}: {value!r}")


def as_text(value, null):
    """A value as the text formats hold it: an integer as its decimal text, null as `null`."""
    if value is None:
        return null
    if isinstance(value, bool):
        raise TypeError(f"a boolean: {value!r}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    raise TypeError(f"a {type(value).__name__}: {value!r}")


def normalise(rows: list, format: str) -> list:
    """Rows made comparable: CSV as text with null as the empty cell (what the CSV format
    writes for it, as formats.rs expects), JSON and NDJSON as text with null as null (their
    integers are strings unless `--json-integers number`), the typed formats as they are."""
    if format == "csv":
        return [[as_text(v, "") for v in row] for row in rows]
    if format in ("json", "ndjson"):
        return [[as_text(v, None) for v in row] for row in rows]
    return [[typed(v) for v in row] for row in rows]


def compare(args) -> int:
    with open(args.policy, encoding="utf-8") if os.path.isfile(args.policy) else _text(args.policy) as file:
        policy_spec = json.load(file)
    with open(args.key_file, "rb") as file:
        key = file.read()
    policy = Policy(policy_spec, key)
    query = args.query.partition("?")[2] if "?" in args.query else args.query
    params = urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    names = [n for n, _ in params]
    if len(set(names)) != len(names):
        sys.exit("a parameter is given twice")
    fields, expected, limit = expected_rows(args.dataset, dict(params), policy)
    if not os.path.isfile(args.export):
        print(f"no export file {args.export}", file=sys.stderr)
        return 1
    columns, got = read_export(args.export, args.format)
    if columns is not None and list(columns) != fields:
        print(f"the export's columns {columns} are not the requested {fields}", file=sys.stderr)
        return 1
    want = normalise(expected, args.format)
    got = normalise(got, args.format)
    want_count = collections.Counter(json.dumps(r) for r in want)
    got_count = collections.Counter(json.dumps(r) for r in got)
    if limit is None:
        missing, extra = want_count - got_count, got_count - want_count
        ok = not missing and not extra
        count_ok = True
    else:
        missing, extra = collections.Counter(), got_count - want_count
        count_ok = len(got) == min(limit, len(want))
        ok = not extra and count_ok
    if ok:
        print(json.dumps({"rows": len(got), "ok": True}))
        return 0
    lines = [f"export {args.export} ({args.format}): {len(got)} rows; expected {len(want)} rows"
             + (f" (limit {limit}: {min(limit, len(want))})" if limit is not None else "")]
    if not count_ok:
        lines.append(f"  the row count is wrong under the limit: {len(got)}")
    lines.append(f"  fields: {fields}")
    if missing:
        lines.append(f"  {sum(missing.values())} expected rows missing from the export, e.g.:")
        lines.extend(f"    - {_short(json.loads(r))}" for r in list(missing)[:5])
    if extra:
        lines.append(f"  {sum(extra.values())} rows of the export not expected, e.g.:")
        lines.extend(f"    + {_short(json.loads(r))}" for r in list(extra)[:5])
    # Rows that differ in a few fields only: the fields, side by side.
    spare = [json.loads(r) for r in extra]
    shown = 0
    for text in list(missing)[:50]:
        row = json.loads(text)
        near = min(spare, key=lambda other: sum(a != b for a, b in zip(row, other)), default=None)
        if near is None or sum(a != b for a, b in zip(row, near)) > max(1, len(fields) // 2):
            continue
        if shown == 0:
            lines.append("  the nearest rows, field by field (expected / exported):")
        diffs = [f"{name}: {' / '.join(_around(a, b))}" for name, a, b in zip(fields, row, near) if a != b]
        lines.append("    " + "; ".join(diffs))
        shown += 1
        if shown == 5:
            break
    print("\n".join(lines), file=sys.stderr)
    return 1


def handover(args) -> int:
    """The contractor's CSV read by pandas: as many records as the full export, and no value of
    the identifier columns of the full export anywhere in the contractor's file."""
    import pandas

    handed = pandas.read_csv(args.export, dtype=str, keep_default_na=False)
    full = pandas.read_csv(args.full, dtype=str, keep_default_na=False)
    with open(args.export, encoding="utf-8") as file:
        text = file.read()
    leaks = []
    for column in args.identifiers.split(","):
        for value in set(full[column]):
            # An address that is its own truncation (`1.2.3.0`) may rightly appear.
            if column == "device_ipv6" and truncate(value) == value:
                continue
            if len(value) >= 6 and value in text:
                leaks.append(f"{column}={value}")
    report = {"rows": len(handed), "full_rows": len(full), "columns": list(handed.columns), "leaks": leaks[:20]}
    print(json.dumps(report))
    return 0 if not leaks and len(handed) == len(full) else 1


def _cut(value, width: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def _around(a, b) -> tuple:
    """Two values, texts cut to where they first differ."""
    if not (isinstance(a, str) and isinstance(b, str)):
        return _cut(a), _cut(b)
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, at - 40)
    head = "…" if start else ""
    return _cut(head + a[start:], 120), _cut(head + b[start:], 120)


def _short(row: list) -> str:
    return "[" + ", ".join(_cut(v, 80) for v in row) + "]"


class _text:
    """A JSON text given inline instead of a file name, opened like a file."""

    def __init__(self, text: str):
        self.text = text

    def __enter__(self):
        import io

        return io.StringIO(self.text)

    def __exit__(self, *exc):
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    sub.add_parser("selftest")
    c = sub.add_parser("corpus")
    c.add_argument("path")
    sub.add_parser("scrub")
    h = sub.add_parser("handover")
    h.add_argument("--export", required=True)
    h.add_argument("--full", required=True)
    h.add_argument("--identifiers", required=True)
    p = sub.add_parser("compare")
    p.add_argument("--dataset", required=True)
    p.add_argument("--query", required=True, help="the query string (or errors.<fmt>?<query>)")
    p.add_argument("--policy", required=True, help="a JSON file, or the JSON text itself")
    p.add_argument("--key-file", required=True)
    p.add_argument("--format", required=True, choices=["csv", "json", "ndjson", "parquet", "arrow"])
    p.add_argument("--export", required=True)
    args = parser.parse_args()
    if args.mode == "selftest":
        selftest()
        return 0
    if args.mode == "corpus":
        return corpus(args.path)
    if args.mode == "scrub":
        return scrub_lines()
    if args.mode == "handover":
        return handover(args)
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
