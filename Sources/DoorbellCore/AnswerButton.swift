// An answer button (`[[device]] kind = "answer_button"`) sits inside the house: its presses say
// the door was answered. They become `door.answered` (the gesture kept in data) instead of a
// doorbell press, so the cloud, which pushes `doorbell.*` to every phone, does not tell the
// household that someone is at the door when one of them opens it; the default chime action
// (on doorbell.pressed) stays silent; an `[[action]] answer_phones` (whose default trigger is
// door.answered) dismisses the ringing alert on the phones.

public enum AnswerButton {
    /// The event as the device's kind makes it: unchanged unless it is a press of an answer button.
    public static func retype(_ event: AgentEvent, devices: [DeviceConfig]) -> AgentEvent {
        guard event.type.rawValue.hasPrefix("doorbell."),
              devices.contains(where: { $0.kind == .answerButton && $0.id == event.device.id }) else { return event }
        var answered = event
        answered.type = .doorAnswered
        let gesture: (String, JSONValue) = ("gesture", .string(String(event.type.rawValue.dropFirst("doorbell.".count))))
        if case let .object(fields) = event.data { answered.data = .object(fields + [gesture]) } else { answered.data = .object([gesture]) }
        return answered
    }
}
