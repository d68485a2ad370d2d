#!/usr/bin/env bash
# `make demo`: compiles the flagship example and shows what the compiler made of it.
set -euo pipefail
build=$1
loomc="$build/bin/loomc"
example=examples/mlp.loom

echo "== $example"
cat "$example"
echo
echo "== loomc $example --emit=loom"
"$loomc" "$example" --emit=loom
echo
echo "== summary"
ir=$("$loomc" "$example" --emit=loom)
printf '  mesh        %s\n' "$(grep -o 'shard.grid @[a-z_]*(shape = [0-9x]*)' <<<"$ir")"
printf '  precision   %s\n' "$(grep -o '#loom.precision<[^>]*>' <<<"$ir" | head -1)"
printf '  inputs      %s\n' "$(grep -o 'loom.input = "[^"]*"' <<<"$ir" | cut -d'"' -f2 | tr '\n' ' ')"
printf '  params      %s\n' "$(grep -o 'loom.param = "[^"]*"' <<<"$ir" | cut -d'"' -f2 | tr '\n' ' ')"
printf '  outputs     %s\n' "$(grep -o 'loom.output = "[^"]*"' <<<"$ir" | cut -d'"' -f2 | tr '\n' ' ')"
printf '  matmuls     %s\n' "$(grep -c 'loom.matmul' <<<"$ir")"
printf '  shardings   %s\n' "$(grep -c 'shard.shard ' <<<"$ir")"
echo
echo "Running the model needs the single-device backend (issue 3); until then"
echo "the demo stops at the checked loom IR."
