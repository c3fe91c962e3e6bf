import CloudCore
import CloudPush
import CloudStore
import Foundation
import Hummingbird
import NIOPosix

/// The app-facing API: accounts, gateways, doorbells, shares, phone tokens, deliveries and
/// beacon reports. Every route but `POST /accounts` takes `Authorization: Bearer <account token>`;
/// `POST /accounts` takes the operator's admin token. See cloud/README.md.
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
        router.post("gateways") { request, context in await authenticated(request) { account in
            try await enrollGateway(request, context, account)
        } }
        router.get("doorbells") { request, _ in await authenticated(request) { account in
            let list = try await store.doorbells(visibleTo: account.id)
            return .json(.ok, ["doorbells": .array(list.map { Self.json($0.0, owned: $0.owned) })])
        } }
        router.put("doorbells/:id") { request, context in await authenticated(request) { account in
            try await putDoorbell(request, context, account)
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
                accountID: account.id, uuid: body.uuid, major: body.major, minor: body.minor,
                event: body.event ?? "entered", doorbellID: body.doorbell_id, site: body.site,
                title: body.title, body: body.body)
            return .json(.ok, ["id": .string(message.id), "uuid": .string(message.uuid)])
        } }
        router.post("beacon-reports") { request, context in await authenticated(request) { account in
            try await beaconReport(request, context, account)
        } }
    }

    // MARK: Handlers

    struct AccountBody: Decodable { let name: String }
    struct GatewayBody: Decodable { let id: String; let public_key: String?; let secret: String? }
    struct DoorbellBody: Decodable { let name: String?; let site: String? }
    struct ShareBody: Decodable { let account_id: String }
    struct PhoneBody: Decodable { let environment: String; let bundle_id: String }
    struct BeaconMessageBody: Decodable {
        let uuid: String; let major: Int64; let minor: Int64; let event: String?
        let doorbell_id: String?; let site: String?; let title: String; let body: String
    }
    struct BeaconReportBody: Decodable {
        let uuid: String; let major: Int64; let minor: Int64; let event: String?; let token: String
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
        try await store.registerPhone(token: token, accountID: account.id, environment: environment, bundleID: body.bundle_id, now: now)
        return .json(.ok, ["token": .string(token.lowercased()), "status": .string("registered")])
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
        guard let event else {
            throw APIError(.notFound, "not_found", "no event \(id) on a doorbell this account can see")
        }
        // A guest sees the pushes to its own phones; the owner sees all of them.
        let visible = owned ? rows : rows.filter { $0.accountID == account.id }
        return .json(.ok, [
            "event_id": .string(event.id),
            "type": .string(event.type),
            "deliveries": .array(visible.map { Self.json($0, pressedAt: event.occurredAt) }),
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
        enum Result { case noPhone, noMessage, rateLimited, queued(String) }
        let result = try await { () async throws -> Result in
            guard let phone = try await store.phone(token: body.token), phone.accountID == account.id else { return .noPhone }
            guard let message = try await store.beaconMessage(for: account.id, uuid: body.uuid, major: body.major,
                                                        minor: body.minor, event: event)
            else { return .noMessage }
            guard try await store.claimBeaconPush(token: phone.token, uuid: message.uuid, major: message.major,
                                            minor: message.minor, now: now, intervalMilliseconds: interval)
            else { return .rateLimited }
            let region = "\(message.uuid)/\(message.major)/\(message.minor)"
            let reportID = "beacon-" + UUID().uuidString.lowercased()
            guard let payload = PushPayload.forBeacon(title: message.title, body: message.body, region: region, reportID: reportID)
            else { return .noMessage }
            try await store.queuePush(id: reportID, to: phone, payload: payload, collapseID: "beacon-\(message.major)-\(message.minor)",
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
        } catch let error as HTTPError {
            return .error(error.status, code: "invalid_request", reason: error.body ?? "\(error.status)")
        } catch {
            return .error(.badRequest, code: "invalid_request", reason: "\(error)")
        }
    }

    func decode<T: Decodable>(_ type: T.Type, _ request: Request, _ context: BasicRequestContext) async throws -> T {
        let buffer = try await request.body.collect(upTo: 64 * 1024)
        do {
            return try JSONDecoder().decode(T.self, from: Data(buffer: buffer))
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
            "token": .string(phone.token), "environment": .string(phone.environment.rawValue),
            "bundle_id": .string(phone.bundleID), "registered_at_ms": .int(phone.registeredAtMilliseconds),
            "bad_token_count": .int(phone.badTokenCount),
        ])
    }

    static func json(_ delivery: Delivery, pressedAt: String) -> JSONText.Value {
        .object([
            ("token", .string(delivery.token)), ("account_id", .string(delivery.accountID)),
            ("state", .string(delivery.state.rawValue)), ("attempts", .int(delivery.attempts)),
            ("last_status", delivery.lastStatus.map { .int($0) } ?? .null), ("last_reason", .string(delivery.lastReason)),
            ("apns_id", .string(delivery.apnsID)), ("updated_at_ms", .int(delivery.updatedAtMilliseconds)),
        ] + delivery.receiptFields(pressedAt: pressedAt))
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
