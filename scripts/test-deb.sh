#!/usr/bin/env bash
# Tests the Debian package from `make deb`: lintian has no errors, and it installs into a
# throwaway root (dpkg --root, maintainer scripts honouring DPKG_ROOT) with its files, its
# system user, its enabled unit, and a shipped config that the shipped binary accepts.
set -uo pipefail
cd "$(dirname "$0")/.."
deb=$(ls -t .work/deb/doorbell-agent_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { echo "test-deb: no package; run make deb first" >&2; exit 1; }
passed=0; failed=0
check() { # name, command...
  local name=$1; shift
  if "$@" >/tmp/test-deb.out 2>&1; then passed=$((passed + 1)); echo "ok    $name"
  else failed=$((failed + 1)); echo "FAIL  $name"; sed 's/^/      /' /tmp/test-deb.out | head -20; fi
}

lint() { ! lintian --tag-display-limit 0 "$deb" 2>/dev/null | grep '^E:'; }
check "lintian reports no errors" lint

root=$(mktemp -d /tmp/doorbell-deb-root.XXXXXX)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/etc"
touch "$root/var/lib/dpkg/status"
# A throwaway root has no libc or libcurl packages registered: dependencies are the host's.
check "dpkg --root installs it" dpkg --root="$root" --force-script-chrootless --force-depends --force-not-root \
  --log=/dev/null -i "$deb"
for f in usr/bin/doorbell-agent usr/bin/agentctl lib/systemd/system/doorbell-agent.service \
         usr/lib/sysusers.d/doorbell-agent.conf usr/lib/tmpfiles.d/doorbell-agent.conf \
         etc/doorbell-agent/agent.toml etc/doorbell-agent/rtl_433-doorbells.conf \
         usr/share/man/man1/doorbell-agent.1.gz usr/share/man/man1/agentctl.1.gz \
         usr/share/bash-completion/completions/agentctl usr/share/bash-completion/completions/doorbell-agent \
         usr/share/zsh/vendor-completions/_doorbell-agent usr/share/fish/vendor_completions.d/doorbell-agent.fish \
         usr/share/doc/doorbell-agent/copyright; do
  check "file /$f" test -e "$root/$f"
done
check "conffiles registered" grep -q /etc/doorbell-agent/agent.toml "$root/var/lib/dpkg/info/doorbell-agent.conffiles"
check "postinst created the system user" grep -q '^doorbell-agent:' "$root/etc/passwd"
check "postinst created its group" grep -q '^doorbell-agent:' "$root/etc/group"
check "postinst enabled the unit" test -L "$root/etc/systemd/system/multi-user.target.wants/doorbell-agent.service"
check "the shipped binary accepts the shipped config" "$root/usr/bin/doorbell-agent" check-config "$root/etc/doorbell-agent/agent.toml"
check "man page renders" sh -c "zcat '$root/usr/share/man/man1/agentctl.1.gz' | grep -q 'inject'"
# doorbell-agent's help, man page and completions come from its own parser (AgentCommandLine).
check "the agent's man page names its subcommands" sh -c "zcat '$root/usr/share/man/man1/doorbell-agent.1.gz' | grep -q 'encode\\\\-ook'"
check "the agent's bash completion parses" bash -n "$root/usr/share/bash-completion/completions/doorbell-agent"
check "dpkg --purge removes it" dpkg --root="$root" --force-script-chrootless --force-not-root --log=/dev/null --purge doorbell-agent
check "no binary left after purge" test ! -e "$root/usr/bin/doorbell-agent"
echo "test-deb: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
