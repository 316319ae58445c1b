"""Hooks of .ci/schemathesis.

`use_utf8_bom=true` starts the JSON export with a UTF-8 byte order mark, as the spec's
parameter asks (RFC 8259 lets parsers ignore it; Python's json refuses it). When the request
asked for it, the mark is taken off before the body is checked against the document, so that
the rest is still checked; an unasked mark stays and fails the check.

A `Range` of a prepared export answers a slice of the copy sent (206; docs/api.md, "Prepared
exports"), which is no JSON document, and of the gzip copy when gzip is accepted, which
`requests` cannot decode alone. So a positive request with `Range` asks for the plain copy
(`Accept-Encoding: identity`; negative ones, such as a missing `Authorization`, are left as
generated), and a 206 is checked here against the whole export fetched again without `Range`:
the slice must be its bytes at the offsets `Content-Range` names. The whole export then stands
in for the slice, so that the document's checks apply to it.
"""

import re

import requests
import schemathesis

BOM = b"\xef\xbb\xbf"


@schemathesis.hook
def before_call(context, case, kwargs):
    negative = case.meta is not None and case.meta.generation.mode.is_negative
    headers = case.headers or {}
    if not negative and any(name.lower() == "range" for name in headers):
        case.headers = {**headers, "Accept-Encoding": "identity"}


def check_slice(response):
    """The 206's body against the whole export: the same bytes at the same offsets."""
    found = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", response.headers["content-range"][0])
    assert found, response.headers["content-range"]
    first, last, length = map(int, found.groups())
    request = response.request
    # The complete export in the spool, as the slice was cut from it (a streamed one may order
    # its rows otherwise).
    dropped = ("range", "if-range", "if-none-match", "cache-control", "prefer", "accept-encoding")
    headers = {k: v for k, v in request.headers.items() if k.lower() not in dropped}
    headers.update({"Accept-Encoding": "identity", "Prefer": "respond-async"})
    whole = requests.get(request.url, headers=headers, timeout=60)
    assert whole.status_code == 200 and len(whole.content) == length, (whole.status_code, length)
    assert response.content == whole.content[first : last + 1], "a 206 slice differs from the export"
    response.content = whole.content


@schemathesis.hook
def after_call(context, case, response):
    if response.status_code == 206 and "content-encoding" not in response.headers:
        check_slice(response)
    asked = str((case.query or {}).get("use_utf8_bom")).lower() in ("true", "1")
    json_export = case.path.endswith("/errors.json") and response.status_code in (200, 206)
    if asked and json_export and response.content.startswith(BOM):
        response.content = response.content[len(BOM):]
