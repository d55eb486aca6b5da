# Shared by scripts/test and scripts/demo: install what is missing, configure, build once.
# Sourced, not run.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PAYRECON_BUILD_DIR:-$root/build}
jobs=${PAYRECON_JOBS:-$(nproc 2>/dev/null || echo 2)}
# ccache (CMakeLists.txt uses it when installed): paths relative to the checkout and the working
# directory left out of the hash, so that another clone of the same tree hits the same cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}

# Extra arguments go to cmake's configure step (-DPAYRECON_SANITIZE=ON).
payrecon_build() {
  "$root/scripts/bootstrap"
  local werror=ON
  [ "${PAYRECON_WERROR:-}" = "OFF" ] && werror=OFF
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPAYRECON_WERROR=$werror "$@" >/dev/null
  cmake --build "$build" -j"$jobs"
}

# A throwaway payrecon home (private PostgreSQL and secrets) for this run; stopped and removed on
# exit. Sets PAYRECON_HOME.
payrecon_throwaway_home() {
  PAYRECON_HOME=$(mktemp -d "${TMPDIR:-/tmp}/payrecon-$1.XXXXXX")
  export PAYRECON_HOME
  unset PAYRECON_DATABASE_URL
  trap 'payrecon_cleanup' EXIT
}

payrecon_cleanup() {
  if [ -n "${PAYRECON_HOME:-}" ] && [ -d "$PAYRECON_HOME" ]; then
    "$build/cli/payrecon" db stop >/dev/null 2>&1 || true
    rm -rf "$PAYRECON_HOME"
  fi
}
