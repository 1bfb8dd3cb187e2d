#!/bin/bash
# SPDX-License-Identifier: MIT
#
# mkfs.mendfs, fsck.mendfs and the mendfs daemon on a real device-DAX device:
# boots a Debian kernel under QEMU with an emulated nvdimm, turns it into
# /dev/dax0.0 with ndctl, and runs devdax-guest.sh (the VM's /init) on it.
#
# Programs: $MKFS_MENDFS, $MENDFS, $FSCK_MENDFS, $MENDCTL (the built ones).
# Needs root and qemu-system-x86_64 (Debian: qemu-system-x86); a missing one
# is a failure, not a skip: this suite exists to run the VM.
# MENDFS_VM_ACCEL: tcg (default) or kvm (needs a /dev/kvm that can boot a
# stock kernel, which the kvm_pvm one here cannot: docs/design/testing.md §6).
# The kernel (linux-image-<version>-amd64, the one linux-image-amd64 depends
# on), busybox-static and ndctl (with any of its libraries not installed here)
# are fetched with `apt-get download` and unpacked with `dpkg -x` into
# ${MENDFS_VM_CACHE:-/var/cache/mendfs-vm}; nothing is installed on the host.
# MENDFS_VM_TIMEOUT (seconds, default 300) bounds the VM.
# Exit 0 when the guest prints "MENDFS-DEVDAX-RESULT: PASS", else 1 with the
# console log.
set -Eeuo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${MENDFS_VM_CACHE:-/var/cache/mendfs-vm}
VM_TIMEOUT=${MENDFS_VM_TIMEOUT:-300}
ACCEL=${MENDFS_VM_ACCEL:-tcg}
MODULES=(nfit nd_pmem nd_btt dax_pmem device_dax fuse)

die() {
	echo "devdax-vm: $*" >&2
	exit 1
}

for v in MKFS_MENDFS MENDFS FSCK_MENDFS MENDCTL; do
	[ -x "${!v:-}" ] || die "$v not set or not executable"
done
[ "$(id -u)" = 0 ] || die "needs root (apt-get download)"
[ "$ACCEL" != kvm ] || [ -c /dev/kvm ] || die "MENDFS_VM_ACCEL=kvm but there is no /dev/kvm"
command -v qemu-system-x86_64 >/dev/null ||
	die "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"

WORK=$(mktemp -d /tmp/mendfs-devdax.XXXXXX)
QPID=
cleanup() {
	if [ -n "$QPID" ]; then
		kill "$QPID" 2>/dev/null || true
		wait "$QPID" 2>/dev/null || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "devdax-vm: line $LINENO failed: $BASH_COMMAND" >&2' ERR
trap 'exit 1' INT TERM HUP

APT_UPDATED=
apt_update_once() {
	[ -z "$APT_UPDATED" ] || return 0
	APT_UPDATED=1
	echo "devdax-vm: apt-get update" >&2
	apt-get update -qq >/dev/null 2>&1 || echo "devdax-vm: apt-get update failed" >&2
}

# resolve: the kernel package linux-image-amd64 depends on, busybox-static,
# ndctl and those of ndctl's dependencies that are not installed here, each
# with its candidate version, in PKGS and VER (one apt-cache run of each kind:
# they take a second apiece)
declare -A VER=()
PKGS=()
resolve() {
	local deps pkg ver
	PKGS=()
	VER=()
	deps=$(apt-cache depends linux-image-amd64 ndctl 2>/dev/null | awk '
		/^[^ ]/ { top = $1 }
		top == "linux-image-amd64" && $1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2 }
		top == "ndctl" && $1 == "Depends:" && $2 !~ /^</ { print "dep", $2 }')
	pkg=$(awk '$1 != "dep" { print; exit }' <<<"$deps")
	[ -n "$pkg" ] || return 1
	PKGS=("$pkg" busybox-static ndctl)
	for pkg in $(awk '$1 == "dep" { print $2 }' <<<"$deps"); do
		[ "$(dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] ||
			PKGS+=("$pkg")
	done
	while read -r pkg ver; do
		VER[$pkg]=$ver
	done < <(apt-cache policy "${PKGS[@]}" 2>/dev/null | awk '
		/^[^ ]/ { p = $1; sub(/:$/, "", p) }
		$1 == "Candidate:" && $2 != "(none)" { print p, $2 }')
	for pkg in "${PKGS[@]}"; do
		[ -n "${VER[$pkg]:-}" ] || return 1
	done
}

# fetch PKG: unpack version ${VER[PKG]} of PKG into the cache (once) and
# print its directory; versions of it cached before are removed.
fetch() {
	local pkg=$1 ver=${VER[$1]} dir old
	dir=$CACHE/${pkg}_${ver//:/_}
	if [ ! -e "$dir/.done" ]; then
		echo "devdax-vm: fetching $pkg $ver" >&2
		rm -rf "$dir" "$CACHE/deb"
		mkdir -p "$CACHE/deb"
		(cd "$CACHE/deb" && apt-get download -q -o APT::Sandbox::User=root "$pkg=$ver" >&2) ||
			die "apt-get download $pkg=$ver failed"
		dpkg -x "$CACHE"/deb/*.deb "$dir" || die "dpkg -x $pkg failed"
		rm -rf "$CACHE/deb"
		# linux-image-6.1.0-57-amd64 replaces linux-image-6.1.0-56-amd64
		for old in "$CACHE/${pkg%%-[0-9]*}"[-_]*; do
			[ "$old" = "$dir" ] || rm -rf "$old"
		done
		touch "$dir/.done"
	fi
	echo "$dir"
}

# cached PKGPREFIX: the one cached package whose name starts with PKGPREFIX
# (offline runs)
cached() {
	local d
	d=$(ls -d "$CACHE/$1"*/.done 2>/dev/null | sort -V | tail -n 1)
	[ -n "$d" ] || die "apt cannot resolve the packages (run apt-get update) and no $1 is cached"
	dirname "$d"
}

mkdir -p "$CACHE"
t0=$(date +%s.%N)

# --- the kernel, busybox, ndctl ------------------------------------------
if resolve || { apt_update_once && resolve; }; then
	KROOT=$(fetch "${PKGS[0]}")
	BBROOT=$(fetch busybox-static)
	NDROOT=$(fetch ndctl)
	LIBPATH=
	for pkg in "${PKGS[@]:3}"; do
		d=$(fetch "$pkg")
		LIBPATH=$LIBPATH:$d/usr/lib/x86_64-linux-gnu:$d/lib/x86_64-linux-gnu
	done
else
	echo "devdax-vm: apt cannot resolve the packages; using the cache" >&2
	KROOT=$(cached linux-image-)
	BBROOT=$(cached busybox-static_)
	NDROOT=$(cached ndctl_)
	LIBPATH=
	for d in "$CACHE"/lib*_*/; do
		LIBPATH=$LIBPATH:$d/usr/lib/x86_64-linux-gnu:$d/lib/x86_64-linux-gnu
	done
fi
LIBPATH=$NDROOT/usr/lib/x86_64-linux-gnu:$NDROOT/lib/x86_64-linux-gnu$LIBPATH

KVER=$(ls "$KROOT/lib/modules")
[ "$(echo "$KVER" | wc -l)" = 1 ] || die "expected one kernel in $KROOT/lib/modules"
VMLINUZ=$KROOT/boot/vmlinuz-$KVER
[ -f "$VMLINUZ" ] || die "no $VMLINUZ"
t1=$(date +%s.%N)

# --- the initramfs ----------------------------------------------------------
R=$WORK/root
mkdir -p "$R"/{bin,sbin,etc,proc,sys,dev,tmp,run,mnt,lib64,lib/x86_64-linux-gnu,var/log}

# copy_bin SRC: SRC as /bin/NAME, with every library ldd names
copy_bin() {
	local src=$1 line name path
	cp "$src" "$R/bin/$(basename "$src")"
	while read -r line; do
		case $line in
		*"=> not found"*) die "$(basename "$src"): ${line%% *} not found" ;;
		*"=> /"*)
			name=${line%% *}
			path=${line#*=> }
			path=${path%% (*}
			cp -L "$path" "$R/lib/x86_64-linux-gnu/$name"
			;;
		/*)
			path=${line%% (*}
			cp -L "$path" "$R/lib64/$(basename "$path")"
			;;
		esac
	done < <(LD_LIBRARY_PATH=$LIBPATH ldd "$src")
}

cp "$BBROOT/bin/busybox" "$R/bin/busybox"
ln -s busybox "$R/bin/sh"
copy_bin "$NDROOT/usr/bin/ndctl"
for p in "$MKFS_MENDFS" "$MENDFS" "$FSCK_MENDFS" "$MENDCTL"; do
	copy_bin "$p"
done
# glibc dlopens libgcc_s for pthread_cancel (the daemon's unmount): ldd
# cannot name it (no early exit in awk: ldconfig would die of SIGPIPE, and pipefail)
gcc_s=$(ldconfig -p | awk '$1 == "libgcc_s.so.1" && /x86-64/ && !n++ { print $NF }')
[ -n "$gcc_s" ] || die "libgcc_s.so.1 not found (ldconfig -p)"
cp -L "$gcc_s" "$R/lib/x86_64-linux-gnu/libgcc_s.so.1"

# modules: each wanted one after the modules it depends on (the depends=
# field of its .modinfo), as paths relative to /lib/modules
MODDIR=$KROOT/lib/modules/$KVER
declare -A KO=() DONE=()
while read -r n f; do
	n=${n%.ko}
	KO[${n//-/_}]=$KVER/kernel/$f
done < <(find "$MODDIR/kernel" -name '*.ko' -printf '%f %P\n')
ORDER=()
add_module() {
	local m=${1//-/_} d
	[ -z "${DONE[$m]:-}" ] || return 0
	DONE[$m]=1
	[ -n "${KO[$m]:-}" ] || die "module $m not found in $MODDIR (built in? compressed?)"
	for d in $(tr '\0' '\n' <"$KROOT/lib/modules/${KO[$m]}" | sed -n 's/^depends=//p' | tr ',' ' '); do
		add_module "$d"
	done
	ORDER+=("${KO[$m]}")
}
for m in "${MODULES[@]}"; do
	add_module "$m"
done
for m in "${ORDER[@]}"; do
	mkdir -p "$R/lib/modules/$(dirname "$m")"
	cp "$KROOT/lib/modules/$m" "$R/lib/modules/$m"
done
printf '%s\n' "${ORDER[@]}" >"$R/modules.list"

echo 'root:x:0:0:root:/root:/bin/sh' >"$R/etc/passwd"
echo 'root:x:0:' >"$R/etc/group"
cp "$HERE/devdax-guest.sh" "$R/init"
chmod 755 "$R/init"
(cd "$R" && find . | "$R/bin/busybox" cpio -o -H newc 2>/dev/null) | gzip -1 >"$WORK/initrd.gz"
t2=$(date +%s.%N)

# --- the VM -------------------------------------------------------------------
case $ACCEL in
kvm)
	# -arch-capabilities: under nested KVM, QEMU 7.2 aborts on "failed to
	# set MSR 0x10a" (IA32_ARCH_CAPABILITIES) with a plain -cpu host.
	ACCEL_ARGS=(-enable-kvm -cpu host,-arch-capabilities)
	;;
tcg) ACCEL_ARGS=(-accel tcg,thread=multi -cpu max) ;;
*) die "MENDFS_VM_ACCEL must be tcg or kvm, not '$ACCEL'" ;;
esac
# 512 MiB of emulated nvdimm plus its 128 KiB label area (QEMU keeps the
# labels at the end of the backing file): the region is then a multiple of
# its 16 MiB alignment, as ndctl create-namespace wants
truncate -s $((512 * 1024 + 128))K "$WORK/nvdimm.img"
echo "devdax-vm: kernel $KVER, initramfs $(du -k "$WORK/initrd.gz" | cut -f1) KiB," \
	"modules: ${ORDER[*]##*/}"
timeout "$VM_TIMEOUT" qemu-system-x86_64 \
	"${ACCEL_ARGS[@]}" -smp 2 -nographic -no-reboot -nic none \
	-machine pc,nvdimm=on -m 1G,slots=2,maxmem=4G \
	-object memory-backend-file,id=mem1,share=on,mem-path="$WORK/nvdimm.img",size=$((512 * 1024 + 128))K \
	-device nvdimm,id=nvdimm1,memdev=mem1,label-size=128K \
	-kernel "$VMLINUZ" -initrd "$WORK/initrd.gz" \
	-append "console=ttyS0 panic=-1 quiet" \
	</dev/null >"$WORK/console.log" 2>&1 &
QPID=$!
status=0
wait "$QPID" || status=$?
QPID=
t3=$(date +%s.%N)

# without carriage returns and SeaBIOS's terminal escapes
sed 's/\r//g; s/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1bc//g' "$WORK/console.log" >"$WORK/console.txt"
awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v s="$status" 'BEGIN {
	printf "devdax-vm: fetch %.1f s, initramfs %.1f s, VM boot + test %.1f s (qemu exit %d)\n",
		b - a, c - b, d - c, s }'
if grep -q '^MENDFS-DEVDAX-RESULT: PASS' "$WORK/console.txt"; then
	sed 's/^/  console: /' "$WORK/console.txt"
	echo "devdax-vm: PASS"
	exit 0
fi
echo "devdax-vm: FAIL; console log:" >&2
sed 's/^/  console: /' "$WORK/console.txt" >&2
[ "$status" = 124 ] && echo "devdax-vm: the VM did not finish within $VM_TIMEOUT s" >&2
exit 1
