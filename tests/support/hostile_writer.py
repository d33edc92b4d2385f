# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A hostile neighbour: any local process may register our tracepoints with our exact
formats and write records into them. This one writes records that are well-formed for the
kernel but wrong for us: texts that are not the JSON they should be, ids that are not hex,
enums out of range, terminal escape sequences in every text a human reads, spans that are
their own parent, a resource announcement that claims another process's resource id, and
a flood of resources.

It imports nothing of the package, only the standard library: it registers with the raw
``DIAG_IOCSREG`` ioctl on ``user_events_data`` (``struct user_reg``, an enable word in an
mmap'd page) and writes with ``os.writev`` (the write index first), as any program could.
It packs records by the registration command it is given (fixed fields in order, then each
``__rel_loc char[]`` text, NUL-terminated), so it follows the schema the test hands it.

``python tests/support/hostile_writer.py CONFIG.json``, CONFIG holding ``user_events_data``
(its path), ``layout`` (``multi``: register with USER_EVENT_REG_MULTI_FORMAT, ``single``:
the single-format command), ``commands`` (``{key: [multi-format command, single-format
command]}`` for the keys of :data:`KEYS`), ``phase`` (any text, in the names),
``app_resource_id`` (the genuine app's resource id, claimed with other attributes) and
``flood`` (how many distinct resources to announce). It prints one JSON line: its ``pid``,
records ``written``, and ``refused`` (errno name: count, for writes the kernel refused).

:func:`hostile_records` gives the records themselves (key, field values), for unit tests.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import json
import mmap
import os
import struct
import sys
import time
from typing import Any

DIAG_IOCSREG = 0xC0082A00  # _IOWR('*', 0, struct user_reg *), x86_64
DIAG_IOCSUNREG = 0x40082A02  # _IOW('*', 2, struct user_unreg *), x86_64
USER_EVENT_REG_MULTI_FORMAT = 2
_USER_REG = struct.Struct("<IBBHQQI")  # size, enable_bit, enable_size, flags, addr, name, index
_USER_UNREG = struct.Struct("<IBBHQ")  # size, disable_bit, reserved, reserved2, disable_addr

KEYS = (
    "span",
    "resource",
    "log_info",
    "log_error",
    "metric_sum",
    "metric_histogram",
    "metric_exp_histogram",
)
"""Our tracepoints this writer writes to (``<prefix>_<key>``)."""

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\u009b\n"
"""Retitle the terminal (OSC), clear it (CSI), a C1 CSI, a newline."""

_FIXED = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q", "s64": "q"}


# -- records, by their registration command -------------------------------------------


def parse_command(command: str) -> list[tuple[str, str]]:
    """(type, name) of each field of a registration command ``NAME type name; ...``."""
    _, _, rest = command.partition(" ")
    fields = []
    for spec in rest.split(";"):
        spec = spec.strip()
        if spec:
            kind, _, name = spec.rpartition(" ")
            fields.append((kind, name))
    return fields


def pack(command: str, values: dict[str, Any]) -> bytes:
    """A record payload for ``command``'s fields: integers for ``u8``..``s64`` (masked to
    the field), bytes or str for ``char[N]`` (cut or NUL-padded) and for texts (written
    as given plus a NUL: invalid UTF-8 included). A field not in ``values`` is 0 or empty."""
    fixed, texts = bytearray(), []
    slots = []
    for kind, name in parse_command(command):
        value = values.get(name)
        if kind.startswith("__rel_loc"):
            text = value if value is not None else b""
            texts.append((text.encode("utf-8") if isinstance(text, str) else text) + b"\0")
            slots.append(len(fixed))
            fixed += b"\0\0\0\0"
        elif kind.startswith("char["):
            size = int(kind[5:-1])
            text = value if value is not None else b""
            raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
            fixed += raw[:size].ljust(size, b"\0")
        else:
            code = _FIXED[kind]
            bits = struct.calcsize(code) * 8
            number = int(value or 0)
            if code == "q":
                number = (number + (1 << 63)) % (1 << 64) - (1 << 63)
            else:
                number %= 1 << bits
            fixed += struct.pack("<" + code, number)
    data = bytearray()
    for at, text in zip(slots, texts, strict=True):
        start = len(fixed) + len(data)
        struct.pack_into("<I", fixed, at, len(text) << 16 | (start - (at + 4)))
        data += text
    return bytes(fixed + data)


def _json(value: Any) -> str:
    """Compact JSON with non-ASCII characters as themselves (C1 controls raw, as JSON
    allows); C0 controls escaped, as JSON requires."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def resource_id(attributes: str | bytes, schema_url: str | bytes = b"") -> int:
    """The id a resource record with these texts must carry (docs/schema.md: a hash of the
    attribute text and schema URL)."""
    a = attributes.encode() if isinstance(attributes, str) else attributes
    s = schema_url.encode() if isinstance(schema_url, str) else schema_url
    return int.from_bytes(hashlib.blake2b(a + b"\0" + s, digest_size=8).digest(), "little")


class _Ids:
    """Fresh ids: every record has its own trace id, span id and observed time, so no two
    hostile items can be mistaken for each other (or for the app's)."""

    def __init__(self) -> None:
        self.now = time.time_ns()
        self.count = 0

    def trace(self) -> str:
        return os.urandom(16).hex()

    def span(self) -> str:
        return os.urandom(8).hex()

    def time(self) -> int:
        self.count += 1
        return self.now + self.count * 1000


def hostile_records(
    phase: str, app_resource_id: int, flood: int
) -> list[tuple[str, dict[str, Any]]]:
    """(key of :data:`KEYS`, field values) of every hostile record, in writing order."""
    ids = _Ids()
    records: list[tuple[str, dict[str, Any]]] = []
    scope = _json({"name": "hostile", "version": "", "schema_url": "", "attributes": {}})

    # A resource of our own, valid, whose service name is made of escape sequences.
    evil_attributes = _json({"service.name": f"hostile {phase} {ESCAPES}svc", "pid": "x"})
    evil = resource_id(evil_attributes)
    records.append(("resource", {"resource_id": evil, "interval_ms": 1,
                                 "attributes": evil_attributes}))  # fmt: skip
    # The genuine app's resource id, with other attributes (its hash does not match).
    records.append(("resource", {
        "resource_id": app_resource_id,
        "interval_ms": 10_000,
        "attributes": _json({"service.name": f"impostor {ESCAPES}", "service.version": "6"}),
    }))  # fmt: skip
    for bad in ("[1]", '"text"', "42", '{"a":', '{"~x":1}', b"\xff\xfe{}"):
        records.append(("resource", {"resource_id": resource_id(bad), "attributes": bad}))
    records.append(("resource", {"resource_id": resource_id("{}", "{"), "attributes": "{}",
                                 "schema_url": "{"}))  # fmt: skip
    flooded = []
    for number in range(flood):
        text = _json({"service.name": f"flood {phase} {number}"})
        flooded.append(resource_id(text))
        records.append(("resource", {"resource_id": flooded[-1], "attributes": text}))

    def span(**fields: Any) -> None:
        start = ids.time()
        values: dict[str, Any] = {
            "start_time_ns": start,
            "end_time_ns": start + 500,
            "duration_ns": 500,
            "resource_id": evil,
            "trace_id": ids.trace(),
            "span_id": ids.span(),
            "parent_span_id": "0" * 16,
            "kind": 1,
            "trace_flags": 1,
            "name": f"hostile {phase} span",
            "attributes": "{}",
            "events": "[]",
            "links": "[]",
            "scope": scope,
        }
        values.update(fields)
        records.append(("span", values))

    event = {"name": "e", "time_ns": 1, "attributes": {}, "dropped": 0}
    link = {"trace_id": "1" * 32, "span_id": "2" * 16, "trace_flags": 1, "trace_state": "",
            "is_remote": False, "attributes": {}, "dropped": 0}  # fmt: skip
    bad_attributes: list[str | bytes] = [
        "[1]",
        '"a string"',
        "42",
        "null",
        "true",
        '{"a":',
        b"\xc3\x28",
    ]
    bad_attributes += ['{"~x":1}', '{"a":{"~x":"y"}}', '{"a":{"~b":"!!"}}', '{"a":1e999}']
    bad_attributes.append('{"a":' + "[" * 1500 + "]" * 1500 + "}")  # deeper than recursion
    for attributes in bad_attributes:
        span(attributes=attributes)
    bad_events = [_json(event), '[1,"a"]', _json([{**event, "name": 5}])]
    bad_events.append(_json([{**event, "time_ns": "soon", "attributes": [], "dropped": -1}]))
    bad_events += [_json([{"name": "no time"}]), _json([{**event, "attributes": "x"}])]
    for events in bad_events:
        span(events=events)
    bad_links = [_json(link), "[1]", _json([{**link, "trace_id": "zz", "span_id": "?"}])]
    bad_links.append(_json([{**link, "trace_flags": 999, "is_remote": "yes"}]))
    bad_links += [_json([{**link, "trace_state": 5}]), _json([{}])]
    for links in bad_links:
        span(links=links)
    for bad_scope in ("[1,2]", '"scope"', "7", _json({"name": 5}), _json({"version": "1"}), "{"):
        span(scope=bad_scope)
    span(trace_id="z" * 32)
    span(trace_id=b"\xff" * 16 + b"0" * 16)  # not even ASCII
    span(span_id="not-hex!not-hex!")
    span(parent_span_id="ghijklmnopqrstuv", parent_flags=1)
    span(trace_id="0" * 32, span_id="0" * 16)
    for kind in (5, 200):
        span(kind=kind)
    for status_code in (3, 255):
        span(status_code=status_code, status_description="bad status")
    span(trace_flags=255, parent_flags=255, truncated=255, dropped_attributes=2**32 - 1)
    span(start_time_ns=2**64 - 1, end_time_ns=0, duration_ns=2**64 - 1)
    for name in (b"\xff\xfe", '{"broken', '"unterminated', "{}", '"\\ud800"', "a\0b"):
        span(name=name)
    span(status_code=2, status_description='{"broken')
    span(status_code=2, status_description=b"\xc0\x80")
    span(trace_state=f"a=b,,,=c{ESCAPES}")
    span(trace_state="{" * 40)
    # Terminal escapes, in otherwise valid records: each should be printed harmlessly.
    span(name=f"name {ESCAPES}")
    span(name=_json(f"json name {ESCAPES}"))
    span(status_code=2, status_description=f"description {ESCAPES}")
    span(events=_json([{**event, "name": f"event {ESCAPES}"}]))
    span(attributes=_json({f"key {ESCAPES}": f"value {ESCAPES}"}))
    span(scope=_json({"name": f"scope {ESCAPES}", "version": ESCAPES, "schema_url": "",
                      "attributes": {}}))  # fmt: skip
    # A span that is its own parent; two spans that are each other's parent.
    trace, own = ids.trace(), ids.span()
    span(trace_id=trace, span_id=own, parent_span_id=own, parent_flags=1, name="own parent")
    trace, first, second = ids.trace(), ids.span(), ids.span()
    span(trace_id=trace, span_id=first, parent_span_id=second, parent_flags=1, name="cycle a")
    span(trace_id=trace, span_id=second, parent_span_id=first, parent_flags=1, name="cycle b")
    # Resources nobody announced, and flooded ones.
    for _ in range(3):
        span(resource_id=int.from_bytes(os.urandom(8), "little"), name="unannounced")
    for rid in flooded[:3]:
        span(resource_id=rid, name="flooded resource")

    def log(key: str = "log_info", **fields: Any) -> None:
        values: dict[str, Any] = {
            "time_ns": ids.time(),
            "observed_time_ns": ids.time(),
            "resource_id": evil,
            "trace_id": ids.trace(),
            "span_id": ids.span(),
            "severity_number": 9,
            "trace_flags": 1,
            "flags": 7,
            "severity_text": "INFO",
            "body": _json(f"hostile {phase} log"),
            "attributes": "{}",
            "scope": scope,
        }
        values.update(fields)
        records.append((key, values))

    for number in (0, 25, 200, 255):
        log(severity_number=number)
    log("log_error", severity_number=3)
    for body in ('{"a":', "[1", '{"~x":1}', b"\xed\xa0\x80", "", "NaN", "1e999"):
        log(body=body)
    for attributes in ("[1]", '"s"', "{"):
        log(attributes=attributes)
    log(severity_text=f"sev {ESCAPES}")
    log(severity_text=b"\xff")
    log(event_name=f"event {ESCAPES}")
    log(body=_json(f"body {ESCAPES}"))
    log(body=_json({f"key {ESCAPES}": [ESCAPES]}))
    log(trace_id="x" * 32, span_id="y" * 16)
    log(scope="[1]", flags=255, truncated=255)
    log(resource_id=int.from_bytes(os.urandom(8), "little"))

    def point(key: str, **fields: Any) -> None:
        when = ids.time()
        values: dict[str, Any] = {
            "start_time_ns": when,
            "time_ns": when + 1,
            "resource_id": evil,
            "value": 5,
            "value_bits": struct.unpack("<Q", struct.pack("<d", 5.0))[0],
            "count": 1,
            "kind": {"metric_sum": 1, "metric_histogram": 3}.get(key, 4),
            "temporality": 2,
            "is_monotonic": 1,
            "flags": 1,
            "name": f"hostile.{phase}",
            "attributes": "{}",
            "exemplars": "[]",
            "buckets": _json({"bounds": [1.0], "counts": [1, 0]}),
            "scope": scope,
        }
        values.update(fields)
        records.append((key, values))

    point("metric_sum", temporality=9)
    point("metric_sum", kind=77)
    point("metric_sum", flags=2, value_text="not json")
    point("metric_sum", flags=2, value_text='"a string"')
    for exemplars in ('{"a":1}', "[1]", _json([{"time_ns": 1, "value": True, "attributes": {},
                                                "trace_id": "zz"}])):  # fmt: skip
        point("metric_sum", exemplars=exemplars)
    point("metric_sum", attributes="[1]")
    point("metric_sum", name=f"metric {ESCAPES}", unit=ESCAPES, description=ESCAPES)
    for buckets in ('{"counts":"x"}', _json({"bounds": [1], "counts": [-1, "a"]}), "[]", "{"):
        point("metric_histogram", buckets=buckets)
    for buckets in (_json({"scale": 0, "zero_count": 0, "positive": [], "negative": {},
                           "flags": 0}), "{}"):  # fmt: skip
        point("metric_exp_histogram", buckets=buckets)
    return records


# -- the kernel -------------------------------------------------------------------------


class Writer:
    """Registrations on one ``user_events_data`` file, each with its enable word (one u32
    per registration, bit 0) in an mmap'd page of this process."""

    def __init__(self, path: str, multi_format: bool) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        self.multi_format = multi_format
        self.words = mmap.mmap(-1, mmap.PAGESIZE)
        self._base = ctypes.addressof(ctypes.c_char.from_buffer(self.words))
        self.index: dict[str, int] = {}
        self.commands: dict[str, str] = {}
        self.slot: dict[str, int] = {}

    def register(self, key: str, multi: str, single: str) -> None:
        command = multi if self.multi_format else single
        slot = len(self.slot)
        text = ctypes.create_string_buffer(command.encode())
        request = bytearray(
            _USER_REG.pack(
                _USER_REG.size,
                0,
                4,
                USER_EVENT_REG_MULTI_FORMAT if self.multi_format else 0,
                self._base + 4 * slot,
                ctypes.addressof(text),
                0,
            )
        )
        fcntl.ioctl(self.fd, DIAG_IOCSREG, request, True)
        self.index[key] = _USER_REG.unpack(request)[-1]
        self.commands[key] = command
        self.slot[key] = slot

    def enabled(self, key: str) -> bool:
        return struct.unpack_from("<I", self.words, 4 * self.slot[key])[0] != 0

    def write(self, key: str, payload: bytes) -> None:
        os.writev(self.fd, [struct.pack("<i", self.index[key]), payload])

    def close(self) -> None:
        """Unregister every enable word before the page goes: the kernel's enablers outlive
        the fd, so it would go on setting bits in whatever memory reuses the page (and this
        process could not register anything else at those addresses)."""
        for slot in self.slot.values():
            request = _USER_UNREG.pack(_USER_UNREG.size, 0, 0, 0, self._base + 4 * slot)
            fcntl.ioctl(self.fd, DIAG_IOCSUNREG, request)
        os.close(self.fd)


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as f:
        config = json.load(f)
    writer = Writer(config["user_events_data"], config["layout"] == "multi")
    for key in KEYS:
        multi, single = config["commands"][key]
        writer.register(key, multi, single)
    deadline = time.monotonic() + 30
    while not all(writer.enabled(key) for key in KEYS):  # the readers hold our tracepoints
        if time.monotonic() > deadline:
            idle = [key for key in KEYS if not writer.enabled(key)]
            sys.stderr.write(f"hostile_writer: nobody listens to {idle}\n")
            return 1
        time.sleep(0.05)
    records = hostile_records(config["phase"], config["app_resource_id"], config["flood"])
    written, refused = 0, {}
    for key, values in records:
        try:
            writer.write(key, pack(writer.commands[key], values))
            written += 1
        except OSError as error:
            name = errno.errorcode.get(error.errno or 0, str(error.errno))
            refused[name] = refused.get(name, 0) + 1
    writer.close()
    sys.stdout.write(json.dumps({"pid": os.getpid(), "written": written, "refused": refused}))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
