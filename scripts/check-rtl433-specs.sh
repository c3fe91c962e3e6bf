#!/usr/bin/env bash
# Runs the board decoder file (board/common/rtl_433-doorbells.conf) through real rtl_433 over every
# recording of the RF test set (Tests/Fixtures/rf-recordings) and checks that each one yields its expected code.
# Noise words of other codes are allowed (they match no device) but are listed.
set -euo pipefail
cd "$(dirname "$0")/.."
rec=Tests/Fixtures/rf-recordings
conf=board/common/rtl_433-doorbells.conf
command -v rtl_433 >/dev/null || { echo "check-rtl433-specs: rtl_433 missing (apt-get install rtl-433)" >&2; exit 1; }

# recording → expected identity (code as 6 hex digits, or data for the 33-bit Byron words)
expected=(
  "rtl433tests__door_bell_01__gfile002_433.92M_250k.cu8 code=91568f"
  "rtl433tests__door_bell_01__gfile003_433.92M_250k.cu8 code=91568f"
  "rtl433tests__PT2262_01__gfile002_433.92M_250k.cu8 code=755555"
  "rtl433tests__generic_remote_01__gfile001_433.92M_250k.cu8 code=13cdc0"
  "rtl433tests__generic_remote_01__gfile002_433.92M_250k.cu8 code=13cd0c"
  "flipper__Doorbell2.ook code=11c408"
  "flipper__Surfou_wireless_doorbell.ook code=04cdf8"
  "flipper__GE_Doorbell_19297.ook code=9fc378"
  "flipper__Byron_DB421E.ook data=a7b67a2c8"
  "@board/sim/recordings/front-door.ook code=5a3c91"
)
passed=0; failed=0
for row in "${expected[@]}"; do
  file=${row%% *}; want=${row##* }
  # '@' marks a recording of the project's own (the sim board's), the rest are the shared set.
  if [[ $file == @* ]]; then path=${file#@}; else path=$rec/$file; fi
  got=$(rtl_433 -c "$conf" -r "$path" -F json 2>/dev/null | python3 -c '
import sys, json, collections
seen = collections.Counter()
for line in sys.stdin:
    try: d = json.loads(line)
    except ValueError: continue
    seen["code=%06x" % d["code"] if isinstance(d.get("code"), int) and d["code"] >= 0 else "data=%s" % d.get("data")] += 1
print(" ".join("%s×%d" % kv for kv in seen.most_common()))')
  if [[ " $got" == *" $want×"* ]]; then
    passed=$((passed + 1)); printf "ok    %-58s %s\n" "$(basename "$file")" "$got"
  else
    failed=$((failed + 1)); printf "FAIL  %-58s want %s, got: %s\n" "$(basename "$file")" "$want" "${got:-nothing}"
  fi
done
echo "check-rtl433-specs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
