#!/usr/bin/env bash
# Compiles contracts/*.sol (what the service deploys) and tests/contracts/*.sol
# (what the tests deploy) with the pinned solc-js from the npm registry and
# writes one artifact per contract ({"abi", "bytecode"}) to each directory's
# build/. The artifacts are committed; run this only after changing the
# Solidity source.
set -euo pipefail
SOLC_VERSION="0.8.30"
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${CUSTODY_INDEXER_CACHE:-$HOME/.cache/custody-indexer}/solc-$SOLC_VERSION"
if [ ! -d "$cache/node_modules/solc" ]; then
  mkdir -p "$cache"
  npm install --silent --no-audit --no-fund --prefix "$cache" "solc@$SOLC_VERSION" >&2
fi
for dir in "$root/contracts" "$root/tests/contracts"; do
NODE_PATH="$cache/node_modules" node - "$dir" <<'JS'
const fs = require('fs');
const path = require('path');
const solc = require('solc');
const dir = process.argv[2];
const sources = {};
for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.sol'))) {
  sources[f] = { content: fs.readFileSync(path.join(dir, f), 'utf8') };
}
const input = {
  language: 'Solidity',
  sources,
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: 'cancun',
    outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
  },
};
const out = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (out.errors || []).filter((e) => e.severity === 'error');
if (errors.length) {
  for (const e of errors) console.error(e.formattedMessage);
  process.exit(1);
}
fs.mkdirSync(path.join(dir, 'build'), { recursive: true });
for (const file of Object.keys(out.contracts)) {
  for (const [name, c] of Object.entries(out.contracts[file])) {
    const artifact = { abi: c.abi, bytecode: '0x' + c.evm.bytecode.object };
    fs.writeFileSync(path.join(dir, 'build', name + '.json'), JSON.stringify(artifact, null, 1) + '\n');
    console.error('wrote build/' + name + '.json');
  }
}
JS
done
