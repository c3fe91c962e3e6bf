// `[[action]]`: what the base station does itself the moment an event exists. Each action does
// one of three things: run a program (`exec`), pulse a GPIO line (`gpio_pulse`; the two may go
// together: a relay and a program), or answer the door on the owner's phones (`answer_phones`,
// alone: it needs the phone link of `[radio.ble] ancs`).

extension ConfigLoader {
    static func readAction(_ t: TableReader, index: Int, devices: [DeviceConfig], phoneLink: Bool, baseDir: String) -> ActionConfig? {
        defer { t.finish() }
        let name = t.string("name", required: false) ?? "action-\(index)"
        var on: [EventType] = [.doorbellPressed]
        if let types = t.stringArray("on") {
            on = []
            for type in types {
                if let e = EventType(rawValue: type) { on.append(e) } else {
                    t.report("on", "unknown event type \"\(type)\"; use \(EventType.allCases.map(\.rawValue).joined(separator: ", "))")
                }
            }
        }
        let devicesFilter = t.stringArray("devices") ?? []
        for d in devicesFilter where !devices.contains(where: { $0.id == d }) {
            t.report("devices", "no [[device]] with id \"\(d)\"")
        }
        var action = ActionConfig(name: name, on: on, devices: devicesFilter, exec: [])
        if let v = t.int("timeout_ms", in: 100...600_000) { action.timeoutMs = v }
        if let v = t.int("max_running", in: 1...32) { action.maxRunning = v }
        if let g = t.table("gpio_pulse") {
            if let line = readLine(g, what: "the chime relay or buzzer") {
                var pulse = GPIOPulseSettings(line: line)
                if let v = g.int("duration_ms", in: 10...60_000) { pulse.durationMs = v }
                action.gpioPulse = pulse
            }
            g.finish()
        }
        if let argv = t.stringArray("exec") {
            if argv.isEmpty || argv[0].isEmpty {
                t.report("exec", "needs a program, e.g. exec = [\"/usr/bin/aplay\", \"/usr/share/sounds/ding.wav\"]")
            } else if argv[0].hasPrefix("./") || argv[0].hasPrefix("../") {
                // Beside the config (board profiles ship their chime scripts that way).
                action.exec = [resolve(argv[0], baseDir: baseDir)] + argv.dropFirst()
            } else if !argv[0].hasPrefix("/") {
                t.report("exec", "give the program's absolute path, or ./name beside this config (no PATH lookup, no shell): \"\(argv[0])\"")
            } else {
                action.exec = argv
            }
        }
        if let answer = t.bool("answer_phones") {
            // An answer button's presses are door.answered; that is what answers unless `on` says otherwise.
            if !t.has("on") { action.on = [.doorAnswered] }
            if !answer {
                t.report("answer_phones", "false does nothing: leave the key out, or give this action exec or gpio_pulse")
            } else if t.has("exec") || t.has("gpio_pulse") {
                let other = t.has("exec") ? "exec" : "gpio_pulse"
                t.report("answer_phones", "goes alone: move \(other) to a second [[action]] with the same on and devices")
            } else if !phoneLink {
                t.report("answer_phones", "needs the phone link: set ancs = true in [radio.ble] (with the BLE radio enabled), then pair the phone with agentctl pair")
            } else {
                action.answerPhones = true
                return action
            }
            return nil
        }
        if !t.has("exec") && !t.has("gpio_pulse") && !t.has("answer_phones") {
            t.report("exec", "or gpio_pulse or answer_phones is required: the program to run, e.g. exec = [\"/usr/local/bin/chime\"], "
                + "gpio_pulse = { chip = \"pinctrl-bcm2711\", line = 17, duration_ms = 300 }, or answer_phones = true")
        }
        return !action.exec.isEmpty || action.gpioPulse != nil ? action : nil
    }
}
