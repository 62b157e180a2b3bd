#!/usr/bin/env bash
# The folders are layers (docs/architecture.md): a library file includes only files of its own
# layer or of the layers below it. A file belongs to the longest folder of the list that holds it
# (backends/gloo/ops/Allreduce.cpp to backends/gloo, backends/gloo/transport/SyncMesh.cpp to
# backends/gloo/transport). Lists every include that reaches up or sideways, and fails.
set -euo pipefail
here=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$here"

# Bottom to top. Folders on one line are one layer: those joined by "+" are one component and
# include each other; those apart are siblings and include neither.
layers=(
  "c10d/core"
  "c10d/net"
  "store+store/tcp"
  "c10d"
  "c10d/checkpoint"
  "c10d/elastic"
  "c10d/training backends/common"
  "c10d/parallel"
  "backends/gloo/transport"
  "backends/gloo/algorithms"
  "backends/gloo backends/mpi backends/nccl"
  "rpc/transport"
  "rpc"
  "rpc/autograd"
  "c10d/capi"
)

layer_of() {  # prints "index component" of the longest listed folder holding a tree path's folder
  local dir=$1 i
  while :; do
    for i in "${!layers[@]}"; do
      for component in ${layers[$i]}; do
        for folder in ${component//+/ }; do
          [ "$dir" = "$folder" ] && { echo "$i $component"; return; }
        done
      done
    done
    [ "$dir" = "${dir%/*}" ] && break
    dir=${dir%/*}
  done
  echo "-1 $1"
}

bad=0
checked=0
while IFS= read -r file; do
  read -r mine myfolder < <(layer_of "$(dirname "$file")")
  [ "$mine" -ge 0 ] || continue
  while IFS= read -r included; do
    [ -f "$included" ] || continue  # a system or third-party header
    read -r theirs theirfolder < <(layer_of "$(dirname "$included")")
    checked=$((checked + 1))
    if [ "$theirs" -gt "$mine" ] || { [ "$theirs" -eq "$mine" ] && [ "$theirfolder" != "$myfolder" ]; }; then
      echo "FAIL: $file (layer $myfolder) includes $included (layer $theirfolder)"
      bad=$((bad + 1))
    fi
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$file")
done < <(git ls-files 'c10d/*' 'store/*' 'backends/*' 'rpc/*' | grep -E '\.(h|hpp|cpp)$')
[ "$checked" -gt 100 ] || { echo "FAIL: only $checked includes checked"; exit 1; }
[ "$bad" -eq 0 ] || exit 1
echo "PASS: $checked includes of the library follow its layers"
