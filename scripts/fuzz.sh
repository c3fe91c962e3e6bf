#!/usr/bin/env bash
# make fuzz: every parser under libFuzzer + AddressSanitizer for FUZZ_SECONDS each (default 60).
# Seeds: Tests/FuzzCorpus/<target>/. A crash fails the run and leaves its reproducer in
# Tests/FuzzCorpus/<target>/crash-*: commit it, fix the bug; `make test` replays every file there.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-"json rtl433 config control pulses ooktext vcd hci ad bthome secret eddystone ancs smp acl cli btsnoop provision smaps"}
# The cloud's parsers (cloud/Sources/cloud-fuzz; seeds and reproducers in cloud/Tests/FuzzCorpus/).
cloud_targets=${CLOUD_FUZZ_TARGETS:-"envelope webhook apns payload receipt strictjson"}
swift build --scratch-path .build-fuzz --product doorbell-fuzz \
  -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -Xclang-linker -Xswiftc -fuse-ld=lld
bin=.build-fuzz/debug/doorbell-fuzz
work=.work/fuzz
failed=0
for t in $targets; do
  mkdir -p "$work/$t"
  cp -n Tests/FuzzCorpus/"$t"/* "$work/$t/" 2>/dev/null || true
  echo "fuzz: $t for ${seconds}s"
  if FUZZ_TARGET=$t "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="Tests/FuzzCorpus/$t/" "$work/$t" > "$work/$t.log" 2>&1; then
    echo "fuzz: $t ok — $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$work/$t.log" | tail -1)"
  else
    failed=$((failed + 1))
    echo "fuzz: $t FOUND A CRASH — reproducer in Tests/FuzzCorpus/$t/ (log: $work/$t.log)"
    grep -A15 "ERROR\|Fatal error\|==ERROR" "$work/$t.log" | head -30
  fi
done
(cd cloud && swift build --scratch-path .build-fuzz --product cloud-fuzz \
  -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -Xclang-linker -Xswiftc -fuse-ld=lld)
for t in $cloud_targets; do
  mkdir -p "$work/cloud-$t"
  cp -n cloud/Tests/FuzzCorpus/"$t"/* "$work/cloud-$t/" 2>/dev/null || true
  echo "fuzz: cloud $t for ${seconds}s"
  if CLOUD_FUZZ_TARGET=$t cloud/.build-fuzz/debug/cloud-fuzz -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="cloud/Tests/FuzzCorpus/$t/" "$work/cloud-$t" > "$work/cloud-$t.log" 2>&1; then
    echo "fuzz: cloud $t ok — $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$work/cloud-$t.log" | tail -1)"
  else
    failed=$((failed + 1))
    echo "fuzz: cloud $t FOUND A CRASH — reproducer in cloud/Tests/FuzzCorpus/$t/ (log: $work/cloud-$t.log)"
    grep -A15 "ERROR\|Fatal error\|==ERROR" "$work/cloud-$t.log" | head -30
  fi
done
[ "$failed" -eq 0 ]
