// The ANCS client policy of PhoneSession: once the bonded phone's link is encrypted and ANCS is
// found, subscribe Data Source then Notification Source (Apple: the Data Source first, so that no
// response is missed); for each notification added or modified in a category of interest, ask
// its attributes with GetNotificationAttributes, one Control Point command at a time (the Data
// Source response carries no length, so the assembler must know the one outstanding command),
// the rest queued (bounded). Complete notifications go to the PhoneNotificationTracker; its
// dismissals become PerformNotificationAction(negative), ahead of the queued fetches.
//
// Nothing is read before the link is the bonded phone (`Link.phone`: encrypted with its key).
// A notification announced live whose read the link cut is remembered with the bond and read
// again when the phone lists it (pre-existing) on a later link: reported then, as live.

extension PhoneSession {
    /// A press the agent forwarded (for the delivery receipts).
    public mutating func pressForwarded(eventID: String, doorbellName: String, at now: PhoneTime) -> [Output] {
        forward(tracker.pressForwarded(eventID: eventID, doorbellName: doorbellName, at: now.monotonic))
    }

    /// The door was answered (`agentctl answer`, an `answer_phones` action): the ringing doorbell
    /// notification is dismissed on the phone. The first output says what is being dismissed
    /// (nothing, when no doorbell notification was ringing on a connected phone).
    public mutating func answered(at now: PhoneTime) -> [Output] {
        var dismissing: [PhoneDismissal] = []
        for d in tracker.answered() where link?.phone?.id == d.phoneID {
            // Dismissing goes before the fetches waiting: the door is being answered now.
            link?.queue.insert(.dismiss(uid: d.uid), at: 0)
            trimQueue()
            dismissing.append(d)
        }
        return [.answered(dismissing: dismissing)] + pump(at: now)
    }

    func forward(_ outputs: [PhoneNotificationTracker.Output]) -> [Output] {
        outputs.map { o in
            switch o {
            case let .event(type, data): .event(type: type, data: data)
            }
        }
    }

    mutating func gatt(_ event: GATTClient.Action, at now: PhoneTime) -> [Output] {
        switch event {
        case let .discoveredANCS(ns, cp, ds):
            link?.ancs = (ns, cp, ds)
            return (link?.encrypted == true ? [] : requestSecurity(at: now)) + startANCS(at: now)
        case .servicesChanged:
            // The handles are stale: what was asked is lost; discovery reports ANCS again.
            abandonCommands()
            link?.ancs = nil
            link?.subscribing = false
            link?.reading = false
            status.readingNotifications = false
            return []
        case .securityRequired:
            return requestSecurity(at: now)
        case let .notification(handle, value):
            guard let ancs = link?.ancs else { return [] }
            if handle == ancs.notificationSource { return notificationSource(value, at: now) }
            if handle == ancs.dataSource, let outcome = assembler.receive(value, at: now.monotonic) { return dataSourceOutcome(outcome, at: now) }
            return []
        case let .written(handle):
            guard let ancs = link?.ancs else { return [] }
            if handle == ancs.notificationSource, let phone = link?.phone, link?.reading == false {
                link?.reading = true
                status.readingNotifications = true
                tracker.phoneConnected(phone.id, name: phone.name)
            } else if handle == ancs.controlPoint, link?.outstanding != nil {
                link?.outstanding?.acknowledged = true
                return finishIfDone(at: now)
            }
            return []
        case let .writeFailed(handle, error):
            guard let ancs = link?.ancs else { return [] }
            if handle == ancs.controlPoint, let o = link?.outstanding {
                // 0xA2 Invalid Parameter: the notification went meanwhile. Nothing will answer.
                assembler.cancel()
                link?.outstanding = nil
                if o.command.hasDataSourceResponse { status.fetchesAbandoned += 1 }
                status.lastError = "the phone refused \(o.command): \(ANCSControlPointError(attErrorCode: error)?.description ?? ATT.errorName(error))"
                return pump(at: now)
            }
            if handle == ancs.notificationSource || handle == ancs.dataSource {
                status.lastError = "the phone refused the ANCS subscription (\(ATT.errorName(error))); forget the base station on the phone and pair again"
            }
            return []
        case let .deviceName(name):
            return named(name)
        case .ancsAbsent, .timedOut, .send:
            return []
        }
    }

    /// Subscribes once the link is encrypted, ANCS is known and the phone's bond is durable.
    mutating func startANCS(at now: PhoneTime) -> [Output] {
        guard let l = link, l.encrypted, l.phone != nil, let ancs = l.ancs, !l.subscribing else { return [] }
        link?.subscribing = true
        return [.subscribe(ancs.dataSource), .subscribe(ancs.notificationSource)]
    }

    mutating func notificationSource(_ value: [UInt8], at now: PhoneTime) -> [Output] {
        guard case var .success(n) = notificationSource.receive(value), let id = link?.phone?.id else { return [] }
        switch n.event {
        case .removed:
            link?.queue.removeAll { $0.fetching == n.uid }
            link?.live[n.uid] = nil
            // Gone before it could be read: nothing to report later either.
            var out: [Output] = []
            if bonds.update(id, { $0.finished(uid: n.uid) }), let bond = bonds.bonds.first(where: { $0.id == id }) { out.append(.updateBond(bond)) }
            let gone = PhoneNotification(phoneID: id, uid: n.uid, change: .removed, category: Int(n.category.rawValue), appID: "")
            return out + forward(tracker.notification(gone, at: now)) + pump(at: now)
        case .added, .modified:
            guard settings.fetchCategories.map({ $0.contains(n.category.description) }) ?? true else { return [] }
            let category = Int(n.category.rawValue)
            if n.flags.contains(.preExisting), bonds.bonds.first(where: { $0.id == id })?.isUnfinished(uid: n.uid, category: category) == true {
                // Announced live on an earlier link and never read: it is read now, as live.
                n.flags.remove(.preExisting)
            }
            if n.event == .added, !n.flags.contains(.preExisting) { link?.live[n.uid] = category }
            // A later event of the same notification replaces the one waiting.
            link?.queue.removeAll { $0.fetching == n.uid }
            link?.queue.append(.fetch(n))
            trimQueue()
            return pump(at: now)
        case .unknown:
            return []
        }
    }

    /// Past the bound, pre-existing notifications (what the phone lists on subscribing) go
    /// first, then the oldest: a new doorbell push must not wait behind the backlog.
    mutating func trimQueue() {
        while let q = link?.queue, q.count > settings.maxQueuedCommands {
            let victim = q.firstIndex { $0.isPreExisting } ?? q.firstIndex { $0.fetching != nil } ?? 0
            link?.queue.remove(at: victim)
            status.fetchesDropped += 1
        }
    }

    /// Writes the next queued command when none is outstanding.
    mutating func pump(at now: PhoneTime) -> [Output] {
        guard let l = link, l.reading, l.outstanding == nil, let ancs = l.ancs, let next = l.queue.first else { return [] }
        link?.queue.removeFirst()
        let command: ANCSCommand
        var fetched: ANCSNotification?
        switch next {
        case let .dismiss(uid):
            command = .performNotificationAction(uid: uid, action: .negative)
        case let .fetch(n):
            fetched = n
            command = .getNotificationAttributes(uid: n.uid, attributes: [.appIdentifier, .title(maxLength: settings.titleMax),
                                                                          .subtitle(maxLength: settings.subtitleMax),
                                                                          .message(maxLength: settings.messageMax), .date])
        }
        // Neither command carries an app identifier, the one thing `encoded` can refuse.
        guard let bytes = try? command.encoded() else { return pump(at: now) }
        if command.hasDataSourceResponse {
            do { try assembler.sent(command, at: now.monotonic) } catch { return pump(at: now) }
        }
        link?.outstanding = Outstanding(command: command, notification: fetched, answered: !command.hasDataSourceResponse)
        return [.write(handle: ancs.controlPoint, bytes)]
    }

    mutating func dataSourceOutcome(_ outcome: ANCSDataSourceOutcome, at now: PhoneTime) -> [Output] {
        guard link?.outstanding != nil else { return [] }
        switch outcome {
        case let .notificationAttributes(a):
            link?.outstanding?.answered = true
            guard let bond = link?.phone, let n = link?.outstanding?.notification, n.uid == a.uid else { return finishIfDone(at: now) }
            status.notificationsRead += 1
            link?.live[a.uid] = nil
            let change: PhoneNotification.Change = n.event == .modified ? .modified : .added
            var phone = PhoneNotification(phoneID: bond.id, uid: a.uid, change: change, category: Int(n.category.rawValue),
                                          appID: a.appIdentifier ?? "", title: a.title ?? "", subtitle: a.subtitle ?? "", message: a.message ?? "",
                                          flags: n.flags)
            phone.phoneDate = a.date
            phone.postedAtMicros = a.date.flatMap { instant($0, at: now) }
            let reference = phone.appID == settings.tracker.doorbellAppID ? PhoneNotificationTracker.reference(in: phone.subtitle) : nil
            let receipts = bonds.bonds.first { $0.id == bond.id }?.receipts ?? []
            phone.receiptReported = reference.map { receipts.contains($0) } ?? false
            let events = forward(tracker.notification(phone, at: now))
            // What the bond remembers changed: the read finished, a receipt went out (one write,
            // after the events: a crash between them repeats a receipt rather than lose it).
            var changed = bonds.update(bond.id) { $0.finished(uid: a.uid) }
            if let reference, events.contains(where: { if case .event("push.displayed", _) = $0 { true } else { false } }) {
                changed = bonds.update(bond.id) { $0.receiptReported(reference) } || changed
            }
            var out = events
            if changed, let b = bonds.bonds.first(where: { $0.id == bond.id }) {
                link?.bond = b
                out.append(.updateBond(b))
            }
            return out + finishIfDone(at: now)
        case .appAttributes:
            link?.outstanding?.answered = true
            return finishIfDone(at: now)
        case let .abandoned(error):
            // Timed out or too large: the Write Response may never come either; move on.
            status.fetchesAbandoned += 1
            status.lastError = error.description
            link?.outstanding = nil
            return pump(at: now)
        }
    }

    /// The phone's Date as an instant: its local time read in the base station's zone. A time
    /// more than a minute after the base station read it cannot be right (the zones differ):
    /// nil, and the read time stands in.
    func instant(_ date: ANCSDate, at now: PhoneTime) -> Int64? {
        guard let seconds = settings.localTime(date) else { return nil }
        let micros = seconds * 1_000_000
        return micros <= now.wall + 60_000_000 ? micros : nil
    }

    mutating func finishIfDone(at now: PhoneTime) -> [Output] {
        guard let o = link?.outstanding, o.acknowledged, o.answered else { return [] }
        link?.outstanding = nil
        return pump(at: now)
    }

    mutating func abandonCommands() {
        if assembler.linkDropped() != nil { status.fetchesAbandoned += 1 }
        link?.outstanding = nil
        link?.queue.removeAll()
    }
}

/// A Control Point command waiting its turn.
enum QueuedCommand: Sendable, Equatable {
    case fetch(ANCSNotification)
    case dismiss(uid: UInt32)

    /// The notification whose attributes this fetches.
    var fetching: UInt32? { if case let .fetch(n) = self { n.uid } else { nil } }
    var isPreExisting: Bool { if case let .fetch(n) = self { n.flags.contains(.preExisting) } else { false } }
}
