#!/usr/bin/env python3
"""ANCS fixtures for DoorbellCoreTests, built from the byte layout of Apple's ANCS specification
with nothing but `struct` (independent of the Swift encoders), and a cross-check of the Swift
golden outputs against an independent decoder (Bumble's `bumble.profiles.ancs.Notification` for
the Notification Source, the decoding below for the Data Source).

    ancs_reference.py write   # (re)writes Tests/DoorbellCoreTests/Fixtures/ancs-*.hex
    ancs_reference.py check   # exits 1 when the fixtures or the Swift golden files disagree
"""
import os
import struct
import sys

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "DoorbellCoreTests", "Fixtures")
CATEGORIES = ["other", "incoming-call", "missed-call", "voicemail", "social", "schedule", "email", "news",
              "health-and-fitness", "business-and-finance", "location", "entertainment"]
EVENTS = ["added", "modified", "removed"]
FLAGS = ["silent", "important", "pre-existing", "positive-action", "negative-action"]
ATTRS = ["app-identifier", "title", "subtitle", "message", "message-size", "date",
         "positive-action-label", "negative-action-label"]

# (comment, event, flags, category, count, uid) or (comment, raw bytes)
NOTIFICATION_SOURCE = [
    ("incoming call added: important, accept/decline actions", 0, 0x1A, 1, 1, 7),
    ("the doorbell app's push appears (category other, a clear action)", 0, 0x10, 0, 3, 42),
    ("an email already there when the base station subscribed", 0, 0x14, 6, 12, 3),
    ("missed call modified", 1, 0x02, 2, 1, 8),
    ("the incoming call removed (answered on the phone)", 2, 0x00, 1, 0, 7),
    ("a silent news notification", 0, 0x01, 7, 5, 0x01020304),
    ("entertainment, the last category of the 2013 specification", 0, 0x00, 11, 1, 0xFFFFFFFE),
    ("a category a newer iOS may add (12)", 0, 0x00, 12, 1, 99),
    ("an event id the specification does not define (3)", 3, 0x00, 4, 2, 100),
    ("a reserved flag bit (0x20) set", 0, 0x22, 5, 1, 101),
    ("truncated: 7 bytes", bytes.fromhex("00120103070000")),
    ("9 bytes: one too many", bytes.fromhex("001201030700000000")),
]


def ns_bytes(case):
    if len(case) == 2:
        return case[1]
    _, event, flags, category, count, uid = case
    return struct.pack("<BBBBI", event, flags, category, count, uid)


def gna(uid, attrs):
    """GetNotificationAttributes: attrs as (id, max length or None)."""
    out = struct.pack("<BI", 0, uid)
    for a, n in attrs:
        out += struct.pack("<BH", a, n) if n is not None else struct.pack("<B", a)
    return out


# Control Point commands, in the order ANCSControlPointTests lists its Swift values.
CONTROL_POINT = [
    ("get notification attributes of uid 7: app id, title 32, message 64, date, both labels",
     gna(7, [(0, None), (1, 32), (3, 64), (5, None), (6, None), (7, None)])),
    ("every notification attribute of uid 0x01020304, subtitle 0x0123",
     gna(0x01020304, [(0, None), (1, 64), (2, 0x0123), (3, 256), (4, None), (5, None), (6, None), (7, None)])),
    ("get app attributes: display name of com.example.doorbell", b"\x01" + b"com.example.doorbell\x00" + b"\x00"),
    ("perform the positive action on uid 7", struct.pack("<BIB", 2, 7, 0)),
    ("perform the negative action on uid 0xFFFFFFFE (dismiss from the door)", struct.pack("<BIB", 2, 0xFFFFFFFE, 1)),
]


def tuple_(a, value):
    return struct.pack("<BH", a, len(value)) + value


def split(data, size=20):
    """GATT notifications at the default ATT MTU (23): 20 bytes each."""
    return [data[i:i + size] for i in range(0, len(data), size)] or [b""]


def n_resp(uid, tuples):
    return struct.pack("<BI", 0, uid) + b"".join(tuple_(a, v) for a, v in tuples)


# (comment, command text as the Swift test reads it, [fragments])
DATA_SOURCE = [
    ("incoming call: every attribute asked, an empty message, split at MTU 23",
     "N 7 app-identifier title:32 message:64 date positive-action-label negative-action-label",
     split(n_resp(7, [(0, b"com.apple.mobilephone"), (1, b"Anna"), (3, b""), (5, b"20261126T154512"),
                      (6, b"Accept"), (7, b"Decline")]))),
    ("the doorbell app's push with its correlation token in the subtitle, UTF-8 title",
     "N 42 app-identifier title:64 subtitle:64 message:256 message-size date",
     split(n_resp(42, [(0, b"com.example.doorbell"), (1, "Front door \U0001F514".encode()),
                       (2, b"evt 01JD4Q7ZKX"), (3, b"Someone is at the front door"), (4, b"28"),
                       (5, b"20261126T154509")]))),
    ("app attributes: the display name",
     "A com.example.doorbell display-name",
     split(b"\x01com.example.doorbell\x00" + tuple_(0, b"Doorbell"))),
    ("a title longer than the 8 bytes asked for: kept to 8, counted oversized",
     "N 9 title:8",
     [n_resp(9, [(1, b"Someone at the door")])]),
    ("an attribute id the specification does not define (0x20) between two asked for",
     "N 10 app-identifier title:16",
     [n_resp(10, [(0, b"com.apple.MobileSMS")]) + tuple_(0x20, b"??") + tuple_(1, b"Ben")]),
    ("a late answer for uid 12 arrives first, then the answer for uid 11",
     "N 11 app-identifier",
     [n_resp(12, [(0, b"abc")]), n_resp(11, [(0, b"com.apple.mobilemail")])]),
    ("the phone stops in the middle of the title: the command times out",
     "N 13 app-identifier title:32",
     split(n_resp(13, [(0, b"com.apple.mobilephone"), (1, b"Anna Lindqvist")]))[:2]),
    ("a date that is not yyyyMMdd'T'HHmmSS",
     "N 14 date",
     [n_resp(14, [(5, b"2026-11-26 15:45")])]),
    ("a subtitle that was not asked for, then the title that was; bytes after the end",
     "N 15 title:32",
     [n_resp(15, [(2, b"sub"), (1, b"Title")]) + b"\x00\x00"]),
    ("one byte per notification",
     "N 16 app-identifier negative-action-label",
     [bytes([b]) for b in n_resp(16, [(0, b"com.apple.mobilephone"), (7, b"Decline")])]),
]


def fixture_texts():
    """File name → the text this script lays out for it."""
    ns = ("# ANCS Notification Source packets (8 bytes: EventID, EventFlags, CategoryID,\n"
          "# CategoryCount, NotificationUID little-endian), written by Tests/helpers/ancs_reference.py\n"
          "# from the layout in Apple's ANCS specification with Python's struct.\n")
    ns += "".join(f"# {case[0]}\n{ns_bytes(case).hex()}\n" for case in NOTIFICATION_SOURCE)
    cp = "# ANCS Control Point commands, written by Tests/helpers/ancs_reference.py with struct.\n"
    cp += "".join(f"# {comment}\n{data.hex()}\n" for comment, data in CONTROL_POINT)
    ds = ("# ANCS Data Source responses, one GATT notification per '>' line, after the command\n"
          "# the base station wrote ('N uid attribute[:max]…' or 'A app-id attribute…'). Written by\n"
          "# Tests/helpers/ancs_reference.py with struct from Apple's ANCS specification.\n")
    for comment, command, fragments in DATA_SOURCE:
        ds += f"# {comment}\ncommand {command}\n" + "".join(f"> {fr.hex()}\n" for fr in fragments)
    return {"ancs-notification-source.hex": ns, "ancs-control-point.hex": cp, "ancs-data-source.hex": ds}


def write():
    for name, text in fixture_texts().items():
        with open(os.path.join(FIXTURES, name), "w") as f:
            f.write(text)


def describe_notification(data):
    """The golden line, from Bumble's decoder (its enums are open: unknown values pass through)."""
    from bumble.profiles.ancs import Notification
    if len(data) != 8:
        return f"error: ANCS Notification Source packet of {len(data)} bytes (always 8): ignored; " \
               "the phone or the link is corrupting data"
    n = Notification.from_bytes(data)
    event = EVENTS[n.event_id] if n.event_id < 3 else f"unknown-event-{int(n.event_id)}"
    category = CATEGORIES[n.category_id] if n.category_id < 12 else f"unknown-category-{int(n.category_id)}"
    flags = [name for i, name in enumerate(FLAGS) if int(n.event_flags) & (1 << i)]
    if int(n.event_flags) & ~0x1F:
        flags.append(f"reserved-0x{int(n.event_flags) & ~0x1F:x}")
    return f"{event} flags={','.join(flags) or 'none'} category={category} count={n.category_count} uid={n.notification_uid}"


def decode_data_source(command, fragments):
    """The values a complete response carries, by golden-file key, decoded here independently:
    the stream's header, then (id, length, value) tuples, each value kept to its max length; the
    first response whose header is the command's (a late answer for another UID is skipped)."""
    words = command.split()
    keys = {0: "app", 1: "title", 2: "subtitle", 3: "message", 4: "size", 5: "date", 6: "positive", 7: "negative"}
    if words[0] == "A":
        header, wanted, keys = b"\x01" + words[1].encode() + b"\x00", {0: None}, {0: "display-name"}
    else:
        header, wanted = struct.pack("<BI", 0, int(words[1])), {}
        for w in words[2:]:
            name, _, n = w.partition(":")
            wanted[ATTRS.index(name)] = int(n) if n else None
    start = next((i for i in range(len(fragments)) if b"".join(fragments[i:]).startswith(header)), None)
    if start is None:
        return None
    data = b"".join(fragments[start:])[len(header):]
    got = {}
    while len(data) >= 3 and len(got) < len(wanted):
        a, n = struct.unpack_from("<BH", data)
        value, data = data[3:3 + n], data[3 + n:]
        if len(value) < n:
            return None  # cut short: the command times out
        if a in wanted and keys[a] not in got:
            got[keys[a]] = value[:wanted[a]] if wanted[a] is not None else value
    return got if len(got) == len(wanted) else None


def check_data_source(golden):
    ok, i = True, 0
    for comment, command, fragments in DATA_SOURCE:
        i = golden.index("# " + comment, i)
        line = golden[i + 1]
        values = decode_data_source(command, fragments)
        if values is None:
            ok &= line.startswith("abandoned")
            continue
        for key, value in values.items():
            text = value.decode("utf-8", "replace")
            if key == "size":
                expected = f"size={int(text)}"
            elif key == "date":
                expected = "date=-" if len(text) != 15 or text[8] != "T" else \
                    f"date={text[0:4]}-{text[4:6]}-{text[6:8]}T{text[9:11]}:{text[11:13]}:{text[13:15]}"
            else:
                expected = f'{key}="{text}"'
            if expected not in line:
                ok = False
                print(f"data source differs for {comment!r}: python {expected}, swift {line}")
    return ok


def check():
    ok = check_data_source(open(os.path.join(FIXTURES, "ancs-data-source.golden.txt")).read().splitlines())
    golden = open(os.path.join(FIXTURES, "ancs-notification-source.golden.txt")).read().splitlines()
    mine = []
    for case in NOTIFICATION_SOURCE:
        mine += ["# " + case[0], describe_notification(ns_bytes(case))]
    got = [line for line in golden if not line.startswith("counted")]
    if got != mine:
        ok = False
        for a, b in zip(got, mine):
            if a != b:
                print(f"notification source differs:\n  swift:  {a}\n  python: {b}")
    for name, text in fixture_texts().items():
        if open(os.path.join(FIXTURES, name)).read() != text:
            ok = False
            print(f"{name} is not what this script writes (ancs_reference.py write, then review the diff)")
    print("ancs reference: agrees" if ok else "ancs reference: DISAGREES")
    return ok


if __name__ == "__main__":
    if sys.argv[1:] == ["write"]:
        write()
    elif sys.argv[1:] == ["check"]:
        sys.exit(0 if check() else 1)
    else:
        print(__doc__)
        sys.exit(64)
