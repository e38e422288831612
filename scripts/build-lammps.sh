#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds LAMMPS from Debian bookworm's source package (29 Sep 2021, update 2) with the
# packages fastmlip needs, into $(fastmlip_cache_dir)/lammps/<key>, and points
# $(fastmlip_cache_dir)/lammps/current at it.
#
# The key hashes the version, the CMake options and our Kokkos fix, so a second run on
# the same machine does nothing, and a changed option rebuilds. A build directory without
# the .complete stamp is a leftover of an interrupted run and is removed first.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

lammps_debian_version=20220106   # Debian's name for "29 Sep 2021 - Update 2"
jobs=${FASTMLIP_JOBS:-$(nproc)}
cache=$(fastmlip_cache_dir)/lammps

options=(
  -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=on -DLAMMPS_EXCEPTIONS=on
  -DBUILD_MPI=on -DBUILD_OMP=on -DPKG_PLUGIN=on -DPKG_MANYBODY=on -DPKG_ML-SNAP=on
  -DPKG_KOKKOS=on -DEXTERNAL_KOKKOS=on -DKokkos_DIR="$repo/cmake/kokkos-debian"
  -DWITH_JPEG=off -DWITH_PNG=off -DWITH_FFMPEG=off -DWITH_GZIP=on
)
# The KOKKOS package's /kk twins of other packages' pair styles (lj/cut/kk, eam/alloy/kk,
# snap/kk, ...: a quarter of the build's CPU time) are left out of the build: fastmlip's tests and
# examples run its own /kk styles, with KOKKOS' atom, comm, neighbor and fix styles, which stay, as
# do the plain eam/alloy, snap and the rest. hybrid/kk stays for inputs that mix styles.
kokkos_pairs_kept=(pair_hybrid_kokkos pair_hybrid_overlay_kokkos)
key=$( { echo "$lammps_debian_version"; printf '%s\n' "${options[@]}" "${kokkos_pairs_kept[@]}";
         cat "$repo/cmake/kokkos-debian/"*.cmake; } | sed "s|$repo|REPO|g" | sha256sum | cut -c1-12)
dir="$cache/$lammps_debian_version-$key"

if [ -f "$dir/.complete" ]; then
  log "LAMMPS $lammps_debian_version already built in $dir"
  ln -sfn "$dir" "$cache/current.tmp" && mv -T "$cache/current.tmp" "$cache/current"
  exit 0
fi

[ -d "$dir" ] && { log "removing incomplete LAMMPS build $dir"; rm -rf "$dir"; }
mkdir -p "$dir"
cd "$dir"
# apt drops privileges to its _apt user for downloads, which cannot write into a root-owned
# cache directory; as root, keep root for this one fetch. Ordinary users fetch as themselves.
sandbox=()
[ "$(id -u)" = 0 ] && sandbox=(-o APT::Sandbox::User=root)
step "fetch Debian's lammps source package" \
  "cd $dir && apt-get source lammps   (or rerun $0)" \
  apt-get "${sandbox[@]}" source -q lammps
src=$(find "$dir" -maxdepth 1 -type d -name "lammps-$lammps_debian_version*" | head -n 1)
[ -n "$src" ] || { log "FAILED: no lammps-$lammps_debian_version* source tree after apt-get source"; exit 1; }
ln -sfn "$src" "$dir/src-tree"
for f in "$src"/src/KOKKOS/pair_*_kokkos*.cpp "$src"/src/KOKKOS/pair_*_kokkos*.h; do
  stem=$(basename "${f%.*}")
  [[ " ${kokkos_pairs_kept[*]} " == *" $stem "* ]] || rm "$f"
done

step "configure LAMMPS" "rerun $0" \
  cmake -S "$src/cmake" -B "$dir/build" "${options[@]}" \
    -DCMAKE_INSTALL_PREFIX="$dir/install" -DCMAKE_INSTALL_RPATH="$dir/install/lib" \
    -DCMAKE_INSTALL_LIBDIR=lib
step "build LAMMPS (about 9 minutes on 2 cores)" "rerun $0" \
  cmake --build "$dir/build" -j "$jobs"
step "install LAMMPS into $dir/install" "rerun $0" \
  cmake --install "$dir/build"

# Smoke test before stamping: the binary runs and has the packages we asked for.
"$dir/install/bin/lmp" -h > "$dir/lmp-help.txt"
for pkg in KOKKOS PLUGIN MANYBODY ML-SNAP; do
  grep -q "$pkg" "$dir/lmp-help.txt" || { log "FAILED: built lmp lacks package $pkg"; exit 1; }
done
touch "$dir/.complete"
ln -sfn "$dir" "$cache/current.tmp" && mv -T "$cache/current.tmp" "$cache/current"
log "LAMMPS ready: $dir/install/bin/lmp (source tree $src)"
