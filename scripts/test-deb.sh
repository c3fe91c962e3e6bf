#!/usr/bin/env bash
# Tests the Debian package from `make deb`: lintian has no errors, and it installs into a
# throwaway root (dpkg --root, maintainer scripts honouring DPKG_ROOT) with its files, its
# system user, its enabled unit, and a shipped config that the shipped binary accepts.
# With an argument, that package (e.g. .work/deb/trixie/doorbell-agent_*_arm64.deb from
# `make deb ARCH=arm64 DIST=trixie`): a foreign binary runs under qemu-user with the target
# release's libraries (the cross sysroot), and its Depends and NEEDED libraries must agree.
set -uo pipefail
cd "$(dirname "$0")/.."
deb=${1:-$(ls -t .work/deb/doorbell-agent_*.deb 2>/dev/null | head -1)}
[ -n "$deb" ] && [ -f "$deb" ] || { echo "test-deb: no package; run make deb first" >&2; exit 1; }
arch=$(dpkg-deb -f "$deb" Architecture)
run=()
foreign=()
[ "$arch" = "$(dpkg --print-architecture)" ] || foreign=(--force-architecture)
if [ "$arch" != "$(dpkg --print-architecture)" ] || [ "$(basename "$(dirname "$deb")")" != deb ]; then
  dist=$(basename "$(dirname "$deb")")
  sysroot=$(scripts/cross/sysroot.sh "$dist" "$arch") || exit 1
  case $arch in
    arm64) run=(qemu-aarch64-static -L "$sysroot") ;;
    amd64) run=("$sysroot/lib64/ld-linux-x86-64.so.2" --library-path "$sysroot/usr/lib/x86_64-linux-gnu") ;;
  esac
fi
echo "test-deb: $deb ($arch)"
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
check "dpkg --root installs it" dpkg --root="$root" --force-script-chrootless --force-depends --force-not-root "${foreign[@]}" \
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
check "the shipped binary accepts the shipped config" "${run[@]}" "$root/usr/bin/doorbell-agent" check-config "$root/etc/doorbell-agent/agent.toml"
check "agentctl runs" "${run[@]}" "$root/usr/bin/agentctl" --help
# Every shared library the binaries need is one that Depends brings (libgpiod.so.2 on a trixie
# image was the failure that started #25).
needed_in_depends() {
  local depends libs lib pkg
  depends=$(dpkg-deb -f "$deb" Depends)
  libs=$(readelf -d "$root/usr/bin/doorbell-agent" "$root/usr/bin/agentctl" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u)
  for lib in $libs; do
    case $lib in
      libc.so.6|libm.so.6|libpthread.so.0|libdl.so.2|librt.so.1|libutil.so.1|ld-linux*) pkg=libc6 ;;
      libbluetooth.so.3) pkg=libbluetooth3 ;;
      libcurl.so.4) pkg=libcurl4 ;;
      libcrypto.so.3|libssl.so.3) pkg=libssl3 ;;
      libsqlite3.so.0) pkg=libsqlite3-0 ;;
      libgpiod.so.2) pkg=libgpiod2 ;;
      libgpiod.so.3) pkg=libgpiod3 ;;
      libmosquitto.so.1) pkg=libmosquitto1 ;;
      libstdc++.so.6) pkg=libstdc++6 ;;
      libgcc_s.so.1) pkg=libgcc-s1 ;;
      *) echo "$lib: no package known for it"; return 1 ;;
    esac
    echo "$depends" | tr ',' '\n' | sed 's/(.*)//; s/[[:space:]]//g' | grep -qxF -e "$pkg" -e "${pkg}t64" \
      || { echo "$lib needs $pkg, not in Depends: $depends"; return 1; }
  done
}
check "every NEEDED library is in Depends" needed_in_depends
# The release link packs relative relocations (Package.swift; docs/benchmarks.md "Code laid out
# by use"): a build that lost the flag reads 0.5 MB more at every start. RELR needs glibc 2.36,
# which Depends must then say.
relr_and_libc() {
  readelf -d "$root/usr/bin/doorbell-agent" | grep -q '(RELR)' || { echo "no DT_RELR: the link did not pack relative relocations"; return 1; }
  local libc
  libc=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed -n 's/^ *libc6 (>= \([^)]*\)).*/\1/p')
  [ -n "$libc" ] && dpkg --compare-versions "$libc" ge 2.36 || { echo "RELR needs libc6 (>= 2.36) in Depends, not '${libc:-unversioned}'"; return 1; }
}
check "relative relocations packed, libc6 >= 2.36 depended on" relr_and_libc
check "man page renders" sh -c "zcat '$root/usr/share/man/man1/agentctl.1.gz' | grep -q 'inject'"
# doorbell-agent's help, man page and completions come from its own parser (AgentCommandLine).
check "the agent's man page names its subcommands" sh -c "zcat '$root/usr/share/man/man1/doorbell-agent.1.gz' | grep -q 'encode\\\\-ook'"
check "the agent's bash completion parses" bash -n "$root/usr/share/bash-completion/completions/doorbell-agent"
check "dpkg --purge removes it" dpkg --root="$root" --force-script-chrootless --force-not-root --log=/dev/null --purge doorbell-agent
check "no binary left after purge" test ! -e "$root/usr/bin/doorbell-agent"
echo "test-deb: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
