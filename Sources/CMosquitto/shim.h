#ifndef DOORBELL_CMOSQUITTO_SHIM_H
#define DOORBELL_CMOSQUITTO_SHIM_H
// libmosquitto (Eclipse Mosquitto's client library, Debian libmosquitto-dev): the MQTT sink's
// protocol, TLS, keep-alive and QoS 1 retransmission. Nothing of MQTT is hand-written here.
#include <mosquitto.h>
#include <mqtt_protocol.h>
#endif
