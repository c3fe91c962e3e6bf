// Home Assistant MQTT discovery: the retained `<discovery_prefix>/<component>/<node>/<object>/config`
// messages that make each configured doorbell and BTHome button an `event` entity with device
// triggers (automations from the UI, no YAML), each beacon region a presence `binary_sensor`, each
// BTHome button's battery a `sensor`, and the gateway a device of its own with diagnostic
// entities; every device hangs off the gateway (`via_device`) and shares its availability topic.
// Pure: a function of the config. The shell publishes them, and an empty retained payload on a
// config topic that is no longer produced removes that entity from Home Assistant.

public enum HomeAssistantDiscovery {
    /// BTHome buttons announce these; RF buttons only press and hold (the agent's names).
    static let bleEventTypes = ["press", "double_press", "triple_press", "long_press", "long_double_press", "long_triple_press", "hold"]
    static let rfEventTypes = ["press", "hold"]

    /// The `event_type` Home Assistant gets for one of the agent's types: a doorbell's press is
    /// `ring`, the type Home Assistant requires of every doorbell-class event entity (its standard
    /// doorbell event; without it HA warns, and from 2027.4 refuses the entity). The others keep
    /// their names; an answer button is a button, so its press stays `press`.
    public static func sentEventType(_ agentType: String, kind: DeviceKind) -> String {
        kind == .doorbell && agentType == "press" ? "ring" : agentType
    }

    /// Device-trigger types: Home Assistant's own names where one fits, so the UI words them.
    static func triggerType(_ eventType: String) -> String {
        switch eventType {
        case "press": "button_short_press"
        case "double_press": "button_double_press"
        case "triple_press": "button_triple_press"
        case "long_press": "button_long_press"
        default: eventType
        }
    }

    public static func messages(config: AgentConfig, settings: MQTTSettings, agentVersion: String) -> [MQTTMessage] {
        let topics = MQTTTopics(prefix: settings.topicPrefix, gatewayID: config.gatewayID)
        let node = "doorbell_" + MQTTTopics.level(config.gatewayID)
        let gatewayIdentifier = node
        let availability: [(String, JSONValue)] = [("availability_topic", .string(topics.status)),
                                                   ("payload_available", .string("online")), ("payload_not_available", .string("offline"))]
        let origin: (String, JSONValue) = ("origin", .object([("name", .string("doorbell-agent")), ("sw_version", .string(agentVersion))]))
        var out: [MQTTMessage] = []
        func add(_ component: String, _ object: String, _ members: [(String, JSONValue)]) {
            let topic = "\(settings.discoveryPrefix)/\(component)/\(node)/\(MQTTTopics.level(object))/config"
            out.append(MQTTMessage(topic: topic, json: .object(members + (component == "device_automation" ? [] : [origin])), retain: true))
        }

        let gatewayDevice: JSONValue = .object([
            ("identifiers", .array([.string(gatewayIdentifier)])), ("name", .string("Doorbell gateway \(config.gatewayID)")),
            ("manufacturer", .string("doorbell-agent")), ("model", .string("Base station")), ("sw_version", .string(agentVersion)),
        ])
        func child(_ id: String, _ name: String, model: String) -> JSONValue {
            .object([("identifiers", .array([.string(gatewayIdentifier + "_" + MQTTTopics.level(id))])), ("name", .string(name)),
                     ("manufacturer", .string("doorbell-agent")), ("model", .string(model)), ("via_device", .string(gatewayIdentifier))])
        }

        // The gateway first, so that Home Assistant knows it when a child names it as via_device.
        // Its own health, from the retained diagnostics JSON.
        let diagnostics: [(component: String, key: String, name: String, extra: [(String, JSONValue)])] = [
            ("sensor", "outbox_depth", "Events waiting", [("state_class", .string("measurement"))]),
            ("sensor", "outbox_oldest_age_s", "Oldest waiting event", [("unit_of_measurement", .string("s")), ("device_class", .string("duration"))]),
            ("sensor", "radios", "Radios", []),
            ("sensor", "last_delivery", "Last cloud delivery", []),
            ("binary_sensor", "clock_synchronized", "Clock synchronized", [("payload_on", .bool(true)), ("payload_off", .bool(false))]),
            ("binary_sensor", "problem", "Problem", [("device_class", .string("problem")), ("payload_on", .bool(true)), ("payload_off", .bool(false)),
                                                      ("json_attributes_topic", .string(topics.diagnostics)),
                                                      ("json_attributes_template", .string("{{ {'problems': value_json.problems} | tojson }}"))]),
        ]
        for d in diagnostics {
            add(d.component, "gateway_\(d.key)", [
                ("name", .string(d.name)), ("unique_id", .string("\(node)_gateway_\(d.key)")), ("state_topic", .string(topics.diagnostics)),
                ("value_template", .string("{{ value_json.\(d.key) }}")), ("entity_category", .string("diagnostic")),
                ("device", gatewayDevice),
            ] + d.extra + availability)
        }
        for d in config.devices {
            let ble = d.radio == "ble"
            let device = child(d.id, d.name, model: ble ? "BTHome button" : (d.radio == "ook" ? "433 MHz button (GPIO receiver)" : "433 MHz button"))
            let types = ble ? bleEventTypes : rfEventTypes
            let object = MQTTTopics.level(d.id)
            add("event", object, [
                ("name", .null), ("unique_id", .string("\(node)_\(object)_event")),
                ("state_topic", .string(topics.deviceEvent(d.id))),
                ("event_types", .array(types.map { .string(sentEventType($0, kind: d.kind)) })),
                ("device_class", .string(d.kind == .doorbell ? "doorbell" : "button")), ("device", device),
            ] + availability)
            // Keyed by the agent's type (a doorbell's `…_press` trigger keeps its topic, so the
            // automations built on it keep working), firing on what is sent.
            for type in types {
                add("device_automation", "\(object)_\(type)", [
                    ("automation_type", .string("trigger")), ("topic", .string(topics.deviceEvent(d.id))),
                    ("type", .string(triggerType(type))), ("subtype", .string("button_1")), ("payload", .string(sentEventType(type, kind: d.kind))),
                    ("value_template", .string("{{ value_json.event_type }}")), ("device", device),
                ])
            }
            if ble {
                add("sensor", "\(object)_battery", [
                    ("name", .string("Battery")), ("unique_id", .string("\(node)_\(object)_battery")),
                    ("state_topic", .string(topics.battery(d.id))), ("device_class", .string("battery")),
                    ("unit_of_measurement", .string("%")), ("state_class", .string("measurement")),
                    ("entity_category", .string("diagnostic")), ("device", device),
                ] + availability)
            }
        }

        for r in config.regions {
            let object = MQTTTopics.level(r.id)
            add("binary_sensor", "\(object)_presence", [
                ("name", .null), ("unique_id", .string("\(node)_\(object)_presence")),
                ("state_topic", .string(topics.presence(r.id))), ("payload_on", .string("ON")), ("payload_off", .string("OFF")),
                ("device_class", .string("presence")), ("json_attributes_topic", .string(topics.presenceAttributes(r.id))),
                ("device", child(r.id, r.name, model: "\(r.format) region")),
            ] + availability)
        }

        return out
    }
}
