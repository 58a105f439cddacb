#!/bin/bash
# Build the harness worker's root filesystem from Debian's own packages, as one tarball for
# `docker import`. No registry can be reached from here (docs/facts.md), so the
# image is bootstrapped with mmdebstrap from the mirror the caller read out of this machine's apt
# configuration, and the Python dependencies come from a wheelhouse built on the host.
#
# usage: build-rootfs.sh OUT.tar WHEELHOUSE 'deb URI SUITE COMPONENT' ...
#
# fleet.testing.harness.build_image() runs this; the image tag is a hash of this file, the rootfs/ overlay,
# the mirror lines and the dependency list, so changing any of them builds a new image.
set -euo pipefail

if [ "$#" -lt 3 ]; then
    echo "usage: $0 OUT.tar WHEELHOUSE MIRROR-LINE..." >&2
    exit 2
fi
out=$1
wheels=$(realpath "$2")
shift 2
here=$(dirname "$(realpath "$0")")

# sshd, Python 3 with venv, git, and systemd as PID 1 with a user manager per master (D3: the units
# are `systemd-run --user`). dbus-user-session gives each user manager its bus; libpam-systemd
# makes an SSH login register with logind so XDG_RUNTIME_DIR is set. iproute2 removes the default
# route at boot (harness-no-route.service). No Recommends: they would pull systemd-timesyncd, which
# tries to reach NTP servers.
packages=openssh-server,python3,python3-venv,git,systemd,systemd-sysv,dbus,dbus-user-session
packages=$packages,libpam-systemd,sudo,iproute2,procps,util-linux,ca-certificates

# The masters: alpha on every worker, beta as the second master on w4 (D4: a user supervisor is per
# user, so the same unit name under two users is two names); m3..m8 for layouts with more masters
# a worker (fleet/testing/harness.py MASTERS_ENV, the scale benchmark). The shared volume is group-writable
# for FLEET_GID, so a board or origin written by one side can be written by the other.
FLEET_GID=2000

mmdebstrap \
    --variant=apt \
    --include="$packages" \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook="sync-in '$here/rootfs' /" \
    --customize-hook="mkdir -p \"\$1/tmp/wheels\"" \
    --customize-hook="sync-in '$wheels' /tmp/wheels" \
    --customize-hook='chroot "$1" sh -eux -c "
        chown -R root:root /usr/local/sbin /etc/ssh/sshd_config.d /etc/systemd/system /etc/gitconfig
        chmod 0755 /usr/local/sbin/harness-*
        groupadd --gid '"$FLEET_GID"' fleet
        useradd --create-home --uid 2001 --gid fleet --shell /bin/bash alpha
        useradd --create-home --uid 2002 --gid fleet --shell /bin/bash beta
        for n in 3 4 5 6 7 8; do
            useradd --create-home --uid 200\$n --gid fleet --shell /bin/bash m\$n
        done
        rm -f /etc/ssh/ssh_host_*
        systemctl enable harness-no-route.service harness-masters.service
        systemctl mask apt-daily.timer apt-daily-upgrade.timer getty@tty1.service
        python3 -m venv /opt/fleet-venv
        /opt/fleet-venv/bin/pip install --no-index --no-cache-dir --disable-pip-version-check \
            --find-links /tmp/wheels /tmp/wheels/*.whl
        rm -rf /tmp/wheels /var/cache/apt/archives/*.deb /var/lib/apt/lists/*
        : > /etc/machine-id
    "' \
    bookworm "$out" "$@"
