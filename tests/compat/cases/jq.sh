# jq: parse a 14 MB JSON array of 200,000 objects, group, aggregate.
description="jq: group_by and aggregate over 200k objects"
packages=(jq)
program="jq"
cost=15
prepare() { compat_gen json 5 200000 >data.json; }
command=(jq -c 'group_by(.k) | map({k: .[0].k, n: length, s: (map(.v) | add), t: (map(.tags | length) | add)})' "$IN/data.json")
