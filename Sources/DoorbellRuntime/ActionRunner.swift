import DoorbellCore
import Glibc

// Local actions (the chime): started the moment an event exists, before it is even stored, so
// the bell rings with the internet down and a full disk. Each run is a child with a timeout on a
// thread of its own; the pipeline never waits for one. A press arriving while `max_running`
// runs are still busy is skipped and counted, so a storm of presses stays bounded. An
// `answer_phones` action runs nothing: it hands "answered" to the phone link (as `agentctl
// answer` does), whose thread dismisses the ringing notification and logs what it dismissed.

public struct ActionStatus: Sendable, Equatable {
    public var name: String
    public var does = ""
    public var runs = 0
    public var failures = 0
    public var timeouts = 0
    public var skippedBusy = 0
    public var running = 0
    public var lastError: String?
}

public final class ActionRunner: @unchecked Sendable {
    let actions: [ActionConfig]
    let log: Logger
    public let status: Locked<[ActionStatus]>
    /// Tells the phone link the door was answered; false when the link is off.
    let answerPhones: @Sendable () -> Bool

    public init(actions: [ActionConfig], log: Logger, answerPhones: @escaping @Sendable () -> Bool = { false }) {
        self.actions = actions
        self.log = log
        self.answerPhones = answerPhones
        self.status = Locked(actions.map { ActionStatus(name: $0.name, does: $0.does) })
    }

    public func trigger(_ event: AgentEvent, json: JSONValue) {
        for (index, action) in actions.enumerated() where action.matches(event) {
            if action.answerPhones {
                answer(action, index: index, event: event)
                continue
            }
            let admitted = status.withLock { s -> Bool in
                guard s[index].running < action.maxRunning else { s[index].skippedBusy += 1; return false }
                s[index].running += 1
                return true
            }
            guard admitted else {
                log.warning("action.skipped_busy", [("action", action.name), ("max_running", String(action.maxRunning))])
                continue
            }
            let env = Self.environment(event, json: json)
            let started = startThread(name: "action") { [self] in
                // The relay first: it is the bell; a program may take longer to start.
                if let pulse = action.gpioPulse { runPulse(pulse, action: action, index: index, also: !action.exec.isEmpty) }
                if !action.exec.isEmpty { run(action, index: index, environment: env) }
                status.withLock { $0[index].running -= 1 }
            }
            if !started {
                // The press itself is not lost: it is stored and sent whatever happens here.
                status.withLock { $0[index].running -= 1 }
                record(index, failure: "could not start the action: the system has no thread to give (out of memory or at its task limit)", action: action)
            }
        }
    }

    /// Queued, not waited for: the radio thread performs it and logs `phone.answered`.
    private func answer(_ action: ActionConfig, index: Int, event: AgentEvent) {
        status.withLock { $0[index].runs += 1 }
        guard answerPhones() else {
            // The loader refuses answer_phones without ancs; a radio that could not start has no link.
            record(index, failure: "answer_phones: the phone link is not running (see radio ble in agentctl status)", action: action)
            return
        }
        log.info("action.answer_phones", [("action", action.name), ("device", event.device.id), ("event", event.type.rawValue)])
    }

    static func environment(_ event: AgentEvent, json: JSONValue) -> [String] {
        [
            "DOORBELL_EVENT_TYPE=\(event.type.rawValue)",
            "DOORBELL_DEVICE_ID=\(event.device.id)",
            "DOORBELL_DEVICE_NAME=\(event.device.name)",
            "DOORBELL_OCCURRED_AT=\(RFC3339.format(micros: event.occurredAtMicros))",
            "DOORBELL_TEST=\(event.test ? "1" : "0")",
            "DOORBELL_EVENT_JSON=\(JSONWriter.string(json))",
            "PATH=/usr/local/bin:/usr/bin:/bin",
        ]
    }

    private func run(_ action: ActionConfig, index: Int, environment: [String]) {
        let started = Clocks.monotonicMicros()
        let process: ChildProcess
        do {
            process = try ChildProcess(program: action.exec[0], arguments: Array(action.exec.dropFirst()), environment: environment)
        } catch {
            record(index, failure: error.description, action: action)
            return
        }
        let finished = WakeSignal()
        let timedOut = Locked(false)
        // Watchdog: TERM at the timeout, KILL a second later.
        // Without its watchdog the action still runs (it is the bell); only the timeout is lost.
        startThread(name: "action-timeout") {
            if !finished.wait(timeoutMicros: Int64(action.timeoutMs) * 1000) {
                timedOut.withLock { $0 = true }
                process.signal(SIGTERM)
                if !finished.wait(timeoutMicros: 1_000_000) { process.signal(SIGKILL) }
            }
        }
        let name = action.name
        let reading = startThread(name: "action-stderr") { [log] in
            readLines(fd: process.stderrFD) { line in if !line.isEmpty { log.info("action.output", [("action", name), ("line", line)]) } }
        }
        if !reading { close(process.stderrFD) } // the program gets EPIPE on stderr instead of blocking on a full pipe
        readLines(fd: process.stdoutFD) { line in if !line.isEmpty { self.log.debug("action.output", [("action", name), ("line", line)]) } }
        let exit = process.wait()
        finished.signal()
        let ms = (Clocks.monotonicMicros() - started) / 1000
        if timedOut.snapshot {
            status.withLock { $0[index].timeouts += 1; $0[index].runs += 1; $0[index].lastError = "killed after \(action.timeoutMs) ms (timeout_ms)" }
            log.error("action.timeout", [("action", action.name), ("timeout_ms", String(action.timeoutMs))])
        } else if exit.code != 0 {
            status.withLock { $0[index].runs += 1 }
            record(index, failure: "\(action.exec[0]) \(exit.description)", action: action)
        } else {
            // A run that works again ends the problem (a relay beside it keeps its own error).
            status.withLock { $0[index].runs += 1; if action.gpioPulse == nil { $0[index].lastError = nil } }
            log.info("action.done", [("action", action.name), ("ms", String(ms))])
        }
    }

    /// Drives the line active for the duration, then inactive, and releases it, so another
    /// program (or the next press) can use the pin in between. With an exec beside it the pulse
    /// runs on its own thread: the program need not wait for the relay.
    private func runPulse(_ pulse: GPIOPulseSettings, action: ActionConfig, index: Int, also: Bool) {
        let body: @Sendable () -> Void = { [self] in
            do throws(GPIOError) {
                let line = try GPIOOutputLine(pulse.line)
                line.set(active: true)
                usleep(UInt32(pulse.durationMs) * 1000)
                line.set(active: false)
                // The line works again (the chip came back): no longer a problem in agentctl status.
                if !also { status.withLock { $0[index].runs += 1; $0[index].lastError = nil } }
                log.info("action.gpio_pulse", [("action", action.name), ("line", pulse.line.description), ("ms", String(pulse.durationMs))])
            } catch {
                if !also { status.withLock { $0[index].runs += 1 } }
                record(index, failure: "gpio_pulse: " + error.description, action: action)
            }
        }
        if !also || !startThread(name: "action-gpio", body) { body() }
    }

    private func record(_ index: Int, failure: String, action: ActionConfig) {
        status.withLock { $0[index].failures += 1; $0[index].lastError = failure }
        log.error("action.failed", [("action", action.name), ("error", failure)])
    }
}
