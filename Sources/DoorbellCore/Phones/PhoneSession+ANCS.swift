// The ANCS client policy of PhoneSession: once the bonded phone's link is encrypted and ANCS is
// found, subscribe Data Source then Notification Source (Apple: the Data Source first, so that no
// response is missed); for each notification added or modified in a category of interest, ask
// its attributes with GetNotificationAttributes, one Control Point command at a time (the Data
// Source response carries no length, so the assembler must know the one outstanding command),
// the rest queued (bounded). Complete notifications go to the PhoneNotificationTracker; its
// dismissals become PerformNotificationAction(negative), ahead of the queued fetches.

extension PhoneSession {
    /// A press the agent forwarded (for the delivery receipts).
    public mutating func pressForwarded(eventID: String, doorbellName: String, at now: Int64) -> [Output] {
        forward(tracker.pressForwarded(eventID: eventID, doorbellName: doorbellName, at: now))
    }

    /// The door was answered (`agentctl answer`, an `answer_phones` action): the ringing doorbell
    /// notification is dismissed on the phone. The first output says what is being dismissed
    /// (nothing, when no doorbell notification was ringing on a connected phone).
    public mutating func answered(at now: Int64) -> [Output] {
        var dismissing: [PhoneDismissal] = []
        for d in tracker.answered() where link?.bond?.id == d.phoneID {
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

    mutating func gatt(_ event: GATTClient.Action, at now: Int64) -> [Output] {
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
            if handle == ancs.dataSource, let outcome = assembler.receive(value, at: now) { return dataSourceOutcome(outcome, at: now) }
            return []
        case let .written(handle):
            guard let ancs = link?.ancs else { return [] }
            if handle == ancs.notificationSource, let id = link?.bond?.id, link?.reading == false {
                link?.reading = true
                status.readingNotifications = true
                tracker.phoneConnected(id, name: link?.bond?.name ?? "")
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
    mutating func startANCS(at now: Int64) -> [Output] {
        guard let l = link, l.encrypted, l.bond != nil, let ancs = l.ancs, !l.subscribing else { return [] }
        link?.subscribing = true
        return [.subscribe(ancs.dataSource), .subscribe(ancs.notificationSource)]
    }

    mutating func notificationSource(_ value: [UInt8], at now: Int64) -> [Output] {
        guard case let .success(n) = notificationSource.receive(value), let id = link?.bond?.id else { return [] }
        switch n.event {
        case .removed:
            link?.queue.removeAll { $0.fetching == n.uid }
            let gone = PhoneNotification(phoneID: id, uid: n.uid, change: .removed, category: Int(n.category.rawValue), appID: "")
            return forward(tracker.notification(gone, at: now)) + pump(at: now)
        case .added, .modified:
            guard settings.fetchCategories.map({ $0.contains(n.category.description) }) ?? true else { return [] }
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
    mutating func pump(at now: Int64) -> [Output] {
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
            do { try assembler.sent(command, at: now) } catch { return pump(at: now) }
        }
        link?.outstanding = Outstanding(command: command, notification: fetched, answered: !command.hasDataSourceResponse)
        return [.write(handle: ancs.controlPoint, bytes)]
    }

    mutating func dataSourceOutcome(_ outcome: ANCSDataSourceOutcome, at now: Int64) -> [Output] {
        guard link?.outstanding != nil else { return [] }
        switch outcome {
        case let .notificationAttributes(a):
            link?.outstanding?.answered = true
            guard let id = link?.bond?.id, let n = link?.outstanding?.notification, n.uid == a.uid else { return finishIfDone(at: now) }
            status.notificationsRead += 1
            let change: PhoneNotification.Change = n.event == .modified ? .modified : .added
            let phone = PhoneNotification(phoneID: id, uid: a.uid, change: change, category: Int(n.category.rawValue),
                                          appID: a.appIdentifier ?? "", title: a.title ?? "", subtitle: a.subtitle ?? "", message: a.message ?? "",
                                          flags: n.flags)
            return forward(tracker.notification(phone, at: now)) + finishIfDone(at: now)
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

    mutating func finishIfDone(at now: Int64) -> [Output] {
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
