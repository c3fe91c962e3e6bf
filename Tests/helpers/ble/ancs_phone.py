"""ancs_phone.py - the owner's iPhone, emulated with Bumble, for virtual_radio.py --phone.

A central that behaves the way iOS does towards an ANCS accessory:
  * scans for the ANCS Service Solicitation (AD 0x15, 7905F431-...) and connects to that advertiser;
  * connects from a resolvable private address made from its IRK, a new one for every connection;
  * serves ANCS (Notification Source: notify; Control Point: write with response; Data Source:
    notify) whose values and CCCDs need an encrypted link (ATT 0x0F Insufficient Encryption before);
  * answers the peripheral's SMP Security Request: pairs as initiator (LE Secure Connections, Just
    Works, bonding, distributing its IRK and identity address) or, once bonded, re-encrypts with the
    stored LTK (it also does that by itself right after connecting, as iOS does);
  * posts notifications from a script and from a control file, answers Get Notification/App
    Attributes in MTU-sized Data Source fragments, performs actions, and sends every current
    notification again flagged pre-existing when Notification Source is subscribed on a new link.

Every change of state is one JSON line on stdout, {"phone": "<event>", ...}, and the same in the
radio's truth file as action "phone_<event>" (see README.md "The emulated iPhone").

open_mode=True is the earlier phone: no pairing, open characteristics, one fixed address.
intruder=True is not the owner's phone but a central that connects from the owner's identity
address (public, as the phone's own is) without its keys: it lets the base station read its Device
Name, then starts encryption with a key of its own, which the link refuses (MIC failure); it tries
`intrusions` times, reconnecting after each drop.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import sys
import time
import uuid as uuid_mod

from bumble import hci, ll
from bumble.att import ATT_Error, Attribute
from bumble.controller import Controller
from bumble.device import Device
from bumble.gatt import (
    GATT_CLIENT_CHARACTERISTIC_CONFIGURATION_DESCRIPTOR,
    Characteristic,
    CharacteristicValue,
    Descriptor,
    Service,
)
from bumble.host import Host
from bumble.keys import MemoryKeyStore
from bumble.pairing import PairingConfig, PairingDelegate
from bumble.transport.common import AsyncPipeSink

log = logging.getLogger("virtual_radio.phone")

ANCS_UUID = "7905F431-B5CE-4E99-A40F-4B1E122D00D0"
ANCS_NS_UUID = "9FBF120D-6301-42D9-8C58-25E699A21DBD"
ANCS_CP_UUID = "69D1D8F3-45E1-49A8-9821-9BBDFDAAD9D9"
ANCS_DS_UUID = "22EAC6E9-24D6-4BB5-BE44-B36ACE7C7BFB"

EVENT_ADDED, EVENT_MODIFIED, EVENT_REMOVED = 0, 1, 2
EVENT_NAMES = {EVENT_ADDED: "added", EVENT_MODIFIED: "modified", EVENT_REMOVED: "removed"}
FLAG_BITS = {"silent": 0x01, "important": 0x02, "pre_existing": 0x04,
             "positive_action": 0x08, "negative_action": 0x10}
CATEGORIES = ["other", "incoming_call", "missed_call", "voicemail", "social", "schedule", "email",
              "news", "health_and_fitness", "business_and_finance", "location", "entertainment"]
CMD_GET_NOTIFICATION_ATTRIBUTES, CMD_GET_APP_ATTRIBUTES, CMD_PERFORM_ACTION = 0, 1, 2
ERR_UNKNOWN_COMMAND, ERR_INVALID_COMMAND, ERR_INVALID_PARAMETER, ERR_ACTION_FAILED = 0xA0, 0xA1, 0xA2, 0xA3
# Notification attribute ids; Title, Subtitle and Message carry a 2-octet max length in the request.
ATTR_NAMES = {0: "app_id", 1: "title", 2: "subtitle", 3: "message", 4: "message_size", 5: "date",
              6: "positive_action_label", 7: "negative_action_label"}
ATTRS_WITH_MAX = {1, 2, 3}
# What an unencrypted access gets: iOS answers Insufficient Authentication (0x05); Bumble's own
# permission check raises Insufficient Encryption (0x0F), which the phone turns into this.
INSUFFICIENT_AUTHENTICATION, INSUFFICIENT_ENCRYPTION = 0x05, 0x0F


def ancs_solicitation_ad() -> bytes:
    value = uuid_mod.UUID(ANCS_UUID).bytes[::-1]
    return bytes([len(value) + 1, 0x15]) + value


def emit_line(truth, event: str, /, **fields) -> None:
    """One JSON line on stdout for the tests, and the same in the truth file."""
    print(json.dumps({"phone": event, "wall": round(time.time(), 6), **fields}), flush=True)
    if truth is not None:  # its own "action", "wall" and "t" keys come first there
        truth.write("phone_" + event, **{("ancs_" + k if k in ("action", "wall", "t") else k): v
                                         for k, v in fields.items()})


class Notification:
    """One notification on the phone, as the script or the control file gives it."""

    def __init__(self, spec: dict, uid: int) -> None:
        self.uid = int(spec.get("uid", uid)) & 0xFFFFFFFF
        cat = spec.get("category", 0)
        self.category = CATEGORIES.index(cat) if isinstance(cat, str) else int(cat)
        self.app_id = str(spec.get("app_id", "com.example.app"))
        self.app_name = str(spec.get("app_name", self.app_id.rsplit(".", 1)[-1]))
        self.title = str(spec.get("title", ""))
        self.subtitle = str(spec.get("subtitle", ""))
        self.message = str(spec.get("message", ""))
        self.date = str(spec.get("date", time.strftime("%Y%m%dT%H%M%S")))
        self.positive_label = str(spec.get("positive_action_label", "Answer" if self.category == 1 else ""))
        self.negative_label = str(spec.get("negative_action_label", "Decline" if self.category == 1 else "Clear"))
        flags = spec.get("flags", 0)
        if isinstance(flags, list):
            flags = sum(FLAG_BITS[f] for f in flags)
        self.flags = int(flags) & ~FLAG_BITS["pre_existing"]
        if self.negative_label and "flags" not in spec:
            self.flags |= FLAG_BITS["negative_action"]
        if self.positive_label and "flags" not in spec:
            self.flags |= FLAG_BITS["positive_action"]
        self.pre_existing = bool(spec.get("pre_existing", False))
        self.at_s = float(spec.get("at_s", 0.0))

    def attribute(self, attr: int) -> bytes | None:
        values = {0: self.app_id, 1: self.title, 2: self.subtitle, 3: self.message,
                  4: str(len(self.message.encode())), 5: self.date,
                  6: self.positive_label, 7: self.negative_label}
        v = values.get(attr)
        return None if v is None else v.encode()


class ScanningController(Controller):
    """The phone's controller. Bumble's answers its own active scan of a legacy advertisement with
    the advertising data again as the scan response; a real one hears the advertiser's scan
    response data, which is what this one reports (the base station's name and, beside a beacon,
    the solicitation are there)."""

    def on_advertising_pdu(self, pdu) -> None:
        if not self.le_scan_enable or not isinstance(pdu, (ll.AdvInd, ll.AdvExtInd)):
            return super().on_advertising_pdu(pdu)
        scanning, self.le_scan_enable = self.le_scan_enable, False
        try:
            super().on_advertising_pdu(pdu)  # a pending connection, without Bumble's own reports
        finally:
            self.le_scan_enable = scanning
        address = pdu.advertiser_address
        response = b""
        for c in self.link.controllers:
            la = getattr(c, "le_legacy_advertiser", None)
            if c is not self and la is not None and la.enabled and la.address == address:
                response = bytes(la.scan_response_data)
            # Sets share the controller's address: the one that sent this data.
            for adv_set in getattr(c, "advertising_sets", {}).values() if c is not self else ():
                if adv_set.enabled and adv_set.address == address and bytes(adv_set.data) == bytes(pdu.data):
                    response = bytes(adv_set.scan_response_data)
        if self.le_features & hci.LeFeatureMask.LE_EXTENDED_ADVERTISING:
            kinds = hci.HCI_LE_Extended_Advertising_Report_Event.EventType
            for event_type, data in ((kinds.CONNECTABLE_ADVERTISING, pdu.data), (kinds.SCAN_RESPONSE, response)):
                self.send_hci_packet(hci.HCI_LE_Extended_Advertising_Report_Event([
                    hci.HCI_LE_Extended_Advertising_Report_Event.Report(
                        event_type=event_type, address_type=address.address_type, address=address,
                        primary_phy=hci.Phy.LE_1M, secondary_phy=hci.Phy.LE_1M, advertising_sid=0, tx_power=0,
                        rssi=-50, periodic_advertising_interval=0, direct_address_type=0,
                        direct_address=hci.Address.ANY, data=data)]))
        else:
            kinds = hci.HCI_LE_Advertising_Report_Event.EventType
            for event_type, data in ((kinds.ADV_IND, pdu.data), (kinds.SCAN_RSP, response)):
                self.send_hci_packet(hci.HCI_LE_Advertising_Report_Event([
                    hci.HCI_LE_Advertising_Report_Event.Report(event_type=event_type, address_type=address.address_type,
                                                              address=address, data=data, rssi=-50)]))


class GuardedCharacteristic(Characteristic):
    """A characteristic whose refusals (link not encrypted) carry the phone's error code and are
    reported as a JSON line."""

    phone: "Phone"

    async def read_value(self, bearer):
        try:
            return await super().read_value(bearer)
        except ATT_Error as e:
            raise self.phone.refusal("read", self.label, e) from None

    async def write_value(self, bearer, value):
        try:
            return await super().write_value(bearer, value)
        except ATT_Error as e:
            raise self.phone.refusal("write", self.label, e) from None


class GuardedCCCD(Descriptor):
    async def write_value(self, bearer, value):
        try:
            return await super().write_value(bearer, value)
        except ATT_Error as e:
            raise self.phone.refusal("subscribe", self.label, e) from None


class Phone:
    def __init__(self, link, identity_address: str, truth=None, drop_after: float | None = None, *,
                 open_mode: bool = False, irk: bytes | None = None, notifications: list[dict] | None = None,
                 control_path: str | None = None, drop_mid_response: bool = False,
                 encrypt_on_connect: bool = True, security_error: int = INSUFFICIENT_AUTHENTICATION,
                 name: str = "Anna’s iPhone", intruder: bool = False, intrusions: int = 3) -> None:
        self.link = link
        self.name = name  # GAP Device Name, readable unencrypted as on iOS
        self.truth = truth
        self.drop_after = drop_after
        self.open_mode = open_mode
        self.identity = identity_address
        self.irk = irk or os.urandom(16)
        self.control_path = control_path
        self.drop_mid_response = drop_mid_response
        self.encrypt_on_connect = encrypt_on_connect
        self.security_error = security_error
        self.intruder = intruder
        self.names_seen: set[tuple[int, bytes]] = set()
        self.intrusions = intrusions
        self.connecting = False
        self.connection = None
        self.securing = False
        self.notifications: dict[int, Notification] = {}
        self.pending: list[Notification] = []
        self.next_uid = 1
        for spec in notifications or []:
            n = self._new(spec)
            (self.notifications.__setitem__(n.uid, n) if n.pre_existing else self.pending.append(n))
        self.script_started = False
        self.tasks: set[asyncio.Task] = set()

    def _new(self, spec: dict) -> Notification:
        n = Notification(spec, self.next_uid)
        self.next_uid = max(self.next_uid, n.uid + 1)
        return n

    def emit(self, event: str, /, **fields) -> None:
        emit_line(self.truth, event, **fields)

    def spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # ---- GATT database ---------------------------------------------------------------------------
    async def start(self) -> None:
        if self.open_mode:
            address = hci.Address(self.identity, hci.Address.RANDOM_DEVICE_ADDRESS)
            self.controller = ScanningController("phone", link=self.link)
        elif self.intruder:
            # The owner's identity address on the air, as is: what an address-only check lets in.
            address = hci.Address(self.identity, hci.Address.PUBLIC_DEVICE_ADDRESS)
            self.controller = ScanningController("phone", link=self.link, public_address=self.identity)
        else:
            # The identity is public, as an iPhone's is; the air only ever sees private addresses.
            address = hci.Address.generate_private_address(self.irk)
            self.controller = ScanningController("phone", link=self.link, public_address=self.identity)
        self.device = Device(name=self.name, address=address,
                             host=Host(self.controller, AsyncPipeSink(self.controller)))
        self.device.irk = self.irk
        self.device.keystore = MemoryKeyStore()
        delegate = PairingDelegate(io_capability=PairingDelegate.NO_OUTPUT_NO_INPUT)
        self.device.pairing_config_factory = lambda connection: PairingConfig(
            sc=True, mitm=False, bonding=True, delegate=delegate,
            identity_address_type=PairingConfig.AddressType.PUBLIC)

        enc = 0 if self.open_mode else (Attribute.READ_REQUIRES_ENCRYPTION | Attribute.WRITE_REQUIRES_ENCRYPTION)
        self.ns = self._characteristic(ANCS_NS_UUID, "notification_source", Characteristic.Properties.NOTIFY,
                                       Attribute.READABLE | enc, b"")
        self.cp = self._characteristic(ANCS_CP_UUID, "control_point", Characteristic.Properties.WRITE,
                                       Attribute.WRITEABLE | enc, CharacteristicValue(write=self._control_point))
        self.ds = self._characteristic(ANCS_DS_UUID, "data_source", Characteristic.Properties.NOTIFY,
                                       Attribute.READABLE | enc, b"")
        for c in (self.ns, self.ds):
            cccd = GuardedCCCD(GATT_CLIENT_CHARACTERISTIC_CONFIGURATION_DESCRIPTOR,
                               Attribute.READABLE | Attribute.WRITEABLE | enc,
                               self.device.gatt_server.make_descriptor_value(c))
            cccd.phone, cccd.label = self, c.label
            c.descriptors = [cccd]
            c.on(Characteristic.EVENT_SUBSCRIPTION,
                 lambda conn, notify, indicate, c=c: self._subscribed(c, bool(notify)))
        self.device.add_service(Service(ANCS_UUID, [self.ns, self.cp, self.ds]))
        await self.device.power_on()
        self.device.on("advertisement", self._advertisement)
        self.device.on("connection", self._connection)
        await self.device.start_scanning(active=True, filter_duplicates=False)
        if self.control_path:
            self.spawn(self._follow_control())

    def _characteristic(self, uuid: str, name: str, props, perms, value) -> GuardedCharacteristic:
        c = GuardedCharacteristic(uuid, props, perms, value)
        c.phone, c.label = self, name
        return c

    def refusal(self, what: str, characteristic: str, error: ATT_Error) -> ATT_Error:
        if error.error_code != INSUFFICIENT_ENCRYPTION:
            return error  # a Control Point error (0xA0-0xA3): reported by _control_point
        self.emit("refused", what=what, characteristic=characteristic, att_error=f"0x{self.security_error:02X}")
        return ATT_Error(self.security_error, att_handle=error.att_handle)

    # ---- finding and connecting to the base station ----------------------------------------------
    def _advertisement(self, adv) -> None:
        # The advertisement with its scan response when the scanner merged them.
        data = bytes(adv.data_bytes) + bytes(adv.data)
        if ancs_solicitation_ad() not in data:
            return
        # The Local Name (complete 0x09 or shortened 0x08), as iOS shows it: once per name seen.
        for t, v in adv.data.ad_structures:
            if int(t) in (0x08, 0x09) and (int(t), bytes(v)) not in self.names_seen:
                self.names_seen.add((int(t), bytes(v)))
                self.emit("advertised_name", name=bytes(v).decode(errors="replace"), shortened=int(t) == 0x08)
        if self.connecting:
            return
        if self.intruder and self.intrusions <= 0:
            return
        self.connecting = True
        self.spawn(self._connect(adv.address))

    async def _connect(self, address) -> None:
        try:
            await self.device.stop_scanning()
            if not self.open_mode and not self.intruder:
                await self._new_private_address()
            own = hci.OwnAddressType.PUBLIC if self.intruder else hci.OwnAddressType.RANDOM
            await self.device.connect(address, own_address_type=own, timeout=10)
        except Exception as e:  # a failed attempt: scan and try again
            log.warning("phone: connect failed: %s", e)
            self.connecting = False
            await self.device.start_scanning(active=True, filter_duplicates=False)

    async def _new_private_address(self) -> None:
        # Device.update_rpa() in bumble 0.0.236 sends the *old* address to the controller.
        rpa = hci.Address.generate_private_address(self.irk)
        await self.device.send_sync_command(hci.HCI_LE_Set_Random_Address_Command(random_address=rpa))
        self.device.random_address = rpa

    def _connection(self, connection) -> None:
        self.connection = connection
        self.securing = False
        self.emit("connected", address=str(connection.self_address).split("/")[0],
                  identity=self.identity, irk=self.irk[::-1].hex(),
                  peer=str(connection.peer_address).split("/")[0])
        if self.drop_after is not None:
            delay, self.drop_after = self.drop_after, None
            asyncio.get_running_loop().call_later(delay, lambda: self.spawn(self._drop(connection, "drop_after")))
        connection.on("disconnection", lambda reason: self._gone(connection, reason))
        if self.open_mode:
            return
        if self.intruder:
            # Time for the base station to read the Device Name, then encryption with a made-up key.
            self.intrusions -= 1
            asyncio.get_running_loop().call_later(1.5, lambda: self.spawn(self._intrude(connection)))
            return
        connection.on("security_request", lambda auth_req: self.spawn(self._secure(connection, "security_request")))
        connection.on("pairing", lambda keys: self.emit("paired", peer=str(connection.peer_address).split("/")[0]))
        connection.on("connection_encryption_change", lambda: self._encryption_changed(connection))
        if self.encrypt_on_connect:
            self.spawn(self._secure(connection, "bonded_reconnect", only_if_bonded=True))

    async def _intrude(self, connection) -> None:
        if self.connection is not connection:
            return
        self.emit("intruding", method="encrypt_without_the_bond")
        try:
            await self.device.send_command(hci.HCI_LE_Enable_Encryption_Command(
                connection_handle=connection.handle, random_number=bytes(8), encrypted_diversifier=0,
                long_term_key=os.urandom(16)))
        except Exception as e:  # the drop that follows says the rest
            log.warning("intruder: encryption command failed: %s", e)

    async def _drop(self, connection, why: str) -> None:
        self.emit("dropping", why=why)
        try:
            await connection.disconnect()
        except Exception as e:
            log.warning("phone: disconnect failed: %s", e)

    def _gone(self, connection, reason) -> None:
        self.emit("disconnected", reason=int(reason) if isinstance(reason, int) else str(reason))
        if self.connection is connection:
            self.connection = None
        self.connecting = False
        self.spawn(self.device.start_scanning(active=True, filter_duplicates=False))

    # ---- security ---------------------------------------------------------------------------------
    async def _bonded(self, connection) -> bool:
        return await self.device.keystore.get(str(connection.peer_address)) is not None

    async def _secure(self, connection, why: str, only_if_bonded: bool = False) -> None:
        if connection.is_encrypted or self.securing:
            return
        bonded = await self._bonded(connection)
        if only_if_bonded and not bonded:
            return
        self.securing = True
        self.emit("securing", why=why, method="encrypt_with_bond" if bonded else "pair")
        try:
            if bonded:
                await self.device.encrypt(connection)
            else:
                await self.device.pair(connection)
        except Exception as e:  # the reason is in the line; iOS shows nothing either
            self.emit("encryption_failed" if bonded else "pairing_failed", reason=str(e))
        finally:
            self.securing = False

    def _encryption_changed(self, connection) -> None:
        if connection.is_encrypted:
            self.emit("encrypted", address=str(connection.self_address).split("/")[0])

    # ---- Notification Source ----------------------------------------------------------------------
    def _subscribed(self, characteristic, notify: bool) -> None:
        self.emit("subscribed", characteristic=characteristic.label, notify=notify)
        if characteristic is self.ns and notify:
            # iOS sends every current notification, flagged pre-existing, when NS is subscribed.
            connection = self.connection
            for n in list(self.notifications.values()):
                self.spawn(self._source(connection, EVENT_ADDED, n, pre_existing=True))
            if not self.script_started:
                self.script_started = True
                for n in self.pending:
                    asyncio.get_running_loop().call_later(n.at_s, lambda n=n: self.post(n))
                self.pending = []

    def post(self, n: Notification) -> None:
        event = EVENT_MODIFIED if n.uid in self.notifications else EVENT_ADDED
        self.notifications[n.uid] = n
        self.emit("posted", uid=n.uid, category=CATEGORIES[n.category] if n.category < len(CATEGORIES) else n.category,
                  app_id=n.app_id, title=n.title, subtitle=n.subtitle, event=EVENT_NAMES[event])
        self.spawn(self._source(self.connection, event, n))

    def remove(self, uid: int, why: str) -> bool:
        n = self.notifications.pop(uid, None)
        if n is None:
            return False
        self.emit("removed", uid=uid, why=why)
        self.spawn(self._source(self.connection, EVENT_REMOVED, n))
        return True

    async def _source(self, connection, event: int, n: Notification, pre_existing: bool = False) -> None:
        if connection is None or self.connection is not connection:
            return  # not connected: the next subscription sends it as pre-existing
        count = sum(1 for m in self.notifications.values() if m.category == n.category)
        flags = n.flags | (FLAG_BITS["pre_existing"] if pre_existing else 0)
        pdu = bytes([event, flags, n.category, min(count, 255)]) + n.uid.to_bytes(4, "little")
        if not self._subscribed_to(connection, self.ns):
            return
        await self.device.gatt_server.notify_subscriber(connection, self.ns, pdu)
        self.emit("notified", uid=n.uid, event=EVENT_NAMES[event], flags=flags, category=n.category,
                  pre_existing=pre_existing, value_hex=pdu.hex())

    def _subscribed_to(self, connection, characteristic) -> bool:
        cccd = self.device.gatt_server.subscribers.get(connection, {}).get(characteristic.handle)
        return bool(cccd) and cccd[0] & 0x01 != 0

    # ---- Control Point and Data Source ------------------------------------------------------------
    def _control_point(self, connection, value: bytes) -> None:
        value = bytes(value)
        if self.truth is not None:
            self.truth.write("phone_control_point", value_hex=value.hex())
        try:
            response = self._command(value)
        except ATT_Error as e:
            self.emit("command_error", value_hex=value.hex(), att_error=f"0x{e.error_code:02X}")
            raise
        if response:
            # After the Write Response: Bumble sends it when this callback returns.
            self.spawn(self._data_source(connection, response))

    def _command(self, value: bytes) -> bytes | None:
        if not value:
            raise ATT_Error(ERR_INVALID_COMMAND)
        cmd = value[0]
        if cmd == CMD_GET_NOTIFICATION_ATTRIBUTES:
            if len(value) < 5:
                raise ATT_Error(ERR_INVALID_COMMAND)
            uid = int.from_bytes(value[1:5], "little")
            attrs, i = [], 5
            while i < len(value):
                attr = value[i]
                if attr not in ATTR_NAMES:
                    raise ATT_Error(ERR_INVALID_PARAMETER)
                max_len = None
                if attr in ATTRS_WITH_MAX:
                    if i + 3 > len(value):
                        raise ATT_Error(ERR_INVALID_COMMAND)
                    max_len = int.from_bytes(value[i + 1:i + 3], "little")
                    i += 3
                else:
                    i += 1
                attrs.append((attr, max_len))
            self.emit("command", command="get_notification_attributes", uid=uid,
                      attributes=[{"id": ATTR_NAMES[a], **({"max": m} if m is not None else {})} for a, m in attrs])
            n = self.notifications.get(uid)
            if n is None:
                raise ATT_Error(ERR_INVALID_PARAMETER)
            out = bytes([cmd]) + value[1:5]
            for attr, max_len in attrs:
                v = n.attribute(attr) or b""
                if max_len is not None:
                    v = truncate_utf8(v, max_len)
                out += bytes([attr]) + len(v).to_bytes(2, "little") + v
            return out
        if cmd == CMD_GET_APP_ATTRIBUTES:
            end = value.find(b"\x00", 1)
            if end < 0:
                raise ATT_Error(ERR_INVALID_COMMAND)
            app_id = value[1:end].decode(errors="replace")
            attrs = list(value[end + 1:])
            self.emit("command", command="get_app_attributes", app_id=app_id, attributes=attrs)
            names = {n.app_id: n.app_name for n in self.notifications.values()}
            if app_id not in names or any(a != 0 for a in attrs):
                raise ATT_Error(ERR_INVALID_PARAMETER)
            name = names[app_id].encode()
            return bytes([cmd]) + value[1:end + 1] + b"".join(
                bytes([a]) + len(name).to_bytes(2, "little") + name for a in attrs)
        if cmd == CMD_PERFORM_ACTION:
            if len(value) != 6:
                raise ATT_Error(ERR_INVALID_COMMAND)
            uid, action = int.from_bytes(value[1:5], "little"), value[5]
            self.emit("command", command="perform_notification_action", uid=uid, action=action)
            n = self.notifications.get(uid)
            if n is None or action > 1:
                raise ATT_Error(ERR_INVALID_PARAMETER)
            if not n.flags & FLAG_BITS["positive_action" if action == 0 else "negative_action"]:
                raise ATT_Error(ERR_ACTION_FAILED)
            self.emit("performed", uid=uid, action="positive" if action == 0 else "negative")
            self.remove(uid, "performed")
            return None
        raise ATT_Error(ERR_UNKNOWN_COMMAND)

    async def _data_source(self, connection, response: bytes) -> None:
        await asyncio.sleep(0)  # let the Write Response go first
        if not self._subscribed_to(connection, self.ds):
            self.emit("response_not_sent", why="data_source_not_subscribed")
            return
        size = max(1, connection.att_mtu - 3)
        fragments = [response[i:i + size] for i in range(0, len(response), size)]
        cut = None
        if self.drop_mid_response:
            self.drop_mid_response = False
            # Half the fragments, or half of the only one: always a response cut in the middle.
            if len(fragments) > 1:
                cut = len(fragments) // 2
            else:
                fragments = [response[:max(1, len(response) // 2)]]
                cut = 1
        for k, fragment in enumerate(fragments):
            if cut is not None and k == cut:
                break
            await self.device.gatt_server.notify_subscriber(connection, self.ds, fragment)
        if cut is not None:
            self.emit("dropped_mid_response", uid=int.from_bytes(response[1:5], "little") if response[0] != 1 else None,
                      fragments_sent=min(cut, len(fragments)), bytes_total=len(response))
            await self._drop(connection, "drop_mid_response")
            return
        self.emit("responded", command=response[0], fragments=len(fragments), bytes=len(response), mtu=connection.att_mtu)

    # ---- control file ----------------------------------------------------------------------------
    async def _follow_control(self) -> None:
        """Follows a JSON-lines file (or FIFO) like `tail -f`: each complete line is one command."""
        path = self.control_path
        if not os.path.exists(path):
            open(path, "a").close()
        fifo = stat.S_ISFIFO(os.stat(path).st_mode)
        # O_RDWR on a FIFO: never EOF when a writer closes, and opening never blocks.
        fd = os.open(path, (os.O_RDWR if fifo else os.O_RDONLY) | os.O_NONBLOCK)
        buf = b""
        try:
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    chunk = b""
                if not chunk:
                    await asyncio.sleep(0.02)
                    continue
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        self.control(line.decode(errors="replace"))
        finally:
            os.close(fd)

    def control(self, line: str) -> None:
        try:
            cmd = json.loads(line)
            op = cmd.pop("op", "post")
        except (ValueError, AttributeError) as e:
            self.emit("control_error", line=line, error=str(e))
            return
        self.emit("control", op=op, **({"uid": cmd["uid"]} if "uid" in cmd else {}))
        try:
            self._run(op, cmd, line)
        except (ValueError, KeyError, TypeError) as e:  # a bad field: the file goes on being followed
            self.emit("control_error", line=line, error=repr(e))

    def _run(self, op: str, cmd: dict, line: str) -> None:
        if op in ("post", "modify"):
            if op == "modify" and int(cmd.get("uid", -1)) in self.notifications:
                old = self.notifications[int(cmd["uid"])]
                base = {"category": old.category, "app_id": old.app_id, "title": old.title,
                        "subtitle": old.subtitle, "message": old.message, "date": old.date, "flags": old.flags}
                cmd = {**base, **cmd}
            self.post(self._new(cmd))
        elif op == "remove":
            self.remove(int(cmd["uid"]), "control")
        elif op == "drop":
            if self.connection is not None:
                self.spawn(self._drop(self.connection, "control"))
        elif op == "drop_mid_response":
            self.drop_mid_response = True
        elif op == "forget":
            # "Forget This Device" on the phone: the next Security Request pairs again.
            self.spawn(self._forget())
        else:
            self.emit("control_error", line=line, error=f"unknown op {op!r}")

    async def _forget(self) -> None:
        await self.device.keystore.delete_all()
        self.emit("forgot")


def truncate_utf8(v: bytes, max_len: int) -> bytes:
    """At most max_len octets, never cutting a UTF-8 sequence in half (as iOS does)."""
    if len(v) <= max_len:
        return v
    return v[:max_len].decode("utf-8", errors="ignore").encode()


def load_notifications(path: str | None) -> list[dict]:
    if not path:
        return []
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, dict):
        data = data.get("notifications", [])
    if not isinstance(data, list):
        raise SystemExit(f"{path}: expected a list of notifications")
    return data
