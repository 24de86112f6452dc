#!/usr/bin/env bash
# Measures `cargo run -- dev` as a new user meets it, on this machine: a
# fresh clone of this checkout's HEAD with every cache empty (a CARGO_HOME
# of its own, so each crate is downloaded; the clone's own target
# directory; an empty custody-indexer cache, so anvil is installed and the
# local Solana network built), then every `sh` block of the README's
# "Try it" run against it as the README shows them. Prints a table of each
# step's time (docs/dev.md keeps the last one measured) and exits non-zero
# when a step fails. Needs port 8080 free, network access to crates.io and
# npm, and about 15 GB of disk under TMPDIR for the duration.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/measure-dev.XXXXXX")
dev_pid=""
cleanup() {
  if [ -n "$dev_pid" ] && kill -0 "$dev_pid" 2>/dev/null; then
    kill -INT "$dev_pid" 2>/dev/null || true
    wait "$dev_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

rows=()
row() { rows+=("| $1 | $2 s |"); echo "measure-dev: $1: $2 s" >&2; }
elapsed() { echo $((SECONDS - $1)); }

start=$SECONDS
git clone --quiet "$root" "$work/clone"
row "git clone" "$(elapsed "$start")"

export CARGO_HOME="$work/cargo-home" CUSTODY_INDEXER_CACHE="$work/cache"
export CARGO_TARGET_DIR="$work/clone/target" CARGO_TERM_COLOR=never
unset ANVIL_BIN SOLANA_NODE_BIN NATS_SERVER_BIN CUSTODY_INDEXER_SOLANA_NODE_SOURCE DATABASE_URL
cd "$work/clone"

begun=$SECONDS
cargo run -- dev --json > "$work/dev.out" 2> "$work/dev.err" &
dev_pid=$!
# Waits until `$1` holds (checked each second) or dev ended, for at most $2 s.
until_true() {
  local deadline=$((SECONDS + $2))
  until eval "$1"; do
    kill -0 "$dev_pid" 2>/dev/null || { echo "measure-dev: dev ended:" >&2; tail -40 "$work/dev.err" >&2; exit 1; }
    [ "$SECONDS" -lt "$deadline" ] || { echo "measure-dev: timed out waiting for: $1" >&2; tail -40 "$work/dev.err" >&2; exit 1; }
    sleep 1
  done
}
until_true 'grep -q "Running \`" "$work/dev.err"' 3600
row "cargo run: crates downloaded and the service built (debug)" "$(elapsed "$begun")"
until_true '[ "$(wc -l < "$work/dev.out")" -ge 1 ]' 1200
ready=$(elapsed "$begun")
row "\`dev\` ready (its line printed), from the command" "$ready"
joining=$(head -1 "$work/dev.out" | python3 -c 'import json, sys; print(" ".join(json.load(sys.stdin).get("joining", [])))')

# The README's "Try it" blocks, as a user pastes them, in one shell (a
# block's variables, KEY and ACCOUNT, reach the next), each timed.
python3 - "$root/README.md" "$work/try.sh" "$work/try.times" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
part = text[text.index("## Try it"):]
part = part[:part.index("\n## ", 1)]
with open(sys.argv[2], "w") as out:
    for n, block in enumerate(re.findall(r"```sh\n(.*?)```", part, re.S)):
        # Quoted as it is: no part of it runs in the marker line.
        label = block.splitlines()[0][:60].replace("|", "\\|").replace("'", "")
        out.write(f"echo \"{n} $SECONDS \"'{label}' >> {sys.argv[3]}\n{block}\n")
    out.write(f'echo "end $SECONDS" >> {sys.argv[3]}\n')
EOF
if ! bash -euo pipefail "$work/try.sh" > "$work/try.out" 2>&1; then
  echo "measure-dev: a Try it step failed (the last one timed):" >&2
  tail -1 "$work/try.times" >&2; tail -20 "$work/try.out" >&2; exit 1
fi
mapfile -t times < "$work/try.times"
for ((i = 0; i + 1 < ${#times[@]}; i++)); do
  read -r _ at label <<< "${times[i]}"
  read -r _ next _ <<< "${times[i + 1]}"
  row "Try it: \`$label\`" "$((next - at))"
done
row "\`dev\` ready with every Try it step done, from the command" "$(elapsed "$begun")"

if [ -n "$joining" ]; then
  until_true '[ "$(wc -l < "$work/dev.out")" -ge 2 ]' 3600
  row "$joining joined (the local Solana network built in the background), from the command" "$(elapsed "$begun")"
  step=$SECONDS
  cargo run --quiet -- dev deposit --chain SOLANA_DEVNET --asset USDC --amount 25 --follow > "$work/solana.out"
  row "a Solana deposit followed to CONFIRMED" "$(elapsed "$step")"
fi

echo
echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores, $(git -C "$root" rev-parse --short HEAD):"
echo
echo "| step | time |"
echo "|---|---:|"
printf '%s\n' "${rows[@]}"
