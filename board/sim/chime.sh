#!/bin/sh
# The sim board's chime: a real board drives a relay (gpio_pulse) or plays a sound (aplay).
# The agent runs this at once for every press, with the event in the environment.
log="$(dirname "$0")/../../.work/sim/chime.log"
echo "ding-dong: $DOORBELL_DEVICE_NAME ($DOORBELL_DEVICE_ID) at $DOORBELL_OCCURRED_AT" >> "$log"
