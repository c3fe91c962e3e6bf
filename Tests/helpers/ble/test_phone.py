"""Self-test of the emulated iPhone (ancs_phone.py) against a Bumble peripheral written here.

The peripheral plays the base station's part: it advertises the ANCS solicitation, sends an SMP
Security Request, pairs as responder (Secure Connections, Just Works, bonding, distributing no keys
of its own, as SMPResponder.swift does), discovers ANCS as GATT client, subscribes and writes the
Control Point. Both sit on one in-process LocalLink (virtual_radio's HarnessLink). The last test
runs virtual_radio.py itself and drives the phone through its control file.

Run: .venv/bin/python Tests/helpers/ble/test_phone.py
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bumble import hci  # noqa: E402
from bumble.controller import Controller  # noqa: E402
from bumble.core import UUID, ProtocolError  # noqa: E402
from bumble.device import Device  # noqa: E402
from bumble.host import Host  # noqa: E402
from bumble.keys import MemoryKeyStore  # noqa: E402
from bumble.pairing import PairingConfig, PairingDelegate  # noqa: E402
from bumble.smp import KeyDistribution  # noqa: E402
from bumble.transport import open_transport  # noqa: E402
from bumble.transport.common import AsyncPipeSink  # noqa: E402

import ancs_phone  # noqa: E402
from ancs_phone import ANCS_CP_UUID, ANCS_DS_UUID, ANCS_NS_UUID, ANCS_UUID, Phone  # noqa: E402
from virtual_radio import HarnessLink  # noqa: E402

BASE_STATION = "F0:F0:F0:00:00:01"
PHONE_IDENTITY = "F4:0F:24:00:00:01"
DOORBELL_APP = "com.example.doorbell"


async def until(condition, what: str, seconds: float = 5.0):
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        value = condition()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


class RecordingPhone(Phone):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lines: list[dict] = []

    def emit(self, event: str, /, **fields) -> None:
        self.lines.append({"phone": event, **fields})

    def events(self, event: str) -> list[dict]:
        return [x for x in self.lines if x["phone"] == event]


class BaseStation:
    """The peripheral: advertising, SMP responder, ANCS GATT client."""

    def __init__(self, link, device: Device | None = None):
        if device is None:
            self.controller = Controller("base", link=link, public_address=BASE_STATION)
            device = Device(name="base", address=hci.Address("C3:00:00:00:00:01"),
                            host=Host(self.controller, AsyncPipeSink(self.controller)))
        self.device = device
        self.device.keystore = MemoryKeyStore()
        # Like SMPResponder.swift: takes the phone's identity key, distributes nothing.
        delegate = PairingDelegate(io_capability=PairingDelegate.NO_OUTPUT_NO_INPUT,
                                   local_initiator_key_distribution=KeyDistribution.ID_KEY,
                                   local_responder_key_distribution=KeyDistribution(0))
        self.device.pairing_config_factory = lambda c: PairingConfig(sc=True, mitm=False, bonding=True, delegate=delegate)
        self.connections: list = []
        self.pairings: list = []
        self.ns_values: list[bytes] = []
        self.ds_values: list[bytes] = []

    async def start(self):
        await self.device.power_on()
        self.device.on("connection", self._connection)
        self.device.on("pairing", lambda *a: self.pairings.append(a))
        await self.advertise()

    async def advertise(self):
        data = bytes([2, 1, 6]) + ancs_phone.ancs_solicitation_ad()
        await self.device.start_advertising(advertising_data=data, own_address_type=hci.OwnAddressType.PUBLIC,
                                            advertising_interval_min=20, advertising_interval_max=20)

    def _connection(self, connection):
        self.connections.append(connection)
        connection.on("pairing", lambda keys: self.pairings.append(keys))

    @property
    def connection(self):
        return self.connections[-1]

    async def discover(self):
        client = self.connection.gatt_client
        services = await client.discover_services([UUID(ANCS_UUID)])
        assert len(services) == 1, services
        chars = await services[0].discover_characteristics()
        by_uuid = {str(c.uuid).upper(): c for c in chars}
        self.ns, self.cp, self.ds = by_uuid[ANCS_NS_UUID], by_uuid[ANCS_CP_UUID], by_uuid[ANCS_DS_UUID]
        for c in (self.ns, self.ds):
            await c.discover_descriptors()

    async def subscribe(self):
        await self.ds.subscribe(lambda v: self.ds_values.append(bytes(v)))
        await self.ns.subscribe(lambda v: self.ns_values.append(bytes(v)))

    async def command(self, value: bytes):
        await self.cp.write_value(value, with_response=True)

    async def pair_or_encrypt(self):
        """The Security Request; the phone answers by pairing or by encrypting with its bond."""
        self.device.request_pairing(self.connection)
        await until(lambda: self.connection.is_encrypted, "the link to be encrypted")


def get_attributes(uid: int, title_max=64, subtitle_max=64, message_max=256) -> bytes:
    return (bytes([0]) + uid.to_bytes(4, "little") + bytes([0])
            + bytes([1]) + title_max.to_bytes(2, "little") + bytes([2]) + subtitle_max.to_bytes(2, "little")
            + bytes([3]) + message_max.to_bytes(2, "little") + bytes([5]))


def parse_attributes(data: bytes, count: int) -> tuple[int, int, dict[int, bytes]] | None:
    """The reassembled Data Source response, or None while incomplete."""
    if len(data) < 5:
        return None
    i, out = 5, {}
    for _ in range(count):
        if i + 3 > len(data):
            return None
        attr, n = data[i], int.from_bytes(data[i + 1:i + 3], "little")
        if i + 3 + n > len(data):
            return None
        out[attr] = data[i + 3:i + 3 + n]
        i += 3 + n
    return data[0], int.from_bytes(data[1:5], "little"), out


class AirTestCase(unittest.IsolatedAsyncioTestCase):
    async def connect(self, address: str = PHONE_IDENTITY, **phone_options):
        """A phone and a base station on one air, once the phone has connected."""
        link = HarnessLink()
        self.phone = RecordingPhone(link, address, **phone_options)
        self.base = BaseStation(link)
        await self.base.start()
        await self.phone.start()
        await until(lambda: self.base.connections, "the phone to connect")
        return self.phone, self.base

    async def asyncTearDown(self):
        for t in list(self.phone.tasks):
            t.cancel()


class PhoneTests(AirTestCase):
    notifications = [
        {"uid": 7, "category": "email", "app_id": "com.apple.mobilemail", "title": "Invoice",
         "message": "Your invoice is attached.", "pre_existing": True},
    ]

    async def asyncSetUp(self):
        await self.connect(notifications=self.notifications)

    async def paired_and_subscribed(self):
        await self.base.discover()
        await self.base.pair_or_encrypt()
        await self.base.subscribe()

    async def reconnect(self, drop: bool = True):
        n = len(self.base.connections)
        if drop:
            self.phone.control('{"op": "drop"}')
        await until(lambda: len(self.phone.events("disconnected")) >= n, "the phone to drop the link")
        await self.base.advertise()
        await until(lambda: len(self.base.connections) > n, "the phone to reconnect")

    async def test_the_phone_connects_to_the_solicitation_from_a_resolvable_private_address(self):
        connected = self.phone.events("connected")[0]
        address = hci.Address(connected["address"], hci.Address.RANDOM_DEVICE_ADDRESS)
        self.assertTrue(address.is_resolvable, connected)
        self.assertEqual(connected["peer"], BASE_STATION)
        self.assertEqual(str(self.base.connection.peer_address).split("/")[0], connected["address"])

    async def test_ancs_needs_encryption_before_pairing(self):
        await self.base.discover()
        for attempt in (lambda: self.base.ns.subscribe(lambda v: None),
                        lambda: self.base.command(get_attributes(7)),
                        lambda: self.base.ns.read_value()):
            with self.assertRaises(ProtocolError) as e:
                await attempt()
            self.assertEqual(e.exception.error_code, 0x05, "Insufficient Authentication, as iOS answers")
        self.assertEqual({r["what"] for r in self.phone.events("refused")}, {"subscribe", "write", "read"})
        self.assertEqual(self.phone.events("command"), [])

    async def test_the_security_request_pairs_once_and_a_reconnect_reencrypts_from_a_new_address(self):
        await self.paired_and_subscribed()
        await until(lambda: self.base.pairings, "pairing to finish on the base station")
        keys = self.base.pairings[0]
        self.assertEqual(keys.irk.value, self.phone.irk, "the phone distributes its IRK")
        self.assertEqual(str(self.base.connection.peer_address).split("/")[0], PHONE_IDENTITY)
        self.assertEqual(len(self.phone.events("paired")), 1)
        first = self.phone.events("connected")[0]["address"]

        await self.reconnect()
        await until(lambda: self.base.connection.is_encrypted, "re-encryption with the bond")
        second = self.phone.events("connected")[1]["address"]
        self.assertNotEqual(first, second)
        resolvable = self.base.connection.peer_resolvable_address
        self.assertEqual(str(resolvable).split("/")[0], second, "the base station saw the new RPA")
        self.assertEqual(str(self.base.connection.peer_address).split("/")[0], PHONE_IDENTITY, "and resolved it")
        self.assertEqual(len(self.phone.events("paired")), 1, "no second pairing")
        self.assertEqual(len(self.base.pairings), 1)
        self.assertEqual(self.phone.events("securing")[-1]["method"], "encrypt_with_bond")
        # The Security Request on an encrypted link changes nothing.
        self.base.device.request_pairing(self.base.connection)
        await asyncio.sleep(0.05)
        self.assertEqual(len(self.phone.events("paired")), 1)

    async def test_a_notification_posted_mid_session_arrives_and_its_attributes_reassemble(self):
        await self.paired_and_subscribed()
        await until(lambda: self.base.ns_values, "the pre-existing notification")
        self.assertEqual(self.base.ns_values[0], bytes([0, 0x10 | 0x04, 6, 1]) + (7).to_bytes(4, "little"))
        subtitle = "Ring 9f3c \u00e9v\u00e9nement"  # the token the cloud put into the push, and UTF-8
        message = "Someone is at the front door. " * 5
        self.phone.control(json.dumps({"op": "post", "uid": 42, "category": "social", "app_id": DOORBELL_APP,
                                       "title": "Front door", "subtitle": subtitle, "message": message,
                                       "date": "20261126T163000", "flags": ["important", "negative_action"]}))
        await until(lambda: len(self.base.ns_values) == 2, "the posted notification")
        self.assertEqual(self.base.ns_values[1], bytes([0, 0x12, 4, 1]) + (42).to_bytes(4, "little"))

        await self.base.command(get_attributes(42, title_max=5, subtitle_max=14, message_max=200))
        parsed = await until(lambda: parse_attributes(b"".join(self.base.ds_values), 5), "the whole response")
        self.assertGreater(len(self.base.ds_values), 5, "split into MTU-sized notifications")
        self.assertTrue(all(len(v) <= self.base.connection.att_mtu - 3 for v in self.base.ds_values))
        cmd, uid, attrs = parsed
        self.assertEqual((cmd, uid), (0, 42))
        self.assertEqual(attrs[0].decode(), DOORBELL_APP)
        self.assertEqual(attrs[1].decode(), "Front")
        self.assertEqual(attrs[2], "Ring 9f3c \u00e9v".encode(), "cut to 13 of the 14 octets: not inside a character")
        self.assertEqual(attrs[3].decode(), message[:200])
        self.assertEqual(attrs[5].decode(), "20261126T163000")
        self.assertEqual(len(b"".join(self.base.ds_values)), 5 + 5 * 3 + sum(len(v) for v in attrs.values()))

        self.base.ds_values.clear()
        await self.base.command(bytes([1]) + DOORBELL_APP.encode() + b"\x00\x00")
        app = await until(lambda: b"\x00" in b"".join(self.base.ds_values)[1:]
                          and len(b"".join(self.base.ds_values)) >= len(DOORBELL_APP) + 5 + len("doorbell")
                          and b"".join(self.base.ds_values), "the app attributes")
        self.assertEqual(app, bytes([1]) + DOORBELL_APP.encode() + b"\x00" + bytes([0, 8, 0]) + b"doorbell")
        commands = [c["command"] for c in self.phone.events("command")]
        self.assertEqual(commands, ["get_notification_attributes", "get_app_attributes"])

    async def test_control_point_errors(self):
        await self.paired_and_subscribed()
        for value, code in ((bytes([9, 1]), 0xA0), (bytes([0, 1, 0]), 0xA1), (get_attributes(999), 0xA2),
                            (bytes([2]) + (7).to_bytes(4, "little") + bytes([0]), 0xA3),
                            (bytes([1]) + b"com.unknown\x00\x00", 0xA2), (b"", 0xA1)):
            with self.assertRaises(ProtocolError, msg=value.hex()) as e:
                await self.base.command(value)
            self.assertEqual(e.exception.error_code, code, value.hex())
        self.assertEqual(len(self.phone.events("command_error")), 6)
        self.assertEqual(self.base.ds_values, [])

    async def test_perform_notification_action_is_recorded_and_removes_the_notification(self):
        await self.paired_and_subscribed()
        await until(lambda: self.base.ns_values, "the pre-existing notification")
        await self.base.command(bytes([2]) + (7).to_bytes(4, "little") + bytes([1]))
        await until(lambda: len(self.base.ns_values) == 2, "the removal")
        self.assertEqual(self.base.ns_values[1][:1], bytes([2]), "EventID removed")
        self.assertEqual(self.base.ns_values[1][4:], (7).to_bytes(4, "little"))
        self.assertEqual(self.phone.events("performed"), [{"phone": "performed", "uid": 7, "action": "negative"}])
        with self.assertRaises(ProtocolError) as e:
            await self.base.command(get_attributes(7))
        self.assertEqual(e.exception.error_code, 0xA2, "a removed notification is unknown")

    async def test_a_drop_mid_response_and_the_reconnect_resends_notifications_as_pre_existing(self):
        await self.paired_and_subscribed()
        self.phone.control(json.dumps({"op": "post", "uid": 43, "app_id": DOORBELL_APP, "title": "Front door",
                                       "message": "x" * 120}))
        await until(lambda: len(self.base.ns_values) == 2, "the posted notification")
        self.phone.control('{"op": "drop_mid_response"}')
        await self.base.command(get_attributes(43))
        await until(lambda: self.phone.events("disconnected"), "the drop")
        self.assertIsNone(parse_attributes(b"".join(self.base.ds_values), 5), "the response was cut")
        self.assertGreater(len(self.base.ds_values), 0)
        self.assertEqual(len(self.phone.events("dropped_mid_response")), 1)

        await self.reconnect(drop=False)
        self.base.ns_values.clear()
        self.base.ds_values.clear()
        await self.paired_and_subscribed()
        await until(lambda: len(self.base.ns_values) == 2, "both notifications again")
        self.assertEqual(sorted(int.from_bytes(v[4:], "little") for v in self.base.ns_values), [7, 43])
        self.assertTrue(all(v[0] == 0 and v[1] & 0x04 for v in self.base.ns_values), "added, pre-existing")
        await self.base.command(get_attributes(43))  # once only: this one is answered whole
        parsed = await until(lambda: parse_attributes(b"".join(self.base.ds_values), 5), "the whole response")
        self.assertEqual(parsed[2][3], b"x" * 120)
        self.assertEqual(len(self.phone.events("paired")), 1)

    async def test_a_forgotten_bond_pairs_again(self):
        await self.paired_and_subscribed()
        self.phone.control('{"op": "forget"}')
        await until(lambda: self.phone.events("forgot"), "the phone to forget")
        await self.reconnect()
        await self.base.discover()
        await self.base.pair_or_encrypt()
        await until(lambda: len(self.phone.events("paired")) == 2, "a second pairing")


class SecurityErrorTests(AirTestCase):
    async def test_the_refusal_can_be_insufficient_encryption(self):
        phone, base = await self.connect(security_error=0x0F)
        await base.discover()
        with self.assertRaises(ProtocolError) as e:
            await base.ns.subscribe(lambda v: None)
        self.assertEqual(e.exception.error_code, 0x0F)
        self.assertEqual(phone.events("refused")[0]["att_error"], "0x0F")


class RefusedPairingTests(AirTestCase):
    async def test_a_base_station_that_refuses_to_pair_leaves_the_link_unencrypted(self):
        phone, base = await self.connect()

        class ClosedWindow(PairingDelegate):
            async def accept(self):
                return False
        base.device.pairing_config_factory = lambda c: PairingConfig(sc=True, mitm=False, bonding=True,
                                                                     delegate=ClosedWindow())
        base.device.request_pairing(base.connection)
        await until(lambda: phone.events("pairing_failed"), "the phone to see the refusal")
        await asyncio.sleep(0.05)
        self.assertEqual(len(phone.events("pairing_failed")), 1)
        self.assertFalse(base.connection.is_encrypted)
        self.assertEqual(phone.events("paired") + phone.events("encrypted") + phone.events("disconnected"), [])


class ScriptTests(AirTestCase):
    async def test_scripted_notifications_are_posted_at_their_time_after_the_subscription(self):
        phone, base = await self.connect(notifications=[
            {"uid": 1, "category": 1, "app_id": "com.apple.mobilephone", "title": "Mum", "at_s": 0.2},
            {"uid": 2, "category": "other", "title": "Old", "pre_existing": True}])
        await base.discover()
        await base.pair_or_encrypt()
        await base.subscribe()
        await until(lambda: len(base.ns_values) == 2, "the pre-existing and the scripted notification", 3)
        self.assertEqual(base.ns_values[0][4:], (2).to_bytes(4, "little"))
        self.assertEqual(base.ns_values[1], bytes([0, 0x18, 1, 1]) + (1).to_bytes(4, "little"),
                         "an incoming call with both actions, not pre-existing")


class OpenPhoneTests(AirTestCase):
    async def test_the_open_phone_serves_ancs_without_pairing(self):
        phone, base = await self.connect("5A:44:33:22:11:7B", open_mode=True, notifications=[
            {"uid": 3, "title": "Hi", "pre_existing": True}])
        await base.discover()
        await base.subscribe()
        await until(lambda: base.ns_values, "the notification, unencrypted")
        self.assertFalse(base.connection.is_encrypted)
        self.assertEqual(phone.events("connected")[0]["address"], "5A:44:33:22:11:7B")


class CommandLineTests(unittest.IsolatedAsyncioTestCase):
    """virtual_radio.py --phone as the Swift tests run it: the base station is a Bumble host on the
    radio's H4/TCP port (so the LTK request goes through the host-facing controller), the phone is
    driven through its control file, and its JSON lines on stdout are what a test waits on."""

    async def test_over_h4_the_phone_pairs_follows_its_control_file_and_prints_json_lines(self):
        here = os.path.dirname(os.path.abspath(__file__))
        with tempfile.TemporaryDirectory() as d:
            scenario, control, notes = (os.path.join(d, n) for n in ("s.json", "control.jsonl", "n.json"))
            with open(scenario, "w") as f:
                json.dump({"name": "phone", "advertisers": [], "events": []}, f)
            with open(notes, "w") as f:
                json.dump([{"uid": 5, "title": "Old", "pre_existing": True}], f)
            p = subprocess.Popen([sys.executable, os.path.join(here, "virtual_radio.py"), "--port", "0",
                                  "--scenario", scenario, "--start-on", "now", "--hold", "--max-seconds", "20",
                                  "--phone", "--phone-control", control, "--phone-notifications", notes,
                                  "--truth", os.path.join(d, "truth.jsonl")],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            try:
                ready = await asyncio.wait_for(asyncio.to_thread(p.stdout.readline), 15)
                self.assertTrue(ready.startswith("READY "), ready)
                port = json.loads(ready[6:])["port"]
                async with await open_transport(f"tcp-client:127.0.0.1:{port}") as (source, sink):
                    base = BaseStation(None, Device.with_hci("base", hci.Address("C3:00:00:00:00:01"), source, sink))
                    await base.start()
                    await until(lambda: base.connections, "the phone to connect", 10)
                    await base.discover()
                    await base.pair_or_encrypt()
                    await base.subscribe()
                    await until(lambda: base.ns_values, "the scripted pre-existing notification")
                    with open(control, "a") as f:
                        f.write(json.dumps({"op": "post", "uid": 9, "app_id": DOORBELL_APP, "subtitle": "t"}) + "\n")
                        f.write("not json\n")
                        f.write(json.dumps({"op": "post", "category": "no such category"}) + "\n")
                        f.write(json.dumps({"op": "post", "uid": 10, "title": "after the errors"}) + "\n")
                    await until(lambda: len(base.ns_values) == 3, "the posted notifications")
                    await base.command(get_attributes(9))
                    parsed = await until(lambda: parse_attributes(b"".join(base.ds_values), 5), "the response")
                    self.assertEqual(parsed[2][2], b"t")
                    await base.command(bytes([2]) + (9).to_bytes(4, "little") + bytes([1]))
                    await until(lambda: len(base.ns_values) == 4, "the removal")
            finally:
                p.terminate()
                out = p.communicate(timeout=10)[0]
            lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
            events = [x["phone"] for x in lines]
            for e in ("connected", "securing", "encrypted", "paired", "subscribed", "notified", "control",
                      "posted", "control_error", "command", "responded", "performed", "removed"):
                self.assertIn(e, events, out)
            self.assertEqual(events[0], "connected", out)
            self.assertEqual(events.count("control_error"), 2, out)
            self.assertTrue(all("wall" in x for x in lines))
            with open(os.path.join(d, "truth.jsonl")) as f:
                truth = [json.loads(x) for x in f]
            performed = [x for x in truth if x["action"] == "phone_performed"]
            self.assertEqual([(x["uid"], x["ancs_action"]) for x in performed], [(9, "negative")])
            self.assertEqual(sum(x["action"] == "phone_connected" for x in truth), 1)


class IntruderTests(AirTestCase):
    """Not the owner's phone: the owner's identity address without its keys."""

    async def test_the_intruder_connects_from_the_owners_address_and_its_encryption_fails_with_a_mic_failure(self):
        phone, base = await self.connect(intruder=True, intrusions=1, name="Mallory")
        self.assertEqual(str(base.connection.peer_address).split("/")[0], PHONE_IDENTITY)
        # The base station has a bond for that address: it answers with the owner's key.
        base.device.on("connection", lambda c: None)
        owner_ltk = os.urandom(16)

        async def ltk(connection_handle, rand, ediv):
            return owner_ltk
        base.device.host.long_term_key_provider = ltk
        await until(lambda: phone.events("intruding"), "the intruder to start encryption")
        await until(lambda: phone.events("disconnected"), "the link to fail", seconds=10)
        self.assertEqual(phone.events("disconnected")[0]["reason"], hci.HCI_ErrorCode.CONNECTION_TERMINATED_DUE_TO_MIC_FAILURE_ERROR)
        self.assertFalse(base.connection.is_encrypted)


class AdvertisedNameTests(AirTestCase):
    async def test_the_phone_reports_the_name_in_the_scan_response(self):
        link = HarnessLink()
        self.phone = RecordingPhone(link, PHONE_IDENTITY)
        self.base = BaseStation(link)
        await self.base.device.power_on()
        self.base.device.on("connection", self.base._connection)
        data = bytes([2, 1, 6]) + ancs_phone.ancs_solicitation_ad()
        await self.base.device.start_advertising(advertising_data=data, scan_response_data=bytes([8, 0x09]) + b"gw-0001",
                                                 own_address_type=hci.OwnAddressType.PUBLIC,
                                                 advertising_interval_min=20, advertising_interval_max=20)
        await self.phone.start()
        await until(lambda: self.phone.events("advertised_name"), "the name")
        self.assertEqual(self.phone.events("advertised_name")[0], {"phone": "advertised_name", "name": "gw-0001", "shortened": False})


if __name__ == "__main__":
    unittest.main(verbosity=2)
