import CloudCore
import CloudPush
import CloudStore
import Foundation
import Hummingbird
import Logging
import NIOPosix

/// The app-facing API: accounts, gateways and their enrolment tokens, doorbells, shares, phone
/// tokens, deliveries and beacon reports. Every route but `POST /accounts`, `POST /enrol` and
/// `POST /enrol/problems` takes `Authorization: Bearer <account token>`; `POST /accounts` takes
/// the operator's admin token, the enrol routes a one-time token in the body. See cloud/README.md.
public struct AppAPI: Sendable {
    let store: CloudStore
    /// The admin token's hash (as account tokens are kept); nil: accounts can only be made with
    /// `doorbell-cloud account create`.
    let adminTokenHash: String?
    let clock: WallClock
    let fanOut: FanOut?
    /// Bundle ids phones may register (the APNs topics we can push to); empty: any.
    let topics: Set<String>
    let beaconIntervalMilliseconds: Int64
    let pushTTLMilliseconds: Int64
    let logger = Logger(label: "doorbell-cloud.api")

    public init(store: CloudStore, adminToken: String?, clock: WallClock = .system, fanOut: FanOut?,
                topics: Set<String> = [], beaconIntervalSeconds: Int64 = 600, pushTTLSeconds: Int64 = 3600) {
        self.store = store
        adminTokenHash = adminToken.map(CloudStore.tokenHash)
        self.clock = clock
        self.fanOut = fanOut
        self.topics = topics
        beaconIntervalMilliseconds = beaconIntervalSeconds * 1000
        pushTTLMilliseconds = pushTTLSeconds * 1000
    }

    public func register(on router: Router<BasicRequestContext>) {
        router.post("accounts") { request, context in await handle { try await createAccount(request, context) } }
        router.get("me") { request, _ in await authenticated(request) { account in
            .json(.ok, ["id": .string(account.id), "name": .string(account.name)])
        } }
        router.delete("me") { request, context in await authenticated(request) { account in
            // The body names the account, so a stray DELETE cannot end one.
            let body = try await decode(ConfirmBody.self, request, context)
            guard body.confirm == account.id else {
                throw APIError(.badRequest, "invalid_request", "to delete this account send {\"confirm\": \"\(account.id)\"}")
            }
            try await store.deleteAccount(id: account.id)
            return Response(status: .noContent)
        } }
        router.post("gateways") { request, context in await authenticated(request) { account in
            try await enrollGateway(request, context, account)
        } }
        router.get("gateways") { request, _ in await authenticated(request) { account in
            // With each gateway's last heartbeat: is it alive, which version, which slot.
            let gateways = try await store.gateways(accountID: account.id)
            return .json(.ok, ["gateways": .array(gateways.map { g in .object([
                ("id", .string(g.id)), ("enrolled_at_ms", .int(g.enrolledAtMilliseconds)),
                ("last_seen_ms", g.lastSeenMilliseconds.map { .int($0) } ?? .null),
                ("agent_version", g.agentVersion.map { .string($0) } ?? .null),
                ("boot_slot", g.bootSlot.map { .string($0) } ?? .null),
            ]) })])
        } }
        router.post("enrolment-tokens") { request, context in await authenticated(request) { account in
            try await createEnrolmentToken(request, context, account)
        } }
        // The gateway itself, with the token for credential (it has no account token).
        router.post("enrol") { request, context in await handle { try await enrol(request, context) } }
        router.post("enrol/problems") { request, context in await handle { try await reportProblem(request, context) } }
        router.get("provisioning-reports") { request, _ in await authenticated(request) { account in
            let reports = try await store.provisioningReports(accountID: account.id)
            return .json(.ok, ["reports": .array(reports.map { report in .object([
                ("id", .string(report.id)), ("gateway_id", .string(report.gatewayID)), ("problem", .string(report.problem)),
                ("reported_at_ms", .int(report.reportedAtMilliseconds)),
            ]) })])
        } }
        router.delete("gateways/:id") { request, context in await authenticated(request) { account in
            try await store.removeGateway(id: try context.parameters.require("id"), accountID: account.id)
            return Response(status: .noContent)
        } }
        router.get("doorbells") { request, _ in await authenticated(request) { account in
            let list = try await store.doorbells(visibleTo: account.id)
            return .json(.ok, ["doorbells": .array(list.map { Self.json($0.0, owned: $0.owned) })])
        } }
        router.put("doorbells/:id") { request, context in await authenticated(request) { account in
            try await putDoorbell(request, context, account)
        } }
        router.delete("doorbells/:id") { request, context in await authenticated(request) { account in
            try await store.removeDoorbell(id: try context.parameters.require("id"), accountID: account.id)
            return Response(status: .noContent)
        } }
        router.get("doorbells/:id/shares") { request, context in await authenticated(request) { account in
            let id = try context.parameters.require("id")
            let shares = try await store.shares(doorbellID: id, ownerID: account.id)
            return .json(.ok, ["doorbell_id": .string(id), "accounts": .array(shares.map { .string($0) })])
        } }
        router.post("doorbells/:id/shares") { request, context in await authenticated(request) { account in
            let id = try context.parameters.require("id")
            let body = try await decode(ShareBody.self, request, context)
            let now = clock.millisecondsSinceEpoch()
            try await store.share(doorbellID: id, with: body.account_id, by: account.id, now: now)
            return .json(.created, ["doorbell_id": .string(id), "account_id": .string(body.account_id), "status": .string("shared")])
        } }
        router.delete("doorbells/:id/shares/:account") { request, context in await authenticated(request) { account in
            let id = try context.parameters.require("id")
            let guest = try context.parameters.require("account")
            try await store.unshare(doorbellID: id, from: guest, by: account.id)
            return Response(status: .noContent)
        } }
        router.get("phones") { request, _ in await authenticated(request) { account in
            let phones = try await store.phones(accountID: account.id)
            return .json(.ok, ["phones": .array(phones.map(Self.json))])
        } }
        router.put("phones/:token") { request, context in await authenticated(request) { account in
            try await registerPhone(request, context, account)
        } }
        router.delete("phones/:token") { request, context in await authenticated(request) { account in
            let token = try context.parameters.require("token")
            try await store.unregisterPhone(token: token, accountID: account.id)
            return Response(status: .noContent)
        } }
        router.get("events/:id/deliveries") { request, context in await authenticated(request) { account in
            try await deliveries(context, account)
        } }
        router.put("beacon-messages") { request, context in await authenticated(request) { account in
            let body = try await decode(BeaconMessageBody.self, request, context)
            let message = try await store.putBeaconMessage(
                accountID: account.id, region: try body.region.parsed(), event: body.event ?? "entered",
                doorbellID: body.doorbell_id, site: body.site, title: body.title, body: body.body)
            return .json(.ok, ["message": Self.json(message)])
        } }
        router.get("beacon-messages") { request, _ in await authenticated(request) { account in
            .json(.ok, ["messages": .array(try await store.beaconMessages(accountID: account.id).map(Self.json))])
        } }
        router.delete("beacon-messages/:id") { request, context in await authenticated(request) { account in
            try await store.deleteBeaconMessage(id: try context.parameters.require("id"), accountID: account.id)
            return Response(status: .noContent)
        } }
        router.post("beacon-reports") { request, context in await authenticated(request) { account in
            try await beaconReport(request, context, account)
        } }
    }

    // MARK: Handlers

    struct AccountBody: Decodable { let name: String }
    struct GatewayBody: Decodable { let id: String; let public_key: String?; let secret: String? }
    struct EnrolmentTokenBody: Decodable { let gateway_id: String?; let ttl_s: Int64? }
    struct EnrolBody: Decodable { let token: String; let gateway_id: String; let public_key: String }
    struct ProblemBody: Decodable { let token: String; let gateway_id: String; let problem: String }
    struct DoorbellBody: Decodable { let name: String?; let site: String? }
    struct ShareBody: Decodable { let account_id: String }
    struct PhoneBody: Decodable {
        let environment: String; let bundle_id: String; let installation_secret: String
        let name: String?; let share_name: Bool?
    }
    struct ConfirmBody: Decodable { let confirm: String? }
    /// A region as bodies give it: uuid, major, minor (iBeacon) or namespace, instance (Eddystone-UID).
    struct RegionFields: Decodable {
        let uuid: String?; let major: Int64?; let minor: Int64?; let namespace: String?; let instance: String?

        func parsed() throws -> BeaconRegion {
            do {
                return try BeaconRegion(uuid: uuid, major: major, minor: minor, namespace: namespace, instance: instance)
            } catch {
                throw APIError(.badRequest, "invalid_request", error.description)
            }
        }
    }
    struct BeaconMessageBody: Decodable {
        let region: RegionFields; let event: String?
        let doorbell_id: String?; let site: String?; let title: String; let body: String

        enum CodingKeys: String, CodingKey { case event, doorbell_id, site, title, body }

        init(from decoder: any Decoder) throws {
            region = try RegionFields(from: decoder)
            let fields = try decoder.container(keyedBy: CodingKeys.self)
            event = try fields.decodeIfPresent(String.self, forKey: .event)
            doorbell_id = try fields.decodeIfPresent(String.self, forKey: .doorbell_id)
            site = try fields.decodeIfPresent(String.self, forKey: .site)
            title = try fields.decode(String.self, forKey: .title)
            body = try fields.decode(String.self, forKey: .body)
        }
    }
    struct BeaconReportBody: Decodable {
        let region: RegionFields; let event: String?; let token: String

        enum CodingKeys: String, CodingKey { case event, token }

        init(from decoder: any Decoder) throws {
            region = try RegionFields(from: decoder)
            let fields = try decoder.container(keyedBy: CodingKeys.self)
            event = try fields.decodeIfPresent(String.self, forKey: .event)
            token = try fields.decode(String.self, forKey: .token)
        }
    }

    func createAccount(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        guard let adminTokenHash else {
            throw APIError(.forbidden, "no_admin_token",
                           "this server has no --admin-token-file; create accounts with `doorbell-cloud account create`")
        }
        guard let presented = Self.bearer(request), CloudStore.tokenHash(presented) == adminTokenHash else {
            throw APIError(.unauthorized, "unauthorized", "POST /accounts needs Authorization: Bearer <admin token>")
        }
        let body = try await decode(AccountBody.self, request, context)
        let now = clock.millisecondsSinceEpoch()
        let (account, token) = try await store.createAccount(name: body.name, now: now)
        return .json(.created, ["id": .string(account.id), "name": .string(account.name), "token": .string(token)])
    }

    func enrollGateway(_ request: Request, _ context: BasicRequestContext, _ account: Account) async throws -> Response {
        let body = try await decode(GatewayBody.self, request, context)
        let now = clock.millisecondsSinceEpoch()
        try await store.enrollGateway(id: body.id, accountID: account.id, publicKey: body.public_key, secret: body.secret, now: now)
        return .json(.created, ["id": .string(body.id), "account_id": .string(account.id), "status": .string("enrolled")])
    }

    func createEnrolmentToken(_ request: Request, _ context: BasicRequestContext, _ account: Account) async throws -> Response {
        let body = try await decode(EnrolmentTokenBody.self, request, context)
        let ttl: Int64
        switch EnrolmentToken.ttl(body.ttl_s) {
        case .success(let seconds): ttl = seconds
        case .failure(let problem): throw APIError(.badRequest, problem.code, problem.description)
        }
        let now = clock.millisecondsSinceEpoch()
        let (token, expires) = try await store.createEnrolmentToken(accountID: account.id, gatewayID: body.gateway_id,
                                                                    ttlSeconds: ttl, now: now)
        return .json(.created, [
            "token": .string(token), "gateway_id": .string(body.gateway_id),
            "expires_at": .string(Self.iso8601(milliseconds: expires)), "expires_at_ms": .int(expires),
        ])
    }

    /// `POST /enrol`: a gateway binds itself to the token's account. 201 enrolled, 200 when the
    /// same gateway and key enrolled with this token before (a retry after a lost answer).
    func enrol(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let body = try await decode(EnrolBody.self, request, context)
        let now = clock.millisecondsSinceEpoch()
        do {
            let (_, enrolled) = try await store.enrol(token: body.token, gatewayID: body.gateway_id, publicKey: body.public_key, now: now)
            logger.notice("gateway enrolled with a token", metadata: ["gateway.id": "\(body.gateway_id)", "new": "\(enrolled)"])
            return .json(enrolled ? .created : .ok, [
                "gateway_id": .string(body.gateway_id), "status": .string(enrolled ? "enrolled" : "already_enrolled"),
            ])
        } catch EnrolmentRefusal.token(let problem) {
            throw Self.tokenError(problem)
        }
    }

    /// `POST /enrol/problems`: a gateway whose boot file is bad says so, with its token for
    /// credential (it is not enrolled, so no key of it is known); the token is not spent.
    func reportProblem(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let body = try await decode(ProblemBody.self, request, context)
        let now = clock.millisecondsSinceEpoch()
        do {
            guard try await store.reportProvisioningProblem(token: body.token, gatewayID: body.gateway_id, problem: body.problem, now: now) else {
                throw Self.tokenError(.unknown)
            }
        } catch EnrolmentRefusal.token(let problem) {
            throw Self.tokenError(problem)
        }
        return .json(.accepted, ["status": .string("recorded")])
    }

    static func tokenError(_ problem: EnrolmentToken.TokenProblem) -> APIError {
        let status: HTTPResponse.Status
        switch problem {
        case .malformed, .unknown: status = .unauthorized
        case .expired: status = .gone
        case .used: status = .conflict
        case .otherGateway: status = .forbidden
        case .badTTL: status = .badRequest
        }
        return APIError(status, problem.code, problem.description)
    }

    static func iso8601(milliseconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(milliseconds / 1000)))
    }

    func putDoorbell(_ request: Request, _ context: BasicRequestContext, _ account: Account) async throws -> Response {
        let id = try context.parameters.require("id")
        guard let colon = id.firstIndex(of: ":") else {
            throw APIError(.badRequest, "invalid_request", "doorbell id is <gateway id>:<device id>, e.g. gw-0001:front-door")
        }
        let body = try await decode(DoorbellBody.self, request, context)
        let now = clock.millisecondsSinceEpoch()
        let doorbell = try await store.putDoorbell(gatewayID: String(id[..<colon]), deviceID: String(id[id.index(after: colon)...]),
                                                   name: body.name, site: body.site, accountID: account.id, now: now)
        return .json(.ok, ["doorbell": Self.json(doorbell, owned: true)])
    }

    func registerPhone(_ request: Request, _ context: BasicRequestContext, _ account: Account) async throws -> Response {
        let token = try context.parameters.require("token")
        let body = try await decode(PhoneBody.self, request, context)
        guard let environment = APNsEnvironment(rawValue: body.environment) else {
            throw APIError(.badRequest, "invalid_request", "environment must be sandbox (development builds) or production")
        }
        guard topics.isEmpty || topics.contains(body.bundle_id) else {
            throw APIError(.badRequest, "invalid_request",
                           "bundle_id \(body.bundle_id) is not an app this server pushes to (\(topics.sorted().joined(separator: ", ")))")
        }
        let now = clock.millisecondsSinceEpoch()
        let decision = try await store.registerPhone(
            token: token, accountID: account.id, installationSecret: body.installation_secret, environment: environment,
            bundleID: body.bundle_id, name: body.name, shareName: body.share_name ?? false, now: now)
        let status: String
        switch decision {
        case .register: status = "registered"
        case .refresh, .rebind: status = "refreshed"
        case .move: status = "moved"
        case .refuse: status = "refused"  // thrown before; here for completeness
        }
        return .json(.ok, ["token": .string(token.lowercased()), "id": .string(PhoneClaim.phoneID(token: token)),
                           "status": .string(status)])
    }

    func deliveries(_ context: BasicRequestContext, _ account: Account) async throws -> Response {
        let id = try context.parameters.require("id")
        let (event, rows, owned) = try await { () async throws -> (StoredEvent?, [Delivery], Bool) in
            guard let event = try await store.event(id: id) else { return (nil, [], false) }
            let doorbellID = event.deviceID.map { Doorbell.id(gatewayID: event.gatewayID, deviceID: $0) }
            var doorbell: Doorbell?
            if let doorbellID { doorbell = try await store.doorbell(id: doorbellID) }
            let gatewayOwner = try await store.gateway(id: event.gatewayID)?.accountID
            let owned = doorbell?.accountID == account.id || gatewayOwner == account.id
            var visible = owned
            if !owned, let doorbellID { visible = try await store.canSee(doorbellID: doorbellID, accountID: account.id) }
            guard visible else { return (nil, [], false) }
            return (event, try await store.deliveries(eventID: id), owned)
        }()
        var names: [String: (name: String?, shared: Bool)] = [:]
        if event != nil { names = try await store.phoneNames(eventID: id) }
        guard let event else {
            throw APIError(.notFound, "not_found", "no event \(id) on a doorbell this account can see")
        }
        // A guest sees the pushes to its own phones; the owner sees all of them, each phone by an
        // opaque id, never its token, and another account's phone's name only if that account
        // shares it (`share_name`).
        let visible = owned ? rows : rows.filter { $0.accountID == account.id }
        return .json(.ok, [
            "event_id": .string(event.id),
            "type": .string(event.type),
            "deliveries": .array(visible.map { delivery in
                let phone = names[delivery.token]
                let mine = delivery.accountID == account.id
                let name = mine || phone?.shared == true ? phone?.name : nil
                return Self.json(delivery, pressedAt: event.occurredAt, phoneName: name, showDisplayedOn: mine || phone?.shared == true)
            }),
        ])
    }

    func beaconReport(_ request: Request, _ context: BasicRequestContext, _ account: Account) async throws -> Response {
        let body = try await decode(BeaconReportBody.self, request, context)
        let event = body.event ?? "entered"
        guard ["entered", "exited"].contains(event) else {
            throw APIError(.badRequest, "invalid_request", "event must be entered or exited")
        }
        let now = clock.millisecondsSinceEpoch()
        let interval = beaconIntervalMilliseconds
        let ttl = pushTTLMilliseconds
        let region = try body.region.parsed()
        enum Result { case noPhone, noMessage, rateLimited, queued(String) }
        let result = try await { () async throws -> Result in
            guard let phone = try await store.phone(token: body.token), phone.accountID == account.id else { return .noPhone }
            guard let message = try await store.beaconMessage(for: account.id, region: region, event: event)
            else { return .noMessage }
            // Built before the rate-limit slot is taken: a push that cannot be sent spends none.
            let reportID = PushPayload.beaconReportID()
            guard let payload = PushPayload.forBeacon(title: message.title, body: message.body, region: message.region.display,
                                                      reportID: reportID)
            else { return .noMessage }
            guard try await store.claimBeaconPush(token: phone.token, region: message.region, now: now, intervalMilliseconds: interval)
            else { return .rateLimited }
            try await store.queuePush(id: reportID, to: phone, payload: payload,
                                      collapseID: "beacon-" + String(CloudStore.tokenHash(message.region.key).prefix(32)),
                                      now: now, ttlMilliseconds: ttl)
            return .queued(reportID)
        }()
        switch result {
        case .noPhone:
            throw APIError(.notFound, "unknown_token", "register this phone's token first (PUT /phones/{token})")
        case .noMessage:
            return .json(.ok, ["status": .string("no_message")])
        case .rateLimited:
            var response = Response.json(.tooManyRequests, [
                "status": .string("rate_limited"),
                "reason": .string("this phone got this region's message less than \(interval / 1000) s ago"),
            ])
            response.headers[.retryAfter] = String(interval / 1000)
            return response
        case .queued(let id):
            fanOut?.notify()
            return .json(.accepted, ["status": .string("queued"), "id": .string(id)])
        }
    }

    // MARK: Plumbing

    func authenticated(_ request: Request, _ body: (Account) async throws -> Response) async -> Response {
        await handle {
            guard let token = Self.bearer(request) else {
                throw APIError(.unauthorized, "unauthorized", "send Authorization: Bearer <account token>")
            }
            guard let account = try await store.account(bearer: token) else {
                throw APIError(.unauthorized, "unauthorized", "unknown account token")
            }
            return try await body(account)
        }
    }

    func handle(_ body: () async throws -> Response) async -> Response {
        do {
            return try await body()
        } catch let error as APIError {
            return .error(error.status, code: error.code, reason: error.reason)
        } catch let error as DirectoryError {
            switch error {
            case .notFound(let m): return .error(.notFound, code: "not_found", reason: m)
            case .forbidden(let m): return .error(.forbidden, code: "forbidden", reason: m)
            case .conflict(let m): return .error(.conflict, code: "conflict", reason: m)
            case .invalid(let m): return .error(.badRequest, code: "invalid_request", reason: m)
            }
        } catch let error as KeyError {
            return .error(.badRequest, code: "invalid_request", reason: "\(error)")
        } catch let error as StoreError {
            return .error(.internalServerError, code: "storage_failed", reason: "storage failed (\(error.operation)); retry later")
        } catch let error as BodyTooLarge {
            return BodyLimits.tooLarge(limit: error.limit)
        } catch let error as HTTPError {
            return .error(error.status, code: "invalid_request", reason: error.body ?? "\(error.status)")
        } catch {
            // Never an internal type's name: what failed is logged, the caller gets what to do.
            logger.error("request failed", metadata: ["error": "\(error)"])
            return .error(.internalServerError, code: "internal_error", reason: "the request could not be served; retry later")
        }
    }

    func decode<T: Decodable>(_ type: T.Type, _ request: Request, _ context: BasicRequestContext) async throws -> T {
        let buffer = try await BodyLimits.collect(request, limit: BodyLimits.api)
        let bytes = Array(buffer: buffer)
        do {
            try StrictJSON.check(bytes)
        } catch {
            throw APIError(.badRequest, "invalid_request", "the body must be one JSON object: \(error.description)")
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch let DecodingError.keyNotFound(key, _) {
            throw APIError(.badRequest, "invalid_request", "missing field '\(key.stringValue)'")
        } catch let DecodingError.typeMismatch(_, context) {
            throw APIError(.badRequest, "invalid_request",
                           "field '\(context.codingPath.map(\.stringValue).joined(separator: "."))' has the wrong type")
        } catch {
            throw APIError(.badRequest, "invalid_request", "the body must be a JSON object")
        }
    }

    static func bearer(_ request: Request) -> String? {
        guard let value = request.headers[.authorization] else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }

    static func json(_ doorbell: Doorbell, owned: Bool) -> JSONText.Value {
        .object([
            "id": .string(doorbell.id), "name": .string(doorbell.name), "site": .string(doorbell.site),
            "gateway_id": .string(doorbell.gatewayID), "device_id": .string(doorbell.deviceID),
            "owner": .string(doorbell.accountID), "owned": .bool(owned),
        ])
    }

    static func json(_ phone: Phone) -> JSONText.Value {
        .object([
            "id": .string(PhoneClaim.phoneID(token: phone.token)), "name": .string(phone.name), "share_name": .bool(phone.nameShared),
            "token": .string(phone.token), "environment": .string(phone.environment.rawValue),
            "bundle_id": .string(phone.bundleID), "registered_at_ms": .int(phone.registeredAtMilliseconds),
            "bad_token_count": .int(phone.badTokenCount),
        ])
    }

    static func json(_ message: BeaconMessage) -> JSONText.Value {
        var fields: [(String, JSONText.Value)] = [("id", .string(message.id))]
        switch message.region {
        case let .iBeacon(uuid, major, minor):
            fields.append(contentsOf: [("uuid", .string(uuid)), ("major", .int(major)), ("minor", .int(minor))])
        case let .eddystone(namespace, instance):
            fields.append(contentsOf: [("namespace", .string(namespace)), ("instance", .string(instance))])
        }
        fields.append(contentsOf: [
            ("event", .string(message.event)), ("doorbell_id", .string(message.doorbellID)), ("site", .string(message.site)),
            ("title", .string(message.title)), ("body", .string(message.body)),
        ])
        return .object(fields)
    }

    static func json(_ delivery: Delivery, pressedAt: String, phoneName: String?, showDisplayedOn: Bool) -> JSONText.Value {
        let receipt = delivery.receiptFields(pressedAt: pressedAt).map { field in
            field.0 == "displayed_on" && !showDisplayedOn ? (field.0, JSONText.Value.null) : field
        }
        return .object([
            ("phone_id", .string(PhoneClaim.phoneID(token: delivery.token))), ("phone_name", .string(phoneName)),
            ("account_id", .string(delivery.accountID)),
            ("state", .string(delivery.state.rawValue)), ("attempts", .int(delivery.attempts)),
            ("last_status", delivery.lastStatus.map { .int($0) } ?? .null), ("last_reason", .string(delivery.lastReason)),
            ("apns_id", .string(delivery.apnsID)), ("updated_at_ms", .int(delivery.updatedAtMilliseconds)),
        ] + receipt)
    }
}

struct APIError: Error {
    let status: HTTPResponse.Status
    let code: String
    let reason: String

    init(_ status: HTTPResponse.Status, _ code: String, _ reason: String) {
        self.status = status
        self.code = code
        self.reason = reason
    }
}
