# Sourced by idle.sh and drain.sh: the work directory, the agent's config as `make bench` writes it
# (scripts/bench.sh's conf: a quiet rtl_433 stand-in as radio), and a reader of /proc/PID files.
# FP_DIR (default /tmp/fp) holds w/ (pki/, g.whsec, quiet.sh) and bench (a release doorbell-bench).
fp=${FP_DIR:-/tmp/fp}
w=$fp/w
bench=$fp/bench

# fp_conf NAME STATE_DIR URL: writes $w/NAME.toml.
fp_conf() {
  cat > "$w/$1.toml" <<CONF
gateway_id = "gw-bench"
[paths]
state_dir = "$2"
control_socket = "$w/$1.sock"
[log]
level = "warning"
[clock]
require_sync = false
[radio.rtl433]
binary = "$w/quiet.sh"
[uplink]
url = "$3"
ca_file = "$w/pki/ca.pem"
hmac_secret_file = "$w/g.whsec"
CONF
}

# fp_field PID FILE KEY: KEY's value in /proc/PID/FILE (status, smaps_rollup), in kB.
fp_field() { awk -v k="$3:" '$1==k {print $2}' "/proc/$1/$2"; }
