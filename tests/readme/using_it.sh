#!/usr/bin/env bash
# README.md's "Using it", pasted line by line into a fresh shell, as a new user would: its first
# block of commands in order, then the curl example, with the providers file and the payment body
# the README shows (payrecon.json, order.json). Each line runs in a shell of its own that starts
# with only what the lines before it exported (HOME, PATH and STRIPE_API_KEY besides), in a
# directory that looks like the clone (build/cli/payrecon), with a HOME of its own: `db start`
# creates the private PostgreSQL there.
#
# What a person fills in, this fills in the same way: `prk_...` with the API key a line printed,
# `<payment-id>` with the "id" a line printed. The README's own fake-provider block runs first and
# points base_url at the bundled fake provider (tests reach loopback only). The liberties it takes,
# and why: the fake and serve listen on free ports instead of 12111 and 8080 (tests run in
# parallel), the lines that name those ports using the ones taken.
#
# Every line must exit 0; then what it did is counted: two payments, each sent to the provider
# exactly once, a 0600 HTML report.
#
# Usage: using_it.sh README.md PAYRECON_BIN FAKE_PROVIDER_BIN
set -euo pipefail

readme=$1
payrecon=$2
fake=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/payrecon-readme.XXXXXX")
chmod 755 "$work" # as root, the private cluster runs as the postgres user, who must reach it
mkdir -p "$work/clone/build/cli" "$work/home"
ln -s "$(realpath "$payrecon")" "$work/clone/build/cli/payrecon"
state=$work/state.env
: >"$state"

cleanup() {
  local rc=$?
  [ -s "$work/pids" ] && while read -r pid; do kill "$pid" 2>/dev/null || true; done <"$work/pids"
  # In the pasted lines' environment only: an inherited PAYRECON_HOME or PAYRECON_DATABASE_URL
  # (the suite's own database) must never be the one stopped.
  env -i HOME="$work/home" PATH="$PATH" "$payrecon" db stop >/dev/null 2>&1 || true
  if [ "$rc" -ne 0 ]; then
    echo "--- what the lines printed (in $work) ---" >&2
    for f in "$work"/line-*.out; do [ -e "$f" ] && { echo "== $(head -1 "$f")"; tail -n +2 "$f" | tail -20; }; done >&2
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

fail() {
  echo "README 'Using it': $*" >&2
  exit 1
}

# The n-th fenced block of the "## Using it" section (up to the next "## " heading).
block() {
  awk -v n="$1" '
    /^## / { on = ($0 == "## Using it") ; next }
    on && /^```/ { if (inside) { inside = 0 } else { inside = 1; count++ }; next }
    on && inside && count == n { print }' "$readme"
}

commands=$(block 1)
curl_lines=$(block 3)
providers=$(block 4)
fake_lines=$(block 5)
body=$(block 6)
[ -n "$commands" ] || fail "no command block found"
grep -q '^curl ' <<<"$curl_lines" || fail "block 3 is not the curl example: $curl_lines"
grep -q '"providers"' <<<"$providers" || fail "block 4 is not the providers file: $providers"
grep -q 'payrecon-fake-provider' <<<"$fake_lines" || fail "block 5 is not the fake provider: $fake_lines"
grep -q '"merchant_reference": "order-1001"' <<<"$body" || fail "block 6 is not order.json: $body"
printf '%s\n' "$providers" >"$work/clone/payrecon.json"
printf '%s\n' "$body" >"$work/clone/order.json"
mkdir -p "$work/clone/build/tests/fake_provider"
ln -s "$(realpath "$fake")" "$work/clone/build/tests/fake_provider/payrecon-fake-provider"
export STRIPE_API_KEY=unset-until-the-readme-exports-one

key=""
payment=""
port=""
n=0
# Runs one line as pasted: a fresh bash with the exports so far, in the clone.
paste_line() {
  local line=$1
  n=$((n + 1))
  local out
  out=$(printf '%s/line-%02d.out' "$work" "$n")
  printf '%s\n' "$line" >"$out"
  env -i HOME="$work/home" PATH="$PATH" STRIPE_API_KEY="$STRIPE_API_KEY" LANG=C.UTF-8 \
    bash -c 'set -a; . "$1"; set +a; cd "$2"; eval "$3"; rc=$?
             [ -n "${!:-}" ] && echo "$!" >>"$4"
             export -p | grep -v -e " PWD=" -e " OLDPWD=" -e " SHLVL=" >"$1"; exit $rc' \
    bash "$state" "$work/clone" "$line" "$work/pids" >>"$out" 2>&1 ||
    fail "this line exited $? -- $line"$'\n'"$(tail -n +2 "$out" | tail -20)"
}

# The fake provider block first, as the README says (before the first payments create): its fixed
# ports become any free ones (tests run in parallel), written to a file the sed line then reads.
fake_port=""
fake_admin=""
while IFS= read -r line; do
  [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
  if [[ "$line" == *"payrecon-fake-provider"* ]]; then
    line=${line//--port 12111/--port 0}
    line=${line//--admin-port 12112/--admin-port 0 --port-file $work/fake.ports}
    paste_line "$line"
    for _ in $(seq 1 200); do [ -s "$work/fake.ports" ] && break; sleep 0.05; done
    read -r fake_port fake_admin <"$work/fake.ports" ||
      fail "the fake provider did not start: $(cat "$work/clone/fake.log")"
    continue
  fi
  [ -n "$fake_port" ] && line=${line//12111/$fake_port}
  paste_line "$line"
done <<<"$fake_lines"
[ -n "$fake_port" ] || fail "the fake provider block never started it"
grep -q "http://127.0.0.1:$fake_port" "$work/clone/payrecon.json" ||
  fail "the README's lines did not point payrecon.json at the fake: $(cat "$work/clone/payrecon.json")"

while IFS= read -r line; do
  # A line that is only a comment continues the one above it.
  [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
  if [[ "$line" == *"prk_..."* ]]; then
    [ -n "$key" ] || fail "a line needs the API key, and none was printed before it: $line"
    line=${line//prk_.../$key}
  fi
  if [[ "$line" == *"<payment-id>"* ]]; then
    [ -n "$payment" ] || fail "a line needs a payment ID, and none was printed before it: $line"
    line=${line//<payment-id>/$payment}
  fi
  serving=0
  if [[ "$line" == *"serve --listen 127.0.0.1:8080"* ]]; then
    line=${line//127.0.0.1:8080/127.0.0.1:0}
    serving=1
  fi
  paste_line "$line"
  printed=$(tail -n +2 "$(printf '%s/line-%02d.out' "$work" "$n")")
  if found=$(grep -o 'prk_[A-Za-z0-9_-]\{20,\}' <<<"$printed" | head -1); then key=$found; fi
  if found=$(grep -o '"id": *"[0-9a-f-]\{36\}"' <<<"$printed" | head -1 | grep -o '[0-9a-f-]\{36\}'); then
    payment=$found
  fi
  if [ "$serving" = 1 ]; then
    # Its request log goes where the line sends it (serve.log in the clone), or to the line's output.
    out=$(printf '%s/line-%02d.out' "$work" "$n")
    [[ "$line" == *">>serve.log"* ]] && out=$work/clone/serve.log
    for _ in $(seq 1 400); do
      port=$(grep -o '"event":"listening".*"port":[0-9]*' "$out" 2>/dev/null | grep -o '[0-9]*$' || true)
      [ -n "$port" ] && break
      sleep 0.05
    done
    [ -n "$port" ] || fail "serve did not say where it listens: $(cat "$out")"
  fi
done <<<"$commands"

[ -n "$port" ] || fail "the command block never started serve"
# The curl example: its first line makes order-1002.json, the rest, joined at its backslash, runs
# on serve's port, with the key exported above.
paste_line "$(head -1 <<<"$curl_lines")"
[ -s "$work/clone/order-1002.json" ] || fail "the curl block's first line made no order-1002.json"
curl_line=$(tail -n +2 <<<"$curl_lines" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta')
curl_line=${curl_line//127.0.0.1:8080/127.0.0.1:$port}
paste_line "$curl_line -s -w '\nHTTP %{http_code}\n'"
answer=$(tail -n +2 "$(printf '%s/line-%02d.out' "$work" "$n")")
grep -q '^HTTP 202$' <<<"$answer" || fail "the curl example did not get 202: $answer"
# The README says the same key again replays: it does, and charges nothing.
paste_line "$curl_line -s -D - -o /dev/null"
grep -qi '^Idempotent-Replayed: true' "$(printf '%s/line-%02d.out' "$work" "$n")" ||
  fail "the same curl again was not a replay: $(cat "$(printf '%s/line-%02d.out' "$work" "$n")")"
# The worker sends the second one.
paste_line "build/cli/payrecon worker --once"

# What the lines did: two payments, both succeeded, each executed once at the provider.
paste_line "build/cli/payrecon payments list --json"
listed=$(tail -n +2 "$(printf '%s/line-%02d.out' "$work" "$n")")
[ "$(grep -o '"merchant_reference": *"order-100[12]"' <<<"$listed" | sort -u | wc -l)" = 2 ] ||
  fail "payments list does not show order-1001 and order-1002: $listed"
[ "$(grep -o '"state": *"succeeded"' <<<"$listed" | wc -l)" = 2 ] ||
  fail "the two payments did not both succeed: $listed"
ledger=$(curl -s "http://127.0.0.1:$fake_admin/__admin/ledger")
executions=$(grep -o '"executions":{[^}]*}' <<<"$ledger")
[ "$(grep -o '":1' <<<"$executions" | wc -l)" = 2 ] && ! grep -q '":[02-9]' <<<"$executions" ||
  fail "the provider did not execute each payment exactly once: $ledger"
[ "$(stat -c %a "$work/clone/report.html")" = 600 ] || fail "report.html is not 0600"
grep -q '<!doctype html>' "$work/clone/report.html" || fail "report.html is not the HTML report"
echo "README 'Using it': $n lines pasted, every one exited 0; 2 payments, each executed once"
