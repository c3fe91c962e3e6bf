import DoorbellCore
import Foundation
import Testing

/// `[[action]] answer_phones`: a configured button answers the door on the owner's phones. The
/// loader accepts it only beside the phone link and alone in its action; it fires for the
/// events its `on` and `devices` select, like every action.
@Suite struct AnswerPhonesActionTests {
    static let ble = """
    gateway_id = "gw"
    [radio.ble]
    transport = "hci"
    ancs = true
    [[device]]
    id = "front-door"
    radio = "ble"
    match = { address = "C0:11:22:33:44:01" }
    [[device]]
    id = "hall-button"
    radio = "ble"
    match = { address = "C0:11:22:33:44:02" }
    """

    static func errors(_ toml: String) -> String {
        do {
            _ = try ConfigLoader.parse(text: toml, file: "agent.toml")
            return ""
        } catch {
            return error.description
        }
    }

    @Test func aButtonInTheHallAnswersTheDoor() throws {
        let c = try ConfigLoader.parse(text: Self.ble + """

        [[action]]
        name = "answer"
        on = ["doorbell.pressed", "doorbell.long_pressed"]
        devices = ["hall-button"]
        answer_phones = true
        [[action]]
        name = "chime"
        devices = ["front-door"]
        exec = ["/usr/local/bin/chime"]
        """, file: "agent.toml")
        let answer = try #require(c.actions.first)
        #expect(answer.answerPhones && answer.exec.isEmpty && answer.gpioPulse == nil)
        #expect(answer.does == "answer_phones")
        #expect(c.actions.last?.answerPhones == false && c.actions.last?.does == "exec")
    }

    @Test func itAnswersForItsOwnButtonAndEventsOnly() throws {
        let c = try ConfigLoader.parse(text: Self.ble + "\n[[action]]\non = [\"doorbell.long_pressed\"]\ndevices = [\"hall-button\"]\nanswer_phones = true\n",
                                       file: "agent.toml")
        let answer = try #require(c.actions.first)
        func event(_ type: EventType, _ device: String) -> AgentEvent {
            AgentEvent(type: type, device: DeviceRef(id: device, name: device, radio: "ble"), occurredAtMicros: 0, clockSynced: true)
        }
        #expect(answer.matches(event(.doorbellLongPressed, "hall-button")))
        #expect(!answer.matches(event(.doorbellPressed, "hall-button")), "a short press of the hall button is not in `on`")
        #expect(!answer.matches(event(.doorbellLongPressed, "front-door")), "the visitor's button never answers")
    }

    struct Refused: Sendable, CustomTestStringConvertible {
        let name: String
        let toml: String
        let message: String
        var testDescription: String { name }
    }

    static let refused: [Refused] = [
        Refused(name: "without the phone link", toml: ble.replacingOccurrences(of: "ancs = true", with: "") + "\n[[action]]\nanswer_phones = true\n",
                message: "action[0].answer_phones: needs the phone link: set ancs = true in [radio.ble] (with the BLE radio enabled), then pair the phone with agentctl pair"),
        Refused(name: "with the BLE radio off", toml: "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"hci\"\nancs = true\nenabled = false\n[[action]]\nanswer_phones = true\n",
                message: "action[0].answer_phones: needs the phone link: set ancs = true in [radio.ble] (with the BLE radio enabled)"),
        Refused(name: "beside exec", toml: ble + "\n[[action]]\nexec = [\"/bin/true\"]\nanswer_phones = true\n",
                message: "action[0].answer_phones: goes alone: move exec to a second [[action]] with the same on and devices"),
        Refused(name: "beside gpio_pulse", toml: ble + "\n[[action]]\ngpio_pulse = { chip = \"gpiochip0\", line = 17 }\nanswer_phones = true\n",
                message: "action[0].answer_phones: goes alone: move gpio_pulse to a second [[action]] with the same on and devices"),
        Refused(name: "false", toml: ble + "\n[[action]]\nanswer_phones = false\n",
                message: "action[0].answer_phones: false does nothing: leave the key out, or give this action exec or gpio_pulse"),
        Refused(name: "not a bool", toml: ble + "\n[[action]]\nanswer_phones = \"yes\"\n",
                message: "action[0].answer_phones: must be true or false, found a string"),
    ]

    @Test(arguments: refused)
    func theLoaderSaysWhatToWrite(_ c: Refused) {
        let errors = Self.errors(c.toml)
        #expect(errors.contains(c.message), "\(errors)")
        #expect(errors.split(separator: "\n").count == 1, "one problem, one message: \(errors)")
    }
}

/// `[[device]] kind = "answer_button"`: its presses are `door.answered`, which the cloud does not
/// push and the chime's default action does not ring; an `answer_phones` action answers on it by default.
@Suite struct AnswerButtonTests {
    static let config = AnswerPhonesActionTests.ble.replacingOccurrences(of: "id = \"hall-button\"", with: "id = \"hall-button\"\nkind = \"answer_button\"") + """

    [[action]]
    name = "answer"
    answer_phones = true
    [[action]]
    name = "chime"
    exec = ["/usr/local/bin/chime"]
    """

    static func event(_ type: EventType, _ device: String, data: JSONValue = .object([("suppressed", .number(0))])) -> AgentEvent {
        AgentEvent(type: type, device: DeviceRef(id: device, name: device, radio: "ble"), occurredAtMicros: 0, clockSynced: true, data: data)
    }

    @Test func anAnswerButtonsPressesAreDoorAnsweredWithTheirGesture() throws {
        let c = try ConfigLoader.parse(text: Self.config, file: "agent.toml")
        #expect(c.devices.map(\.kind) == [.doorbell, .answerButton])
        let answered = AnswerButton.retype(Self.event(.doorbellDoublePressed, "hall-button"), devices: c.devices)
        #expect(answered.type == .doorAnswered)
        #expect(answered.data == .object([("suppressed", .number(0)), ("gesture", .string("double_pressed"))]))
        #expect(AnswerButton.retype(Self.event(.doorbellPressed, "front-door"), devices: c.devices).type == .doorbellPressed)
        let entered = Self.event(.beaconEntered, "hall-button")
        #expect(AnswerButton.retype(entered, devices: c.devices) == entered, "only presses answer")
    }

    @Test func theAnswerActionFiresOnItAndTheChimeDoesNot() throws {
        let c = try ConfigLoader.parse(text: Self.config, file: "agent.toml")
        let answer = try #require(c.actions.first), chime = try #require(c.actions.last)
        #expect(answer.on == [.doorAnswered])
        let hall = AnswerButton.retype(Self.event(.doorbellPressed, "hall-button"), devices: c.devices)
        let door = AnswerButton.retype(Self.event(.doorbellPressed, "front-door"), devices: c.devices)
        #expect(answer.matches(hall) && !answer.matches(door))
        #expect(chime.matches(door) && !chime.matches(hall), "answering the door does not ring the chime")
        // An explicit `on` still wins: a long press of the doorbell itself may answer.
        let own = try ConfigLoader.parse(text: Self.config.replacingOccurrences(of: "answer_phones = true", with: "on = [\"doorbell.long_pressed\"]\nanswer_phones = true"),
                                         file: "agent.toml")
        #expect(own.actions.first?.on == [.doorbellLongPressed])
    }

    @Test func anUnknownKindNamesTheKinds() {
        let text = Self.config.replacingOccurrences(of: "kind = \"answer_button\"", with: "kind = \"answer\"")
        #expect(AnswerPhonesActionTests.errors(text).contains("use one of doorbell, answer_button"))
    }
}

/// Issue #26.4: a light that flashes while a call rings and stops when it stops: actions select the
/// phone's notification events by type, like any other.
@Suite struct PhoneEventActionTests {
    @Test func anActionSelectsANotificationAndItsRemoval() throws {
        let c = try ConfigLoader.parse(text: AnswerPhonesActionTests.ble + """

        [[action]]
        name = "flash"
        on = ["phone.notification"]
        exec = ["/usr/local/bin/flash", "on"]
        [[action]]
        name = "stop-flashing"
        on = ["phone.notification_removed", "phone.notification_modified"]
        exec = ["/usr/local/bin/flash", "off"]
        """, file: "agent.toml")
        func event(_ type: EventType) -> AgentEvent {
            AgentEvent(type: type, device: DeviceRef(id: "F4:0F:24:00:00:01", name: "Anna’s iPhone", radio: "ble"), occurredAtMicros: 0, clockSynced: true)
        }
        #expect(c.actions.map { $0.matches(event(.phoneNotification)) } == [true, false])
        #expect(c.actions.map { $0.matches(event(.phoneNotificationRemoved)) } == [false, true])
        #expect(c.actions.map { $0.matches(event(.phoneNotificationModified)) } == [false, true])
    }
}
