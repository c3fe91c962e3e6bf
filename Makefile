# doorbell-agent — the two commands: `make demo` and `make test`.
SHELL := /bin/bash
SWIFT ?= swift
CLOUD_BIN := cloud/.build/debug/doorbell-cloud

.PHONY: all deps build build-cloud demo test test-field test-image deb image bundle fuzz bench clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build --product doorbell-agent
	$(SWIFT) build --product agentctl

build-cloud: deps
	cd cloud && $(SWIFT) build --product doorbell-cloud

# The sim board end to end: recorded press → rtl_433 → agent → HTTPS → reference receiver.
demo: build build-cloud
	@scripts/demo.sh

# The Debian package (release, static Swift runtime, stripped): for this machine, or with
# ARCH=amd64|arm64 and/or DIST=bookworm|trixie cross-built with Debian's Swift (scripts/cross/).
deb: deps
	ARCH=$(ARCH) DIST=$(DIST) scripts/make-deb.sh

# The field image for a Raspberry Pi board profile (board/<name>/image.conf): Debian 13 arm64,
# the agent's arm64 trixie .deb, A/B root slots and a data partition (scripts/image/; root, ≈ 30
# min cold, the root tree cached in /var/cache/doorbell-image). Output in .work/image/.
image: deps
	@[ -n "$(BOARD)" ] || { echo "make image: say which board, e.g. make image BOARD=raspberrypi-4" >&2; exit 64; }
	BOARD=$(BOARD) scripts/image/build-image.sh

# A signed RAUC update bundle for the field image's A/B root slots (scripts/image/build-bundle.sh):
# the root file system `make image` built (built first if missing), signed with BUNDLE_KEY and
# BUNDLE_CERT (default: development keys made once in .work/rauc-dev-keys). Output in .work/image/.
bundle: deps
	@[ -n "$(BOARD)" ] || { echo "make bundle: say which board, e.g. make bundle BOARD=raspberrypi-4" >&2; exit 64; }
	BOARD=$(BOARD) scripts/image/build-bundle.sh

# The image itself booted in the field rig's emulated aarch64 board (scripts/field-rig/test_image.py;
# BOARD default raspberrypi-4; first boot, enrolment and a press against doorbell-cloud, built if
# missing; a power cut). Opt-in, not in make test: its run time is in the README.
test-image: deps
	scripts/field-rig/run-image.sh $(or $(BOARD),raspberrypi-4)

# Every test: unit, property, and integration with real rtl_433, SQLite, HTTPS and processes.
test: deps build-cloud
	scripts/venv.sh >/dev/null
	scripts/venv-ha.sh >/dev/null
	.venv/bin/python Tests/helpers/test_apns_test_server.py
	.venv/bin/python Tests/helpers/ble/test_phone.py
	.venv/bin/python scripts/image/tests/test_rauc_tryboot.py
	.venv/bin/python scripts/image/tests/test_update.py
	scripts/check-rtl433-specs.sh
	scripts/make-deb.sh
	scripts/test-deb.sh
	ARCH=arm64 DIST=trixie scripts/make-deb.sh
	scripts/test-deb.sh .work/deb/trixie/doorbell-agent_*_arm64.deb
	RIG_SKIP_DEB=1 scripts/field-rig/run.sh
	cd cloud && scripts/with-test-postgres.sh $(SWIFT) test
	cd cloud && $(SWIFT) build --product cloud-fuzz && for t in envelope webhook heartbeat apns payload receipt strictjson; do .build/debug/cloud-fuzz $$t Tests/FuzzCorpus/$$t/*; done
	$(SWIFT) build --build-tests
	for t in json rtl433 config control pulses ooktext vcd hci ad bthome secret eddystone ancs smp acl phone cli btsnoop provision smaps; do .build/debug/doorbell-fuzz $$t Tests/FuzzCorpus/$$t/*; done
	DOORBELL_CLOUD_BIN=$(CURDIR)/$(CLOUD_BIN) $(SWIFT) test --skip-build

# The field rig alone: the .deb under the shipped unit in a Debian 12 VM of the host's architecture
# (real kernel, systemd, BlueZ, a Bumble controller as hci0 and on ttyS1), and the arm64 trixie
# .deb on an emulated aarch64 Debian 13 board: there every scenario (make test runs the platform's
# ones there, RIG_BOARD=platform). See scripts/field-rig/. Then the field image itself (make
# test-image: built if missing; too long for CI's 90 minutes beside make test, so it is here and
# the README asks for it before every release), and the Pi 3 image on qemu's raspi3b machine.
test-field: deps
	RIG_BOARD=all scripts/field-rig/run.sh
	scripts/field-rig/run-image.sh $(or $(BOARD),raspberrypi-4)
	scripts/field-rig/run-image-raspi3b.sh

# Figures (speed, footprint, storage wear) with their methods, into docs/benchmarks.md.
# BENCH_BOARD=1 adds the board's (scripts/bench-board.sh: the arm64 package's footprint and replay
# in the field rig's emulated aarch64 board beside the amd64 one in its PC guest; root, ≈ 1 h).
bench: deps
	scripts/bench.sh
	if [ "$(BENCH_BOARD)" = 1 ]; then scripts/bench-board.sh; fi

# Every parser under libFuzzer + ASan, FUZZ_SECONDS each (default 60).
fuzz: deps
	scripts/fuzz.sh

clean:
	rm -rf .build cloud/.build .work
