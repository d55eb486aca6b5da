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
  payrecon_configure "$@"
  payrecon_announce_build "payrecon and its test suite" .
  cmake --build "$build" -j"$jobs"
}

# Only what scripts/demo runs: the CLI and the fake provider, not the test suite.
payrecon_build_demo() {
  payrecon_configure
  payrecon_announce_build "payrecon and the fake provider" core net store services engine \
    providers reports api cli tests/fake_provider
  cmake --build "$build" -j"$jobs" --target payrecon payrecon-fake-provider
}

payrecon_configure() {
  "$root/scripts/bootstrap"
  local werror=ON
  [ "${PAYRECON_WERROR:-}" = "OFF" ] && werror=OFF
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPAYRECON_WERROR=$werror "$@" >/dev/null
}

# Before a first build (no payrecon binary in $build yet), says on stderr how much there is to
# compile and about how long it takes: the C++ sources under the given directories, at about 6 s
# of one core each and 15 s for a test file (g++ -O2 -g on this code base: 2.5 to 20 s a source
# file, 12 to 17 s a Catch2 test file measured; a clean clone's demo build, 168 files, took 541 s
# on 2 quiet cores), over $jobs cores, plus a minute of linking.
# ccache makes it shorter where it already holds them.
payrecon_announce_build() {
  local what=$1
  shift
  [ -x "$build/cli/payrecon" ] && return 0
  local files tests
  files=$(cd "$root" && find "$@" -name 'build*' -prune -o -name '*.cpp' -print)
  tests=$(printf '%s\n' "$files" | grep -c '/test_[^/]*\.cpp$') || true
  local n
  n=$(printf '%s\n' "$files" | grep -c .) || true
  local seconds=$(( (n - tests) * 6 + tests * 15 ))
  local minutes=$(( (seconds + jobs * 60 - 1) / (jobs * 60) + 1 ))
  printf 'payrecon: a first build of %s: %s C++ files to compile, about %s minutes on %s cores (less where ccache already holds them)\n' \
    "$what" "$n" "$minutes" "$jobs" >&2
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
