#!/bin/sh
# image.sh VMDIR BINARY [TESTS]: a Debian 12 virtual machine that runs leasecached from
# deploy/leasecached.service under systemd, for integration/vm_test.go (`make vm-check`, `make vm-tests`;
# doc/design/deploy.md, "The virtual machine").
#
# VMDIR/root is a debootstrap of Debian 12 with systemd and Debian's kernel, made once and reused while
# its package list is the one VMDIR/root.done names; everything else is made again on each run from it and
# from the repository, in VMDIR/stage: BINARY (the static daemon) as /usr/local/bin/leasecached, the unit
# as shipped with deploy/vm/vm.conf as its drop-in, enabled; a root shell on the second serial port (the
# test's control line); a static address for QEMU's user network; the directory TESTS, if given, as
# /opt/leasecached-tests. Out: VMDIR/disk.img (ext4, the whole root), VMDIR/vmlinuz, VMDIR/initrd.img.
set -eu

vmdir=$1
bin=$2
tests=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What the tests run in the guest use besides the base system: file systems to fill (slab's and the
# integration tests' full disks), python3 (a test's second lock holder), dmsetup (the power cut's
# log-writes device).
packages=systemd,systemd-sysv,udev,linux-image-amd64,kmod,procps,e2fsprogs,iproute2,btrfs-progs,xfsprogs,python3-minimal,dmsetup

mkdir -p "$vmdir"
if [ "$(cat "$vmdir/root.done" 2>/dev/null)" != "$packages" ]; then
	rm -rf "$vmdir/root" "$vmdir/root.done"
	debootstrap --variant=minbase --include="$packages" bookworm "$vmdir/root" "$mirror"
	echo "$packages" > "$vmdir/root.done"
fi

stage=$vmdir/stage
rm -rf "$stage"
cp -a "$vmdir/root" "$stage"

echo lcvm > "$stage/etc/hostname"
echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' > "$stage/etc/fstab"
# QEMU's user network: the guest is 10.0.2.15, the host's forwarded ports arrive there.
mkdir -p "$stage/etc/systemd/network"
printf '[Match]\nName=en* eth*\n\n[Network]\nAddress=10.0.2.15/24\nGateway=10.0.2.2\n' \
	> "$stage/etc/systemd/network/10-vm.network"
ln -sf /lib/systemd/system/systemd-networkd.service \
	"$stage/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
# The control line: a root shell on ttyS1 (ttyS0 is the kernel's console, kept in a log by the test).
mkdir -p "$stage/etc/systemd/system/serial-getty@ttyS1.service.d"
printf '[Service]\nExecStart=\nExecStart=-/sbin/agetty --autologin root --noclear --keep-baud 115200 %%I dumb\n' \
	> "$stage/etc/systemd/system/serial-getty@ttyS1.service.d/autologin.conf"
mkdir -p "$stage/etc/systemd/system/getty.target.wants"
ln -sf /lib/systemd/system/serial-getty@.service \
	"$stage/etc/systemd/system/getty.target.wants/serial-getty@ttyS1.service"

# The daemon as README.md's "Deploy" installs it, with the drop-in a user who wants a warm restart adds.
chroot "$stage" useradd --system --no-create-home --shell /usr/sbin/nologin leasecached
install -m 0755 "$bin" "$stage/usr/local/bin/leasecached"
install -m 0644 "$here/../leasecached.service" "$stage/etc/systemd/system/leasecached.service"
mkdir -p "$stage/etc/systemd/system/leasecached.service.d"
install -m 0644 "$here/vm.conf" "$stage/etc/systemd/system/leasecached.service.d/vm.conf"
ln -sf /etc/systemd/system/leasecached.service \
	"$stage/etc/systemd/system/multi-user.target.wants/leasecached.service"

if [ -n "$tests" ]; then
	cp -a "$tests" "$stage/opt/leasecached-tests"
fi

cp -L "$stage/vmlinuz" "$vmdir/vmlinuz"
cp -L "$stage/initrd.img" "$vmdir/initrd.img"
rm -f "$vmdir/disk.img"
truncate -s 8G "$vmdir/disk.img" # sparse; room for the tests' files
mkfs.ext4 -q -F -L lcvm -d "$stage" "$vmdir/disk.img"
rm -rf "$stage"
